"""SurgVU 2026's model-based scores kept on disk: each answer is scored by BERTScore and NLI once.

An answer's BERTScore-F1 and NLI entailment (semantic.SemanticScorer) are decided by the answer's
text, its references in order and what scores them, so `summary.score_outcomes` keeps each in
`<cache-dir>/scores/surgvqa-semantic.sqlite` and a rerun or `--resume` reads it back instead of
loading the models. The key is sha256 of the answer, the references and the scorer's identity
(`scorer_identity`): SCORE_RULE (bumped when semantic.py's rule changes), each model folder's
content (`model_fingerprint`: its config, tokenizer files and the weights transformers loads, by
sha256), BERTScore's layer, the rescale baseline's content, `--compat source`, the packages whose
versions move the numbers (PACKAGES) and where the models run (`device_signature`: the GPU, or the
CPU's kernels and torch's threads, which move the last bits). A score is stored as its JSON text
(floats round-trip exactly), so a read score is the computed one to the bit. Scoring errors are
never stored. `--no-cache` reads and writes nothing.

Storage is one sqlite file in WAL mode (support.client.response_cache.WalDatabase: safe across
processes and runs), written in batches, a transaction each. A file that is not this cache (not a
database, damaged, another schema or format) is warned about naming it (ScoreCacheWarning) and
left as it is: the run scores without the cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from support.client.response_cache import CacheUnusable, WalDatabase, connect_read_only
from support.evaluations.surgvqa.semantic import WEIGHT_FILES, ScoringModels
from support.settings import OutputSettings
from support.storage.file_hashes import HASH_MEMO, FileHashes
from support.storage.files import write_error
from support.types import canonical_json, sha256_hex

FORMAT_VERSION = 1  # the file's layout (PRAGMA user_version)
SCORE_RULE = 1  # bump when semantic.SemanticScorer's scores change for the same inputs
STORE = Path("scores") / "surgvqa-semantic.sqlite"  # under the run's cache folder
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS scores ("
    " key TEXT PRIMARY KEY, scorer TEXT NOT NULL, created REAL NOT NULL, scores TEXT NOT NULL)"
)
COLUMNS = ("key", "scorer", "created", "scores")
SCORE_KEYS = ("bertscore_f1", "nli_entailment", "nli_bertscore_f1")
REFERENCE_KEYS = ("reference_bertscore", "reference_nli")
# whose versions can move a score's bits (bert_score and the cross-encoder, their tokenizers and
# kernels; scipy: the stable softmax)
PACKAGES = ("bert-score", "sentence-transformers", "transformers", "tokenizers", "torch", "numpy",
            "scipy")  # fmt: skip
# a model folder's files that decide nothing a score is made of
DOCS = frozenset({"README.md", ".gitattributes", "LICENSE", "LICENSE.txt"})
# weights of other frameworks, or the ones transformers skips for the file it loads
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".h5", ".msgpack", ".ot", ".onnx", ".pt", ".pth",
                   ".ckpt", ".gguf", ".tflite")  # fmt: skip
# what forces torch's float kernels below what the CPU offers (tools/surgvu26_official.py's
# DISPATCH_VARS: that script imports nothing from vlmbench; a unit test keeps the two equal)
DISPATCH_VARS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",
                 "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # fmt: skip
_CHUNK = 500  # keys per SELECT (sqlite's variable limit is 999 on old builds)
FLUSH_S = 10.0  # seconds of scoring between two writes (a transaction each)


class ScoreCacheWarning(UserWarning):
    """The score cache cannot be used (its file named): the run scores without it."""


# ---- what decides a score -------------------------------------------------------------------
def loaded_weights(folder: Path) -> list[Path]:
    """The weight files transformers loads from `folder`, in its order (WEIGHT_FILES):
    model.safetensors, else the sharded index and its shards, else pytorch_model.bin."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if name.endswith(".index.json"):
            weight_map = json.loads(path.read_text(encoding="utf-8")).get("weight_map", {})
            return [path, *(folder / s for s in sorted(set(map(str, weight_map.values()))))]
        return [path]
    return []


def model_fingerprint(folder: str | Path, hashes: FileHashes) -> str:
    """sha256 over a model folder's files (name, size and content sha256 of each; contents
    memoised by `hashes`): the weights transformers loads and every other top-level file but
    docs and weights it skips (config, tokenizer, sentence-transformers' own)."""
    folder = Path(folder)
    others = [
        p
        for p in folder.iterdir()
        if p.is_file() and p.name not in DOCS and not p.name.endswith(WEIGHT_SUFFIXES)
    ]
    lines = []
    for path in sorted({*others, *loaded_weights(folder)}):
        size, digest = hashes.sha256(path)
        lines.append(f"{path.relative_to(folder)}:{size}:{digest}")
    return sha256_hex("\n".join(lines))


def cpu_vendor() -> str:
    """/proc/cpuinfo's vendor_id ("AuthenticAMD", "GenuineIntel"), else "unknown"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_signature() -> str:
    """The CPU's vendor, torch's CPU capability and any dispatch variable set: what picks the
    float kernels (tools/surgvu26_official.py's, the agreement golden's `cpu`)."""
    import torch

    forced = [f"{name}={os.environ[name]}" for name in DISPATCH_VARS if os.environ.get(name)]
    return " ".join([cpu_vendor(), torch.backends.cpu.get_cpu_capability(), *forced])


def device_signature() -> str:
    """Where the models run, as far as it moves a score's bits: the GPU bert_score picks (CUDA
    when torch sees one) and its name, else the CPU's kernels and torch's threads (the NLI
    logits' last bit depends on them); MPS too, which the cross-encoder takes when present."""
    import torch

    if torch.cuda.is_available():
        return f"cuda {torch.cuda.get_device_name(0)} {torch.version.cuda}"
    mps = " mps" if torch.backends.mps.is_available() else ""
    return f"cpu {cpu_signature()} threads={torch.get_num_threads()}{mps}"


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def scorer_identity(models: ScoringModels, source: bool, hashes: FileHashes) -> dict[str, Any]:
    """Everything besides the answer and its references that decides a score (module
    docstring). OSError when a model's or the baseline's file cannot be read."""
    baseline = None
    if models.baseline is not None:
        baseline = sha256_hex(Path(models.baseline).read_bytes())  # a few KB
    return {
        "rule": SCORE_RULE,
        "bertscore": model_fingerprint(models.bertscore, hashes),
        "nli": model_fingerprint(models.nli, hashes),
        "layers": models.layers,
        "baseline": baseline,
        "source": source,
        "packages": package_versions(),
        "device": device_signature(),
    }


def score_key(scorer: str, answer: str, references: Sequence[str]) -> str:
    """The content address of one answer's scores by scorer `scorer` (its identity's digest)."""
    return sha256_hex(canonical_json([scorer, answer, list(references)]))


def decoded(text: str, n_refs: int) -> dict[str, Any] | None:
    """A stored row's scores, as SemanticScorer.score returns them, or None when it is not that
    (any other shape is a miss, scored again)."""
    try:
        got = json.loads(text)
    except ValueError:
        return None
    if not isinstance(got, dict) or list(got) != [*SCORE_KEYS, *REFERENCE_KEYS]:
        return None
    lists = [got[k] for k in REFERENCE_KEYS]
    if not all(isinstance(v, list) and len(v) == n_refs for v in lists):
        return None
    values = [got[k] for k in SCORE_KEYS] + [x for v in lists for x in v]
    return got if all(type(x) is float for x in values) else None


# ---- the file -------------------------------------------------------------------------------
def _refusal(path: Path) -> str | None:
    """Why the file at `path` is not this cache (None: it is, or it is not there yet): read
    without writing, so a foreign file is never changed."""
    if not path.exists():
        return None
    try:
        conn = connect_read_only(path, timeout_s=10.0)
    except sqlite3.Error as exc:
        return f"unreadable, not an intact sqlite database ({exc})"
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(scores)"))
    except sqlite3.Error as exc:
        return f"unreadable, not an intact sqlite database ({exc})"
    finally:
        conn.close()
    if tables and (tables != {"scores"} or columns != COLUMNS):
        return f"holds another schema (tables {', '.join(sorted(tables))})"
    if tables and version not in (0, FORMAT_VERSION):  # 0: made, its version not yet set
        return f"format {version}, not {FORMAT_VERSION} (another vlmbench's)"
    return None


class ScoreStore:
    """The sqlite file of kept scores (module docstring): `get` many keys, `add` rows to write
    at the next `flush` (one transaction). `read_only`: a folder this process cannot write. Any
    problem with the file is one ScoreCacheWarning naming it; the store then does nothing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.read_only = write_error(self.path.parent) is not None
        self.pending: list[tuple[str, str, float, str]] = []
        self.undecodable = 0  # rows read that were not scores: scored again
        self._db: WalDatabase | None = None
        why = _refusal(self.path)
        if why is None and not (self.read_only and not self.path.exists()):
            try:
                self._db = WalDatabase(self.path, SCHEMA, read_only=self.read_only)
                if not self.read_only:
                    self._db.conn().execute(f"PRAGMA user_version = {FORMAT_VERSION}")
            except (CacheUnusable, sqlite3.Error) as exc:
                why = str(exc)
        if why is not None:
            self.disable(why)

    def disable(self, why: str) -> None:
        """Warn naming the file and stop using it (its content is left as it is)."""
        if self._db is not None:
            self._db.close()
        self._db, self.pending = None, []
        warnings.warn(
            f"score cache {self.path}: {why}. BERTScore and NLI are computed without it and not "
            "kept; move it aside (a new one is made in its place), point --cache-dir elsewhere, "
            "or run with --no-cache",
            ScoreCacheWarning,
            stacklevel=3,
        )

    def get(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored scores' JSON text of the `keys` found."""
        found: dict[str, str] = {}
        if self._db is None:
            return found
        try:
            conn = self._db.conn()
            for start in range(0, len(keys), _CHUNK):
                chunk = list(keys[start : start + _CHUNK])
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT key, scores FROM scores WHERE key IN ({marks})"
                found.update(conn.execute(sql, chunk).fetchall())
        except sqlite3.Error as exc:
            self.disable(f"cannot be read ({exc})")
        return found

    def add(self, key: str, scorer: str, scores: dict[str, Any]) -> None:
        if self._db is not None and not self.read_only:
            self.pending.append((key, scorer, time.time(), json.dumps(scores)))

    def flush(self) -> None:
        """Write the added rows in one transaction (over a row that did not decode)."""
        if self._db is None or not self.pending:
            return
        rows, self.pending = self.pending, []
        conn = self._db.conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)", rows)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self.disable(f"cannot be written ({exc})")

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()


class KeptScores:
    """One run's view of the kept scores: keys by this scorer's identity (hashed once, the
    weights' contents memoised in `<cache-dir>/file-hashes.json`), rows read up front, computed
    ones written every FLUSH_S seconds and at `close`."""

    def __init__(self, output: OutputSettings, models: ScoringModels, source: bool) -> None:
        cache_dir = Path(output.cache_dir)
        hashes = FileHashes(cache_dir / HASH_MEMO)
        self.store: ScoreStore | None = None
        try:
            identity = scorer_identity(models, source, hashes)
        except (OSError, ValueError) as exc:
            warnings.warn(
                f"score cache: the scoring models' files cannot be hashed ({exc}); BERTScore "
                "and NLI are computed without the cache",
                ScoreCacheWarning,
                stacklevel=2,
            )
            return
        hashes.save()
        self.scorer = sha256_hex(canonical_json(identity))
        self.store = ScoreStore(cache_dir / STORE)
        self._flushed = time.monotonic()

    def key(self, answer: object, references: Sequence[object]) -> str | None:
        """The key of an answer's scores; None when it is not kept (no store, or an answer or a
        reference that is not a string: scored without loading a model anyway)."""
        if self.store is None or not isinstance(answer, str):
            return None
        if not all(isinstance(r, str) for r in references):
            return None
        return score_key(self.scorer, answer, references)

    def read(self, wanted: dict[str, int]) -> dict[str, dict[str, Any]]:
        """The kept scores of `wanted` (key -> its references' count) found in the file."""
        if self.store is None:
            return {}
        found = {}
        for key, text in self.store.get(list(wanted)).items():
            got = decoded(text, wanted[key])
            if got is None:
                self.store.undecodable += 1
            else:
                found[key] = got
        if self.store.undecodable:
            warnings.warn(
                f"score cache {self.store.path}: {self.store.undecodable} stored score(s) do not "
                "decode; they are scored again",
                ScoreCacheWarning,
                stacklevel=2,
            )
        return found

    def keep(self, key: str, scores: dict[str, Any]) -> None:
        """Keep a computed score (written within FLUSH_S seconds, or at `close`)."""
        if self.store is None:
            return
        self.store.add(key, self.scorer, scores)
        if time.monotonic() - self._flushed >= FLUSH_S:
            self.store.flush()
            self._flushed = time.monotonic()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

"""manifest.json (reports/manifest.py): the redaction, the file-hash memo, the data fingerprint,
the sections' pure functions, each evaluation's data files, and `pytest evals/nyu_distance` end
to end (every field, serial = `-n 2`, a changed data file changes the fingerprint)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reports import manifest as mf
from support import evaluations
from support.settings import RECORDED, OutputSettings, RunSettings
from support.types import Outcome

REPO = Path(__file__).resolve().parents[2]
HEX64 = re.compile(r"^[0-9a-f]{64}$")
SECTIONS = {
    "manifest_version",
    "run_folder_format",
    "evaluation",
    "vlmbench",
    "packages",
    "command",
    "run",
    "data",
    "prompts",
    "models",
    "times",
    "host",
    "completion",
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- redaction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:pass@host/v1", "https://***@host/v1"),
        ("--api-base=http://bob:s3cr@t@10.0.0.1:8000/v1", "--api-base=http://***@10.0.0.1:8000/v1"),
        ("ssh://git@example.org/repo", "ssh://***@example.org/repo"),
        ("https://host/v1?api_key=abc123&model=x", "https://host/v1?api_key=***&model=x"),
        ("https://host/v1?x=1&Token=zz", "https://host/v1?x=1&Token=***"),
        ("https://host:8000/v1", "https://host:8000/v1"),  # nothing to hide
        ("user@example.org and a/path@2x.png", "user@example.org and a/path@2x.png"),
    ],
)
def test_urls_lose_their_credentials(text, expected):
    assert mf.redact_text(text) == expected


def test_a_key_in_the_environment_is_redacted_everywhere(monkeypatch):
    secret = "sk-manifest-test-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    value = {"args": [f"--x={secret}"], secret: {"nested": (f"a {secret} b",)}}
    out = mf.redacted(mf.plain(value))
    assert secret not in json.dumps(out)
    assert out["args"] == ["--x=[redacted]"]
    assert out["[redacted]"] == {"nested": ["a [redacted] b"]}


# --- plain JSON ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    root: Path
    names: frozenset[str]
    pair: tuple[int, int]
    ratio: float
    seed: int = 7
    other_seed: int = 9
    seeded: int = 1  # not a seed: the name only starts with "seed"


def test_plain_turns_settings_into_json():
    s = _Settings(Path("/d/x"), frozenset({"b", "a"}), (1, 2), float("nan"))
    assert mf.plain(s) == {
        "root": "/d/x",
        "names": ["a", "b"],
        "pair": [1, 2],
        "ratio": "nan",
        "seed": 7,
        "other_seed": 9,
        "seeded": 1,
    }
    json.dumps(mf.plain(s), allow_nan=False)  # valid JSON, no NaN


def test_seeds_are_the_run_seed_and_the_evaluations_own():
    run = RunSettings(seed=3)
    s = _Settings(Path("/d"), frozenset(), (0, 0), 0.0)
    assert mf.seeds(run, "ev", s) == {"--seed": 3, "ev.seed": 7, "ev.other_seed": 9}
    assert mf.seeds(run, "ev", {"seed": 1}) == {"--seed": 3}  # not a dataclass: no fields read


def test_the_run_section_holds_every_run_option():
    from support.evaluations.nyu_distance.spec import NyuSettings

    nyu = NyuSettings(mat="/d/nyu.mat")
    run = RunSettings(
        seed=4, samples=3, evaluations={"nyu_distance": nyu}, output=OutputSettings(run_id="x")
    )
    got = mf.run_section(run, "nyu_distance")
    options = set(RECORDED) - {"seed", "evaluations"}  # each setting (unit/test_settings.py)
    assert options <= set(got)
    assert got["seeds"] == {"--seed": 4} and got["samples"] == 3 and got["run_id"] == "x"
    assert got["settings"] == mf.plain(nyu) and got["settings"]["mat"] == "/d/nyu.mat"
    json.dumps(got, allow_nan=False)


# --- the file-hash memo and the data fingerprint --------------------------------------------------


def test_the_memo_rehashes_only_when_size_or_mtime_changes(tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"abc")
    memo = tmp_path / "memo.json"
    hashes = mf.FileHashes(memo)
    assert hashes.sha256(f) == (3, sha(b"abc")) and hashes.hashed == 1
    assert hashes.sha256(f) == (3, sha(b"abc")) and hashes.hashed == 1  # served by the memo
    hashes.save()
    again = mf.FileHashes(memo)  # a later run reads the memo file
    stamp = f.stat().st_mtime_ns
    f.write_bytes(b"xyz")  # same size: only the restored mtime hides the change
    os.utime(f, ns=(stamp, stamp))
    assert again.sha256(f) == (3, sha(b"abc")) and again.hashed == 0  # proof the memo is used
    os.utime(f, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))  # mtime moved: re-hashed
    assert again.sha256(f) == (3, sha(b"xyz")) and again.hashed == 1
    stamp = f.stat().st_mtime_ns
    f.write_bytes(b"xyz!")  # size changed, mtime put back: re-hashed all the same
    os.utime(f, ns=(stamp, stamp))
    assert again.sha256(f) == (4, sha(b"xyz!")) and again.hashed == 2


def test_an_unreadable_memo_costs_only_hashing_again(tmp_path):
    memo = tmp_path / "memo.json"
    memo.write_text("{not json")
    f = tmp_path / "a"
    f.write_bytes(b"1")
    hashes = mf.FileHashes(memo)
    assert hashes.sha256(f) == (1, sha(b"1"))
    hashes.save()
    assert str(f.resolve()) in json.loads(memo.read_text())["files"]


def _tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"alpha")
    (root / "sub" / "b.bin").write_bytes(b"\x00\x01")
    (root / ".DS_Store").write_bytes(b"debris")  # hidden: not data
    return root


def test_fingerprint_is_the_sorted_path_size_hash_lines(tmp_path):
    root = _tree(tmp_path / "d")
    fp = mf.data_fingerprint([root], mf.FileHashes(None))
    # the definition, written out: "relative path \t size \t sha256 \n", sorted by path
    lines = f"a.txt\t5\t{sha(b'alpha')}\nsub/b.bin\t2\t{sha(bytes([0, 1]))}\n"
    assert fp["sha256"] == sha(lines.encode())
    assert (fp["files"], fp["bytes"], fp["n_missing"]) == (2, 7, 0)
    # the same files named one by one give the same fingerprint
    listed = mf.data_fingerprint([root / "sub" / "b.bin", root / "a.txt"], mf.FileHashes(None))
    assert listed["sha256"] == fp["sha256"]


def test_fingerprint_follows_content_not_location(tmp_path):
    root = _tree(tmp_path / "d")
    copy = shutil.copytree(root, tmp_path / "elsewhere" / "d2")
    base = mf.data_fingerprint([root], mf.FileHashes(None))["sha256"]
    assert mf.data_fingerprint([copy], mf.FileHashes(None))["sha256"] == base
    (copy / "a.txt").write_bytes(b"alphA")  # same size, new content
    assert mf.data_fingerprint([copy], mf.FileHashes(None))["sha256"] != base
    (copy / "a.txt").write_bytes(b"alpha")
    (copy / "a.txt").rename(copy / "A.txt")  # a renamed file is other data
    assert mf.data_fingerprint([copy], mf.FileHashes(None))["sha256"] != base


def test_a_missing_data_file_is_named_not_raised(tmp_path):
    root = _tree(tmp_path / "d")
    fp = mf.data_fingerprint([root / "a.txt", root / "gone.png"], mf.FileHashes(None))
    assert fp["files"] == 1 and fp["n_missing"] == 1 and fp["missing"] == ["gone.png"]


# --- the sections ---------------------------------------------------------------------------------


def _git_available() -> bool:
    return shutil.which("git") is not None


@pytest.mark.skipif(not (REPO / ".git").exists() or not _git_available(), reason="no checkout")
def test_git_fields_are_filled_in_this_checkout():
    state = mf.git_state(REPO)
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert state["commit"] == head and isinstance(state["dirty"], bool)
    assert mf.vlmbench_section()["version"] is not None


@pytest.mark.skipif(not _git_available(), reason="git is not installed")
def test_git_fields_are_null_outside_a_checkout_top(tmp_path, monkeypatch):
    assert mf.git_state(tmp_path) == {"commit": None, "dirty": None}  # not a repository
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    (tmp_path / "inner").mkdir()
    # an installed copy below some other repository's top is not that repository's commit
    assert mf.git_state(tmp_path / "inner") == {"commit": None, "dirty": None}
    monkeypatch.setenv("PATH", "")  # no git at all
    assert mf.git_state(REPO) == {"commit": None, "dirty": None}


def test_package_versions_list_the_installed_ones_only():
    got = mf.package_versions(("pytest", "numpy", "surely-not-installed-pkg"))
    assert set(got) == {"pytest", "numpy"} and got["pytest"] == pytest.__version__


def test_every_evaluations_prompt_modules_are_found_and_hashed():
    for name in ("pointing", "pgt", "nyu_distance", "surgvqa", "dynamic"):
        spec = evaluations.spec(name)
        assert spec.prompt_modules and spec.data_files is not None, name
        for module in spec.prompt_modules:
            path = REPO / (module.replace(".", "/") + ".py")
            assert mf.module_source_sha256(module) == sha(path.read_bytes()), module
    assert mf.module_source_sha256("support.no_such_module") is None


def _outcome(model: str, case: str, calls: int, hits: int, prompt: str) -> Outcome:
    return Outcome(
        case, "ev", model, "correct", backend_calls=calls, cache_hits=hits, prompt_hash=prompt
    )


def test_models_sum_the_processes_and_keep_the_identity():
    ident = {"provider": "reference", "model": "oracle", "version": "1"}
    stats = {
        "gw0": [{"model": "oracle", "identity": ident, "sent": 2, "cache_hits": 1}],
        "gw1": [{"model": "oracle", "identity": ident, "sent": 3, "cache_hits": 0}],
    }
    outs = [_outcome("oracle", f"c{i}", 1, 0, "p") for i in range(5)]
    got = mf.models_section(("oracle", "chance"), stats, outs)
    oracle = got["oracle"]
    assert (oracle["kind"], oracle["provider"], oracle["identity"]) == ("reference",) * 2 + (ident,)
    assert (oracle["sent"], oracle["cache_hits"], oracle["processes"]) == (5, 1, 2)
    assert oracle["outcomes"] == {
        "n": 5,
        "sent": 5,
        "cache_hits": 0,
        "output_tokens": 0,
        "reasoning_tokens": 0,
        "truncated": 0,
        "adapted": [],
    }
    assert "identities" not in oracle
    chance = got["chance"]  # no process used it: no identity, nothing counted
    assert chance["identity"] is None and chance["sent"] == 0 and chance["processes"] == 0
    other = {**ident, "version": "2"}
    stats["gw1"][0]["identity"] = other
    assert mf.models_section(("oracle",), stats, outs)["oracle"]["identities"] == [ident, other]


@pytest.mark.filterwarnings("ignore:.*the credentials in --api-base are dropped")
def test_models_name_the_endpoint_that_answered(monkeypatch):
    """Each API model's endpoint, from its process's engine statistics: the one the identity
    holds for another endpoint, the vendor's own (which the identity leaves out) for a default
    run; never the URL's credentials or query; null for a model no URL answers."""
    pytest.importorskip("openai")
    from support.backends.registry import BackendOptions, create_backend
    from support.client.engine import ModelClient

    monkeypatch.setenv("OPENAI_API_KEY", "sk-manifest-test-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    proxy = "http://user:pw-SECRET@127.0.0.1:9/v1/?token=tok-SECRET"
    backends = {
        "openai:gpt-4o": create_backend("openai:gpt-4o"),
        "openai:gpt-4o-mini": create_backend("openai:gpt-4o-mini", BackendOptions(api_base=proxy)),
        "oracle": create_backend("oracle"),
    }
    stats = []
    for backend in backends.values():
        client = ModelClient(backend, cache=None, concurrency=1)
        client.cache_hits = 1  # a client that did nothing reports nothing
        stats.append(client.stats())
    got = mf.redacted(mf.models_section(tuple(backends), {"main": stats}, []))
    assert got["openai:gpt-4o"]["endpoint"] == "https://api.openai.com/v1"
    assert "base_url" not in got["openai:gpt-4o"]["identity"]
    mini = got["openai:gpt-4o-mini"]
    assert mini["endpoint"] == mini["identity"]["base_url"] == "http://127.0.0.1:9/v1"
    assert got["oracle"]["endpoint"] is None
    assert "SECRET" not in json.dumps(got)


def test_prompts_count_the_outcomes_hashes():
    outs = [_outcome("m", "a", 1, 0, "h1"), _outcome("n", "a", 1, 0, "h1")]
    outs += [_outcome("m", "b", 1, 0, "h2"), _outcome("m", "c", 0, 0, "")]
    got = mf.prompts_section(evaluations.spec("nyu_distance"), outs)["outcomes"]
    assert got == {"with_prompt": 3, "distinct": 2, "distinct_sha256": sha(b"h1\nh2\n")}


def test_host_facts():
    host = mf.host_section()
    assert host["cpu_count"] == os.cpu_count() and host["python"].count(".") == 2
    assert host["gpus"] is None or all(isinstance(n, str) and n for n in host["gpus"])


# --- each evaluation's data files ----------------------------------------------------------------


def _configured(name: str, run: RunSettings, **values):
    return evaluations.spec(name).configure(values, run)


def _data_files(name: str, run: RunSettings, **values) -> list[Path]:
    spec = evaluations.spec(name)
    return [Path(p) for p in spec.data_files(_configured(name, run, **values), run)]


def _all_files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def test_default_data_is_the_synthetic_folder_of_the_cache(shared_cache):
    run = RunSettings(output=OutputSettings(cache_dir=shared_cache))
    for name in ("pgt", "nyu_distance", "dynamic"):
        (found,) = _data_files(name, run)
        assert found.exists() and (shared_cache / "synthetic") in found.parents, name


def test_data_files_follow_the_options(tmp_path):
    from support.evaluations.nyu_distance.spec import NyuSettings
    from support.evaluations.pointing.spec import PointingSettings

    run = RunSettings(output=OutputSettings(cache_dir=tmp_path / "cache"))
    mat = tmp_path / "nyu.mat"  # not there: configure would refuse it, data_files only lists it
    assert evaluations.spec("nyu_distance").data_files(NyuSettings(mat=str(mat)), run) == [mat]
    (tmp_path / "rgb").mkdir()
    (tmp_path / "depth").mkdir()
    assert _data_files("nyu_distance", run, nyu_dir=str(tmp_path)) == [tmp_path]
    (tmp_path / "metadata.jsonl").write_text("")
    assert _data_files("dynamic", run, dynamic_data=str(tmp_path)) == [tmp_path]
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "balanced_indices_train_100.json").write_text("[]")  # configure wants one
    (tmp_path / "p1.parquet").write_bytes(b"x")
    (tmp_path / "p2.parquet").write_bytes(b"y")
    got = _data_files("pointing", run, cholecseg8k=str(tmp_path / "p*.parquet"))
    assert got == [tmp_path / "p1.parquet", tmp_path / "p2.parquet"]
    got = _data_files("pointing", run, cholecseg8k=str(tmp_path), pointing_prepared=str(prepared))
    assert got == [tmp_path, prepared.resolve()]
    # a hub id: the folder `python -m support.evaluations.pointing.download` extracts into (never
    # fetched)
    settings = PointingSettings(cholecseg8k="someone/SomeData")  # configure: "not downloaded"
    (hub,) = evaluations.spec("pointing").data_files(settings, run)
    assert hub.is_relative_to(run.output.cache_dir) and not hub.exists()


def test_pgt_csv_data_are_the_csv_and_its_images(shared_cache):
    from support.evaluations.pgt.synthetic import ensure_pgt_sample

    csv = ensure_pgt_sample(shared_cache)
    run = RunSettings(output=OutputSettings(cache_dir=shared_cache))
    got = _data_files("pgt", run, pgt_dataset=str(csv))
    assert got[0] == csv and len(got) > 1
    assert set(got) == _all_files(csv.parent)  # the sample's folder holds just these


def test_surgvqa_root_data_are_the_files_read_below_it(shared_cache, tmp_path):
    from support.evaluations.surgvqa.synthetic import ensure_surgvu

    root = shutil.copytree(ensure_surgvu(shared_cache), tmp_path / "surgvu")
    (root / "notes.txt").write_text("not read by the evaluation")
    got = _data_files(
        "surgvqa", RunSettings(output=OutputSettings(cache_dir=tmp_path)), surgvqa_root=str(root)
    )
    assert len(got) == len(set(got)) and all(p.is_file() for p in got)
    # every clip, question and answer file, each video's COCO truth (its grand-challenge twin is
    # read only without one: support/evaluations/surgvqa/dataset.py read_tools); not the notes
    everything = _all_files(root)
    twins = {
        p.with_name(p.name.replace("_coco.json", "_gc.json"))
        for p in everything
        if p.name.endswith("_coco.json")
    }
    assert set(got) == everything - twins - {root / "notes.txt"}
    assert {p.suffix for p in got} == {".mp4", ".json"}


# --- end to end: pytest evals/nyu_distance -------------------------------------------------------


def write_nyu_folder(folder: Path, n: int = 2) -> Path:
    """A small extracted NYU folder (landscape: read as it is): rgb/NNNN.png, depth/NNNN.npy
    holding a tilted plane 1.5-4 m deep (metres, row = v, column = u)."""
    (folder / "rgb").mkdir(parents=True)
    (folder / "depth").mkdir()
    v, u = np.mgrid[0:480, 0:640].astype(np.float32)
    for i in range(n):
        rgb = np.stack([u / 640 * 255, v / 480 * 255, np.full_like(u, 40 * i)], axis=-1)
        Image.fromarray(rgb.astype(np.uint8)).save(folder / "rgb" / f"{i:04d}.png")
        np.save(folder / "depth" / f"{i:04d}.npy", 1.5 + 2.0 * u / 640 + 0.5 * v / 480 + 0.1 * i)
    return folder


@pytest.fixture
def nyu_run(run_suite):
    def _run(folder: Path, *args: str, run_id: str, cache: str = "cache"):
        result, results = run_suite(
            "nyu_distance",
            f"--nyu-dir={folder}",
            "--model=oracle,chance",
            "--pairs-per-image=2",
            *args,
            run_id=run_id,
            cache=cache,
        )
        assert result.ret == 0, result.stdout.str()
        path = results / "nyu_distance" / run_id / "manifest.json"
        return json.loads(path.read_text()), results / "nyu_distance" / run_id

    return _run


@pytest.mark.slow
def test_a_run_writes_every_field_and_xdist_agrees(nyu_run, tmp_path):
    folder = write_nyu_folder(tmp_path / "nyu")
    serial, out = nyu_run(folder, "--seed=5", run_id="serial")
    assert set(serial) == SECTIONS and serial["evaluation"] == "nyu_distance"
    assert serial["vlmbench"]["version"] is not None
    if (REPO / ".git").exists() and _git_available():  # this checkout: the commit is known
        assert re.fullmatch(r"[0-9a-f]{40}", serial["vlmbench"]["commit"])
        assert isinstance(serial["vlmbench"]["dirty"], bool)
    assert {"pytest", "numpy", "pandas", "h5py"} <= set(serial["packages"])
    assert f"--nyu-dir={folder}" in serial["command"]["args"] and serial["command"]["dir"]
    run = serial["run"]
    assert run["seeds"] == {"--seed": 5} and run["compat"] == "writeup"
    assert run["models"] == ["oracle", "chance"] and run["run_id"] == "serial"
    assert run["bootstrap"] == 200 and run["samples"] is None
    assert run["settings"]["folder"] == str(folder) and run["settings"]["pairs_per_image"] == 2
    data = serial["data"]
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    assert data["files"] == 4 and data["bytes"] == sum(p.stat().st_size for p in files)
    assert HEX64.match(data["sha256"]) and data["n_missing"] == 0
    nyu_prompts = REPO / "support" / "evaluations" / "nyu_distance" / "prompts.py"
    assert serial["prompts"]["modules"] == {
        "support.evaluations.nyu_distance.prompts": sha(nyu_prompts.read_bytes())
    }
    rows = [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]
    assert len(rows) == 8  # 2 images x 2 pairs x 2 models
    outcome_prompts = serial["prompts"]["outcomes"]
    assert outcome_prompts["with_prompt"] == 8
    assert outcome_prompts["distinct"] == len({r["prompt_hash"] for r in rows}) == 4
    for name in ("oracle", "chance"):
        m = serial["models"][name]
        assert m["kind"] == "reference" and m["identity"]["model"] == name
        assert m["sent"] == m["outcomes"]["sent"] == 4 and m["cache_hits"] == 0
    assert serial["models"]["chance"]["identity"]["seed"] == 5  # the seed the cache keys on
    times = serial["times"]
    assert times["start"] < times["end"] and times["wall_s"] > 0
    assert times["start"].endswith("+00:00")
    assert serial["host"]["cpu_count"] == os.cpu_count()

    parallel, _ = nyu_run(folder, "--seed=5", "-n", "2", run_id="xdist", cache="fresh")
    assert parallel["data"]["sha256"] == data["sha256"]  # stable across runs
    for name in ("oracle", "chance"):
        one, two = serial["models"][name], parallel["models"][name]
        assert two["identity"] == one["identity"]
        assert (two["sent"], two["cache_hits"]) == (one["sent"], one["cache_hits"])
    assert max(m["processes"] for m in parallel["models"].values()) <= 2
    assert parallel["prompts"] == serial["prompts"]


@pytest.mark.slow
def test_a_changed_data_file_changes_the_fingerprint(nyu_run, tmp_path):
    folder = write_nyu_folder(tmp_path / "nyu")
    memo = mf.FileHashes(tmp_path / "cache" / mf.HASH_MEMO)  # the run's cache folder
    before = mf.data_fingerprint([folder], memo)["sha256"]
    memo.save()  # as an earlier run on this data left it
    depth = folder / "depth" / "0001.npy"
    np.save(depth, np.load(depth) * 1.1)  # farther: a different ground truth, same size
    after = mf.data_fingerprint([folder], mf.FileHashes(None))["sha256"]
    manifest, _ = nyu_run(folder, run_id="changed")
    assert manifest["data"]["sha256"] == after != before  # the memo did not hide the change

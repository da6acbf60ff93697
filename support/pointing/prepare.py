"""Preparation of the pointing evaluation, as in the source's `prepare_fewshot_examples.py`.

Writes into one folder, with the source's names and JSON shapes (N rows, n_test test rows):

- `presence_matrix_train_{N}.npz`: `Y` (N, 12) uint8, `class_ids` (12,), `video_ids` (N,) str
- `balanced_indices_train_{n_test}.json`: the greedy balanced test rows
- `fewshot_plan_train_pos1_neg1_seed43_excl{n_test}.json`: standard plan, 1 positive + 1 negative
- `fewshot_plan_train_pos1_neg1_nearmiss1_seed45_excl{n_test}.json`: plus 1 near-miss negative

Existing files are reused: our own ones while they match the presence matrix they were made from,
files without that record (e.g. the source's own) as they are. Writes are atomic (temp + rename).

    python -m support.pointing.prepare --cholecseg8k SOURCE --out DIR [--n-test 100] [--min-gap 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from support.outputs import atomic_write
from support.pointing.classes import ORGAN_IDS
from support.pointing.dataset import CholecSeg8k
from support.pointing.selection import build_fewshot_plan, select_balanced

__all__ = [
    "Prepared",
    "build_fewshot_plan",
    "build_presence_matrix",
    "load_prepared",
    "prepare",
    "select_balanced",
]

log = logging.getLogger(__name__)

# plan name in Prepared.plans -> the source's settings of build_fewshot_plan
PLANS: dict[str, dict[str, int]] = {
    "standard": {"seed": 43, "n_pos": 1, "n_neg_easy": 1, "n_neg_hard": 0},
    "hard_negatives": {"seed": 45, "n_pos": 1, "n_neg_easy": 1, "n_neg_hard": 1},
}
COMMAND = "python -m support.pointing.prepare --cholecseg8k SOURCE --out {out} --n-test {n_test}"


def file_names(n_rows: int, n_test: int, split: str = "train") -> dict[str, str]:
    """The source's file names: keys "presence", "balanced", and the PLANS names."""
    return {
        "presence": f"presence_matrix_{split}_{n_rows}.npz",
        "balanced": f"balanced_indices_{split}_{n_test}.json",
        "standard": f"fewshot_plan_{split}_pos1_neg1_seed43_excl{n_test}.json",
        "hard_negatives": f"fewshot_plan_{split}_pos1_neg1_nearmiss1_seed45_excl{n_test}.json",
    }


@dataclass(frozen=True, eq=False)
class Prepared:
    """What the pointing evaluation needs: presence, videos, test rows and the few-shot plans."""

    presence: np.ndarray  # (N, 12) uint8; column j is organ ORGAN_IDS[j]
    video_ids: list[str]  # (N,) video of each row
    test_indices: list[int]  # rows of the balanced test set
    plans: dict[str, dict]  # {"standard": plan_json["plan"], "hard_negatives": plan_json["plan"]}
    out_dir: Path


def build_presence_matrix(
    ds: CholecSeg8k, min_pixels: int = 1, workers: int | None = None, progress: bool = True
) -> np.ndarray:
    """(N, 12) uint8: Y[i, j] = 1 if organ ORGAN_IDS[j] covers >= min_pixels pixels of row i."""
    n = len(ds)
    workers = workers or min(8, os.cpu_count() or 1)
    Y = np.zeros((n, len(ORGAN_IDS)), dtype=np.uint8)
    with ThreadPoolExecutor(max_workers=workers) as pool:  # PNG decoding releases the GIL
        rows = pool.map(lambda i: ds.presence(i, min_pixels), range(n))
        for i, row in enumerate(tqdm(rows, total=n, desc="presence", disable=not progress)):
            Y[i] = row
    return Y


def _digest(Y: np.ndarray, video_ids: list[str]) -> str:
    """sha256 of the presence matrix and the videos: what the JSON files were made from."""
    h = hashlib.sha256(np.ascontiguousarray(Y, dtype=np.uint8).tobytes())
    h.update("\n".join(video_ids).encode("utf-8"))
    return h.hexdigest()


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _reusable(path: Path, expect: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON at path if it may be reused: our own file made from the same inputs, or a foreign
    file (no "presence_sha256" record, e.g. the source's) taken as it is."""
    if not path.is_file():
        return None
    obj = json.loads(path.read_text(encoding="utf-8"))
    if "presence_sha256" not in obj:
        log.info("%s: no provenance record; using it as it is", path)
        return obj
    if all(obj.get(k) == v for k, v in expect.items()):
        return obj
    log.warning("%s: made from other inputs; rebuilding it", path)
    return None


def _presence(ds: CholecSeg8k, path: Path) -> tuple[np.ndarray, list[str], bool]:
    """Presence matrix and video ids: from path if it fits ds, else built and written."""
    n = len(ds)
    if path.is_file():
        with np.load(path, allow_pickle=False) as z:
            Y = z["Y"]
            fp = str(z["fingerprint"]) if "fingerprint" in z else None
            vids = [str(v) for v in z["video_ids"]] if "video_ids" in z else ds.video_ids()
        if Y.shape == (n, len(ORGAN_IDS)) and fp in (None, ds.fingerprint) and len(vids) == n:
            return Y.astype(np.uint8), vids, False
        log.warning("%s: made from other data (fingerprint %s); rebuilding it", path, fp)
    Y = build_presence_matrix(ds)
    vids = ds.video_ids()
    arrays = {
        "Y": Y,
        "class_ids": np.array(ORGAN_IDS, dtype=np.int64),
        "video_ids": np.array(vids, dtype=str),
        "fingerprint": np.array(ds.fingerprint),
    }
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))
    return Y, vids, True


def _prepare(
    ds: CholecSeg8k, out_dir: Path, n_test: int, min_gap: int
) -> tuple[Prepared, dict[str, tuple[Path, str]]]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = file_names(len(ds), n_test, ds.split)
    status: dict[str, tuple[Path, str]] = {}
    Y, vids, built = _presence(ds, out_dir / names["presence"])
    status["presence"] = (out_dir / names["presence"], "written" if built else "reused")
    digest = _digest(Y, vids)

    path = out_dir / names["balanced"]
    expect = {"presence_sha256": digest, "n_requested": n_test, "min_gap": min_gap}
    balanced = _reusable(path, expect)
    status["balanced"] = (path, "reused")
    if balanced is None:
        indices = select_balanced(Y, vids, n_test, min_gap)
        sel = Y[indices].astype(np.int64)
        warnings = [] if len(indices) == n_test else [f"only {len(indices)} rows fit min_gap"]
        balanced = {
            "indices": indices,
            "n": len(indices),
            "method": "greedy_balanced",
            "n_requested": n_test,
            "min_gap": min_gap,
            "n_rows": len(ds),
            "class_ids": list(ORGAN_IDS),
            "positives": sel.sum(axis=0).tolist(),  # per organ, among the selected rows
            "warnings": warnings,
            "presence_sha256": digest,
        }
        _write_json(path, balanced)
        status["balanced"] = (path, "written")
    test = [int(i) for i in balanced["indices"]]

    plans: dict[str, dict] = {}
    for name, settings in PLANS.items():
        path = out_dir / names[name]
        test_digest = hashlib.sha256(",".join(map(str, sorted(set(test)))).encode()).hexdigest()
        expect = {"presence_sha256": digest, "test_sha256": test_digest, "min_gap": min_gap}
        plan = _reusable(path, {**expect, **settings})
        status[name] = (path, "reused")
        if plan is None:
            plan = {**build_fewshot_plan(Y, vids, test, min_gap=min_gap, **settings), **expect}
            _write_json(path, plan)
            status[name] = (path, "written")
        for w in plan.get("warnings", []):
            log.warning("%s: %s", path.name, w)
        plans[name] = plan["plan"]
    return Prepared(Y, vids, test, plans, out_dir), status


def prepare(ds: CholecSeg8k, out_dir: Path, n_test: int = 100, min_gap: int = 3) -> Prepared:
    """Write the missing preparation files for ds into out_dir, read the others; safe to run
    from several processes at once: one computes under a file lock while the others wait, and
    every file is written atomically."""
    from filelock import FileLock

    Path(out_dir).parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{out_dir}.lock", timeout=3600):  # beside the folder: it holds only the files
        return _prepare(ds, out_dir, n_test, min_gap)[0]


def _read_json(path: Path, out_dir: Path, n_test: int) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(
            f"missing {path}; create it with: {COMMAND.format(out=out_dir, n_test=n_test)}"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def load_prepared(out_dir: Path, n_test: int = 100, split: str = "train") -> Prepared:
    """Read what `prepare` wrote (nothing is computed); FileNotFoundError names a missing file."""
    out_dir = Path(out_dir)
    names = file_names(0, n_test, split)  # the presence name is found below
    balanced = _read_json(out_dir / names["balanced"], out_dir, n_test)
    hint = COMMAND.format(out=out_dir, n_test=n_test)
    if "n_rows" in balanced:
        presence = out_dir / file_names(balanced["n_rows"], n_test, split)["presence"]
    else:  # a file without our record: the one presence matrix in the folder
        found = sorted(out_dir.glob(f"presence_matrix_{split}_*.npz"))
        if len(found) != 1:
            raise FileNotFoundError(
                f"need exactly one presence_matrix_{split}_N.npz in {out_dir}, found "
                f"{[f.name for f in found]}; create it with: {hint}"
            )
        presence = found[0]
    if not presence.is_file():
        raise FileNotFoundError(f"missing {presence}; create it with: {hint}")
    with np.load(presence, allow_pickle=False) as z:
        Y = z["Y"].astype(np.uint8)
        vids = [str(v) for v in z["video_ids"]] if "video_ids" in z else []
    if not vids:
        log.warning("%s has no video_ids; Prepared.video_ids is empty", presence)
    plans = {name: _read_json(out_dir / names[name], out_dir, n_test)["plan"] for name in PLANS}
    test = [int(i) for i in balanced["indices"]]
    return Prepared(Y, vids, test, plans, out_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m support.pointing.prepare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--cholecseg8k", required=True, metavar="SOURCE",
                    help="save_to_disk folder, parquet file/folder/glob, or hub id")  # fmt: skip
    ap.add_argument("--out", required=True, type=Path, help="folder for the four files")
    ap.add_argument("--n-test", type=int, default=100, help="balanced test rows (default 100)")
    ap.add_argument("--min-gap", type=int, default=3, help="min rows between picks of a video")
    ap.add_argument("--split", default="train")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    ds = CholecSeg8k.open(args.cholecseg8k, split=args.split)
    prepared, status = _prepare(ds, args.out, args.n_test, args.min_gap)
    for path, what in status.values():
        print(f"{what:8s} {path}")
    print(f"{len(ds)} rows, {len(set(prepared.video_ids))} videos, "
          f"{len(prepared.test_indices)} test rows")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

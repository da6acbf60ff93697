"""Preparation of the pointing evaluation, as in the source's `prepare_fewshot_examples.py`.

Writes into one folder, with the source's names and JSON shapes (N rows, n_test test rows):

- `presence_matrix_train_{N}.npz`: `Y` (N, 12) uint8, `class_ids` (12,), `video_ids` (N,) str
- `balanced_indices_train_{n_test}.json`: the greedy balanced test rows
- `fewshot_plan_train_pos1_neg1_seed43_excl{n_test}.json`: standard plan, 1 positive + 1 negative
- `fewshot_plan_train_pos1_neg1_nearmiss1_seed45_excl{n_test}.json`: plus 1 near-miss negative

Existing files are reused: our own ones while they match the presence matrix they were made from,
files without that record (e.g. the source's own) as they are. Writes are atomic (temp + rename).

The original's own folder (fallcat/llm_cholec_organ `data_info/cholecseg8k/`) reads as it is
(`load_prepared`): plan positives as `{"idx", "point"[, "point_type"]}` objects, the near-miss
plan's `near_miss` entries, a presence matrix with `Y` only. `prepare_source` writes such a
folder by the original's rules (`--compat source`: presence at >= 50 px, seeds 42/43/45, see
selection.py).

    python -m support.evaluations.pointing.prepare --cholecseg8k SOURCE --out DIR [--n-test 100]
    [--min-gap 3]
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
from scipy import ndimage
from tqdm import tqdm

from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS
from support.evaluations.pointing.dataset import CholecSeg8k, is_hub_id
from support.evaluations.pointing.selection import (
    SOURCE_MIN_PIXELS,
    SOURCE_SEEDS,
    build_fewshot_plan,
    select_balanced,
    select_balanced_source,
    source_plan_rows,
)
from support.settings import OutputSettings
from support.storage.files import atomic_write

__all__ = [
    "Prepared",
    "build_fewshot_plan",
    "build_presence_matrix",
    "load_prepared",
    "normalize_plan",
    "prepare",
    "prepare_source",
    "select_balanced",
]

log = logging.getLogger(__name__)

# plan name in Prepared.plans -> the source's settings of build_fewshot_plan
PLANS: dict[str, dict[str, int]] = {
    "standard": {"seed": 43, "n_pos": 1, "n_neg_easy": 1, "n_neg_hard": 0},
    "hard_negatives": {"seed": 45, "n_pos": 1, "n_neg_easy": 1, "n_neg_hard": 1},
}
COMMAND = (
    "python -m support.evaluations.pointing.prepare --cholecseg8k SOURCE --out {out} "
    "--n-test {n_test}"
)


def file_names(n_rows: int, n_test: int, split: str = "train") -> dict[str, str]:
    """The source's file names: keys "presence", "balanced", and the PLANS names."""
    return {
        "presence": f"presence_matrix_{split}_{n_rows}.npz",
        "balanced": f"balanced_indices_{split}_{n_test}.json",
        "standard": f"fewshot_plan_{split}_pos1_neg1_seed43_excl{n_test}.json",
        "hard_negatives": f"fewshot_plan_{split}_pos1_neg1_nearmiss1_seed45_excl{n_test}.json",
    }


# the example lists of a plan entry: row numbers, or {"idx": row, ...} objects in the original's
PLAN_ROLES = ("positives", "negatives_easy", "negatives_hard", "near_miss")


@dataclass(frozen=True, eq=False)
class Prepared:
    """What the pointing evaluation needs: presence, videos, test rows and the few-shot plans.

    `plans[name][organ id as str][role]` is a list of dataset rows for each role of PLAN_ROLES
    (empty when the file has none), whatever the file's shape (see `normalize_plan`).
    """

    presence: np.ndarray | None  # (N, 12) uint8, column j is organ ORGAN_IDS[j]; None: no file
    video_ids: list[str]  # (N,) video of each row; empty when the presence file holds none
    test_indices: list[int]  # rows of the balanced test set, in the file's order
    plans: dict[str, dict]  # {"standard": {...}, "hard_negatives": {...}}, normalized
    out_dir: Path
    min_pixels: int = 1  # the presence threshold the matrix (and the plans) were made with


def _row_number(v: Any, where: str) -> int:
    if isinstance(v, dict):
        if "idx" not in v:
            raise ValueError(f"{where}: an example object needs an 'idx' (its row number)")
        v = v["idx"]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{where}: expected a row number (int >= 0) or {{'idx': row}}, got {v!r}")
    return v


def normalize_plan(plan_json: Any, path: Path | str) -> dict[str, dict[str, list[int]]]:
    """A plan file's `plan` as {organ id: {role: [rows]}} for every organ id and role.

    Accepts our files (rows) and the original's (positives and near misses as {"idx", "point",
    "point_type"} objects; the near-miss plan has `near_miss` and no `negatives_hard`). An organ
    or role the file lacks comes back empty. ValueError names the file and the key at fault.
    """
    if not isinstance(plan_json, dict) or not isinstance(plan_json.get("plan"), dict):
        raise ValueError(f"{path}: expected a JSON object with a 'plan' object (organ id -> lists)")
    known = {str(c) for c in ORGAN_IDS}
    unknown = sorted(set(plan_json["plan"]) - known)
    if unknown:
        raise ValueError(f"{path}: plan has unknown organ ids {unknown} (expected 1..12)")
    out: dict[str, dict[str, list[int]]] = {}
    for cid in ORGAN_IDS:
        entry = plan_json["plan"].get(str(cid), {})
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: plan['{cid}'] must be an object, got {entry!r:.60}")
        out[str(cid)] = {}
        for role in PLAN_ROLES:
            items = entry.get(role) or []
            if not isinstance(items, list):
                raise ValueError(f"{path}: plan['{cid}']['{role}'] must be a list")
            where = f"{path}: plan['{cid}']['{role}']"
            out[str(cid)][role] = [_row_number(v, f"{where}[{k}]") for k, v in enumerate(items)]
    return out


def balanced_rows(balanced: Any, path: Path | str, split: str = "train") -> list[int]:
    """The `indices` of a balanced-indices file, in the file's order (checked)."""
    if not isinstance(balanced, dict) or not isinstance(balanced.get("indices"), list):
        raise ValueError(f"{path}: expected a JSON object with an 'indices' list")
    if balanced.get("split", split) != split:
        raise ValueError(f"{path}: 'split' is {balanced['split']!r}, the run reads {split!r}")
    rows = [_row_number(v, f"{path}: indices[{k}]") for k, v in enumerate(balanced["indices"])]
    if not rows:
        raise ValueError(f"{path}: 'indices' is empty")
    if len(set(rows)) != len(rows):
        raise ValueError(f"{path}: 'indices' repeats rows")
    return rows


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
        plans[name] = normalize_plan(plan, path)
    return Prepared(Y, vids, test, plans, out_dir), status


def prepare(ds: CholecSeg8k, out_dir: Path, n_test: int = 100, min_gap: int = 3) -> Prepared:
    """Write the missing preparation files for ds into out_dir, read the others; safe to run
    from several processes at once: one computes under a file lock while the others wait, and
    every file is written atomically."""
    from filelock import FileLock

    Path(out_dir).parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{out_dir}.lock", timeout=3600):  # beside the folder: it holds only the files
        return _prepare(ds, out_dir, n_test, min_gap)[0]


def _read_json(path: Path, out_dir: Path, n_test: int) -> Any:
    if not path.is_file():
        raise FileNotFoundError(
            f"missing {path}; create it with: {COMMAND.format(out=out_dir, n_test=n_test)}"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON file: {exc}") from None


def _read_presence(path: Path) -> tuple[np.ndarray, list[str]]:
    """`Y` (N, 12) and the `video_ids` (empty when absent) of a presence .npz; errors name it."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "Y" not in z:
                raise ValueError(f"{path}: no 'Y' array (keys: {sorted(z.keys())})")
            Y = np.asarray(z["Y"])
            vids = [str(v) for v in z["video_ids"]] if "video_ids" in z else []
    except (OSError, EOFError) as exc:  # not an npz (zip) file
        raise ValueError(f"{path}: not a readable .npz file: {exc}") from None
    if Y.ndim != 2 or Y.shape[1] != len(ORGAN_IDS):
        raise ValueError(f"{path}: 'Y' must be (N, {len(ORGAN_IDS)}), got {Y.shape}")
    if vids and len(vids) != Y.shape[0]:
        raise ValueError(f"{path}: {len(vids)} 'video_ids' for {Y.shape[0]} rows of 'Y'")
    return (Y != 0).astype(np.uint8), vids


def load_prepared(
    out_dir: Path, n_test: int = 100, split: str = "train", need_presence: bool = True
) -> Prepared:
    """Read a prepared folder (nothing is computed): ours, or the original's `data_info` folder.

    The test rows keep the file's order. The presence matrix is the one our balanced file names,
    else the one `presence_matrix_{split}_N.npz` in the folder; without one, FileNotFoundError
    (need_presence) or `presence=None`. Files without our provenance record (the original's) count
    as made at the original's 50 px. FileNotFoundError names a missing file and the command that
    makes it; ValueError names a malformed file and its key.
    """
    out_dir = Path(out_dir)
    names = file_names(0, n_test, split)  # the presence name is found below
    path = out_dir / names["balanced"]
    balanced = _read_json(path, out_dir, n_test)
    test = balanced_rows(balanced, path, split)
    ours = "presence_sha256" in balanced
    hint = COMMAND.format(out=out_dir, n_test=n_test)
    presence: Path | None
    if ours and "n_rows" in balanced:
        presence = out_dir / file_names(balanced["n_rows"], n_test, split)["presence"]
    else:  # a file without our record: the one presence matrix in the folder
        found = sorted(out_dir.glob(f"presence_matrix_{split}_*.npz"))
        if len(found) > 1:
            raise FileNotFoundError(
                f"need exactly one presence_matrix_{split}_N.npz in {out_dir}, found "
                f"{[f.name for f in found]}; create it with: {hint}"
            )
        presence = found[0] if found else None
    Y: np.ndarray | None = None
    vids: list[str] = []
    if presence is not None and presence.is_file():
        Y, vids = _read_presence(presence)
    elif need_presence:
        where = presence or out_dir / f"presence_matrix_{split}_N.npz"
        raise FileNotFoundError(f"missing {where}; create it with: {hint}")
    plans = {}
    for name in PLANS:
        plan_path = out_dir / names[name]
        plans[name] = normalize_plan(_read_json(plan_path, out_dir, n_test), plan_path)
    min_pixels = 1 if ours else SOURCE_MIN_PIXELS
    return Prepared(Y, vids, test, plans, out_dir, min_pixels)


# ---- the original's preparation (`--compat source`) ----------------------------------------------


def source_point(labels: np.ndarray, organ: int) -> list[int] | None:
    """A positive example's point as the original records it: the mask pixel farthest from the
    nearest non-mask pixel (the image border does not count as non-mask there), first in
    row-major order on ties; (x, y) image px. Informational: the evaluation sends a placeholder."""
    mask = np.asarray(labels) == organ
    if not mask.any():
        return None
    dist = ndimage.distance_transform_edt(mask)
    row, col = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return [int(col), int(row)]


def near_miss_point(image: np.ndarray, labels: np.ndarray, organ: int) -> list[int] | None:
    """A near-miss example's point: a pixel outside the organ, 10 to 30 px from it (up to 100 px
    when none is closer), whose colour is nearest the organ's mean colour; first in row-major
    order on ties; (x, y) image px. The original draws it with the unseeded global numpy RNG,
    so its points cannot be reproduced; this is a deterministic stand-in with its intent.
    Informational: the original never sends near-miss examples (they sit under `near_miss`)."""
    mask = np.asarray(labels) == organ
    if not mask.any() or mask.all():
        return None
    dist = ndimage.distance_transform_edt(~mask)  # px to the nearest organ pixel
    rgb = np.asarray(image, dtype=np.float64)[..., :3] / 255.0
    mean = rgb[mask].mean(axis=0)
    for outer in (30, 100):
        band = (dist >= 10) & (dist <= outer)
        if band.any():
            err = np.where(band, np.linalg.norm(rgb - mean, axis=-1), np.inf)
            row, col = np.unravel_index(int(np.argmin(err)), err.shape)
            return [int(col), int(row)]
    return None


def _source_plan_json(
    ds: CholecSeg8k, Y: np.ndarray, test: list[int], kind: str, n_pos: int = 1, n_neg: int = 1
) -> dict[str, Any]:
    """One plan file of the original's, `kind` "standard" (seed 43) or "near_miss" (seed 45)."""
    n_near = 1 if kind == "near_miss" else 0
    seed = SOURCE_SEEDS[kind]
    rows = source_plan_rows(Y, test, seed, n_pos, n_neg, n_near)
    head: dict[str, Any] = {
        "dataset": "CholecSeg8k", "split": ds.split, "min_pixels": SOURCE_MIN_PIXELS,
        "seed": seed, "n_pos": n_pos, "n_neg_easy": n_neg,
    }  # fmt: skip
    head |= {"n_near_miss": n_near} if n_near else {"n_neg_hard": 0}
    head |= {"exclude_balanced": sorted(test), "base_pool_size": len(Y) - len(set(test))}
    plan: dict[str, Any] = {}
    for cid in ORGAN_IDS:
        r = rows[str(cid)]
        tag = {"point_type": "positive"} if n_near else {}
        entry: dict[str, Any] = {
            "name": CLASS_NAMES[cid],
            "positives": [
                {"idx": i, "point": source_point(ds.labels(i), cid), **tag} for i in r["positives"]
            ],
            "negatives_easy": r["negatives_easy"],
        }
        if n_near:
            entry["near_miss"] = [
                {"idx": i, "point": near_miss_point(np.asarray(ds.image(i)), ds.labels(i), cid),
                 "point_type": "near_miss"}
                for i in r["near_miss"]
            ]  # fmt: skip
        else:
            entry["negatives_hard"] = []
        entry |= {"pos_available": r["pos_available"], "neg_available": r["neg_available"]}
        plan[str(cid)] = entry
    return {**head, "plan": plan}


def _prepare_source(ds: CholecSeg8k, out_dir: Path, n_test: int) -> Prepared:
    out_dir.mkdir(parents=True, exist_ok=True)
    names = file_names(len(ds), n_test, ds.split)
    path = out_dir / names["presence"]
    if path.is_file():
        Y, _ = _read_presence(path)
    else:
        Y = build_presence_matrix(ds, min_pixels=SOURCE_MIN_PIXELS, progress=False)
        atomic_write(path, lambda f: np.savez_compressed(f, Y=Y))
        index = out_dir / f"presence_indices_{ds.split}_{len(ds)}.json"
        _write_json(index, {"indices": list(range(len(ds)))})
    path = out_dir / names["balanced"]
    if not path.is_file():
        if n_test > len(ds):
            log.warning("%s: %d test rows asked of %d rows; taking all", path, n_test, len(ds))
        rows = select_balanced_source(Y, n_test, SOURCE_SEEDS["balanced"])
        _write_json(path, {"split": ds.split, "n": len(rows), "indices": rows})
    test = balanced_rows(_read_json(path, out_dir, n_test), path, ds.split)
    for name, kind in (("standard", "standard"), ("hard_negatives", "near_miss")):
        if not (out_dir / names[name]).is_file():
            _write_json(out_dir / names[name], _source_plan_json(ds, Y, test, kind))
    return load_prepared(out_dir, n_test, ds.split)


def prepare_source(ds: CholecSeg8k, out_dir: Path, n_test: int = 100) -> Prepared:
    """Write the original's `data_info` files for ds into out_dir by its rules, those missing
    (existing files are used as they are, as the original's script does), and read them back.

    Files: presence_matrix_{split}_{N}.npz (`Y` only, >= 50 px) and presence_indices_{split}_{N}
    .json, balanced_indices_{split}_{n}.json ({"split", "n", "indices"}, selection order), and
    the standard (seed 43) and near-miss (seed 45) plans under the names `file_names` gives.
    One process computes under a file lock while others wait.
    """
    from filelock import FileLock

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{out_dir}.lock", timeout=3600):
        return _prepare_source(ds, out_dir, n_test)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m support.evaluations.pointing.prepare"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--cholecseg8k", required=True, metavar="SOURCE",
                    help="raw CholecSeg8k folder, save_to_disk folder, parquet file/folder/glob, "
                         "or hub id (downloaded into --cache-dir first)")  # fmt: skip
    ap.add_argument("--out", required=True, type=Path, help="folder for the four files")
    ap.add_argument("--n-test", type=int, default=100, help="balanced test rows (default 100)")
    ap.add_argument("--min-gap", type=int, default=3, help="min rows between picks of a video")
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache-dir", type=Path, default=OutputSettings.cache_dir,
                    help="the suite's --cache-dir: where a hub id is downloaded to")  # fmt: skip
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    source = args.cholecseg8k
    if is_hub_id(source):  # the explicit step that may download (3.1 GB for CholecSeg8k)
        from support.evaluations.pointing.download import download, hub_dir

        source = str(download(hub_dir(args.cache_dir, source), source))
    ds = CholecSeg8k.open(source, split=args.split)
    prepared, status = _prepare(ds, args.out, args.n_test, args.min_gap)
    for path, what in status.values():
        print(f"{what:8s} {path}")
    print(f"{len(ds)} rows, {len(set(prepared.video_ids))} videos, "
          f"{len(prepared.test_indices)} test rows")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

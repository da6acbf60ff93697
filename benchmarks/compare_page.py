"""The comparison page at 7,200 pointing cases a side (issue 42: rendered in Chromium in < 5 s).

    python benchmarks/compare_page.py [--cases 7200] [--pictures 240] [--runs 5] [--work DIR]

A plain script, not a pytest module (CI never runs it). Workload: two runs of one pointing run id
(`<work>/results/pointing/rA`, `.../rB`), each a raw_results.jsonl of `--cases` outcomes written
here in the shape a pointing run writes (frames x the 12 CholecSeg8k classes x 3 conditions; case
id, group {condition, organ}, cluster, params, scores {hit, y_pred, y_true}, prediction, target,
the raw JSON answer, read_by), statuses drawn with a fixed seed (A: ~75% correct, B: ~70%, ~3%
unparsable, ~0.3% errors), and a pictures.json per run linking each case to one of `--pictures`
JPEG files (640 x 512) in a report's assets folder (a real report has one file per outcome; the
page loads pictures lazily, so only the first screen's are read).

Measured: the time `vlmbench-compare rA rB --html page.html` takes (Python: reading both runs,
the paired table at --bootstrap 200, the page), the page's size in bytes, and Chromium's render:
the wall time of `chromium --headless --dump-dom --virtual-time-budget=1000 page.html` (a fresh
profile each run) minus the same command's on an empty page (the browser's own start-up and
exit), medians of `--runs`. The dump is checked to hold the first PAGE_ROWS rows and the flipped
count. Goal: render under 5 s.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from support.compare.page import PAGE_ROWS  # noqa: E402
from support.compare.runs import main as compare_main  # noqa: E402

ORGANS = (  # CholecSeg8k's 12 classes, as pointing names them
    "Abdominal Wall", "Liver", "Gastrointestinal Tract", "Fat", "Grasper", "Connective Tissue",
    "Blood", "Cystic Duct", "L-hook Electrocautery", "Gallbladder", "Hepatic Vein",
    "Liver Ligament",
)  # fmt: skip
CONDITIONS = ("zero_shot", "fewshot_standard", "fewshot_hard_negatives")
CANVAS = (1024, 1024)  # pointing's canvas, px (x, y)
BROWSER_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--virtual-time-budget=1000", "--dump-dom",
)  # fmt: skip


def outcome_row(frame: int, organ: str, condition: str, model: str, rng, p_right: float) -> dict:
    """One pointing outcome as raw_results.jsonl holds it."""
    present = int(rng.random() < 0.6)
    target_point = [int(rng.integers(0, CANVAS[0])), int(rng.integers(0, CANVAS[1]))]
    draw = rng.random()
    slug = organ.lower().replace(" ", "_").replace("-", "_")
    case = f"s{frame:04d}-{slug}-{condition}"
    row = {
        "case_id": f"{case}-{model}",
        "cluster": f"video{frame % 17 + 1:02d}",
        "error": None,
        "evaluation": "pointing",
        "extra": {},
        "group": {"condition": condition, "organ": organ},
        "model": model,
        "params": {
            "condition": condition,
            "frame": f"video{frame % 17 + 1:02d}/f{frame}.png",
            "organ": ORGANS.index(organ),
            "present": present,
            "row": frame,
        },
        "prompt_hash": hashlib.sha256(case.encode()).hexdigest(),
        "read_by": "json",
        "rendered_prompt": None,
        "target": {"point_canvas": target_point if present else None, "present": present},
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    if draw < 0.003:  # a backend error
        failed = {"status": "error", "raw": "", "prediction": None, "scores": {}, "read_by": ""}
        return row | failed | {"error": "BackendError: 503 Service Unavailable"}
    if draw < 0.033:  # an answer no rule reads
        raw = f"I cannot tell whether the {organ.lower()} is visible in this frame."
        return row | {
            "status": "unparsable",
            "raw": raw,
            "read_by": "none",
            "prediction": {"ok": False, "point": None, "present": None, "reason": "no json"},
            "scores": {"hit": False, "y_pred": None, "y_true": present},
        }
    right = draw < 0.033 + p_right
    said = present if right else 1 - present
    point = None
    if said:
        near = right and present
        point = target_point if near else [int(rng.integers(0, 1024)), int(rng.integers(0, 1024))]
    raw = json.dumps({"name": organ, "present": said, "point_canvas": point}, separators=(",", ":"))
    return row | {
        "status": "correct" if right else "wrong",
        "raw": raw,
        "prediction": {"ok": True, "point": point, "present": said, "reason": "json"},
        "scores": {"hit": bool(right and present), "y_pred": said, "y_true": present},
    }


def write_runs(work: Path, cases: int, pictures: int) -> tuple[Path, Path]:
    """Runs rA (model a) and rB (model b) of `cases` outcomes each, a report's assets folder of
    `pictures` JPEG files and each run's pictures.json."""
    from PIL import Image

    assets = work / "html" / "report_assets"
    assets.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(pictures):
        buffer = io.BytesIO()
        shade = (37 * i % 256, 91 * i % 256, 53 * i % 256)
        Image.new("RGB", (640, 512), shade).save(buffer, "JPEG", quality=85)
        name = f"{i:020x}.jpg"
        (assets / name).write_bytes(buffer.getvalue())
        names.append(name)
    frames = -(-cases // (len(ORGANS) * len(CONDITIONS)))
    keys = [(f, o, c) for f in range(frames) for o in ORGANS for c in CONDITIONS][:cases]
    folders = []
    for run_id, model, p_right, seed in (("rA", "model-a", 0.72, 1), ("rB", "model-b", 0.67, 2)):
        rng = np.random.default_rng(seed)
        folder = work / "results" / "pointing" / run_id
        folder.mkdir(parents=True, exist_ok=True)
        rows = [outcome_row(*k, model, rng, p_right) for k in keys]
        lines = [json.dumps(r, sort_keys=True) for r in rows]
        (folder / "raw_results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        rel = os.path.relpath(assets, folder)
        index = {
            "report": os.path.relpath(work / "html" / "report.html", folder),
            "pictures": {r["case_id"]: f"{rel}/{names[i % pictures]}" for i, r in enumerate(rows)},
            "inlined": [],
        }
        (folder / "pictures.json").write_text(json.dumps(index), encoding="utf-8")
        folders.append(folder)
    return folders[0], folders[1]


def render_s(exe: str, page: Path) -> tuple[float, str]:
    """Wall seconds of one --dump-dom of `page` (a fresh profile), and the DOM."""
    with tempfile.TemporaryDirectory(prefix="vlmbench-bench-chromium-") as profile:
        start = time.perf_counter()
        done = subprocess.run(
            [exe, *BROWSER_FLAGS, f"--user-data-dir={profile}", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        wall = time.perf_counter() - start
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-1000:]}")
    return wall, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=7200, help="pointing outcomes a run (7200)")
    parser.add_argument("--pictures", type=int, default=240, help="distinct picture files (240)")
    parser.add_argument("--runs", type=int, default=5, help="renders of each page, median (5)")
    parser.add_argument("--work", type=Path, help="folder for the runs and pages (a temp folder)")
    args = parser.parse_args()
    exe = next((p for n in ("chromium", "chromium-browser") if (p := shutil.which(n))), None)
    if exe is None:
        print("no Chromium on PATH", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="vlmbench-compare-page-"))
    start = time.perf_counter()
    run_a, run_b = write_runs(work, args.cases, args.pictures)
    print(f"runs written: {run_a}, {run_b} ({time.perf_counter() - start:.1f} s)")

    page = work / "page.html"
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            rc = compare_main([str(run_a), str(run_b), "--html", str(page), "--bootstrap", "200"])
        finally:
            sys.stdout = stdout
    build_s = time.perf_counter() - start
    assert rc == 0, rc
    size = page.stat().st_size
    empty = work / "empty.html"
    empty.write_text("<!DOCTYPE html><html><head><title>empty</title></head><body></body></html>")

    pages, blanks = [], []
    dom = ""
    for _ in range(args.runs):  # alternating, so a slow moment of the machine hits both
        wall, dom = render_s(exe, page)
        pages.append(wall)
        blanks.append(render_s(exe, empty)[0])
    rows = len(re.findall(r'<tr class="case k\d"', dom))
    flipped = re.search(r'id="flipped-count">(\d+)<', dom)
    shown = re.search(r"(\d+) of (\d+) matching rows shown", dom)
    assert rows == min(PAGE_ROWS, args.cases), rows
    assert flipped and shown and int(shown.group(2)) > 0, "the page's counts are missing"
    page_s, blank_s = statistics.median(pages), statistics.median(blanks)
    print(f"pairs: {shown.group(2)}; flipped: {flipped.group(1)}; rows in the first paint: {rows}")
    print(f"vlmbench-compare --html (read, pair, bootstrap 200, write): {build_s:.2f} s")
    print(f"page: {size:,} bytes ({size / 1e6:.2f} MB)")
    print(
        f"chromium --dump-dom, median of {args.runs}: page {page_s:.2f} s "
        f"(min {min(pages):.2f}, max {max(pages):.2f}), empty page {blank_s:.2f} s "
        f"(min {min(blanks):.2f}, max {max(blanks):.2f})"
    )
    print(f"render time (page - empty): {page_s - blank_s:.2f} s (goal < 5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

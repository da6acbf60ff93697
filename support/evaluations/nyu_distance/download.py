"""Download `nyu_depth_v2_labeled.mat` (2.8 GB) with resume, a size check and a layout check.

    python -m support.evaluations.nyu_distance.download --to DIR [--expected-bytes N] [--extract N]

The file goes to DIR/nyu_depth_v2_labeled.mat through DIR/nyu_depth_v2_labeled.mat.part: a second
run after an interruption asks the server for the rest only (an HTTP Range request from the partial
file's size) and appends it. The download counts as complete only when its size equals the size the
server announced (Content-Length, or the total of Content-Range) and --expected-bytes if given;
otherwise the partial file is kept and the error says how to resume. A complete file is then opened
with the loader (support.evaluations.nyu_distance.mat.NyuMat) to check its layout. `--extract N`
also writes the first N images upright, unlike the original's extractor
(support.evaluations.nyu_distance.folder says how that one went wrong): DIR/extracted/rgb/00000.png
(480x640 RGB), DIR/extracted/depth/00000.npy ((480, 640) float32 metres) and
DIR/extracted/camera_intrinsics.json.

Then: `pytest evals/nyu_distance --nyu-mat DIR/nyu_depth_v2_labeled.mat` (or `--nyu-dir
DIR/extracted`). Nothing here runs at
import or collection time; the tests serve the file from a loopback server on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path

from support.evaluations.nyu_distance.mat import FILE_NAME, NyuMat, NyuMatError

URL = "http://horatio.cs.nyu.edu/mit/silberman/nyu_depth_v2/nyu_depth_v2_labeled.mat"
CHUNK = 1 << 20  # bytes per read
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)")


class DownloadError(RuntimeError):
    """The download failed or is incomplete; the message says what to do (the partial is kept)."""


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """`bytes 100-199/1000` -> (100, 1000); `bytes */1000` -> (None, 1000)."""
    m = _CONTENT_RANGE.match(value or "")
    if not m:
        return None, None
    start = int(m.group(1)) if m.group(1) else None
    total = int(m.group(3)) if m.group(3) != "*" else None
    return start, total


def download(
    url: str,
    dest: Path,
    expected_bytes: int | None = None,
    timeout_s: float = 60.0,
    progress: bool = True,
) -> Path:
    """Fetch url to dest, resuming dest.part when present; returns dest once complete."""
    from tqdm import tqdm

    dest = Path(dest)
    if dest.is_file():
        size = dest.stat().st_size
        if expected_bytes is not None and size != expected_bytes:
            raise DownloadError(
                f"{dest}: {size} bytes, expected {expected_bytes} (--expected-bytes); "
                f"move it away and run again to download it afresh"
            )
        return dest
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": "vlmbench", **({"Range": f"bytes={have}-"} if have else {})}
    try:
        response = urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout_s
        )
    except urllib.error.HTTPError as exc:
        _, total = _content_range(exc.headers.get("Content-Range"))
        if exc.code == 416 and have and total == have:  # the partial file is the whole file
            return _finish(part, dest, have, total, expected_bytes)
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}{_kept(part)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DownloadError(f"{url}: {reason} (no network?){_kept(part)}") from None
    with response:
        if response.status == 206:
            start, total = _content_range(response.headers.get("Content-Range"))
            if start != have:
                raise DownloadError(
                    f"{url}: asked to resume at byte {have}, the server answered from {start}"
                    f"{_kept(part)}"
                )
            mode = "ab"
        else:  # 200: the whole file (a server that ignores Range starts over)
            have, mode = 0, "wb"
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        if expected_bytes is not None and total is not None and total != expected_bytes:
            raise DownloadError(
                f"{url}: the server reports {total} bytes, expected {expected_bytes} "
                f"(--expected-bytes): not the file expected; nothing written{_kept(part)}"
            )
        size = have
        with (
            open(part, mode) as f,
            tqdm(total=total, initial=have, unit="B", unit_scale=True, disable=not progress) as bar,
        ):
            try:
                while chunk := response.read(CHUNK):
                    f.write(chunk)
                    size += len(chunk)
                    bar.update(len(chunk))
            except (http.client.HTTPException, OSError) as exc:
                raise DownloadError(
                    f"{url}: interrupted after {size} of {total or '?'} bytes ({exc}){_kept(part)}"
                ) from None
    return _finish(part, dest, size, total, expected_bytes)


def _kept(part: Path) -> str:
    if part.is_file() and part.stat().st_size:
        n = part.stat().st_size
        return f"; the partial file {part} ({n} bytes) is kept: run the same command to resume"
    return ""


def _finish(
    part: Path, dest: Path, size: int, total: int | None, expected_bytes: int | None
) -> Path:
    """Rename the partial file into place if its size is right; DownloadError otherwise."""
    if total is not None and size != total:
        raise DownloadError(
            f"{dest.name}: incomplete download, {size} of {total} bytes{_kept(part)}"
        )
    if expected_bytes is not None and size != expected_bytes:
        raise DownloadError(
            f"{dest.name}: downloaded {size} bytes, expected {expected_bytes} (--expected-bytes)"
            f"{_kept(part)}"
        )
    os.replace(part, dest)
    return dest


def extract(mat: NyuMat, out_dir: Path, n: int) -> Path:
    """The first n images as rgb/NNNNN.png, depth/NNNNN.npy (float32 m), camera_intrinsics.json."""
    import numpy as np
    from PIL import Image

    from support.evaluations.nyu_distance.camera import NYU_KINECT

    (out_dir / "rgb").mkdir(parents=True, exist_ok=True)
    (out_dir / "depth").mkdir(parents=True, exist_ok=True)
    for i in range(min(n, len(mat))):
        Image.fromarray(mat.image(i)).save(out_dir / "rgb" / f"{i:05d}.png")
        np.save(out_dir / "depth" / f"{i:05d}.npy", mat.depth(i))
    intrinsics = out_dir / "camera_intrinsics.json"
    intrinsics.write_text(json.dumps(asdict(NYU_KINECT), indent=2) + "\n")
    return out_dir


def main(argv: list[str] | None = None) -> int:
    prog = "python -m support.evaluations.nyu_distance.download"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--to", required=True, type=Path, help="folder to download into")
    ap.add_argument("--url", default=URL, help="where the labeled .mat lives (default: NYU's)")
    ap.add_argument("--expected-bytes", type=int, default=None, help="refuse any other size")
    ap.add_argument("--extract", type=int, default=0, metavar="N", help="write N images out")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per network read (60)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    dest = args.to / FILE_NAME
    try:
        download(args.url, dest, args.expected_bytes, args.timeout, progress=not args.quiet)
        mat = NyuMat(dest)
        print(f"{dest}: {len(mat)} images, layout checked")
        if args.extract:
            out = extract(mat, args.to / "extracted", args.extract)
            print(f"extracted {min(args.extract, len(mat))} images to {out}")
    except (DownloadError, NyuMatError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

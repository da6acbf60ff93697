"""Fetch CholecSeg8k as the hub publishes it and extract the raw tree (an explicit step).

The hub dataset `minwoosun/CholecSeg8k` is a loading script (`CholecSeg8k.py`) around one zip,
`data/CholecSeg8k.zip` (3.1 GB) of the raw tree (`videoNN/videoNN_SSSSS/frame_K_endo*.png`, below a
`CholecSeg8k/` folder as public loaders of the zip show; either way is read). `datasets` >= 4
refuses loading scripts, so the suite reads the extracted tree itself
(support.evaluations.pointing.dataset). This module downloads the zip with `huggingface_hub` (its
cache keeps the zip; a second call re-uses it) and extracts it into a folder, by default under the
run cache, where `--cholecseg8k minwoosun/CholecSeg8k` finds it. Nothing here runs at collection
time.

    python -m support.evaluations.pointing.download [--repo minwoosun/CholecSeg8k] [--cache-dir DIR
    | --out DIR]
"""

from __future__ import annotations

import argparse
import logging
import zipfile
from pathlib import Path

from support.evaluations.pointing.dataset import HUB_ID, find_raw_root
from support.settings import OutputSettings
from support.storage.files import build_once

log = logging.getLogger(__name__)

HUB_FILE = "data/CholecSeg8k.zip"  # the zip inside the hub dataset repository
DEFAULT_CACHE = OutputSettings.cache_dir  # the suite's --cache-dir default


def hub_dir(cache_dir: Path, repo_id: str = HUB_ID) -> Path:
    """Where the zip of `repo_id` is extracted under a run cache folder."""
    return Path(cache_dir) / "datasets" / repo_id.replace("/", "__")


def command(repo_id: str, cache_dir: Path) -> str:
    """The shell command that downloads `repo_id` into `hub_dir(cache_dir, repo_id)`."""
    return (
        f"python -m support.evaluations.pointing.download --repo {repo_id} --cache-dir {cache_dir}"
    )


def extract(zip_path: Path, out_dir: Path) -> Path:
    """Extract a CholecSeg8k zip into out_dir (all or nothing: a temporary folder renamed into
    place) and return the root of the raw tree in it. ValueError if the zip holds no tree."""
    zip_path, out_dir = Path(zip_path), Path(out_dir)

    def build(tmp: Path) -> None:
        try:
            with zipfile.ZipFile(zip_path) as z:
                z.extractall(tmp)  # zipfile drops absolute paths and ".." from member names
        except zipfile.BadZipFile as e:
            raise ValueError(f"{zip_path}: not a zip file ({e})") from None
        if find_raw_root(tmp) is None:
            raise ValueError(
                f"{zip_path}: holds no CholecSeg8k tree (videoNN/videoNN_SSSSS/frame_K_endo.png)"
            )

    build_once(out_dir, build, timeout_s=3600)
    root = find_raw_root(out_dir)
    if root is None:  # out_dir existed before with something else in it
        raise ValueError(f"{out_dir}: exists and holds no CholecSeg8k tree; remove it first")
    return root


def download(
    out_dir: Path,
    repo_id: str = HUB_ID,
    revision: str | None = None,
    hf_cache_dir: str | None = None,
) -> Path:
    """The raw tree of `repo_id` under out_dir: downloaded and extracted unless already there."""
    root = find_raw_root(Path(out_dir))
    if root is not None:
        return root
    from huggingface_hub import hf_hub_download

    log.info("downloading %s %s (3.1 GB for CholecSeg8k)", repo_id, HUB_FILE)
    zip_path = hf_hub_download(
        repo_id=repo_id,
        filename=HUB_FILE,
        repo_type="dataset",
        revision=revision,
        cache_dir=hf_cache_dir,
    )
    return extract(Path(zip_path), Path(out_dir))


def downloaded(repo_id: str, cache_dir: Path) -> Path:
    """The extracted tree of a hub id under cache_dir; FileNotFoundError with the command that
    makes it when it is not there."""
    root = find_raw_root(hub_dir(cache_dir, repo_id))
    if root is None:
        raise FileNotFoundError(
            f"--cholecseg8k {repo_id}: not downloaded yet (downloading 3.1 GB is an explicit "
            f"step, never done while collecting tests). Run: {command(repo_id, cache_dir)}"
        )
    return root


def main(argv: list[str] | None = None) -> int:
    prog = "python -m support.evaluations.pointing.download"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--repo", default=HUB_ID, help=f"hub dataset id (default {HUB_ID})")
    ap.add_argument("--revision", default=None, help="hub revision (default: main)")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                    help="the suite's --cache-dir, where --cholecseg8k HUB_ID looks")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="extract here instead")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = args.out or hub_dir(args.cache_dir, args.repo)
    root = download(out, args.repo, args.revision)
    print(f"CholecSeg8k tree at {root}")
    print(f"use: pytest evals/pointing --cholecseg8k {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Data folders a user names (issue 39, item 5): an empty data folder is a usage error naming the
option and what is missing; data under a vlmbench cache folder is never taken for the user's
(surgvqa searches its root at any depth); data vlmbench built is labelled synthetic wherever it
is reported (the spec's data_label, manifest.json, and end to end: terminal, report.md, HTML)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.manifest import data_section
from support import evaluations
from support.contract.data_paths import CACHE_NAME, built_by_vlmbench, files_below
from support.contract.evaluation import OptionError
from support.evaluations.surgvqa.dataset import read_tools, read_vqa
from support.evaluations.surgvqa.synthetic import build_surgvu, ensure_surgvu
from support.settings import OutputSettings, RunSettings
from support.storage.file_hashes import HASH_MEMO


def run_settings(tmp_path: Path, **evaluation_settings) -> RunSettings:
    return RunSettings(
        evaluations=evaluation_settings,
        output=OutputSettings(cache_dir=tmp_path / "cache", results_dir=tmp_path / "results"),
    )


def configure(name: str, tmp_path: Path, **values):
    return evaluations.spec(name).configure(values, run_settings(tmp_path))


# -- an empty data folder ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evaluation", "dest", "missing"),
    [
        ("surgvqa", "surgvqa_root", "an empty folder"),
        ("pointing", "cholecseg8k", "holds no CholecSeg8k data"),
        ("pointing", "pointing_prepared", "no balanced_indices_<split>_<n>.json"),
        ("pgt", "pgt_root", "an empty folder"),
        ("pgt", "pgt_image_root", "an empty folder"),
        ("nyu_distance", "nyu_dir", "no rgb/ or depth/"),
        ("dynamic", "dynamic_data", "no metadata.jsonl"),
    ],
)
def test_an_empty_data_folder_is_a_usage_error_naming_the_option(
    tmp_path: Path, evaluation: str, dest: str, missing: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    value = [str(empty)] if dest == "pgt_image_root" else str(empty)
    with pytest.raises(OptionError) as info:
        configure(evaluation, tmp_path, **{dest: value})
    flag = "--" + dest.replace("_", "-")
    assert info.value.option == flag
    assert str(info.value).startswith(f"{flag} {empty}: "), info.value
    assert missing in str(info.value)


def test_a_data_folder_without_the_data_says_what_it_lacks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "readme.txt").write_text("not SurgVU")
    with pytest.raises(OptionError, match=r"no caseNNN_question.json .*no N_fps1.mp4"):
        configure("surgvqa", tmp_path, surgvqa_root=str(root))
    with pytest.raises(OptionError, match=r"--pgt-root .*: holds no data below it: no CSV"):
        configure("pgt", tmp_path, pgt_root=str(root))
    # a registered dataset's CSV is looked for by name: that message says more
    with pytest.raises(OptionError, match=r"--pgt-dataset d3: .*d3/7k_sample.csv: no such"):
        configure("pgt", tmp_path, pgt_root=str(root), pgt_dataset="d3")
    (root / "d3").mkdir()
    (root / "d3" / "7k_sample.csv").write_text("image,answer\n/x/0_real.png,real\n")
    assert configure("pgt", tmp_path, pgt_root=str(root), pgt_dataset="d3").dataset == "d3"


# -- vlmbench's cache is not the user's data --------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic SurgVU sample, built once, to copy into roots."""
    return ensure_surgvu(tmp_path_factory.mktemp("surgvu-cache"))


def test_a_root_holding_only_a_vlmbench_cache_is_empty(tmp_path: Path, sample: Path) -> None:
    root = tmp_path / "project"
    (root / CACHE_NAME / "synthetic").mkdir(parents=True)
    (root / CACHE_NAME / "synthetic" / sample.name).symlink_to(sample, target_is_directory=True)
    # a link is not followed; a real copy under the cache is skipped all the same
    build_surgvu(root / CACHE_NAME / "synthetic" / "copy")
    with pytest.raises(OptionError, match=r"--surgvqa-root .*holds no data below it.*vlmbench"):
        configure("surgvqa", tmp_path, surgvqa_root=str(root))
    assert read_vqa(root) == [] and read_tools(root) == []


def test_a_cache_under_another_name_is_skipped_too(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build_surgvu(root / "mine")  # the user's data
    cache = root / "my-cache"  # VLMBENCH_CACHE_DIR=data/my-cache
    build_surgvu(cache / "synthetic" / "surgvu-v1")
    (cache / HASH_MEMO).write_text("{}")
    vqa, tools = read_vqa(root), read_tools(root)
    assert vqa and tools  # without the skip, each case would be found twice (an error)
    assert all(root / "mine" in item.video.parents for item in vqa)
    assert all(root / "mine" in video.video.parents for video in tools)
    assert not any("my-cache" in str(p) for p in files_below(root, "*"))


# -- what vlmbench built is labelled synthetic ------------------------------------------------


def test_built_by_vlmbench(tmp_path: Path) -> None:
    cache = tmp_path / "anywhere"
    built = cache / "synthetic" / "surgvu-v1"
    built.mkdir(parents=True)
    assert built_by_vlmbench(built, cache)  # the run's own cache, whatever its name
    assert built_by_vlmbench(built / "case001" / "x.json", cache)
    assert not built_by_vlmbench(built, tmp_path / "other")  # not a cache vlmbench knows
    default = tmp_path / CACHE_NAME / "synthetic" / "pgt-seed0-v1" / "pgt.csv"
    assert built_by_vlmbench(default)  # the default cache's name
    hub = tmp_path / CACHE_NAME / "datasets" / "minwoosun__CholecSeg8k"
    assert not built_by_vlmbench(hub)  # a real download kept in the cache is real data
    assert not built_by_vlmbench(tmp_path / "synthetic" / "mine")  # a folder of the user's
    assert built_by_vlmbench(cache, cache) and built_by_vlmbench(tmp_path / CACHE_NAME)


@pytest.mark.parametrize(
    ("evaluation", "field"),
    [
        ("surgvqa", "root"),
        ("pointing", "cholecseg8k"),
        ("nyu_distance", "folder"),
        ("pgt", "csv"),
        ("dynamic", "data"),
    ],
)
def test_data_in_a_cache_is_labelled_synthetic(tmp_path: Path, evaluation: str, field: str):
    spec = evaluations.spec(evaluation)
    settings_class = type(spec.configure({}, run_settings(tmp_path)))
    built = tmp_path / "cache" / "synthetic" / "sample-v1"
    mine = tmp_path / "data" / "sample"
    for path, synthetic in ((built, True), (mine, False)):
        value = path if field == "csv" else str(path)
        run = run_settings(tmp_path, **{evaluation: settings_class(**{field: value})})
        label = spec.data_label(run)
        assert (label is not None and "synthetic" in label) == synthetic, label
        section = data_section(spec, run)
        assert section is not None and section["label"] == label  # manifest.json's data.label


def test_the_default_sample_is_labelled_in_the_manifest(tmp_path: Path, sample: Path) -> None:
    settings = configure("surgvqa", tmp_path)  # no --surgvqa-root: the sample in the cache
    run = RunSettings(
        evaluations={"surgvqa": settings}, output=OutputSettings(cache_dir=sample.parent.parent)
    )
    section = data_section(evaluations.spec("surgvqa"), run)
    assert section is not None and "synthetic sample" in section["label"]
    assert "sha256" in section


@pytest.mark.slow
def test_the_built_sample_named_as_a_root_is_reported_synthetic(run_suite, tmp_path, shared_cache):
    """`--surgvqa-root` pointed into the cache's synthetic/ folder: the run reads the sample,
    and the terminal heading, report.md, manifest.json and the HTML page all say so."""
    root = ensure_surgvu(tmp_path / "cache")  # this run's --cache-dir (run_suite links it)
    html = tmp_path / "report.html"
    result, results = run_suite(
        "surgvqa",
        f"--surgvqa-root={root}",
        "-m",
        "quick",
        "--model=oracle",
        f"--html={html}",
        "--self-contained-html",
    )
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    heading = next(line for line in out.splitlines() if "vlmbench: surgvqa" in line)
    assert "synthetic" in heading
    run_dir = results / "surgvqa" / "r1"
    assert "synthetic" in (run_dir / "report.md").read_text(encoding="utf-8").splitlines()[0]
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert "synthetic sample built by vlmbench" in manifest["data"]["label"]
    assert "synthetic sample built by vlmbench" in html.read_text(encoding="utf-8")

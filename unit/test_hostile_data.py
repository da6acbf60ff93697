"""Hostile data (issue 25): a PGT CSV cannot make the suite read a file outside its data roots, an
image that is not one is a case error naming it (nothing sent), and a picture that cannot be
drawn for --html costs no result."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from support.evaluations.pgt.dataset import (
    DatasetError,
    ImageError,
    ImagePaths,
    load_csv,
    read_image,
)

SECRET = "hostile-data-secret-0451"  # a file's text that must never leave the machine


def png(path: Path, shade: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 16), (shade, 0, 0)).save(path)
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """tmp/data with two good images; tmp/secret.txt outside it."""
    folder = tmp_path / "data"
    png(folder / "a.png")
    png(folder / "b.png", 90)
    (folder / "img").mkdir()
    (tmp_path / "secret.txt").write_text(SECRET)
    return folder


def csv(folder: Path, *paths: str, name: str = "d.csv") -> Path:
    rows = [f"{p},{label}" for p, label in zip(paths, ("real", "ai-generated") * 9, strict=False)]
    out = folder / name
    out.write_text("image_path,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return out


# ---- paths stay inside the data roots -----------------------------------------------------------
@pytest.mark.parametrize("outside", ["../secret.txt", "img/../../secret.txt", "ABS"])
def test_a_path_outside_the_data_root_stops_the_dataset_naming_the_row(data, outside):
    outside = str(data.parent / "secret.txt") if outside == "ABS" else outside
    with pytest.raises(DatasetError, match=r"row 1 \(line 3\), column .image_path.: image pa") as e:
        load_csv(csv(data, "a.png", outside))
    assert "leads outside the data roots" in str(e.value) and str(data) in str(e.value)
    assert SECRET not in str(e.value)


def test_absolute_paths_inside_a_root_and_roots_from_the_options_are_accepted(data, tmp_path):
    elsewhere = png(tmp_path / "images" / "c.png")
    assert load_csv(csv(data, str(data / "a.png"), "./b.png")).examples[1].image == data / "b.png"
    with pytest.raises(DatasetError, match="outside the data roots"):
        load_csv(csv(data, str(elsewhere)))
    by_root = ImagePaths(roots={"*": tmp_path / "images"})
    assert load_csv(csv(data, str(elsewhere)), paths=by_root).examples[0].image == elsewhere
    rooted = data / "rooted.csv"  # the source's img_path + dataset, joined to its image root
    rooted.write_text("img_path,dataset\nc.png,real\n../secret.txt,real\n")
    with pytest.raises(DatasetError, match=r"row 1 \(line 3\).*outside the data roots"):
        load_csv(rooted, paths=ImagePaths(roots={"rooted": tmp_path / "images"}))


@pytest.mark.slow
def test_the_secret_is_never_read_in_a_run(run_suite, data):
    result, results = run_suite("pgt", f"--pgt-dataset={csv(data, 'a.png', '../secret.txt')}")
    assert result.ret not in (0, 3)
    out = result.stdout.str() + result.stderr.str()
    assert "row 1 (line 3), column 'image_path': image path '../secret.txt' leads outside" in out
    written = [p for p in results.rglob("*") if p.is_file()] if results.exists() else []
    assert not any(SECRET in p.read_text(errors="replace") for p in written)


# ---- images are decoded when first read ---------------------------------------------------------
def bad_images(folder: Path) -> dict[str, Path]:
    whole = (folder / "a.png").read_bytes()
    files = {"empty": b"", "truncated": whole[: len(whole) // 2], "text": b"just some text\n"}
    for name, content in files.items():
        (folder / f"{name}.png").write_bytes(content)
    return {name: folder / f"{name}.png" for name in files}


def test_empty_truncated_and_text_images_are_errors_naming_the_file(data):
    assert read_image(data / "a.png") == (data / "a.png").read_bytes()
    for name, path in bad_images(data).items():
        with pytest.raises(ImageError, match="empty file" if name == "empty" else "not a readable"):
            read_image(path)
        with pytest.raises(ImageError, match=str(path)):
            read_image(path)


class RecordingClient:
    """A CaseClient stand-in that records what would be sent."""

    def __init__(self) -> None:
        self.sent: list = []

    async def generate(self, request):
        self.sent.append(request)
        raise AssertionError("a request was sent")


def test_a_bad_image_is_never_sent(data, tmp_path):
    from support.evaluations.pgt.spec import configure
    from support.evaluations.pgt.task import PgtEvaluation
    from support.settings import OutputSettings, RunSettings

    bad = bad_images(data)
    dataset = csv(data, "a.png", *(p.name for p in bad.values()))
    run = RunSettings(output=OutputSettings(cache_dir=tmp_path, results_dir=tmp_path / "results"))
    ev = PgtEvaluation.load(run, configure({"pgt_dataset": str(dataset)}, run))
    client = RecordingClient()
    for case in [c for c in ev.cases() if c.params["row"] > 0][:: len(ev.cases()) // 8]:
        with pytest.raises(ImageError, match=Path(case.params["image"]).name):
            asyncio.run(ev.evaluate(case, client))
    assert client.sent == []


# ---- a picture that cannot be drawn costs no result -------------------------------------------
@pytest.mark.slow
def test_html_with_a_corrupt_image_keeps_every_result(run_suite, data, tmp_path):
    (data / "garbage.png").write_bytes(b"\x00\x13garbage, not a png" * 20)
    report = tmp_path / "report.html"
    dataset = csv(data, "a.png", "garbage.png", "b.png")
    args = [f"--pgt-dataset={dataset}", "--model=oracle", "--pgt-phrase=cot", "--pgt-mode=prefill"]
    result, results = run_suite("pgt", *args, f"--html={report}")
    assert result.ret not in (0, 3), result.stdout.str()[-3000:]  # case errors, no INTERNALERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    summary = pd.read_csv(results / "pgt" / "r1" / "summary.csv")
    assert set(summary["n_error"]) == {1} and set(summary["n"]) == {2}  # n: cases scored
    raw = [json.loads(line) for line in (results / "pgt" / "r1" / "raw_results.jsonl").open()]
    errors = [o for o in raw if o["status"] == "error"]
    assert errors and all("garbage.png" in o["error"] for o in errors)
    assert {o["status"] for o in raw if o not in errors} == {"correct"}
    page = report.read_text(encoding="utf-8")
    assert "picture unavailable: ImageError" in page and "garbage.png" in page


def test_a_renderer_that_raises_gives_a_note(monkeypatch):
    from fixtures.case_extras import NOTE_CHARS, unavailable_note

    note = unavailable_note(OSError("<b>" + "x" * 2 * NOTE_CHARS))
    assert note.startswith('<p class="vlmbench-note">picture unavailable: OSError: &lt;b&gt;')
    assert len(note) < NOTE_CHARS + 100

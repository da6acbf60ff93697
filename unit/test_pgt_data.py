"""PGT datasets: the CSV schema, its errors (file, row, column), and the synthetic sample."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PIL import Image

from support.pgt.answers import AI, REAL
from support.pgt.dataset import DATASETS, DatasetError, load_csv, resolve_csv
from support.synthetic.pgt_images import GENERATORS, build_pgt_sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return build_pgt_sample(tmp_path_factory.mktemp("pgt"))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def images(tmp_path: Path) -> Path:
    (tmp_path / "img").mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 8)).save(tmp_path / "img" / name)
    return tmp_path


def test_the_synthetic_sample_has_both_classes_and_several_generators(sample):
    ds = load_csv(sample)
    labels = [e.label for e in ds.examples]
    assert labels.count(REAL) == labels.count(AI) == 24
    assert labels[:4] == [REAL, AI, REAL, AI]  # alternating: any even subset keeps both
    generators = {e.generator for e in ds.examples if e.label == AI}
    assert generators == set(GENERATORS) and len(generators) >= 3
    assert {e.generator for e in ds.examples if e.label == REAL} == {"real"}
    sizes = {Image.open(e.image).size for e in ds.examples}
    formats = {Image.open(e.image).format for e in ds.examples}
    assert sizes == {(256, 256)} and formats == {"PNG"}  # the file says nothing about the label
    assert len({e.id for e in ds.examples}) == len(ds.examples)


def test_the_synthetic_sample_is_deterministic(sample, tmp_path):
    again = build_pgt_sample(tmp_path / "again")
    assert again.read_text() == sample.read_text()
    for rel in ("images/real_coffee_1.png", "images/fake_shaded-spheres_5.png"):
        a, b = (p.parent / rel for p in (sample, again))
        assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def test_aliases_relative_paths_and_defaults(images):
    csv = write(
        images / "d.csv",
        "Path,Label,Source\nimg/a.png,REAL,\nimg/b.png,fake,StyleGAN 2\n",
    )
    ds = load_csv(csv)
    assert [(e.image, e.label, e.generator) for e in ds.examples] == [
        (images / "img/a.png", REAL, "real"),
        (images / "img/b.png", AI, "StyleGAN 2"),
    ]
    assert ds.examples[1].id == "r00001-stylegan-2"
    no_generator = load_csv(write(images / "e.csv", "image_path,label\nimg/b.png,ai-generated\n"))
    assert no_generator.examples[0].generator == "unknown"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("file,label\nimg/a.png,real\n", r"no 'image_path' column \(accepted names"),
        ("image_path,kind\nimg/a.png,real\n", "no 'label' column"),
        (
            "image_path,label\nimg/a.png,real\nimg/b.png,maybe\n",
            r"row 1 \(line 3\), column 'label': label 'maybe' is neither 'real' nor 'ai-generated'",
        ),
        (
            "image_path,label\nimg/a.png,real\nimg/missing.png,real\n",
            r"row 1 \(line 3\), column 'image_path': image not found: .*img/missing.png",
        ),
        ("image_path,label\n,real\n", r"row 0 \(line 2\), column 'image_path': empty image path"),
        ("image_path,label\n", "no data rows"),
        ("", "not a readable CSV"),
        ('image_path,label\n"img/a.png,real\n', "not a readable CSV"),
    ],
)
def test_malformed_csvs_name_the_file_row_and_column(images, text, message):
    csv = write(images / "bad.csv", text)
    with pytest.raises(DatasetError, match=message) as info:
        load_csv(csv)
    assert str(csv) in str(info.value)


def test_registered_names_need_the_root(tmp_path):
    assert resolve_csv("df40", str(tmp_path)) == ("df40", tmp_path / DATASETS["df40"])
    assert resolve_csv("d3-2k", str(tmp_path))[1].name == "2k_sample.csv"
    with pytest.raises(DatasetError, match="--pgt-root"):
        resolve_csv("genimage", None)
    with pytest.raises(DatasetError, match="neither a registered dataset"):
        resolve_csv("imagenet", None)
    assert resolve_csv("mine.csv", str(tmp_path)) == ("mine", tmp_path / "mine.csv")
    with pytest.raises(DatasetError, match="dataset CSV not found"):
        load_csv(tmp_path / DATASETS["df40"])


def test_debug_takes_the_first_five_images_and_samples_spread_out(sample, tmp_path):
    from support.pgt.spec import configure
    from support.pgt.task import PgtEvaluation
    from support.settings import RunSettings

    def rows(samples=None, **values):
        run = RunSettings(cache_dir=tmp_path, results_dir=tmp_path, samples=samples)
        own = configure({"pgt_dataset": str(sample), **values}, run)
        return [e.row for e in PgtEvaluation.load(run, own).examples]

    assert rows(pgt_debug=True) == [0, 1, 2, 3, 4]
    assert rows(samples=4) == [0, 15, 31, 47]  # np.linspace over the 48 rows
    assert len(rows()) == 48

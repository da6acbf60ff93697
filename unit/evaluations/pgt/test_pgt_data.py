"""PGT datasets: the CSV schema, its errors (file, row, column), and the synthetic sample."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PIL import Image

from support.evaluations.pgt.answers import AI, REAL
from support.evaluations.pgt.dataset import DATASETS, DatasetError, load_csv, resolve_csv
from support.evaluations.pgt.synthetic import GENERATORS, build_pgt_sample


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
    from support.evaluations.pgt.spec import configure
    from support.evaluations.pgt.task import PgtEvaluation
    from support.settings import OutputSettings, RunSettings

    def rows(samples=None, **values):
        run = RunSettings(
            samples=samples, output=OutputSettings(cache_dir=tmp_path, results_dir=tmp_path)
        )
        own = configure({"pgt_dataset": str(sample), **values}, run)
        return [e.row for e in PgtEvaluation.load(run, own).examples]

    assert rows(pgt_debug=True) == [0, 1, 2, 3, 4]
    assert rows(samples=4) == [0, 15, 31, 47]  # np.linspace over the 48 rows
    assert len(rows()) == 48


# ---- the source's CSVs (Zero-shot-PGT config.py:93-136, helpers.py:81-99, data/d3/*.csv) -------
def image(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (12, 12)).save(path)
    return path


@pytest.fixture
def source_data(tmp_path: Path) -> dict[str, Path]:
    """The source's data/ folder with its three CSV schemas, and image trees elsewhere: df40 and
    genimage CSVs hold img_path (relative to an image root) + dataset; d3 CSVs hold absolute
    paths under /data3/zkachwal/ELSA_D3 (the repository's data/d3/2k_sample.csv) + answer."""
    data, df40, genimage, d3 = (tmp_path / d for d in ("data", "DF40", "genimage", "ELSA_D3"))
    (data / "df40").mkdir(parents=True)
    (data / "df40" / "2k_sample_df40.csv").write_text(
        "img_path,dataset\n"
        "MidJourney/a.png,MidJourney\n"
        "real/ff/b.png,real\n"
        "StyleGAN3/c.png,StyleGAN3\n"
        "Real/d.png,Real\n"  # 'Real' lowercased is 'real'
    )
    for rel in ("MidJourney/a.png", "real/ff/b.png", "StyleGAN3/c.png", "Real/d.png"):
        image(df40 / rel)
    (data / "genimage").mkdir()
    (data / "genimage" / "10k_random_sample.csv").write_text(
        "img_path,dataset,extra\nsd_v1_5/x.png,stable_diffusion_v_1_5,1\nnature/y.png,real,2\n"
    )
    image(genimage / "sd_v1_5/x.png")
    image(genimage / "nature/y.png")
    (data / "d3").mkdir()
    (data / "d3" / "2k_sample.csv").write_text(
        "image,answer\n"
        "/data3/zkachwal/ELSA_D3/0_real.png,real\n"
        "/data3/zkachwal/ELSA_D3/2_image_gen0.png,ai-generated\n"
        "/data3/zkachwal/ELSA_D3/9_image_gen2.png,ai-generated\n"
        "/data3/zkachwal/ELSA_D3/6_image_gen3.png,ai-generated\n"
    )
    for name in ("0_real.png", "2_image_gen0.png", "9_image_gen2.png", "6_image_gen3.png"):
        image(d3 / name)
    return {"data": data, "df40": df40, "genimage": genimage, "d3": d3}


def loaded(tmp_path: Path, **values):
    from support.evaluations.pgt.spec import configure
    from support.evaluations.pgt.task import PgtEvaluation
    from support.settings import OutputSettings, RunSettings

    run = RunSettings(output=OutputSettings(cache_dir=tmp_path, results_dir=tmp_path / "results"))
    return PgtEvaluation.load(run, configure(values, run)).dataset


def test_df40_and_genimage_join_img_path_to_their_image_roots(source_data, tmp_path):
    roots = f"df40={source_data['df40']},genimage={source_data['genimage']}"
    root = str(source_data["data"])
    ds = loaded(tmp_path, pgt_dataset="df40-2k", pgt_root=root, pgt_image_root=[roots])
    assert ds.schema == "img_path+dataset" and ds.name == "df40-2k"
    assert [(e.image, e.label, e.generator) for e in ds.examples] == [
        (source_data["df40"] / "MidJourney/a.png", AI, "MidJourney"),
        (source_data["df40"] / "real/ff/b.png", REAL, "real"),
        (source_data["df40"] / "StyleGAN3/c.png", AI, "StyleGAN3"),
        (source_data["df40"] / "Real/d.png", REAL, "Real"),
    ]
    ds = loaded(tmp_path, pgt_dataset="genimage", pgt_root=root, pgt_image_root=[roots])
    assert [(e.label, e.generator) for e in ds.examples] == [
        (AI, "stable_diffusion_v_1_5"),
        (REAL, "real"),
    ]
    assert ds.examples[0].image == source_data["genimage"] / "sd_v1_5/x.png"
    # without its image root the paths are relative to the CSV's folder: not found, with a hint
    with pytest.raises(DatasetError, match=r"row 0 \(line 2\), column 'img_path': image not fo"):
        loaded(tmp_path, pgt_dataset="df40-2k", pgt_root=root)
    with pytest.raises(DatasetError, match="--pgt-image-root df40=DIR"):
        loaded(tmp_path, pgt_dataset="df40-2k", pgt_root=root)


def test_d3_absolute_paths_are_rewritten_and_generators_read_from_file_names(source_data, tmp_path):
    root = str(source_data["data"])
    mapping = f"/data3/zkachwal/ELSA_D3={source_data['d3']}"
    ds = loaded(tmp_path, pgt_dataset="d3-2k", pgt_root=root, pgt_path_map=[mapping])
    assert ds.schema == "image+answer"
    assert [(e.image.name, e.label, e.generator) for e in ds.examples] == [
        ("0_real.png", REAL, "real"),
        ("2_image_gen0.png", AI, "image_gen0"),  # plot_recall_radar.py: stem after the first '_'
        ("9_image_gen2.png", AI, "image_gen2"),
        ("6_image_gen3.png", AI, "image_gen3"),
    ]
    assert all(e.image.parent == source_data["d3"] for e in ds.examples)
    assert ds.examples[1].id == "r00001-image-gen0"
    with pytest.raises(DatasetError, match=r"image not found: /data3/zkachwal/ELSA_D3/0_real.png"):
        loaded(tmp_path, pgt_dataset="d3-2k", pgt_root=root)
    with pytest.raises(DatasetError, match="--pgt-path-map OLD=NEW"):
        loaded(tmp_path, pgt_dataset="d3-2k", pgt_root=root)


def test_the_path_map_takes_the_longest_whole_component_prefix(tmp_path):
    from support.evaluations.pgt.dataset import ImagePaths, parse_path_map

    paths = ImagePaths(path_map=parse_path_map(["/data3=/a", "/data3/zk=/b", "/data=/c"]))
    assert paths.rewrite(Path("/data3/zk/x.png")) == Path("/b/x.png")
    assert paths.rewrite(Path("/data3/zkx/y.png")) == Path("/a/zkx/y.png")  # not a component
    assert paths.rewrite(Path("/data/z.png")) == Path("/c/z.png")
    assert paths.rewrite(Path("/elsewhere/z.png")) == Path("/elsewhere/z.png")
    with pytest.raises(ValueError, match="OLD must be an absolute"):
        parse_path_map(["data3=/x"])
    with pytest.raises(ValueError, match="expected OLD=NEW"):
        parse_path_map(["/data3"])


def test_image_roots_by_name_family_or_for_every_dataset():
    from support.evaluations.pgt.dataset import ImagePaths, parse_image_roots

    roots = parse_image_roots(["df40=/d,genimage-2k=/g2", "/any"])
    paths = ImagePaths(roots)
    assert paths.root_for("df40-2k") == Path("/d")  # the family's root
    assert paths.root_for("genimage-2k") == Path("/g2")
    assert paths.root_for("genimage") == Path("/any")
    with pytest.raises(ValueError, match="expected NAME=DIR"):
        parse_image_roots(["df40="])


def test_bad_source_options_are_usage_errors(tmp_path):
    from support.contract.evaluation import OptionError
    from support.evaluations.pgt.spec import configure
    from support.settings import OutputSettings, RunSettings

    run = RunSettings(output=OutputSettings(cache_dir=tmp_path, results_dir=tmp_path))
    with pytest.raises(OptionError, match="--pgt-path-map: 'rel=/x': OLD must be an absolute"):
        configure({"pgt_path_map": ["rel=/x"]}, run)
    with pytest.raises(OptionError, match="--pgt-image-root"):
        configure({"pgt_image_root": ["=/x"]}, run)


def test_source_csvs_name_the_row_and_column_of_a_bad_value(tmp_path):
    image(tmp_path / "a.png")
    csv = write(tmp_path / "x.csv", "img_path,dataset\na.png,real\na.png,\n")
    with pytest.raises(DatasetError, match=r"row 1 \(line 3\), column 'dataset': empty value"):
        load_csv(csv)
    csv = write(tmp_path / "y.csv", "image,answer\n,real\n")
    with pytest.raises(DatasetError, match=r"row 0 \(line 2\), column 'image': empty image path"):
        load_csv(csv)
    # any other value is ai-generated, as the source's rule (helpers.py:89-93)
    csv = write(tmp_path / "z.csv", "image,answer\na.png,AI-generated\na.png,REAL\n")
    assert [e.label for e in load_csv(csv).examples] == [AI, REAL]


def test_registered_names_read_the_source_layout_or_a_flat_folder(tmp_path):
    assert resolve_csv("d3", str(tmp_path)) == ("d3", tmp_path / "d3" / "7k_sample.csv")
    write(tmp_path / "7k_sample.csv", "image,answer\n")
    assert resolve_csv("d3", str(tmp_path)) == ("d3", tmp_path / "7k_sample.csv")

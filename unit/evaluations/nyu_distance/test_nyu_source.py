"""`--compat source` for nyu_distance: the original script's rules, golden values read from its
code (ukataria/IronsiteHackathon at a42cd527: eval/nyu_distance/eval_nyu_distance.py = E,
eval/nyu_distance/nyu_utils.py = U, data/nyu_depth_v2/download_nyu.py = D), and the extracted
folder its download script writes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from support.evaluations.nyu_distance.folder import NyuFolder, NyuFolderError
from support.evaluations.nyu_distance.mat import NyuMat
from support.evaluations.nyu_distance.pairs import (
    SOURCE_SEED,
    sample_pairs_source,
    source_cell_centres,
)
from support.evaluations.nyu_distance.parser import parse_first_number
from support.evaluations.nyu_distance.prompts import source_prompt
from support.evaluations.nyu_distance.summary import result_key
from support.evaluations.nyu_distance.synthetic import ensure_nyu_mat

# E query_vlm_distance: `re.findall(r'\d+\.?\d*', raw_response.strip())`, the first match as a
# float; no match -> None. Each expected value follows from that pattern alone.
FIRST_NUMBER = [
    ("1.5", 1.5),
    ("  2.30 \n", 2.3),
    ("2", 2.0),
    ("2.", 2.0),  # `\.?\d*`: the point may end the match
    (".8", 8.0),  # no leading digit: the match starts at "8"
    ("-1.5", 1.5),  # the sign is not part of the pattern
    ("1,5", 1.0),  # a decimal comma ends the number
    ("1,500 mm", 1.0),
    ("150 cm", 150.0),  # no unit conversion: centimetres read as metres
    ("5'6\"", 5.0),
    ("approximately 3.2 meters", 3.2),
    ("The 3D distance is 2.5 m", 3.0),  # "3D" comes first
    ("A: 1.2, B: 3.4", 1.2),
    ("between 1.5 and 2 m", 1.5),
    ("1.5-2.0", 1.5),
    ("1e3", 1.0),  # no exponent in the pattern
    ("1.5.3", 1.5),
    ("0", 0.0),
    ("007.50", 7.5),
    ("I cannot estimate that.", None),
    ("", None),
    ("   ", None),
    ("distance: unknown", None),
    ("١٢", 12.0),  # `\d` of a str pattern matches any Unicode decimal digit; float() reads them
]


@pytest.mark.parametrize(("answer", "expected"), FIRST_NUMBER)
def test_the_first_number_rule(answer, expected):
    assert parse_first_number(answer).metres == expected


@pytest.mark.parametrize("answer", [None, 3, b"1.5", ["1.5"]])
def test_the_first_number_rule_never_raises(answer):
    assert parse_first_number(answer).metres is None


def test_the_source_prompt_names_the_pixels_and_the_rules():
    # E query_vlm_distance: the f-string with point1/point2 pixel positions, 19 lines
    text = source_prompt((40, 30), (600, 450))
    lines = text.split("\n")
    assert len(lines) == 19
    assert lines[0] == "You are analyzing an indoor scene image with two points marked:"
    assert lines[1] == "- Point A (red cross) at pixel position (40, 30)"
    assert lines[2] == "- Point B (blue cross) at pixel position (600, 450)"
    assert lines[7] == "- You MUST provide a numeric estimate - refusal is not acceptable"
    assert lines[16] == '- Examples: "1.5" or "0.8" or "2.3"'
    assert lines[-1] == "Your distance estimate in meters (number only):"


def test_cell_centres_of_the_kinect_frame():
    # U generate_object_pairs: cell 480//8 = 60 rows by 640//8 = 80 columns, centre i*60+30, j*80+40
    us, vs = source_cell_centres(640, 480)
    assert us == [40, 120, 200, 280, 360, 440, 520, 600]
    assert vs == [30, 90, 150, 210, 270, 330, 390, 450]


def legacy_draws(n: int, draws: int) -> list[tuple[int, int]]:
    """The original's call sequence (U generate_object_pairs): np.random.seed(42), then
    np.random.choice(n, size=2, replace=False) once per attempt, on numpy's global generator."""
    state = np.random.get_state()
    try:
        np.random.seed(SOURCE_SEED)
        return [
            tuple(int(x) for x in np.random.choice(n, size=2, replace=False)) for _ in range(draws)
        ]
    finally:
        np.random.set_state(state)


def test_pairs_follow_the_original_draws_when_every_draw_is_valid():
    us, vs = source_cell_centres(640, 480)
    # depths 1.0, 1.5, 2.0, ... m in row-major order: any two cells differ by >= 0.5 m
    depth = (1.0 + 0.5 * np.arange(64, dtype=np.float32)).reshape(8, 8)
    pairs = sample_pairs_source(depth, us, vs, k=3)
    points = [(u, v) for v in vs for u in us]  # candidates in the original's row-major order
    expected = [(points[a], points[b]) for a, b in legacy_draws(64, 3)]
    assert [(p.point1, p.point2) for p in pairs] == expected
    assert [p.depth1 for p in pairs] == [float(depth.ravel()[points.index(a)]) for a, _ in expected]


def test_invalid_depths_are_no_candidates_and_draws_are_capped():
    us, vs = source_cell_centres(640, 480)
    depth = np.full((8, 8), np.nan, dtype=np.float32)
    depth[0, 0], depth[7, 7] = 1.0, 3.0  # the only two valid cells (NaN, 0, inf are skipped)
    depth[3, 3], depth[4, 4] = 0.0, np.inf
    pairs = sample_pairs_source(depth, us, vs, k=3)
    # every draw picks the same two candidates, so the pairs repeat (the original keeps
    # duplicates); A is whichever the draw named first
    assert len(pairs) == 3
    assert {frozenset((p.point1, p.point2)) for p in pairs} == {frozenset(((40, 30), (600, 450)))}
    flat = np.full((8, 8), 2.0, dtype=np.float32)  # one depth everywhere: every draw rejected
    assert sample_pairs_source(flat, us, vs, k=3) == []


def test_depth_difference_is_compared_in_the_maps_float32():
    # U: `abs(p1["depth"] - p2["depth"]) < 0.2` on the depth map's own values; the original's
    # maps are float32 (D saves h5py's float32 depths), where 1.2 - 1.0 = 0.2000000476 is kept
    us, vs = source_cell_centres(640, 480)
    depth = np.full((8, 8), np.nan, dtype=np.float32)
    depth[0, 0], depth[7, 7] = 1.0, 1.2
    assert len(sample_pairs_source(depth, us, vs, k=1)) == 1
    wide = np.full((8, 8), np.nan)  # float64 1.2 - 1.0 = 0.19999999999999996: rejected
    wide[0, 0], wide[7, 7] = 1.0, 1.2
    assert sample_pairs_source(wide, us, vs, k=1) == []


def test_results_keys_are_the_originals_under_source():
    # E main: all_results = {"claude": [...], "gpt4o": [...]}
    assert result_key("claude-sonnet-4-20250514", "source") == "claude"
    assert result_key("gpt-4o", "source") == "gpt4o"
    assert result_key("gemini-2.0-flash", "source") == "gemini-2.0-flash"
    assert result_key("gpt-4o", "writeup") == "gpt-4o"


def write_source_folder(mat: NyuMat, folder, n: int) -> None:
    """An extracted folder as D extract_nyu_samples writes it: `images[i].transpose(1, 2, 0)` of
    the h5py array (portrait), `(rgb * 255).astype(np.uint8)` on uint8 colours (wraps modulo
    256), rgb/NNNN.jpg with PIL's defaults, depth/NNNN.npy transposed likewise, intrinsics.npy."""
    (folder / "rgb").mkdir(parents=True)
    (folder / "depth").mkdir()
    for i in range(n):
        portrait = mat.image(i).transpose(1, 0, 2)  # = h5py images[i].transpose(1, 2, 0)
        Image.fromarray(portrait * np.uint8(255)).save(folder / "rgb" / f"{i:04d}.jpg")
        np.save(folder / "depth" / f"{i:04d}.npy", mat.depth(i).T)
    intrinsics = {"fx": 518.857901, "fy": 519.469611, "cx": 325.582244, "cy": 253.736347,
                  "width": 640, "height": 480}  # fmt: skip
    np.save(folder / "intrinsics.npy", intrinsics)


@pytest.fixture(scope="module")
def source_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("nyu")
    mat = NyuMat(ensure_nyu_mat(root / "cache"))
    write_source_folder(mat, root / "extracted", 3)
    return mat, root / "extracted"


def test_the_originals_folder_is_read_back_upright_with_true_colours(source_folder):
    mat, folder = source_folder
    data = NyuFolder(folder)
    assert data.transposed and len(data) == 3
    for i in range(3):
        np.testing.assert_array_equal(data.depth(i), mat.depth(i))
        error = np.abs(data.image(i).astype(int) - mat.image(i).astype(int))
        assert np.median(error) <= 3  # JPEG's own error; the wrap is undone
    assert data.intrinsics.fx == pytest.approx(518.857901)


def test_a_folder_without_depths_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "rgb").mkdir()
    (tmp_path / "depth").mkdir()
    Image.new("RGB", (640, 480)).save(tmp_path / "rgb" / "0000.jpg")
    with pytest.raises(NyuFolderError, match=r"depth/0000\.npy: missing"):
        NyuFolder(tmp_path)


@pytest.mark.slow
def test_source_run_on_the_originals_folder(run_suite, source_folder):
    _, folder = source_folder
    result, results = run_suite(
        "nyu_distance", f"--nyu-dir={folder}", "--compat=source", "--model=oracle"
    )
    assert result.ret == 0, result.stdout.str()
    rows = [json.loads(line) for line in (results / "nyu_distance/r1/raw_results.jsonl").open()]
    assert len(rows) == 9  # the first 10 images of 3 = 3 images, 3 pairs each
    assert all(r["status"] == "correct" and r["scores"]["abs_error"] == 0 for r in rows)
    assert all(r["prediction"]["parsed_by"] == "first number (source)" for r in rows)
    us, vs = source_cell_centres(640, 480)
    assert all(tuple(r["params"]["point1"]) in {(u, v) for u in us for v in vs} for r in rows)
    saved = json.loads((results / "nyu_distance/r1/nyu_distance_results.json").read_text())
    assert list(saved) == ["oracle"] and len(saved["oracle"]) == 9
    assert math.isclose(saved["oracle"][0]["predicted_distance"], saved["oracle"][0]["gt_distance"])

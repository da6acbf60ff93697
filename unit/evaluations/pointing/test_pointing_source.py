"""`--compat source` of the pointing evaluation and `--pointing-prepared`: golden tests against the
original (fallcat/llm_cholec_organ; eval code as of 5692c23, few_shot_selection.py and
prepare_fewshot_examples.py at 4ebb357, data_info files at df48cc1).

Expected values are written from the original's code; each comment names the file and lines.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from support.backends.base import BackendError
from support.backends.registry import model_spec
from support.contract.evaluation import OptionError, SummaryContext
from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS
from support.evaluations.pointing.dataset import CholecSeg8k
from support.evaluations.pointing.parser import parse_pointing_source
from support.evaluations.pointing.prepare import (
    balanced_rows,
    build_presence_matrix,
    load_prepared,
    normalize_plan,
)
from support.evaluations.pointing.profiles import PROFILES, SOURCE
from support.evaluations.pointing.prompts import (
    Example,
    source_answer,
    source_few_shot_parts,
    source_temperature,
    source_user_prompt,
    system_prompt,
)
from support.evaluations.pointing.selection import (
    near_miss_negative,
    select_balanced_source,
    select_diverse,
    source_plan_rows,
)
from support.evaluations.pointing.spec import PointingSettings, configure
from support.evaluations.pointing.summary import source_metrics, source_records, summarize
from support.evaluations.pointing.task import PointingEvaluation
from support.settings import OutputSettings, RunSettings
from support.types import Outcome, Part

# one worker runs this module: its costly module fixtures are built once, not once a worker
pytestmark = pytest.mark.xdist_group("pointing_source")

W, H = 854, 480  # the original's canvas in the main script: the frame size (CholecSeg8k)
TEST = [300, 12, 150, 451, 77, 220]  # the test rows of the folder below, in file (not row) order
LIVER = 2


# ---- the original's parser ---------------------------------------------------------------------
# (text, present, point): every expected value from eval/parser.py:35-78 (parse_pointing_json)
PARSER_CASES = [
    # 39-61: the whole text is a JSON object
    ('{"name":"Liver","present":1,"point_canvas":[400,200]}', 1, (400, 200)),
    ('{"name":"Liver","present":0,"point_canvas":null}', 0, None),
    # 43-44: a boolean present
    ('{"present":true,"point_canvas":[10,20]}', 1, (10, 20)),
    # 45-46: a number is present iff int(v) == 1, so 1.7 is present and 2 is not
    ('{"present":1.7,"point_canvas":[10,20]}', 1, (10, 20)),
    # 45-46 + 51-57: present 0, but the point is still read and kept (never scored: 0 present)
    ('{"present":2,"point_canvas":[10,20]}', 0, (10, 20)),
    # 47-48: strings "1"/"yes"/"true" after strip().lower()
    ('{"present":" Yes ","point_canvas":[10,20]}', 1, (10, 20)),
    ('{"present":"present","point_canvas":[10,20]}', 0, (10, 20)),
    # 42: any other type (null) or a missing key leaves the default 0
    ('{"present":null,"point_canvas":[10,20]}', 0, (10, 20)),
    ('{"point_canvas":[10,20]}', 0, (10, 20)),
    ('{"present":1}', 1, None),
    # 54-55: int(round(v)): Python rounds half to even, 2.5 -> 2, 3.5 -> 4; True -> 1
    ('{"present":1,"point_canvas":[2.5,3.5]}', 1, (2, 4)),
    ('{"present":"1","point_canvas":[true,false]}', 1, (1, 0)),
    # 56: bounds are [0, W) x [0, H) of the canvas
    ('{"present":1,"point_canvas":[854,100]}', 1, None),
    ('{"present":1,"point_canvas":[-5,20]}', 1, None),
    ('{"present":1,"point_canvas":[853,479]}', 1, (853, 479)),
    # 52: a list of two items only; 58-59: round() of a string / NaN raises, caught: no point
    ('{"present":1,"point_canvas":[10,20,30]}', 1, None),
    ('{"present":1,"point_canvas":{"x":10,"y":20}}', 1, None),
    ('{"present":1,"point_canvas":["10","20"]}', 1, None),
    ('{"present":1,"point_canvas":[NaN,5]}', 1, None),
    # 58 + 62: round(Infinity) raises OverflowError, which the inner handler does not catch: the
    # outer one falls to the regex (65-76) with `present` already set from the JSON
    ('{"present":1,"point_canvas":[Infinity,5]}', 1, None),
    ('{"present":0,"point_canvas":[Infinity,5],"note":"[7,8]"}', 1, (7, 8)),
    # 46 + 62: int(NaN) raises ValueError outside the inner try: the regex reads [3,4]
    ('{"present":NaN,"point_canvas":[3,4]}', 1, (3, 4)),
    # 65-74: not JSON (code fences, prose, trailing text): the first [x,y] pair means present
    ('```json\n{"name":"Liver","present":1,"point_canvas":[300,200]}\n```', 1, (300, 200)),
    ('```json\n{"name":"Liver","present":0,"point_canvas":null}\n```', 0, None),
    ("The liver is at [300, 200].", 1, (300, 200)),
    ('{"present":0,"point_canvas":[10,20]} (absent)', 1, (10, 20)),
    # 67: only the first pair is tried; out of bounds -> absent, the later pair is ignored
    ("Point: [900, 100] or maybe [300, 200]", 0, None),
    ("[-5, 20] then [5, 20]", 0, None),
    # 9: integers only, in brackets: (x, y) and a float x do not match
    ("Point at (300, 200)", 0, None),
    ("[300.5, 200]", 0, None),
    # 40: JSON that is not an object goes to the regex too
    ("[[300, 200]]", 1, (300, 200)),
    ("null", 0, None),
    # 9: \d is any Unicode digit in Python's re, and int() reads them: Arabic-Indic 3 and 4
    ("[\u0663, \u0664]", 1, (3, 4)),
    # 35 + openai_gpt.py:104-126: a failed call is "" after three tries: absent, scored
    ("", 0, None),
]


@pytest.mark.parametrize(("text", "present", "point"), PARSER_CASES)
def test_source_parser_golden(text: str, present: int, point) -> None:
    ans = parse_pointing_source(text, (W, H))
    assert (ans.present, ans.point, ans.ok) == (present, point, True)


def test_source_parser_never_unparsable() -> None:
    for text in (None, 17, b'{"present": 1}', "{" * 100_000, "x" * 50_000):
        ans = parse_pointing_source(text, (W, H))
        assert ans.ok and ans.present in (0, 1)
    # bytes are JSON for json.loads (39): present, though the regex (66) would skip them
    assert parse_pointing_source(b'{"present": 1}', (W, H)).present == 1


# ---- prompts -------------------------------------------------------------------------------------
def test_source_prompts_golden() -> None:
    # prompts/builders.py:102-105: one line, a space after the first sentence
    assert source_user_prompt("Liver") == (
        'Organ: "Liver". Return exactly: {"name":"Liver", "present":0|1, '
        '"point_canvas":[x,y] or null}'
    )
    # prompts/builders.py:16-23 with the canvas of the main script (eval_pointing_original_size.py
    # passes the frame size): x in [0, 853], y in [0, 479]
    assert "x∈[0,853], y∈[0,479], integers only." in system_prompt(W, H)
    # eval/pointing.py:86-98: the example response, no spaces, null without a point
    assert source_answer("Liver", 1, [427, 240]) == (
        '{"name":"Liver","present":1,"point_canvas":[427,240]}'
    )
    assert source_answer("Liver", 0, None) == '{"name":"Liver","present":0,"point_canvas":null}'


def test_source_few_shot_parts_golden() -> None:
    img = [Part.of_image(Image.new("RGB", (4, 3), (k, 0, 0))) for k in range(3)]
    examples = [
        Example(img[0], source_answer("Liver", 1, [W // 2, H // 2])),
        Example(img[1], source_answer("Liver", 0, None)),
    ]
    prompt = (
        'Organ: "Liver". Return exactly: {"name":"Liver", "present":0|1, '
        '"point_canvas":[x,y] or null}'
    )
    # eval/pointing.py:74-103: header, then per example "\nExample k: " + user prompt, image,
    # "\nResponse: ...\n", then "\nNow for the actual query: " + user prompt and the image
    expected = [
        "Here are some examples:\n",
        f"\nExample 1: {prompt}",
        img[0],
        '\nResponse: {"name":"Liver","present":1,"point_canvas":[427,240]}\n',
        f"\nExample 2: {prompt}",
        img[1],
        '\nResponse: {"name":"Liver","present":0,"point_canvas":null}\n',
        f"\nNow for the actual query: {prompt}",
        img[2],
    ]
    got = source_few_shot_parts("Liver", examples, img[2])
    assert [p.text if p.text is not None else p for p in got] == expected


# ---- selection rules -----------------------------------------------------------------------------
def _Y(rows: list[set[int]]) -> np.ndarray:
    """A presence matrix from the organ ids shown in each row."""
    Y = np.zeros((len(rows), len(ORGAN_IDS)), dtype=np.uint8)
    for i, organs in enumerate(rows):
        for cid in organs:
            Y[i, ORGAN_IDS.index(cid)] = 1
    return Y


def test_balanced_selection_golden() -> None:
    # few_shot_selection.py:143-200 (select_balanced_indices): each step scores rows by the organs
    # picked least so far; no spacing rule; the picks keep their order (not sorted)
    Y = _Y([{5}, {5, 6}, {2, 7}, {1, 2, 3, 4}, {1, 2, 6}, set()])
    # step 1: all organs at 0, scores are row sums: row 3 (4 organs)
    # step 2: organs 5..12 at 0: row 1 shows 5 and 6 (2) beats row 4 ({1,2,6}: only 6 counts)
    # step 3: organs 7..12 at 0: only row 2 shows one (7)
    assert select_balanced_source(Y, 3, seed=42) == [3, 1, 2]
    # a tie: rng.choice among the top rows in ascending order, rng = default_rng(42)
    tie = _Y([{1}, {2}, {3}])
    first = int(np.random.default_rng(42).choice(np.array([0, 1, 2])))
    assert select_balanced_source(tie, 1, seed=42) == [first]
    # every row is picked once when n is the number of rows
    assert sorted(select_balanced_source(tie, 3, seed=42)) == [0, 1, 2]


def test_select_diverse_golden() -> None:
    # few_shot_selection.py:22 onwards (_select_diverse_indices)
    order = list(range(6))
    np.random.default_rng(7).shuffle(order)
    assert order == [5, 2, 0, 4, 1, 3]  # the visiting order of the sorted candidates below
    cands = [500, 0, 50, 130, 260, 270]  # sorted: 0, 50, 130, 260, 270, 500
    # visits 500, 130, 0, 270, ...: each kept while >= 100 rows from the picks
    assert select_diverse(cands, 3, np.random.default_rng(7)) == [500, 130, 0]
    # avoid: 130 is 10 rows from 120, skipped; 270 is kept
    assert select_diverse(cands, 3, np.random.default_rng(7), avoid=[120]) == [500, 0, 270]
    # at most n candidates: all of them, as given, no draw
    assert select_diverse([9, 3], 2, np.random.default_rng(0)) == [9, 3]
    # too close for 100: visit order starts at 30 (default_rng(3) shuffles to [3, 2, 1, 0]);
    # halved spacing 50 adds none, 25 adds 0 (30 away), 12 adds none (10 is 10 from 0); the
    # rest is rng.choice([10, 20], 1, replace=False) of the same rng
    rng = np.random.default_rng(3)
    order = list(range(4))
    rng.shuffle(order)
    assert order == [3, 2, 1, 0]
    last = rng.choice([10, 20], 1, replace=False).tolist()
    assert select_diverse([0, 10, 20, 30], 3, np.random.default_rng(3)) == [30, 0, *last]


def test_plan_rules_golden() -> None:
    # 8 rows; row 0 is a test row (excluded from the pool: base_pool in both plan builders)
    Y = _Y(
        [
            {1, 2, 8},  # test row: never picked
            {1, 2},
            {1, 2},
            {1, 2},
            {2, 8},  # the only organ-8 row of the pool
            {2},
            {2},
            {2},
        ]
    )
    standard = source_plan_rows(Y, [0], seed=43)
    # build_fewshot_plan (251-369): organs in id order, one rng; organ 1 is first: its positive
    # is the first draw, rng.choice([1, 2, 3], 1, replace=False) with default_rng(43)
    first = np.random.default_rng(43).choice([1, 2, 3], 1, replace=False).tolist()
    assert standard["1"]["positives"] == first
    # Liver shows everywhere: no easy negative, as the real plan's Liver (data_info, df48cc1)
    assert standard["2"]["negatives_easy"] == [] and standard["2"]["neg_available"] == 0
    assert standard["8"]["positives"] == [4] and standard["8"]["pos_available"] == 1
    assert standard["12"]["positives"] == [] and standard["12"]["pos_available"] == 0
    assert "near_miss" not in standard["1"]
    near = source_plan_rows(Y, [0], seed=45, n_near_miss=1)
    # build_fewshot_plan_with_nearmiss (585-711), organ 1: positive by _select_diverse_indices
    # (shuffle of 3 positions), its only easy negative row count is 4 (more than 1: a shuffle
    # of 4), then the near miss: rng.choice among the positives not picked
    rng = np.random.default_rng(45)
    order = list(range(3))
    rng.shuffle(order)
    pos = [1, 2, 3][order[0]]
    order = list(range(4))
    rng.shuffle(order)
    easy = [4, 5, 6, 7][order[0]]
    miss = rng.choice([r for r in (1, 2, 3) if r != pos], 1, replace=False).tolist()
    assert (near["1"]["positives"], near["1"]["negatives_easy"]) == ([pos], [easy])
    assert near["1"]["near_miss"] == miss
    # organ 8 has one positive: the near miss reuses it (its "not enough different images" branch)
    assert near["8"]["positives"] == [4] and near["8"]["near_miss"] == [4]


def test_near_miss_negative_rule() -> None:
    Y = _Y([{1, 3, 4}, {3, 4}, {3}, {4, 5}, {1}, {3, 4}])
    # rows without organ 1: 1, 2, 3, 5; most like row 0 on the other organs ({3, 4}): rows 1
    # and 5 (Jaccard 1); the lower wins, unless it is near an excluded row
    assert near_miss_negative(Y, 1, reference=0, exclude=[0]) == 5  # row 1 is next to row 0
    assert near_miss_negative(Y, 1, reference=0, exclude=[4], gap=1) == 1
    assert near_miss_negative(_Y([{1}, {1}]), 1, reference=0, exclude=[]) is None


# ---- malformed prepared files --------------------------------------------------------------------
def test_malformed_plan_errors_name_file_and_key() -> None:
    with pytest.raises(ValueError, match=r"p\.json: expected a JSON object with a 'plan'"):
        normalize_plan({"seed": 43}, "p.json")
    bad = {"plan": {"1": {"positives": [{"point": [1, 2]}]}}}
    with pytest.raises(ValueError, match=r"p\.json: plan\['1'\]\['positives'\]\[0\].*'idx'"):
        normalize_plan(bad, "p.json")
    bad = {"plan": {"3": {"near_miss": [{"idx": "7"}]}}}
    with pytest.raises(ValueError, match=r"plan\['3'\]\['near_miss'\]\[0\].*'7'"):
        normalize_plan(bad, "p.json")
    with pytest.raises(ValueError, match=r"plan\['2'\]\['negatives_easy'\] must be a list"):
        normalize_plan({"plan": {"2": {"negatives_easy": 5}}}, "p.json")
    with pytest.raises(ValueError, match=r"unknown organ ids \['13'\]"):
        normalize_plan({"plan": {"13": {}}}, "p.json")
    with pytest.raises(ValueError, match=r"b\.json: indices\[1\]: expected a row number"):
        balanced_rows({"split": "train", "indices": [3, -1]}, "b.json")
    with pytest.raises(ValueError, match=r"b\.json: 'split' is 'test'"):
        balanced_rows({"split": "test", "indices": [3]}, "b.json")
    with pytest.raises(ValueError, match=r"b\.json: expected a JSON object with an 'indices'"):
        balanced_rows({"idx": [3]}, "b.json")


def test_malformed_folder_files(tmp_path: Path, data_info: Path) -> None:
    folder = tmp_path / "info"
    folder.mkdir()
    for f in data_info.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    npz = next(folder.glob("presence_matrix_train_*.npz"))
    np.savez_compressed(npz, Z=np.zeros((3, 12)))
    with pytest.raises(ValueError, match=rf"{npz.name}: no 'Y' array"):
        load_prepared(folder, 100)
    npz.unlink()
    plan = folder / "fewshot_plan_train_pos1_neg1_seed43_excl100.json"
    plan.write_text("{not json")
    with pytest.raises(ValueError, match=rf"{plan.name}: not a JSON file"):
        load_prepared(folder, 100, need_presence=False)


def test_rows_outside_the_data_are_named(tmp_path: Path, data: Path, data_info: Path) -> None:
    folder = tmp_path / "info"
    folder.mkdir()
    for f in data_info.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    balanced = folder / "balanced_indices_train_100.json"
    balanced.write_text(json.dumps({"split": "train", "n": 2, "indices": [3, 9999]}))
    run = RunSettings(output=OutputSettings(cache_dir=tmp_path / "cache"))
    settings = PointingSettings(str(data), folder)
    with pytest.raises(ValueError, match=r"balanced_indices_train_100\.json: indices\[1\] = 9999"):
        PointingEvaluation.load(run, settings)


def test_prepared_option_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="--pointing-prepared"):
        configure({"pointing_prepared": str(tmp_path / "missing")}, RunSettings())
    (tmp_path / "balanced_indices_train_100.json").write_text("[]")  # an empty one is refused
    s = configure({"pointing_prepared": str(tmp_path)}, RunSettings(compat="source"))
    assert s.prepared == tmp_path.resolve() and s.profile is SOURCE


# ---- the evaluation on data ----------------------------------------------------------------------
@pytest.fixture(scope="session")
def data(synthetic_cholecseg8k: Path) -> Path:
    return synthetic_cholecseg8k


@pytest.fixture(scope="session")
def ds(data: Path) -> CholecSeg8k:
    return CholecSeg8k.open(data)


@pytest.fixture(scope="session")
def presence50(ds: CholecSeg8k) -> np.ndarray:
    return build_presence_matrix(ds, min_pixels=50, progress=False)


@pytest.fixture(scope="session")
def data_info(ds: CholecSeg8k, presence50: np.ndarray, tmp_path_factory) -> Path:
    """A data_info folder in the original's formats (data_info/cholecseg8k at df48cc1): the
    balanced file {"split","n","indices"}, plans whose positives are {"idx","point"[,
    "point_type"]} objects, the near-miss plan's `near_miss` key, an npz with `Y` only."""
    out = tmp_path_factory.mktemp("data_info")
    Y = presence50
    np.savez_compressed(out / f"presence_matrix_train_{len(ds)}.npz", Y=Y)
    (out / "balanced_indices_train_100.json").write_text(
        json.dumps({"split": "train", "n": len(TEST), "indices": TEST}, indent=2)
    )
    pool = [r for r in range(len(ds)) if r not in TEST]
    standard, near = {}, {}
    for j, cid in enumerate(ORGAN_IDS):
        pos = [r for r in pool if Y[r, j]]
        neg = [r for r in pool if not Y[r, j]]
        entry = {"name": CLASS_NAMES[cid], "pos_available": len(pos), "neg_available": len(neg)}
        easy = [] if cid == LIVER else neg[:1]  # the real plan's Liver has none
        standard[str(cid)] = {
            **entry,
            "positives": [{"idx": pos[0], "point": [1, 1]}],
            "negatives_easy": easy,
            "negatives_hard": [],
        }
        near[str(cid)] = {
            **entry,
            "positives": [{"idx": pos[-1], "point": [1, 1], "point_type": "positive"}],
            "negatives_easy": neg[-1:] if cid != LIVER else [],
            "near_miss": [{"idx": pos[len(pos) // 2], "point": [2, 2], "point_type": "near_miss"}],
        }
    head = {"dataset": "CholecSeg8k", "split": "train", "min_pixels": 50, "n_pos": 1}
    head |= {"n_neg_easy": 1, "exclude_balanced": sorted(TEST), "base_pool_size": len(pool)}
    (out / "fewshot_plan_train_pos1_neg1_seed43_excl100.json").write_text(
        json.dumps({**head, "seed": 43, "n_neg_hard": 0, "plan": standard}, indent=2)
    )
    (out / "fewshot_plan_train_pos1_neg1_nearmiss1_seed45_excl100.json").write_text(
        json.dumps({**head, "seed": 45, "n_near_miss": 1, "plan": near}, indent=2)
    )
    return out


def _load(data: Path, folder: Path | None, compat: str, tmp_path: Path) -> PointingEvaluation:
    output = OutputSettings(cache_dir=tmp_path / "cache")
    run = RunSettings(compat=compat, output=output)  # type: ignore[arg-type]
    return PointingEvaluation.load(run, PointingSettings(str(data), folder, PROFILES[compat]))  # type: ignore[index]


def _case(ev: PointingEvaluation, row: int, organ: int, condition: str):
    return next(
        c
        for c in ev.cases()
        if (c.params["row"], c.params["organ"], c.params["condition"]) == (row, organ, condition)
    )


def _pixels(part: Part) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(part.image or b"")).convert("RGB"))


def test_prepared_folder_reads_as_it_is(data_info: Path, data: Path, tmp_path: Path) -> None:
    p = load_prepared(data_info, 100, need_presence=False)
    assert p.test_indices == TEST and p.min_pixels == 50 and p.video_ids == []
    entry = p.plans["hard_negatives"]["1"]
    assert entry["negatives_hard"] == [] and len(entry["near_miss"]) == 1
    ev = _load(data, data_info, "writeup", tmp_path)
    assert ev.rows == TEST  # the file's order, not sorted
    assert [c.params["row"] for c in ev.cases()][:: 3 * 12] == TEST
    assert ev.video_ids == ev.ds.video_ids()  # the npz has none: the dataset's


def test_truth_is_one_pixel_from_the_labels(data_info: Path, data: Path, tmp_path: Path) -> None:
    # the truth is labels_to_presence_vector(min_pixels=1) (datasets/cholecseg8k.py), never the
    # folder's 50-px matrix
    for compat in ("writeup", "source"):
        ev = _load(data, data_info, compat, tmp_path)
        for c in ev.cases()[:36]:
            want = ev.ds.presence(c.params["row"], 1)[ORGAN_IDS.index(c.params["organ"])]
            assert c.params["present"] == want


def test_rows_numbered_otherwise_than_the_folder_stop_the_run(
    data_info: Path, data: Path, tmp_path: Path
) -> None:
    # a folder whose presence matrix disagrees with the data on the test rows (here: zeroed, as
    # if the rows were numbered in another order) names the file and the rows
    folder = tmp_path / "info"
    folder.mkdir()
    for f in data_info.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    npz = next(folder.glob("presence_matrix_train_*.npz"))
    np.savez_compressed(npz, Y=np.zeros_like(np.load(npz)["Y"]))
    with pytest.raises(ValueError, match=r"presence_matrix_train_\d+\.npz: \d+ of \d+ test rows"):
        _load(data, folder, "writeup", tmp_path)


def test_source_requests(data_info: Path, data: Path, ds: CholecSeg8k, tmp_path: Path) -> None:
    ev = _load(data, data_info, "source", tmp_path)
    assert ev.canvas == (W, H)
    info = json.loads(
        (data_info / "fewshot_plan_train_pos1_neg1_nearmiss1_seed45_excl100.json").read_text()
    )
    row = TEST[0]
    req = ev.request(_case(ev, row, 1, "fewshot_hard_negatives"), model_spec("gpt-4o"))
    prompt = source_user_prompt("Abdominal Wall")
    texts = [p.text for p in req.parts if p.text is not None]
    # evaluator.py prepare_few_shot_examples: the positive with the centre placeholder (238),
    # the easy negative; the near miss is never sent (it reads `negatives_hard`, 208)
    assert texts == [
        "Here are some examples:\n",
        f"\nExample 1: {prompt}",
        '\nResponse: {"name":"Abdominal Wall","present":1,"point_canvas":[427,240]}\n',
        f"\nExample 2: {prompt}",
        '\nResponse: {"name":"Abdominal Wall","present":0,"point_canvas":null}\n',
        f"\nNow for the actual query: {prompt}",
    ]
    images = [p for p in req.parts if p.is_image]
    sent = [info["plan"]["1"]["positives"][0]["idx"], info["plan"]["1"]["negatives_easy"][0], row]
    for part, r in zip(images, sent, strict=True):  # the native frames, pixel for pixel
        assert np.array_equal(_pixels(part), np.asarray(ds.image(r)))
    assert req.system == system_prompt(W, H)
    # evaluator.py:93-159: max_tokens 100; OpenAI sends no temperature (the API's 1.0)
    assert (req.max_tokens, req.temperature) == (100, 1.0)
    # Liver in the hard plan: a positive only (no easy negative in the file)
    claude = model_spec("claude-sonnet-4-20250514")
    req = ev.request(_case(ev, row, LIVER, "fewshot_hard_negatives"), claude)
    assert sum(p.is_image for p in req.parts) == 2 and req.temperature == 0.1
    req = ev.request(_case(ev, row, LIVER, "zero_shot"), model_spec("qwen25-vl-7b"))
    assert [p.text for p in req.parts if p.text] == [source_user_prompt("Liver")]
    assert req.temperature == 0.0
    gemini, oracle = model_spec("gemini-2.0-flash"), model_spec("oracle")
    assert (source_temperature(gemini.provider), source_temperature(oracle.provider)) == (0.1, 0.0)


def test_writeup_hard_negatives_from_a_near_miss_plan(
    data_info: Path, data: Path, tmp_path: Path
) -> None:
    ev = _load(data, data_info, "writeup", tmp_path)
    info = json.loads(
        (data_info / "fewshot_plan_train_pos1_neg1_nearmiss1_seed45_excl100.json").read_text()
    )
    examples = ev.examples("fewshot_hard_negatives", 1)
    assert len(examples) == 3  # positive, easy negative, a near-miss negative
    answers = [json.loads(e.answer) for e in examples]
    assert [a["present"] for a in answers] == [1, 0, 0]
    third = near_miss_negative(
        ev.prepared.presence,
        1,
        info["plan"]["1"]["positives"][0]["idx"],
        [*TEST, info["plan"]["1"]["positives"][0]["idx"], *info["plan"]["1"]["negatives_easy"]],
    )
    assert third is not None and not ev.truth(third)[0]  # organ 1 absent from that frame
    assert np.array_equal(_pixels(examples[2].image), _pixels(ev.frame(third)[0]))
    assert len(ev.examples("fewshot_standard", 1)) == 2


def test_writeup_near_miss_without_a_presence_file(
    data_info: Path, data: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "info"
    folder.mkdir()
    for f in data_info.glob("*.json"):  # no presence matrix: the evaluation builds its own
        (folder / f.name).write_bytes(f.read_bytes())
    ev = _load(data, folder, "writeup", tmp_path)
    assert ev.prepared.presence is None
    answers = [json.loads(e.answer) for e in ev.examples("fewshot_hard_negatives", 5)]
    assert [a["present"] for a in answers] == [1, 0, 0]


def test_source_hits_and_targets_native_pixels(data_info: Path, data: Path, tmp_path) -> None:
    ev = _load(data, data_info, "source", tmp_path)
    row = TEST[1]
    labels = ev.ds.labels(row)
    organ = int(np.bincount(labels[labels > 0].ravel()).argmax())
    ys, xs = np.nonzero(labels == organ)
    assert ev.hits(row, organ, (int(xs[0]), int(ys[0])))
    ys, xs = np.nonzero(labels != organ)
    assert not ev.hits(row, organ, (int(xs[0]), int(ys[0])))
    assert not ev.hits(row, organ, (W, 0)) and not ev.hits(row, organ, (-1, 0))
    x, y = ev.target_point(row, organ)
    assert labels[y, x] == organ
    case = _case(ev, row, organ, "zero_shot")
    outcome = Outcome(case.id, "pointing", "m", "correct", prediction={"point": [x, y]})
    picture = Image.open(io.BytesIO(ev.render(case, outcome) or b""))
    # the native 854x480 frame and a 32 px caption, scaled to the report's 640 px
    assert picture.size == (640, round((480 + 32) * 640 / 854))


class _FailingClient:
    """A CaseClient (support.contract.evaluation) whose every call fails after retries."""

    name = "gpt-4o"
    model = model_spec("gpt-4o")
    history = ()

    async def generate(self, request):
        raise BackendError("500 after retries")


def test_failed_call_is_scored_absent_under_source(data_info: Path, data: Path, tmp_path) -> None:
    ev = _load(data, data_info, "source", tmp_path)
    case = next(c for c in ev.cases() if c.params["present"] == 1)
    v = asyncio.run(ev.evaluate(case, _FailingClient()))
    # openai_gpt.py:104-126: "" after the tries; parser.py:35 -> absent, scored as a miss
    assert (v.status, v.scores["y_pred"], v.raw) == ("wrong", 0, "")
    assert "500 after retries" in v.extra["backend_error"]
    writeup = _load(data, data_info, "writeup", tmp_path)
    same = _case(writeup, *(case.params[k] for k in ("row", "organ", "condition")))
    with pytest.raises(BackendError):  # writeup: an error outcome, left out of the metrics
        asyncio.run(writeup.evaluate(same, _FailingClient()))


# ---- metrics -------------------------------------------------------------------------------------
def _outcome(organ: int, y_true: int, y_pred: int, hit, row: int = 0, model: str = "m") -> Outcome:
    return Outcome(
        case_id=f"s{row}-{organ}",
        evaluation="pointing",
        model=model,
        status="correct",
        group={"condition": "zero_shot", "organ": CLASS_NAMES[organ]},
        cluster=f"video{row % 2}",
        scores={"y_true": y_true, "y_pred": y_pred, "hit": hit},
        prediction={"present": y_pred, "point": [5, 5] if y_pred else None},
        raw="{}",
        params={"row": row, "organ": organ, "compat": "source"},
    )


def test_macro_metrics_golden() -> None:
    # Liver: a hit, and a false "present" on an absent frame; Fat: two true absents
    outs = [
        _outcome(LIVER, 1, 1, True),
        _outcome(LIVER, 0, 1, None, row=1),
        _outcome(4, 0, 0, None),
        _outcome(4, 0, 0, None, row=1),
    ]
    s = summarize(outs, SummaryContext.of(n_resamples=0, compat="source"))
    overall = s[s["organ"] == "ALL"].iloc[0]
    # pointing_metrics.py:10-125 per organ: Liver PresenceAcc 1/2, Hit 1/1, GatedAcc 2/2 (the false
    # present cannot hit, so its gated prediction is a true negative), F1 2/3; Fat PresenceAcc 1,
    # Hit undefined, GatedAcc 1, F1 undefined (0/0); 170-232: macro over the defined values
    assert overall["macro_presence_accuracy"] == pytest.approx(0.75)
    assert overall["macro_hit_rate"] == pytest.approx(1.0)
    assert overall["macro_gated_accuracy"] == pytest.approx(1.0)
    assert overall["macro_f1"] == pytest.approx(2 / 3)
    # micro (save_metrics_json): over all organ cases
    assert overall["accuracy"] == pytest.approx(0.75) and overall["gated_accuracy"] == 1.0
    liver = s[s["organ"] == "Liver"].iloc[0]
    assert liver["gated_accuracy"] == 1.0 and liver["accuracy"] == 0.5


def test_writeup_summary_has_no_source_columns() -> None:
    o = _outcome(LIVER, 1, 1, True)
    plain = Outcome(**{**o.__dict__, "params": {"row": 0, "organ": LIVER}})
    s = summarize([plain], SummaryContext.of(n_resamples=0))
    assert not [c for c in s.columns if "gated" in c or c.startswith("macro")]


def test_source_files_golden(tmp_path: Path) -> None:
    outs = [_outcome(c, int(c % 2), int(c % 3 == 0), c % 6 == 3, row=7) for c in ORGAN_IDS]
    records = source_records(outs)[("zero_shot", "m")]
    # enhanced_evaluator.py run_zero_shot_enhanced: one record per sample, organ id order
    assert records[0]["sample_idx"] == 7 and records[0]["prompt"] == {"name": "zero_shot"}
    assert records[0]["y_true"] == [c % 2 for c in ORGAN_IDS]
    assert records[0]["hits"] == [int(c % 6 == 3) for c in ORGAN_IDS]
    assert records[0]["rows"][1]["organ"] == "Liver"
    m = source_metrics(records)
    s = summarize(outs, SummaryContext.of(n_resamples=0, compat="source"))
    overall = s[s["organ"] == "ALL"].iloc[0]
    assert m["macro_metrics"]["macro_f1"] == pytest.approx(overall["macro_f1"])
    assert m["macro_metrics"]["macro_gated_acc"] == pytest.approx(overall["macro_gated_accuracy"])
    assert m["micro_metrics"]["micro_presence_acc"] == pytest.approx(overall["accuracy"])
    assert m["totals"]["Total"] == 12


# ---- the suite end to end ------------------------------------------------------------------------
@pytest.mark.slow
def test_source_quick_oracle_reads_one(run_suite, data: Path) -> None:
    args = (f"--cholecseg8k={data}", "--compat=source", "--model=oracle", "-m", "quick")
    result, results = run_suite("pointing", *args)
    assert result.ret == 0, result.stdout.str()
    out = results / "pointing" / "r1"
    s = pd.read_csv(out / "summary.csv")
    overall = s[s["organ"] == "ALL"]
    cols = ["accuracy", "f1", "point_hit_rate", "gated_accuracy", "macro_presence_accuracy"]
    cols += ["macro_hit_rate", "macro_gated_accuracy", "macro_f1"]
    assert len(overall) == 3 and (overall[cols] == 1.0).all().all()
    rows = [json.loads(x) for x in (out / "raw_results.jsonl").read_text().splitlines()]
    assert len(rows) == 180 and {r["status"] for r in rows} == {"correct"}
    samples = sorted((out / "zero_shot" / "oracle" / "cholecseg8k_pointing").glob("train_*.json"))
    assert len(samples) == 5
    summary = json.loads(
        (
            out / "fewshot_standard/oracle/cholecseg8k_pointing/metrics_summary_train.json"
        ).read_text()
    )
    assert summary["macro_metrics"]["macro_gated_acc"] == 1.0
    # the original's balanced file, made by its rules, in the cache
    made = next((results.parent / "cache").glob("data_info/cholecseg8k/*/source/balanced_*"))
    assert set(json.loads(made.read_text())) == {"split", "n", "indices"}


@pytest.mark.slow
@pytest.mark.parametrize("compat", ["writeup", "source"])
def test_prepared_folder_end_to_end(run_suite, data: Path, data_info: Path, compat: str) -> None:
    args = (f"--cholecseg8k={data}", f"--pointing-prepared={data_info}", f"--compat={compat}")
    result, results = run_suite("pointing", *args, "--model=oracle")
    assert result.ret == 0, result.stdout.str()
    out = results / "pointing" / "r1"
    rows = [json.loads(x) for x in (out / "raw_results.jsonl").read_text().splitlines()]
    assert len(rows) == len(TEST) * 12 * 3 and {r["status"] for r in rows} == {"correct"}
    assert {r["params"]["row"] for r in rows} == set(TEST)
    s = pd.read_csv(out / "summary.csv")
    assert (s[s["organ"] == "ALL"]["f1"] == 1.0).all()


@pytest.mark.parametrize("model, folder", [("hf:/models/x", "hf_models_x"), ("..", "_")])
def test_source_files_go_in_one_folder_a_model(tmp_path: Path, model: str, folder: str) -> None:
    """A model name is one folder name (support.storage.files.file_name): `hf:/models/x` made three
    nested folders, and `..` would have written beside the run's folder."""
    from support.evaluations.pointing.summary import write_source_files

    outs = [_outcome(c, 1, 1, True, row=3, model=model) for c in ORGAN_IDS]
    (path,) = write_source_files(outs, tmp_path / "run")
    assert path.parent == tmp_path / "run" / "zero_shot" / folder / "cholecseg8k_pointing"
    assert [p.name for p in (tmp_path / "run" / "zero_shot").iterdir()] == [folder]

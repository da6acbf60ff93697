"""`-m` before collection (fixtures/selection.py): a case it deselects is never built into an
item, and pgt's `-m quick` never builds the other cases of a large CSV (issue 25, item 8)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from PIL import Image

from fixtures.loading import _selected
from fixtures.selection import NOT_QUICK, QUICK
from support.evaluations.pgt.spec import configure
from support.evaluations.pgt.synthetic import ensure_pgt_sample
from support.evaluations.pgt.task import PgtEvaluation
from support.settings import RunSettings

ROWS = 3_000


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory) -> Path:
    """A 3,000-row CSV over two small images (a real and an ai-generated one)."""
    folder = tmp_path_factory.mktemp("big")
    for name, colour in (("real.png", "white"), ("fake.png", "black")):
        Image.new("RGB", (16, 16), colour).save(folder / name)
    path = folder / "big.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_path", "label", "generator"])
        for i in range(ROWS):
            w.writerow(["real.png", "real", "real"] if i % 2 else ["fake.png", "fake", "sd"])
    return path


def load(sample: Path, tmp_path: Path, **values: object) -> PgtEvaluation:
    run = RunSettings(cache_dir=tmp_path, results_dir=tmp_path)
    return PgtEvaluation.load(run, configure({"pgt_dataset": str(sample), **values}, run))


def test_quick_lists_only_the_quick_cases_of_a_big_csv(big_csv, tmp_path, monkeypatch):
    ev = load(big_csv, tmp_path)
    built = []
    original = PgtEvaluation.case

    def counting(self, *args):
        case = original(self, *args)
        built.append(case.id)
        return case

    monkeypatch.setattr(PgtEvaluation, "case", counting)
    per_image = len(ev.settings.methods()) * len(ev.settings.ns)
    found = _selected(ev, QUICK)
    assert len(found.cases) == ev.quick_samples * per_image
    assert len(built) == len(found.cases)  # none of the other 2,994 images' cases was built
    assert found.left_out == ROWS * per_image - len(found.cases)
    assert all(ev.is_quick(c) for c in found.cases.values())


def test_not_quick_keeps_the_others_and_counts_what_it_left_out(big_csv, tmp_path):
    ev = load(big_csv, tmp_path, pgt_phrase=["baseline"])
    found = _selected(ev, NOT_QUICK)
    assert len(found.cases) == ROWS - ev.quick_samples and found.left_out == ev.quick_samples
    assert not any(ev.is_quick(c) for c in found.cases.values())


@pytest.mark.parametrize("source", [False, True], ids=["writeup", "source"])
def test_pgt_case_grid_is_the_list_it_stands_for(big_csv, tmp_path, source):
    values = {"compat": "source"} if source else {}
    ev = load(big_csv, tmp_path, pgt_phrase=["baseline", "cot"], pgt_n="1,5", **values)
    grid = ev.cases()
    cases = list(grid)
    per_image = len(ev.settings.methods()) * 2  # baseline + cot x its modes; n 1 and 5
    assert len(cases) == len(grid) == ROWS * per_image and per_image > 2
    assert len({c.id for c in cases}) == len(cases)
    assert [grid[i] for i in (0, 1, 7, 8, -1)] == [cases[i] for i in (0, 1, 7, 8, -1)]
    assert grid[10:30:7] == cases[10:30:7]
    with pytest.raises(IndexError):
        grid[len(grid)]
    assert list(ev.quick_cases()) == [c for c in cases if ev.is_quick(c)]


def collected(result) -> set[str]:
    return set(re.findall(r"test_pgt\[([^\]]+)\]", result.stdout.str()))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("expression", "want"),
    [
        ("quick", lambda quick, api: quick),
        ("not quick and api", lambda quick, api: not quick and api),
        # a mark vlmbench does not put on cases (pytest's own `skip`): not judged at load.
        # A mark nobody registered is a usage error since pytest 9.2
        ("quick and not skip", lambda quick, api: quick),
        ("gpu", lambda quick, api: False),
    ],
)
def test_items_are_what_pytests_own_m_selects(run_suite, shared_cache, tmp_path, expression, want):
    """Collected ids under `-m` equal the cases whose marks the expression selects: quick by
    the evaluation's subset, api by the model's kind; nothing for `gpu` (exit 5)."""
    models = ("oracle", "gpt-4o-mini")
    result, _ = run_suite(
        "pgt",
        "--collect-only",
        "-q",
        "-m",
        expression,
        f"--model={','.join(models)}",
        "--skip-unavailable",
    )
    ev = load(ensure_pgt_sample(shared_cache), tmp_path)  # built by the run
    expected = {
        f"{c.id}-{m}" for c in ev.cases() for m in models if want(ev.is_quick(c), m != "oracle")
    }
    assert collected(result) == expected, result.stdout.str()[-2000:]
    assert result.ret == (0 if expected else 5)

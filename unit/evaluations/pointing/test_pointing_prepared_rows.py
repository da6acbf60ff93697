"""Pointing's prepare step (PointingEvaluation.prepare, the contract's Evaluation.prepare): before
the run, every row the selected cases use gets its canvas, canvas label map and target points
stored; a later load reads them and decodes no frame or mask, and scores as a run that made
everything in memory (--no-cache) does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.evaluations.pointing.classes import IGNORE, ORGAN_IDS
from support.evaluations.pointing.dataset import CholecSeg8kFileError
from support.evaluations.pointing.letterbox import Letterbox, canvas_values
from support.evaluations.pointing.task import (
    CANVAS,
    LABEL_RULE,
    TARGET_RULE,
    PointingAnswerSpace,
    PointingEvaluation,
    canvas_folder,
    labels_folder,
    read_label_png,
    read_row_targets,
    targets_folder,
)
from support.types import Case
from unit.helpers.pointing_loads import load

pytestmark = pytest.mark.slow  # the synthetic sample and its prepared tables (once a session)


@pytest.fixture
def cache(tmp_path: Path, shared_cache: Path) -> Path:
    """A cache whose prepared tables (data_info) are the session's and whose canvases are its
    own."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (shared_cache / "data_info").mkdir(parents=True, exist_ok=True)
    (cache / "data_info").symlink_to(shared_cache / "data_info", target_is_directory=True)
    return cache


def selected(ev: PointingEvaluation) -> list[Case]:
    """A small selection: the first test row's zero-shot and standard few-shot cases of two organs
    it shows (the few-shot ones bring their examples' rows)."""
    row = ev.rows[0]
    shown = [o for j, o in enumerate(ORGAN_IDS) if ev.truth(row)[j]][:2]
    return [
        c
        for c in ev.cases()
        if c.params["row"] == row
        and c.params["organ"] in shown
        and c.params["condition"] in ("zero_shot", "fewshot_standard")
    ]


def stored(cache: Path, ev: PointingEvaluation) -> dict[str, list[str]]:
    fp = ev.ds.fingerprint
    folders = {"canvases": canvas_folder, "labels": labels_folder, "targets": targets_folder}
    return {
        kind: sorted(p.name for p in folder(cache, fp).iterdir()) if folder(cache, fp).is_dir()
        else []
        for kind, folder in folders.items()
    }  # fmt: skip


def hit_in_frame(ev: PointingEvaluation, row: int, organ: int, point: tuple[int, int]) -> bool:
    """The hit test on the frame's own labels: the image pixel the point's centre maps to."""
    box = Letterbox(*ev.ds.frame_size(row), *CANVAS)
    pixel = box.to_image_pixel(point[0] + 0.5, point[1] + 0.5)
    return pixel is not None and bool(ev.ds.labels(row)[pixel[1], pixel[0]] == organ)


def test_prepare_stores_what_the_selected_rows_need_as_the_run_makes_it(
    synthetic_cholecseg8k, cache
):
    ev = load(synthetic_cholecseg8k, cache)
    cases = selected(ev)
    rows = ev.rows_used(cases)
    assert rows[0] == ev.rows[0] and len(rows) > 1  # the test row, then its examples' rows
    assert ev.rows[1] not in rows  # the other test row is not selected
    ev.prepare(cases, progress=False)
    assert stored(cache, ev) == {
        "canvases": sorted(f"{r}.png" for r in rows),
        "labels": sorted(f"{r}.png" for r in rows),
        "targets": sorted(f"{r}.json" for r in rows),
    }
    fp = ev.ds.fingerprint
    assert LABEL_RULE in labels_folder(cache, fp).name
    assert TARGET_RULE in targets_folder(cache, fp).name

    plain = load(synthetic_cholecseg8k, cache, use_cache=False)  # made in memory, as before
    for r in rows:
        assert (canvas_folder(cache, fp) / f"{r}.png").read_bytes() == plain.frame(r)[0].image
        label_file = labels_folder(cache, fp) / f"{r}.png"
        labels = read_label_png(label_file.read_bytes(), str(label_file), CANVAS)
        box = Letterbox(*plain.ds.frame_size(r), *CANVAS)
        np.testing.assert_array_equal(labels, canvas_values(plain.ds.labels(r), box, IGNORE))
        assert labels.dtype == np.int8 and (labels == IGNORE).any()  # the padding
        target_file = targets_folder(cache, fp) / f"{r}.json"
        points = read_row_targets(target_file.read_bytes(), str(target_file))
        assert points == {o: plain.target_point(r, o) for o in ORGAN_IDS}
    assert any(p is not None for p in points.values())

    ev.prepare(cases, progress=False)  # all stored: nothing made again
    assert ev._canvases is not None and ev._canvases.made == len(rows)


def test_a_load_after_prepare_reads_and_decodes_no_frame_or_mask(synthetic_cholecseg8k, cache):
    first = load(synthetic_cholecseg8k, cache)
    cases = selected(first)
    first.prepare(cases, progress=False)

    again = load(synthetic_cholecseg8k, cache)  # a worker, or the run after the controller's
    decoded: list[tuple[str, int]] = []
    read = again.ds._rows.read
    again.ds._rows.read = lambda column, i: decoded.append((column, i)) or read(column, i)
    plain = load(synthetic_cholecseg8k, cache, use_cache=False)
    rng = np.random.default_rng(0)
    for case in cases:
        request, expected = again.request(case), plain.request(case)
        assert [p.image for p in request.parts] == [p.image for p in expected.parts]
        assert request.target == expected.target
        answers = [request.target, *(request.answer_space.sample(rng) for _ in range(40))]
        for text in answers:  # the oracle's hit and chance's points, padding included
            parse = again.settings.profile.parse
            assert again.score(case, text, parse(text, again.canvas)) == plain.score(
                case, text, parse(text, plain.canvas)
            )
    assert isinstance(request.answer_space, PointingAnswerSpace)
    assert decoded == []  # no frame, colour mask or watershed mask decoded
    hits = []
    for case in cases:  # the stored label map hits where the frame's labels do, edges included
        row, organ = case.params["row"], case.params["organ"]
        x, y = again.target_point(row, organ)
        line = [(i, y) for i in range(-2, CANVAS[0] + 2)] + [
            (x, i) for i in range(-2, CANVAS[1] + 2)
        ]
        found = [again.hits(row, organ, point) for point in line]
        assert found == [hit_in_frame(plain, row, organ, point) for point in line]
        hits += found
    assert any(hits) and not all(hits)
    memos = (again._canvases, again._stored_labels, again._stored_targets)
    assert all(m is not None and m.made == 0 for m in memos)  # every file read, none made


def test_nothing_is_prepared_without_the_store_and_a_broken_row_is_left_to_its_cases(
    synthetic_cholecseg8k, cache, monkeypatch
):
    plain = load(synthetic_cholecseg8k, cache, use_cache=False)  # --no-cache
    plain.prepare(selected(plain), progress=False)
    assert not (cache / "canvases").exists()

    ev = load(synthetic_cholecseg8k, cache)
    cases = selected(ev)
    broken = ev.rows[0]
    make = ev._canvas_png

    def canvas_png(row: int) -> bytes:
        if row == broken:
            raise CholecSeg8kFileError(f"frame of row {row}: not a readable image")
        return make(row)

    monkeypatch.setattr(ev, "_canvas_png", canvas_png)
    ev.prepare(cases, progress=False)  # no error: the others are prepared
    others = [r for r in ev.rows_used(cases) if r != broken]
    assert stored(cache, ev)["canvases"] == sorted(f"{r}.png" for r in others)
    with pytest.raises(CholecSeg8kFileError, match=f"row {broken}"):
        ev.request(cases[0])  # its cases meet the error, named

"""The pointing canvases and target points kept across runs (support.memo.FileMemo in
PointingEvaluation): a rerun reads what a first run made, the same a run without the store makes."""

from __future__ import annotations

import pytest

from support.evaluations.pointing.classes import ORGAN_IDS
from support.evaluations.pointing.task import (
    CANVAS_RECIPE,
    TARGET_RULE,
    canvas_folder,
    targets_folder,
)
from support.memo import FileMemo
from unit.helpers.pointing_loads import load


@pytest.mark.slow
def test_a_rerun_reads_the_canvases_the_first_run_made(synthetic_cholecseg8k, tmp_path):
    cache = tmp_path / "cache"
    first = load(synthetic_cholecseg8k, cache)
    rows = first.rows[:2]
    made = {r: first.frame(r)[0].image for r in rows}
    assert first._canvases is not None and first._canvases.made == 2
    folder = canvas_folder(cache, first.ds.fingerprint)
    assert CANVAS_RECIPE in folder.name and sorted(p.name for p in folder.iterdir()) == sorted(
        f"{r}.png" for r in rows
    )

    again = load(synthetic_cholecseg8k, cache)
    assert {r: again.frame(r)[0].image for r in rows} == made
    assert again._canvases is not None and again._canvases.made == 0  # read, not made

    plain = load(synthetic_cholecseg8k, cache, use_cache=False)  # --no-cache: no store
    assert plain._canvases is None
    assert {r: plain.frame(r)[0].image for r in rows} == made
    part, box = plain.frame(rows[0])
    assert part.mime == "image/png" and (box.src_w, box.src_h) == plain.labels(rows[0]).shape[::-1]


@pytest.mark.slow
def test_a_rerun_reads_the_targets_without_decoding_labels(synthetic_cholecseg8k, tmp_path):
    cache = tmp_path / "cache"
    first = load(synthetic_cholecseg8k, cache)
    keys = [(r, o) for r in first.rows[:2] for o in ORGAN_IDS if first.truth(r)[ORGAN_IDS.index(o)]]
    assert keys  # some organs are present
    made = {k: first.target_point(*k) for k in keys}
    folder = targets_folder(cache, first.ds.fingerprint)
    assert TARGET_RULE in folder.name
    assert sorted(p.name for p in folder.iterdir()) == sorted({f"{r}.json" for r, _ in keys})

    plain = load(synthetic_cholecseg8k, cache, use_cache=False)  # computed, nothing stored
    assert {k: plain.target_point(*k) for k in keys} == made
    assert any(p is not None for p in made.values())

    again = load(synthetic_cholecseg8k, cache)

    def no_decoding(row: int):
        raise AssertionError(f"labels of row {row} decoded")

    again.ds.labels = no_decoding  # type: ignore[method-assign]
    assert {k: again.target_point(*k) for k in keys} == made
    assert [again.answer(r, o) for r, o in keys] == [first.answer(r, o) for r, o in keys]


def test_file_memo_makes_once_and_survives_an_unwritable_folder(tmp_path):
    memo = FileMemo(tmp_path / "m")
    assert memo.get("a.bin", lambda: b"x") == b"x" and memo.made == 1
    assert memo.get("a.bin", lambda: b"y") == b"x" and memo.made == 1  # kept
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    stuck = FileMemo(blocked)  # its files cannot be written: made every time, never raises
    assert stuck.get("b.bin", lambda: b"z") == b"z" and stuck.get("b.bin", lambda: b"z") == b"z"
    assert stuck.made == 2

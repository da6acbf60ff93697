"""Score provenance (issue 42): which parser rule read each answer, and each model's shares.

Each evaluation's parsers give the code of the rule that read an answer; the codes they give are
exactly the ones the evaluation declares (`EvaluationSpec.read_rules`). Under `--compat source`
the codes are the original scripts' branches:
- pointing: fallcat/llm_cholec_organ eval/parser.py:35-78 (json.loads of the whole text, else the
  first [x,y] pair means present, else absent);
- pgt: Zero-shot-PGT helpers.py:519-538 `_find_label_in_text` (real without ai-generated, an AI
  term without real, both -> real, else None);
- nyu_distance: IronsiteHackathon's eval_nyu_distance.py `query_vlm_distance` (the first number);
- dynamic: AnyPoint models/base_qa_model.py (its exact matches, then `choice_search`: the nearest
  option by embedding).
End to end, a model that writes every right answer in a form the prompt did not ask for
(unit/helpers/lenient_answers.py) scores as the oracle does, is read by fallback rules only, and is
flagged in report.md and the terminal; the oracle is not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support import evaluations
from support.contract.provenance import (
    UNDECLARED,
    ReadRule,
    fallback_flags,
    provenance_table,
    report_section,
)
from support.evaluations.dynamic.prompts import read_choice, read_choice_source
from support.evaluations.nyu_distance.parser import parse_answer, parse_first_number
from support.evaluations.pgt.answers import outcome_rule, read_label, read_label_source
from support.evaluations.pointing.parser import parse_pointing, parse_pointing_source, read_rule
from support.evaluations.surgvqa.boxes import FRAMES_READ, parse_boxes
from support.evaluations.surgvqa.read_rules import vqa_rule
from support.types import Outcome
from unit.helpers.suite_runs import EVERY_SHAPE

HERE = Path(__file__).parent
# a child imports the scripted models by module name: this folder\'s and unit/helpers/\'s
CHILD_PATH = os.pathsep.join(
    map(str, (HERE, Path(__file__).resolve().parents[2] / "unit" / "helpers"))
)
EVALUATIONS = ("dynamic", "nyu_distance", "pgt", "pointing", "surgvqa")


def declared(name: str) -> set[str]:
    return {rule.code for rule in evaluations.spec(name).read_rules}


# -- the parsers' codes ----------------------------------------------------------------------------

CANVAS = (768, 768)
POINTING = [
    ('{"name": "Liver", "present": 1, "point_canvas": [10, 20]}', "json", "source-json"),
    ('```json\n{"present": 0, "point_canvas": null}\n```', "json-fenced", "source-absent"),
    ('Sure: {"present": 1, "point_canvas": [10, 20]} ok', "json-in-text", "source-pair"),
    ('{"present": 1, "point_canvas": [10, 20],}', "key-regex", "source-pair"),
    ("I cannot see it.", "none", "source-absent"),
    ("", "none", "source-absent"),
    (None, "none", "source-absent"),
]


@pytest.mark.parametrize(("text", "writeup", "source"), POINTING)
def test_pointing_codes(text, writeup: str, source: str) -> None:
    assert read_rule(parse_pointing(text, CANVAS), text) == writeup
    assert read_rule(parse_pointing_source(text, CANVAS), text) == source


def test_a_fence_around_prose_or_a_wrapper_is_not_the_object_alone() -> None:
    for text in (
        '```\nMy answer: {"present": 0, "point_canvas": null}\n```',
        '```json\n{"answer": {"present": 1, "point_canvas": [3, 4]}}\n```',
    ):
        assert read_rule(parse_pointing(text, CANVAS), text) == "json-in-text", text


PGT = [
    ("Real.", ("real", "label"), ("real", "source-real")),
    ("AI-generated", ("ai-generated", "label"), ("ai-generated", "source-ai-term")),
    ("It looks fake.", ("ai-generated", "synonym"), ("ai-generated", "source-ai-term")),
    ("Authentic", ("real", "synonym"), (None, "source-none")),
    ("not real", ("ai-generated", "negation"), ("real", "source-real")),
    ("real, not ai-generated", ("real", "label"), ("real", "source-both")),
    ("no idea", (None, "none"), (None, "source-none")),
    (None, (None, "none"), (None, "source-none")),
]


@pytest.mark.parametrize(("text", "writeup", "source"), PGT)
def test_pgt_codes(text, writeup, source) -> None:
    assert read_label(text) == writeup
    assert read_label_source(text) == source


def test_a_label_cut_by_the_token_limit_is_coded_cut() -> None:
    """The task's code of one answer of a reasoning entry (kept entries' too): a label that was
    read but not kept (the answer was cut by the token limit) is `cut`."""
    from types import SimpleNamespace

    from support.evaluations.pgt.profiles import WRITEUP
    from support.evaluations.pgt.task import PgtEvaluation

    task = SimpleNamespace(settings=SimpleNamespace(profile=WRITEUP))
    cut = {"clean_answer_response": "Fake", "extracted_prediction": None}
    kept = {"clean_answer_response": "Fake", "extracted_prediction": "ai-generated"}
    empty = {"clean_answer_response": "", "extracted_prediction": None}
    assert PgtEvaluation.read_by(task, cut) == "cut"  # type: ignore[arg-type]
    assert PgtEvaluation.read_by(task, kept) == "synonym"  # type: ignore[arg-type]
    assert PgtEvaluation.read_by(task, empty) == "none"  # type: ignore[arg-type]


def test_an_outcome_of_n_answers_takes_the_most_common_code() -> None:
    assert outcome_rule(["label", "synonym", "synonym"]) == "synonym"
    assert outcome_rule(["label", "label", "none"]) == "label"
    assert outcome_rule(["label", "synonym"]) == "synonym"  # a tie: the more lenient rule
    assert outcome_rule([]) == ""


NYU = [
    ("2.5", "number", "source-number"),
    ("2.1 meters (about 7 feet)", "metres", "source-number"),
    ("150 cm", "converted", "source-number"),
    ("5'6\"", "converted", "source-number"),
    ("1.5-2 m", "range", "source-number"),
    ("between 1 and 2", "range", "source-number"),
    ("Sorry, I can't say, maybe 3", "refusal", "source-number"),
    ("no idea", "none", "source-none"),
    ("5000", "implausible", "source-implausible"),
    (None, "none", "source-none"),
]


@pytest.mark.parametrize(("text", "writeup", "source"), NYU)
def test_nyu_codes(text, writeup: str, source: str) -> None:
    assert parse_answer(text).rule == writeup
    assert parse_first_number(text).rule == source


OPTIONS = ["chair", "table", "lamp"]


def _letters_encoder(texts: list[str]) -> np.ndarray:
    """Unit rows: the answer is nearest to the option sharing its first letter (or the first)."""
    rows = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        rows[i, (ord(t[:1].lower() or "a") - ord("a")) % 26] = 1.0
    return rows


DYNAMIC = [
    ("B", ("table", "exact"), ("table", "source-exact")),
    ("(C) lamp", ("lamp", "exact"), ("lamp", "source-exact")),
    ("The answer is B.", ("table", "letter"), ("table", "source-nearest")),
    ("I would say the lamp", ("lamp", "named"), ("chair", "source-nearest")),
    ("nothing", (None, "none"), ("chair", "source-nearest")),
]


@pytest.mark.parametrize(("text", "writeup", "source"), DYNAMIC)
def test_dynamic_codes(text, writeup, source) -> None:
    assert read_choice(text, OPTIONS) == writeup
    assert read_choice_source(text, OPTIONS, _letters_encoder) == source
    assert read_choice_source("x", [], _letters_encoder) == (None, "source-none")


ITEM = '{"label": "cadiere forceps", "bbox_2d": [10, 20, 110, 220]}'
GEMINI_ITEM = '{"label": "cadiere forceps", "box_2d": [10, 20, 110, 220]}'
BOXES = [
    (f"[{ITEM}]", "json-list"),
    (f"```json\n[{ITEM}]\n```", "json-fenced"),
    (f"The tools: [{ITEM}] and nothing else.", "json-in-text"),
    (f'{{"boxes": [{ITEM}]}}', "wrapper"),
    (ITEM, "object"),
    (f"[{ITEM.replace(chr(34), chr(39))}]", "literal"),
    (f'[{ITEM}, {{"label": "cadi', "cut"),
    ("[]", "json-list"),  # no tool: read, in the asked form, and no number in any frame
    ("no tools", "none"),
    ('[{"label": "spoon", "bbox_2d": [1, 2, 3, 4]}]', "none"),  # no usable box
]


def coded(text: str, form: str, frame: str) -> str:
    """The code of an answer of BOXES read in `frame`: the form, then the frame its numbers were
    read in (none for an answer without a box, nor for pixels)."""
    return form if form == "none" or text == "[]" or frame == "pixels" else f"{form}@{frame}"


@pytest.mark.parametrize(("text", "form"), BOXES)
@pytest.mark.parametrize("frame", ["pixels", "norm1000", "gemini", "resized"])
def test_surgvqa_box_codes_name_the_form_and_the_frame(text: str, form: str, frame: str) -> None:
    got = parse_boxes(text, 640, 512, frame, seen=(320, 256))  # type: ignore[arg-type]
    assert got.read_by == coded(text, form, frame)


def test_surgvqa_auto_frame_is_read_off_the_box_key() -> None:
    assert parse_boxes(f"[{GEMINI_ITEM}]", 640, 512, "auto").read_by == "json-list@gemini"
    assert parse_boxes(f"[{ITEM}]", 640, 512, "auto").read_by == "json-list"
    # "resized" without the size the model saw reads pixels, and says so
    assert parse_boxes(f"[{ITEM}]", 640, 512, "resized", None).read_by == "json-list"


def test_surgvqa_vqa_codes() -> None:
    assert vqa_rule("The grasper.", False, None) == "text"
    assert vqa_rule("Yes, it is.", True, "yes") == "yes-no"
    assert vqa_rule("Probably.", True, None) == "not-yes-no"
    assert vqa_rule("  ", True, None) == "empty"


def test_the_parsers_give_exactly_the_declared_codes() -> None:
    """Both ways: every code a parser gives is declared, and every declared code is given by some
    answer of the tables above (a declared rule no parser reaches would be a dead row)."""
    pointing = {c for _, w, s in POINTING for c in (w, s)} | {"json-fenced"}
    pgt = {c for _, w, s in PGT for c in (w[1], s[1])} | {"cut"}  # cut: the task's, below
    nyu = {c for _, w, s in NYU for c in (w, s)}
    dynamic = {c for _, w, s in DYNAMIC for c in (w[1], s[1])} | {"source-none"}
    surgvqa = {"text", "yes-no", "not-yes-no", "empty"} | {
        coded(text, form, frame) for text, form in BOXES for frame in FRAMES_READ
    }
    found = {"pointing": pointing, "pgt": pgt, "nyu_distance": nyu, "dynamic": dynamic}
    found["surgvqa"] = surgvqa
    for name in EVALUATIONS:
        assert found[name] == declared(name), name


# -- shares and flags ------------------------------------------------------------------------------

RULES = (
    ReadRule("strict", "primary", "as asked"),
    ReadRule("loose", "fallback", "leniently"),
    ReadRule("nothing", "unread", "unread"),
)


def outcome(model: str, i: int, read_by: str) -> Outcome:
    return Outcome(f"c{i}-{model}", "e", model, "correct", read_by=read_by)


def test_shares_sum_to_one_per_model_and_a_mostly_lenient_model_is_flagged() -> None:
    outs = [outcome("a", i, "strict") for i in range(6)] + [outcome("a", 6, "loose")]
    outs += [outcome("b", i, "loose") for i in range(3)] + [outcome("b", 3, "strict")]
    outs += [outcome("b", 4, "nothing"), outcome("b", 5, "")]  # "": no answer, not counted
    table = provenance_table(outs, RULES, models=("b", "a"))
    assert table["model"].drop_duplicates().tolist() == ["b", "a"]
    for _, mine in table.groupby("model"):
        assert mine["share"].sum() == pytest.approx(1.0)
    b = table[table["model"] == "b"].set_index("read_by")
    assert b["answers"].to_dict() == {"strict": 1, "loose": 3, "nothing": 1}
    flags = fallback_flags(table)
    assert len(flags) == 1 and flags[0].startswith("b: 60% of its answers were read by a fallback")
    assert "loose 60%" in flags[0]
    assert "## How the answers were read" in report_section(table, flags)


def test_a_model_at_exactly_half_is_not_flagged_and_an_undeclared_code_counts_as_lenient() -> None:
    half = [outcome("a", 0, "strict"), outcome("a", 1, "loose")]
    assert fallback_flags(provenance_table(half, RULES)) == []
    odd = [outcome("a", 0, "strict"), outcome("a", 1, "mystery"), outcome("a", 2, "loose")]
    table = provenance_table(odd, RULES)
    assert table.set_index("read_by").loc["mystery", "kind"] == UNDECLARED
    assert len(fallback_flags(table)) == 1


def test_a_rule_is_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="kind"):
        ReadRule("x", "lenient", "")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a code is"):
        ReadRule("two words", "primary", "")


# -- end to end: the quick subsets of all five evaluations ----------------------------------------

LENIENT = "scripted:lenient_answers:reply"


def run_both(run_suite, monkeypatch, *args: str) -> tuple[pytest.RunResult, Path]:
    monkeypatch.setenv("PYTHONPATH", CHILD_PATH)
    return run_suite("", "-m", "quick", "--model=oracle", f"--model={LENIENT}", *args)


def rows(results: Path, name: str) -> list[dict]:
    path = results / name / "r1" / "raw_results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_lenient_model_is_read_by_fallbacks_and_flagged(run_suite, monkeypatch) -> None:
    result, results = run_both(run_suite, monkeypatch, "-k", EVERY_SHAPE)
    assert result.ret == 0, result.outlines[-30:]
    terminal = result.stdout.str()
    for name in EVALUATIONS:
        found = rows(results, name)
        assert {r["read_by"] for r in found} <= declared(name), name
        by_model = {m: [r for r in found if r["model"] == m] for m in ("oracle", LENIENT)}
        table = pd.read_csv(results / name / "r1" / "provenance.csv")
        for model, mine in by_model.items():
            shares = table[table["model"] == model]
            assert shares["share"].sum() == pytest.approx(1.0, abs=1e-5), (name, model)
            assert shares["answers"].sum() == sum(1 for r in mine if r["read_by"]), (name, model)
        report = (results / name / "r1" / "report.md").read_text()
        flagged = f"{LENIENT}: " in report.split("## How the answers were read")[1]
        assert flagged, name
        assert f"vlmbench: {name}: {LENIENT}: " in terminal, name
        assert "oracle: " not in report.split("## How the answers were read")[1].split("|")[0]
        if name != "surgvqa":  # the same values, read by other rules: the same statuses
            status = {
                m: {r["case_id"][: -len(m)]: r["status"] for r in rs} for m, rs in by_model.items()
            }
            assert status["oracle"] == status[LENIENT], name
    codes = {r["read_by"] for r in rows(results, "pointing") if r["model"] == LENIENT}
    assert codes == {"json-in-text"}
    assert {r["read_by"] for r in rows(results, "pgt") if r["model"] == LENIENT} == {"synonym"}
    assert {r["read_by"] for r in rows(results, "nyu_distance") if r["model"] == LENIENT} == {
        "converted"
    }
    assert {r["read_by"] for r in rows(results, "dynamic") if r["model"] == LENIENT} == {"letter"}
    assert {r["read_by"] for r in rows(results, "pointing") if r["model"] == "oracle"} == {"json"}


@pytest.mark.slow
def test_under_compat_source_the_codes_are_the_originals_branches(run_suite, monkeypatch) -> None:
    # every request shape of the four evaluations (EVERY_SHAPE), not all their quick cases, and
    # pointing's blood too: absent from some of this profile's samples, where liver never is
    shapes = f"(({EVERY_SHAPE}) or (pointing and blood)) and not surgvqa"
    result, results = run_both(run_suite, monkeypatch, "--compat=source", "-k", shapes)
    assert result.ret == 0, result.outlines[-30:]
    for name in ("dynamic", "nyu_distance", "pgt", "pointing"):
        codes = {r["read_by"] for r in rows(results, name)}
        assert codes and all(c.startswith("source-") for c in codes), (name, codes)
        assert codes <= declared(name)
    # the original finds the [x,y] pair in the prose; an absent organ's answer has none
    lenient = {r["read_by"] for r in rows(results, "pointing") if r["model"] == LENIENT}
    assert lenient == {"source-pair", "source-absent"}


def test_the_docs_list_every_declared_rule() -> None:
    """docs/reports.md's tables hold each evaluation's rules as declared (surgvqa's frame
    variants are described there in one sentence)."""
    page = (HERE.parents[1] / "docs" / "reports.md").read_text()
    for name in EVALUATIONS:
        for rule in evaluations.spec(name).read_rules:
            if "@" not in rule.code:
                assert f"| `{rule.code}` | {rule.kind} | {rule.meaning} |" in page, (name, rule)


def test_the_html_case_shows_the_rule_that_read_the_answer() -> None:
    pytest.importorskip("pytest_html")
    from fixtures.case_extras import outcome_table

    page = outcome_table(Outcome("c-m", "e", "m", "wrong", raw="A", read_by="<b>x</b>"))
    assert "<th>read by</th><td><pre>&lt;b&gt;x&lt;/b&gt;</pre>" in page
    assert "read by" not in outcome_table(Outcome("c-m", "e", "m", "error"))

"""Read a vlmbench dynamic run back with AnyPoint's own code, and say per category what agreed.

    /tmp/anypoint-venv/bin/python tools/anypoint_roundtrip.py --anypoint DIR --run DIR

--anypoint: a work tree of github.com/shijian2001/AnyPoint (commit 2650ead: `git archive HEAD`
of a clone); its modules are imported unmodified, so this runs in a venv that has what their
imports need (numpy<2, torch 2.13.0, sentence-transformers, diskcache, tqdm, openai, pillow;
nothing is downloaded, no model is loaded), except qwen_vl_utils, which a stand-in replaces when
it does not import (`stub_qwen_vl_utils`: it needs torchvision, and none imports beside the CPU
torch). It imports nothing of vlmbench.
--run: one dynamic run's folder (results/dynamic/<run-id>/), holding <model>/<search>/results.json
and, where the search has errors, <model>/<search>/hard_data/.

Checks, per search (AnyPoint file:line of what is used):
- results.json: `EvalConfig(**config)` (dynamic_evaluation/config.py:7) and `TaskResult(**row)`
  (config.py:28) for every row, each `to_dict()` giving the stored dict back ("loaded");
- every row's verdict: `QAModel.multiple_choice_qa` (models/base_qa_model.py:102), its model a
  stand-in replying the row's recorded model_answer, the prompt PointQAModel's default
  (models/point_qa_model.py `_default_prompt_func`), choice search off (it needs the
  all-mpnet-base-v2 download): it must pick model_answer and score is_correct ("agreed");
- hard_data/tasks.jsonl: record k is results' error_indices[k] (dynamic_evaluation/
  evaluator.py:232-260): the same question, options and answer, its category the row's category
  (the trailing "_" of the generator's spelling aside), point f"{k:06d}.npy"; and
  `load_point_cloud(path)` (base_qa_model.py:14) reads pcd/<point> as an (N, 6) array.

Prints one table per search and a total; exit status 1 when anything disagreed or failed to load.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Tally:
    """Counts for one category of one search."""

    rows: int = 0
    loaded: int = 0  # TaskResult(**row).to_dict() == row
    agreed: int = 0  # multiple_choice_qa picks model_answer and scores is_correct
    hard: int = 0  # hard_data records
    hard_loaded: int = 0  # load_point_cloud read an (N, 6) array
    hard_agreed: int = 0  # record == results row at error_indices[k]
    problems: list[str] = field(default_factory=list)


def stub_qwen_vl_utils() -> str | None:
    """A stand-in `qwen_vl_utils` module when the real one does not import, and why.

    AnyPoint imports it only in layout_generator/api/vision_utils.py:5 (`process_vision_info`,
    for the LLM that writes layouts), reached through point_qa_generator/utils.py:3 importing
    layout_generator.constants; nothing of loading or scoring uses it. The real package imports
    torchvision at its top, and no torchvision imports beside the CPU torch 2.13.0 build
    ("operator torchvision::nms does not exist")."""
    try:
        import qwen_vl_utils  # noqa: F401
    except (ImportError, RuntimeError) as exc:
        stub = types.ModuleType("qwen_vl_utils")

        def process_vision_info(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("qwen_vl_utils is stubbed (tools/anypoint_roundtrip.py)")

        stub.process_vision_info = process_vision_info
        sys.modules["qwen_vl_utils"] = stub
        return f"{type(exc).__name__}: {exc}"
    return None


def import_anypoint(folder: Path) -> dict[str, Any]:
    """AnyPoint's classes, imported from its work tree (its package __init__ chains included)."""
    sys.path.insert(0, str(folder))
    why = stub_qwen_vl_utils()
    if why:
        print(f"note: qwen_vl_utils stubbed (layout LLM only; the real one fails: {why})")
    import dynamic_evaluation  # noqa: F401  (the whole chain, as its own scripts import it)
    from dynamic_evaluation.config import EvalConfig, TaskResult
    from models.base_qa_model import QAModel, load_point_cloud
    from models.point_qa_model import PointQAModel

    return {
        "EvalConfig": EvalConfig,
        "TaskResult": TaskResult,
        "QAModel": QAModel,
        "load_point_cloud": load_point_cloud,
        "prompt": PointQAModel._default_prompt_func,
    }


class Replay:
    """A stand-in for AnyPoint's QAModelInstance: answers with the text it is given."""

    def __init__(self) -> None:
        self.reply = ""

    def qa(self, data: Any, prompt: str) -> str:
        return self.reply


def replay_model(ap: dict[str, Any]) -> tuple[Any, Replay]:
    """A QAModel whose model replies what the caller sets (choice search off, no cache)."""
    model = ap["QAModel"]("replay", "default", ap["prompt"], choice_format="letter")
    stand_in = Replay()
    model.model = stand_in
    return model, stand_in


def evaluator_spelling(category: str) -> str:
    """The generator's `what_attribute_` as AnyPoint's evaluator spells it (`what_attribute`)."""
    return category[:-1] if category.endswith("_") else category


def check_search(folder: Path, ap: dict[str, Any]) -> dict[str, Tally]:
    """category -> its Tally, for one <model>/<search>/ folder."""
    doc = json.loads((folder / "results.json").read_text())
    tallies: dict[str, Tally] = defaultdict(Tally)
    config = ap["EvalConfig"](**doc["config"])
    if config.to_dict() != doc["config"]:
        tallies["(config)"].problems.append("EvalConfig.to_dict() differs from config")
    model, stand_in = replay_model(ap)
    rows = doc["results"]
    for row in rows:
        tally = tallies[str(row.get("category"))]
        tally.rows += 1
        try:
            result = ap["TaskResult"](**row)
        except TypeError as exc:
            tally.problems.append(f"task {row.get('task_id')}: TaskResult: {exc}")
            continue
        tally.loaded += result.to_dict() == row
        stand_in.reply = result.model_answer
        verdict = model.multiple_choice_qa(
            {"point_cloud": None}, result.question, list(result.options or []), result.answer
        )
        same = verdict["multiple_choice_answer"] == result.model_answer
        if same and (verdict["accuracy"] == 1) == result.is_correct:
            tally.agreed += 1
        else:
            tally.problems.append(f"task {result.task_id}: verdict {verdict} vs {row}")
    hard = folder / "hard_data"
    if not hard.is_dir():
        return tallies
    errors = doc["stats"]["error_indices"]
    records = [json.loads(x) for x in (hard / "tasks.jsonl").read_text().splitlines() if x]
    if len(records) != len(errors):
        tallies["(hard_data)"].problems.append(f"{len(records)} records, {len(errors)} errors")
    by_id = {row["task_id"]: row for row in rows}
    for k, record in enumerate(records):
        tally = tallies[evaluator_spelling(record["category"])]
        tally.hard += 1
        cloud = ap["load_point_cloud"](str(hard / "pcd" / record["point"]))
        tally.hard_loaded += cloud.ndim == 2 and cloud.shape[1] == 6 and len(cloud) > 0
        row = by_id.get(errors[k]) if k < len(errors) else None
        same = (
            row is not None
            and record["question_id"] == k
            and record["point"] == f"{k:06d}.npy"
            and evaluator_spelling(record["category"]) == row["category"]
            and all(record[f] == row[f] for f in ("question", "options", "answer"))
        )
        if same:
            tally.hard_agreed += 1
        else:
            tally.problems.append(f"hard record {k}: {record} vs {row}")
    return tallies


HEAD = ("category", "rows", "loaded", "agreed", "hard", "hard_loaded", "hard_agreed")


def counts(t: Tally) -> list[int]:
    return [t.rows, t.loaded, t.agreed, t.hard, t.hard_loaded, t.hard_agreed]


def table(tallies: dict[str, Tally]) -> list[str]:
    """Aligned text lines: a header, one line per category, a total."""
    lines = [[name, *counts(tallies[name])] for name in sorted(tallies)]
    lines.append(["total", *(sum(x) for x in zip(*(line[1:] for line in lines), strict=True))])
    cells = [[str(v) for v in line] for line in [list(HEAD), *lines]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEAD))]
    return [
        "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in cells
    ]


def main(argv: list[str] | None = None) -> int:
    """Check every search of the run; 0 when all agreed, 1 otherwise (problems printed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anypoint", type=Path, required=True, help="AnyPoint work tree")
    parser.add_argument("--run", type=Path, required=True, help="results/dynamic/<run-id>/")
    args = parser.parse_args(argv)
    ap = import_anypoint(args.anypoint.resolve())
    searches = sorted(p.parent for p in args.run.glob("*/*/results.json"))
    if not searches:
        print(f"{args.run}: no <model>/<search>/results.json", file=sys.stderr)
        return 1
    ok = True
    for folder in searches:
        tallies = check_search(folder, ap)
        print(f"\n{folder.relative_to(args.run)}")
        print("\n".join(table(tallies)))
        for t in tallies.values():
            full = t.loaded == t.agreed == t.rows and t.hard_loaded == t.hard_agreed == t.hard
            ok &= full and not t.problems
            for problem in t.problems[:5]:
                print(f"  ! {problem}")
    print("\nall agreed" if ok else "\nDISAGREEMENTS (above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

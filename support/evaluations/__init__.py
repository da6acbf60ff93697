"""The registry of evaluations (name -> "module:SPEC" of its EvaluationSpec), and the packages
of the five built in: `support/evaluations/<name>/`, each holding all of one evaluation (spec,
task, summary, domain modules, its synthetic sample data).

Adding an evaluation is one package here, one thin test module under evals/ (`pytestmark =
pytest.mark.evaluation("<name>")`) and one line in EVALUATIONS. A package outside the suite
registers through the `vlmbench.evaluations` entry-point group (the entry point loads to an
EvaluationSpec; a built-in name is never taken over, nor its entry point loaded), or by calling
`register` before the suite's plugins are loaded (e.g. at the top of a conftest.py that lists
them in `pytest_plugins`).
"""

from __future__ import annotations

import importlib
import importlib.metadata

from support.contract.evaluation import EvaluationSpec

EVALUATIONS: dict[str, str] = {
    "pointing": "support.evaluations.pointing.spec:SPEC",
    "pgt": "support.evaluations.pgt.spec:SPEC",
    "nyu_distance": "support.evaluations.nyu_distance.spec:SPEC",
    "surgvqa": "support.evaluations.surgvqa.spec:SPEC",
    "dynamic": "support.evaluations.dynamic.spec:SPEC",
}
ENTRY_POINT_GROUP = "vlmbench.evaluations"

_specs: dict[str, EvaluationSpec] = {}
_entry_points_loaded = False


def register(name: str, spec: str | EvaluationSpec) -> None:
    """Add an evaluation ("module:ATTR" of its spec, or the spec itself)."""
    if isinstance(spec, EvaluationSpec):
        if spec.name != name:
            raise ValueError(f"evaluation {name!r}: its spec is named {spec.name!r}")
        _specs[name] = spec
    else:
        EVALUATIONS[name] = spec
        _specs.pop(name, None)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in EVALUATIONS:  # built in (an older install's entry point names it too)
            continue
        try:
            spec = ep.load()
        except Exception as exc:
            raise RuntimeError(
                f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}): {exc}"
            ) from exc
        if not isinstance(spec, EvaluationSpec):
            raise TypeError(f"entry point {ep.name} = {ep.value}: not an EvaluationSpec")
        register(spec.name, spec)


def names() -> list[str]:
    """Every registered evaluation, built-in ones first."""
    _load_entry_points()
    return list(dict.fromkeys([*EVALUATIONS, *_specs]))


def spec(name: str) -> EvaluationSpec:
    """The spec registered under `name` (ValueError naming the known ones otherwise)."""
    _load_entry_points()
    if name not in _specs:
        if name not in EVALUATIONS:
            raise ValueError(f"unknown evaluation {name!r}; known: {', '.join(names())}")
        module, _, attr = EVALUATIONS[name].partition(":")
        found = getattr(importlib.import_module(module), attr)
        if not isinstance(found, EvaluationSpec) or found.name != name:
            raise TypeError(f"{EVALUATIONS[name]}: not the EvaluationSpec of {name!r}")
        _specs[name] = found
    return _specs[name]


def score_kinds(name: str) -> dict[str, str]:
    """The kinds of evaluation `name`'s scores (its summary's SCORES), by which a run folder's
    rows are checked when read back; {} for an evaluation not registered here or whose summary
    cannot load (its rows' scores are then checked for plain types only)."""
    try:
        return dict(spec(name).summary_module().SCORES)
    except Exception:  # not registered, or a summary that does not load here
        return {}

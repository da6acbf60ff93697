"""Which comparisons a run's outcomes answer, and how their cases pair: comparisons.csv.

An evaluation declares a `Comparisons` (in its summary module, `COMPARISONS`): its additive counts
and reduction (the ones its summary already uses), the metrics to compare and the test of each,
the fields a contrast may vary (`model` always; e.g. pointing's `condition`), how to read an
outcome's label of a field, and `key(outcome, field)`: what must be equal for two outcomes to be
the same case seen two ways (pointing: the sample and organ, with the condition left out).

A contrast is (field, a, b): "b vs a". For `model` the pairs are the same cases of the two models;
for any other field they are the same cases of one model under the two labels, one table row
group per model. Outcomes with a backend error pair with nothing; cases found on one side only are
counted (`unmatched_a`, `unmatched_b`), never silently dropped. The statistics are
support.statistics.paired'; Holm's adjustment runs over the whole table of an evaluation (`p_holm`).

`--compare A,B` (StatisticsSettings.compare) replaces the evaluation's default contrasts: A and B
are two models of the run, or two labels of one of the evaluation's fields.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from support.statistics.paired import COLUMNS, Pair, Reduce, TestName, compare, holm_by_family
from support.types import Outcome

MODEL = "model"
LABELS = ("evaluation", "field", "model")  # columns before support.statistics.paired.COLUMNS
TABLE_COLUMNS = (*LABELS, *COLUMNS, "unmatched_a", "unmatched_b", "p_holm")


@dataclass(frozen=True)
class Comparisons:
    """An evaluation's comparison spec (module docstring)."""

    counts: Callable[[Outcome], Sequence[float]]
    reduce: Reduce
    metrics: tuple[str, ...]
    tests: Mapping[str, TestName] = field(default_factory=dict)
    scores: Callable[[Outcome], Mapping[str, float]] = lambda o: {}
    fields: Mapping[str, Callable[[Outcome], str]] = field(default_factory=dict)
    key: Callable[[Outcome, str], Hashable] = lambda o, f: o.item_id
    # the contrasts a run gets without --compare, from the labels it has: (field, a, b)
    defaults: Callable[[Mapping[str, list[str]]], list[tuple[str, str, str]]] = lambda labels: []
    include: Callable[[Outcome], bool] = lambda o: True  # outcomes that take part

    def label(self, o: Outcome, name: str) -> str:
        return o.model if name == MODEL else str(self.fields[name](o))


def model_pairs(models: Sequence[str]) -> list[tuple[str, str, str]]:
    """Every pair of models, in the order given: (model, first, second)."""
    return [(MODEL, a, b) for i, a in enumerate(models) for b in models[i + 1 :]]


def observed_labels(outcomes: Sequence[Outcome], spec: Comparisons) -> dict[str, list[str]]:
    """Each field's labels in the run, sorted (models in order of first appearance)."""
    found: dict[str, dict[str, None]] = {MODEL: {}}
    for o in outcomes:
        found[MODEL][o.model] = None
        for name in spec.fields:
            found.setdefault(name, {})[spec.label(o, name)] = None
    return {k: list(v) if k == MODEL else sorted(v) for k, v in found.items()}


def resolve(
    requested: Sequence[tuple[str, str]], labels: Mapping[str, list[str]]
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """`--compare A,B` pairs as contrasts of the field holding both labels; notes for the rest."""
    contrasts, notes = [], []
    for a, b in requested:
        hits = [name for name, values in labels.items() if a in values and b in values]
        if hits:
            contrasts.append((hits[0], a, b))
        else:
            notes.append(f"--compare {a},{b}: no field of this run has both labels")
    return contrasts, notes


def pairs_of(
    outcomes: Sequence[Outcome], spec: Comparisons, name: str, a: str, b: str
) -> dict[str, tuple[list[Pair], int, int]]:
    """model (or "" for a model contrast) -> (pairs, cases only on side a, only on side b)."""
    sides: dict[str, dict[str, dict[Hashable, Outcome]]] = defaultdict(lambda: {a: {}, b: {}})
    for o in outcomes:
        if not spec.include(o):
            continue
        side = spec.label(o, name)
        if side not in (a, b):
            continue
        within = "" if name == MODEL else o.model
        sides[within][side][spec.key(o, name)] = o
    out = {}
    for within, by_side in sorted(sides.items()):
        left, right = by_side[a], by_side[b]
        pairs = []
        for key in sorted(set(left) & set(right), key=repr):
            oa, ob = left[key], right[key]
            if "error" in (oa.status, ob.status):
                continue
            pairs.append(
                Pair(oa.cluster, spec.counts(oa), spec.counts(ob), spec.scores(oa), spec.scores(ob))
            )
        out[within] = (pairs, len(set(left) - set(right)), len(set(right) - set(left)))
    return out


def comparison_table(
    evaluation: str,
    outcomes: Sequence[Outcome],
    spec: Comparisons,
    requested: Sequence[tuple[str, str]] = (),
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[pd.DataFrame, list[str]]:
    """comparisons.csv of one evaluation, and notes on what could not be compared."""
    labels = observed_labels(outcomes, spec)
    if requested:
        contrasts, notes = resolve(requested, labels)
    else:
        contrasts, notes = spec.defaults(labels) + model_pairs(labels[MODEL]), []
    frames = []
    for name, a, b in contrasts:
        for within, (pairs, only_a, only_b) in pairs_of(outcomes, spec, name, a, b).items():
            if not pairs:
                notes.append(f"{name} {b} vs {a}{f' ({within})' if within else ''}: no pairs")
                continue
            frame = compare(
                pairs,
                spec.reduce,
                spec.metrics,
                a=a,
                b=b,
                tests=spec.tests,
                n_resamples=n_resamples,
                seed=seed,
                labels={"evaluation": evaluation, "field": name, "model": within},
            )
            frame["unmatched_a"], frame["unmatched_b"] = only_a, only_b
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=list(TABLE_COLUMNS)), notes
    table = holm_by_family(pd.concat(frames, ignore_index=True), families=["evaluation"])
    return table[list(TABLE_COLUMNS)], notes


def p_text(p: float) -> str:
    """A p-value for people: 4 decimals, `<0.0001` below, `—` when undefined."""
    if p is None or p != p:
        return "—"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def shown_comparisons(table: pd.DataFrame) -> pd.DataFrame:
    """comparisons.csv as people read it (report.md, the HTML summary): values and the difference
    with their intervals, p-values as `p_text`."""
    from support.reporting.tables import with_intervals

    columns = ["field", "model", "a", "b", "metric", "n_pairs", "a_value", "b_value"]
    shown = with_intervals(
        table[[*columns, "diff", "diff_lo", "diff_hi"]], ["a_value", "b_value", "diff"]
    )
    shown["p"] = table["p_value"].map(p_text)
    shown["p_holm"] = table["p_holm"].map(p_text)
    shown["test"] = table["test"]
    has_interval = bool(table[["diff_lo", "diff_hi"]].notna().all(axis=1).any())
    return shown.rename(
        columns={"n_pairs": "pairs", "diff": "diff [95% CI]" if has_interval else "diff"}
    )


def report_section(table: pd.DataFrame, notes: Sequence[str]) -> str:
    """The markdown section of report.md: one line per comparison and metric."""
    from support.reporting.tables import markdown_table

    lines = [
        "\n## Paired comparisons (b vs a)\n",
        "Differences b - a with 95% paired cluster-bootstrap intervals (both sides resample the "
        "same clusters); p from the named test, `p_holm` Holm-adjusted over this table.\n",
    ]
    if len(table):
        lines.append(markdown_table(shown_comparisons(table)))
    else:
        lines.append("No comparison: the run has one model and no contrasting conditions.")
    lines += [f"\n- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def power_table(table: pd.DataFrame, delta: float, target: float) -> pd.DataFrame:
    """`--power`: per comparison row, the half-width of its difference's interval now, the
    clusters (and, at the run's cases per cluster, the cases) needed to detect a difference of
    `delta` at 80% power (two-sided alpha 0.05), and those needed for a half-width of `target`;
    normal approximation from the paired bootstrap's standard error (support.statistics.paired)."""
    from support.statistics.paired import clusters_for_half_width, clusters_needed, half_width

    rows = []
    for _, r in table.iterrows():
        se, n = float(r["diff_se"]), int(r["n_clusters"])
        if not (se == se and n > 0):
            continue
        per_cluster = r["n_pairs"] / n
        need = clusters_needed(se, n, delta)
        need_hw = clusters_for_half_width(se, n, target)
        rows.append(
            {
                "comparison": f"{r['field']} {r['b']} vs {r['a']}"
                + (f" ({r['model']})" if r["model"] else ""),
                "metric": r["metric"],
                "clusters": n,
                "pairs": int(r["n_pairs"]),
                "half_width": half_width(se),
                f"clusters_for_delta_{delta:g}": need,
                f"pairs_for_delta_{delta:g}": math.ceil(need * per_cluster)
                if need == need
                else need,
                f"clusters_for_half_width_{target:g}": need_hw,
            }
        )
    return pd.DataFrame(rows)

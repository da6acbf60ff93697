"""Score provenance: which rule of an evaluation's parser read each answer, and how often.

An evaluation declares its parser's rules (`EvaluationSpec.read_rules`, a `ReadRule` each: a
short stable code, its kind and what it means) and records on each outcome the code of the rule
that read its answer (`Verdict.read_by` -> `Outcome.read_by`, a raw_results.jsonl field). The
kinds:

- "primary":  the answer was in the form the prompt asks for;
- "fallback": read by a more lenient rule (JSON inside prose, a synonym, a unit converted, the
  nearest option by embedding): the score depends on that rule's judgement;
- "unread":   the parser read nothing usable (the outcome is unparsable, or the profile's rule
  for no answer: the original's "absent").

Under `--compat source` the codes are the original script's branches, prefixed `source-`, so a
difference between the profiles is explained case by case. The core counts the codes per model
(`provenance_table`, provenance.csv beside summary.csv: the shares of each model's read answers
sum to 1) and flags a model whose answers were mostly read by a fallback (`fallback_flags`:
report.md and the terminal). Outcomes without a code (a failed request; rows written before
provenance existed) are not answers and are not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pandas as pd

    from support.types import Outcome

ReadKind = Literal["primary", "fallback", "unread"]
READ_KINDS: tuple[ReadKind, ...] = ("primary", "fallback", "unread")
UNDECLARED = "undeclared"  # the kind shown for a code the evaluation does not declare
FALLBACK_FLAG_SHARE = 0.5  # a model is flagged when more than this share was read by fallbacks
COLUMNS = ("model", "read_by", "kind", "answers", "share", "meaning")


@dataclass(frozen=True)
class ReadRule:
    """One rule of a parser: `code` (short, stable: what raw_results.jsonl records), `kind`
    (READ_KINDS) and `meaning` (a line for the reader of provenance.csv)."""

    code: str
    kind: ReadKind
    meaning: str

    def __post_init__(self) -> None:
        if self.kind not in READ_KINDS:
            raise ValueError(
                f"ReadRule {self.code!r}: kind {self.kind!r} is not one of {READ_KINDS}"
            )
        if not self.code or not self.code.replace("-", "").replace("@", "").isalnum():
            raise ValueError(f"ReadRule {self.code!r}: a code is letters, digits, '-' and '@'")


def rules_by_code(rules: Iterable[ReadRule]) -> dict[str, ReadRule]:
    """`rules` keyed by code; ValueError when a code repeats."""
    found: dict[str, ReadRule] = {}
    for rule in rules:
        if rule.code in found:
            raise ValueError(f"read rule {rule.code!r} declared twice")
        found[rule.code] = rule
    return found


def provenance_table(
    outcomes: Iterable[Outcome], rules: Iterable[ReadRule], models: Sequence[str] = ()
) -> pd.DataFrame:
    """One row per (model, code): how many of the model's answers the rule read, and their share
    of the model's read answers (each model's shares sum to 1). Models in the run's --model
    order (`models`; support.reporting.tables.model_order); codes in declaration order, undeclared
    ones last."""
    import pandas as pd

    from support.reporting.tables import model_order

    declared = rules_by_code(rules)
    counts: dict[str, Counter[str]] = {}
    for o in outcomes:
        if o.read_by:
            counts.setdefault(o.model, Counter())[o.read_by] += 1
    order = model_order(counts, models)
    rank = {code: i for i, code in enumerate(declared)}
    rows = []
    for model in order:
        found = counts[model]
        total = sum(found.values())
        for code in sorted(found, key=lambda c: (rank.get(c, len(rank)), c)):
            rule = declared.get(code)
            rows.append(
                {
                    "model": model,
                    "read_by": code,
                    "kind": rule.kind if rule else UNDECLARED,
                    "answers": found[code],
                    "share": found[code] / total,
                    "meaning": rule.meaning if rule else "",
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def kind_shares(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """model -> kind -> share of its read answers (kinds with none left out)."""
    shares: dict[str, dict[str, float]] = {}
    for row in table.itertuples(index=False):
        kinds = shares.setdefault(str(row.model), {})
        kinds[str(row.kind)] = kinds.get(str(row.kind), 0.0) + float(row.share)
    return shares


def fallback_shares(table: pd.DataFrame) -> dict[str, float]:
    """model -> the share of its read answers a fallback rule read (an undeclared code counts as
    one): what the flag and the leaderboard of runs read."""
    return {
        model: kinds.get("fallback", 0.0) + kinds.get(UNDECLARED, 0.0)
        for model, kinds in kind_shares(table).items()
    }


def fallback_flags(table: pd.DataFrame, threshold: float = FALLBACK_FLAG_SHARE) -> list[str]:
    """A line per model more than `threshold` of whose read answers a fallback rule read,
    naming the rules: what report.md and the terminal say."""
    lines = []
    for model, share in fallback_shares(table).items():
        if share <= threshold:
            continue
        mine = table[(table["model"] == model) & table["kind"].isin(["fallback", UNDECLARED])]
        rules = ", ".join(
            f"{row.read_by} {row.share:.0%}"
            for row in mine.sort_values("share", ascending=False, kind="stable").itertuples()
        )
        lines.append(
            f"{model}: {share:.0%} of its answers were read by a fallback rule ({rules}), not "
            "in the form the prompt asks for; the scores depend on those rules (provenance.csv)"
        )
    return lines


def report_section(table: pd.DataFrame, flags: Sequence[str]) -> str:
    """report.md's provenance section: the flags, then each model's shares by rule."""
    from support.reporting.tables import markdown_table

    if table.empty:
        return ""
    lines = ["## How the answers were read\n"]
    lines += [f"- **{flag}**" for flag in flags]
    if flags:
        lines.append("")
    shown = table.assign(share=table["share"].map(lambda s: f"{s:.1%}"))
    lines += [markdown_table(shown.drop(columns=["meaning"])), ""]
    return "\n".join(lines) + "\n"

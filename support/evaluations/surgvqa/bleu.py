"""SurgVU category 2 scoring: the max over five references of nltk's sentence BLEU.

As the challenge's evaluator (write-up 003; the public 2026 evaluation code keeps the same
computation, isi-challenges/surgvu26-category-2-eval-public, evaluation/evaluate.py): text is
normalised by deleting ASCII punctuation (`string.punctuation`), lower-casing and splitting on
white space; each reference is scored alone with `sentence_bleu([ref], cand, weights=(0.25,) * 4,
smoothing_function=SmoothingFunction().method1)`; a question scores the maximum of the five; the
benchmark is the mean over questions (metrics.json: support.evaluations.surgvqa.leaderboard).

Consequences kept on purpose (they are the official scorer's): "-" and "/" are deleted, not spaced
("tip-up" -> "tipup"); Unicode punctuation is not stripped; a one-word exact answer scores 0.1778
(only references of 4 or more tokens can reach 1.0). BLEU itself is nltk's.

Time. nltk counts the candidate's n-grams again for every reference, in Python, so a case's
time grows with the candidate's length times its references (measured in benchmarks/README.md,
"Measurements behind the design"). Only the first MAX_CANDIDATE_TOKENS tokens of a candidate
are scored: far above any real answer (the prompt allows 128 model tokens, the references are
one sentence), so real scores are unchanged; a cut answer is marked in its outcome
(`candidate_cut`). The official scorer has no such cut (evaluation/evaluate.py:251 in
`compute_bleu`: `candidate.split()` whole), so a cut answer's score differs from its score
there; both are near 0 (at most a reference's n-grams among 10,000).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

MAX_CANDIDATE_TOKENS = 10_000  # tokens of an answer scored; the rest are cut (see above)
WEIGHTS = (0.25, 0.25, 0.25, 0.25)  # uniform 1- to 4-gram weights, as the write-up
_SMOOTHING = SmoothingFunction().method1
_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)
YES_NO = ("yes", "no")
# first words of a question answered by yes or no ("Was a large needle driver used ...?")
_AUXILIARIES = frozenset(("is", "are", "was", "were", "do", "does", "did", "has", "have", "had",
                         "can", "could", "will", "would", "should", "shall", "may", "might",
                         "must"))  # fmt: skip


def normalize(text: object) -> str:
    """The official scorer's normalised text (evaluate.py's `normalize`): ASCII punctuation
    deleted, lower case, stripped ("" for an answer that is not text)."""
    if not isinstance(text, str):
        return ""
    return text.translate(_DELETE_PUNCTUATION).lower().strip()


def tokens(text: object) -> list[str]:
    """The scorer's tokens: the normalised text split on white space (any non-text answer gives
    no tokens)."""
    return normalize(text).split()


def scored_text(candidate: object) -> str:
    """The normalised candidate as the text-overlap metrics see it: whole, or, past
    MAX_CANDIDATE_TOKENS tokens, its first tokens joined by single spaces (BLEU's cut, above)."""
    text = normalize(candidate)
    words = text.split()
    return " ".join(words[:MAX_CANDIDATE_TOKENS]) if len(words) > MAX_CANDIDATE_TOKENS else text


def reference_scores(references: Sequence[str], candidate: str) -> list[float]:
    """sentence BLEU of `candidate` (its first MAX_CANDIDATE_TOKENS tokens) against each reference
    alone, in reference order (0.0 for an empty candidate or reference: nltk returns the int 0
    when nothing matches)."""
    cand = tokens(candidate)[:MAX_CANDIDATE_TOKENS]
    out = []
    for ref in references:
        ref_tokens = tokens(ref)
        if not cand or not ref_tokens:
            out.append(0.0)
            continue
        score = sentence_bleu([ref_tokens], cand, weights=WEIGHTS, smoothing_function=_SMOOTHING)
        out.append(float(score))
    return out


def candidate_cut(candidate: object) -> int:
    """Tokens of `candidate` past MAX_CANDIDATE_TOKENS, which BLEU does not see (0 normally)."""
    return max(len(tokens(candidate)) - MAX_CANDIDATE_TOKENS, 0)


def max_bleu(references: Sequence[str], candidate: str) -> tuple[float, int | None]:
    """The question's score (the best single-reference BLEU) and the index of that reference
    (the first of equals; None without references)."""
    return best_reference(reference_scores(references, candidate))


def best_reference(scores: Sequence[float]) -> tuple[float, int | None]:
    """The best of per-reference scores and its index (the first of equals; None when empty)."""
    if not scores:
        return 0.0, None
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return scores[best], best


def is_yes_no_question(question: str) -> bool:
    """A question opening with an auxiliary verb ("Was ...", "Is ...", "Did ...") is answered by
    yes or no; the rest are open."""
    words = tokens(question)
    return bool(words) and words[0] in _AUXILIARIES


def yes_no(text: object) -> str | None:
    """The answer's first token when it is "yes" or "no", else None."""
    words = tokens(text)
    return words[0] if words and words[0] in YES_NO else None


def yes_no_truth(references: Sequence[str]) -> str | None:
    """The yes/no answer the references give: the first word of the first reference that opens
    with yes or no (None when none does, e.g. all are full sentences)."""
    for ref in references:
        if (word := yes_no(ref)) is not None:
            return word
    return None

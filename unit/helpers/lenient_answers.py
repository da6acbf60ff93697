"""A scripted model that knows every answer and never writes it as the prompt asks (issue 42).

`reply` takes the reference answer a request carries (`request.target`) and writes it the way a
chatty model does: a JSON answer inside prose, a label by its synonym, a distance in centimetres,
an option letter in a sentence. Every parser's fallback rule reads it back to the same value, so
this model scores as the oracle does while its answers are read by fallbacks only
(unit/contract/test_provenance.py).
"""

from __future__ import annotations

from support.types import Request

SYNONYMS = {"real": "Authentic.", "ai-generated": "Fake."}  # pgt's labels by another word


def reply(request: Request) -> str:
    """The reference answer in a form the prompt did not ask for."""
    target = request.target if isinstance(request.target, str) else ""
    text = target.strip()
    if text.startswith(("{", "[")):  # pointing's object, surgvqa's boxes
        return f"Sure! Here is my answer: {text} I hope this helps."
    if text in SYNONYMS:  # pgt's stage 2
        return SYNONYMS[text]
    if len(text) == 1 and text.isupper():  # dynamic's option letter
        return f"The answer is {text}."
    try:
        metres = float(text)  # nyu_distance's metres
    except ValueError:
        return target  # pgt's reasoning, surgvqa's VQA answers: as they are
    return f"About {metres * 100:.4f} cm."

"""List prices of the registered API models, for the cost column of reports.

Prices change: a cost here is an estimate at the list price below, not a bill (no cache
discounts, no long-context tiers). `batch_cost_usd` is the same usage at the providers' batch
price (BATCH_DISCOUNT).
"""

from __future__ import annotations

from support.types import Usage

# model id -> (USD per 1M input tokens, USD per 1M output tokens); standard-tier list prices
# from the vendors' pricing pages, taken 2025-06-01
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "claude-3-5-sonnet-20241022": (3.00, 15.00),
    "claude-sonnet-4-20250514": (3.00, 15.00),
    "gemini-2.0-flash": (0.10, 0.40),  # text / image / video input
}

TOKENS_PER_PRICE_UNIT = 1_000_000

# provider -> fraction of the list price a request costs through the provider's batch API: half,
# for input and output tokens alike, at all three (taken 2025-06-01):
# https://platform.openai.com/docs/guides/batch,
# https://docs.anthropic.com/en/docs/build-with-claude/batch-processing,
# https://ai.google.dev/gemini-api/docs/batch-mode
BATCH_DISCOUNT: dict[str, float] = {"openai": 0.5, "anthropic": 0.5, "google": 0.5}


def cost_usd(model_id: str, usage: Usage) -> float | None:
    """USD for `usage` at `model_id`'s list price; None for a model without a price.

    `model_id` is the model's id (`ModelSpec.model_id`: `gpt-4o` for `--model openai:gpt-4o`).
    """
    price = PRICES.get(model_id)
    if price is None:
        return None
    per_input, per_output = price
    return (
        usage.input_tokens * per_input + usage.output_tokens * per_output
    ) / TOKENS_PER_PRICE_UNIT


def batch_cost_usd(provider: str, model_id: str, usage: Usage) -> float | None:
    """USD for `usage` at `model_id`'s batch price (its provider's BATCH_DISCOUNT of the list
    price); None for a model without a price or a provider without a batch API."""
    normal = cost_usd(model_id, usage)
    discount = BATCH_DISCOUNT.get(provider)
    if normal is None or discount is None:
        return None
    return normal * discount

"""What a summary run would cost, before any request: calls, estimated tokens and the price.

Tokens are estimated by the rule the rate limiter counts by (a CJK character is 1, other
characters 1 per 4; `text.tokens.estimate_tokens`, a regex, since the whole library is counted);
a provider's tokenizer counts somewhat differently, so the figures are a planning aid, not a
quote. The price comes from genai-prices' table when it knows the model (it is installed with the
`llm` extra); otherwise `cost_usd` is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# pydantic-ai provider names -> genai-prices provider ids (others, e.g. ollama: no price).
_PRICE_PROVIDERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "google-gla": "google",
    "google-vertex": "google",
    "groq": "groq",
    "mistral": "mistral",
    "deepseek": "deepseek",
}


@dataclass(frozen=True)
class Estimate:
    """Requests a run would make and their estimated tokens (only what the cache lacks)."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None

    def to_json(self) -> dict[str, Any]:
        """The published form of `index --estimate --json` (exactly these keys)."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }


def price_usd(spec: str, input_tokens: int, output_tokens: int) -> float | None:
    """The list price of these tokens for `provider:model`, or None when the table lacks it."""
    provider, _, name = spec.strip().partition(":")
    provider_id = _PRICE_PROVIDERS.get(provider)
    if provider_id is None or not name:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    try:
        result = calc_price(
            Usage(input_tokens=input_tokens, output_tokens=output_tokens),
            name,
            provider_id=provider_id,
        )
    except (LookupError, ValueError):
        return None
    return round(float(result.total_price), 6)


def estimate(spec: str, requests: list[tuple[int, int]]) -> Estimate:
    """`requests` holds each planned request's (input, output) token estimate."""
    tokens_in = sum(i for i, _ in requests)
    tokens_out = sum(o for _, o in requests)
    return Estimate(len(requests), tokens_in, tokens_out, price_usd(spec, tokens_in, tokens_out))

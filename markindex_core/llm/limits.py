"""Client-side rate limits and retries for model requests (no pydantic-ai import here).

`RateLimiter` keeps at most `rpm` requests and at most `tpm` estimated input tokens in any sliding
60 s window. Waiting calls go first in, first out; a single request estimated above `tpm` still
passes, alone (it waits for an empty window, and the next call waits until it has left it). One
limiter is shared by every call of a run: concurrent documents or questions and every retry.

How it hooks into pydantic-ai: `markindex_core.llm.models.LimitedModel` wraps the provider's model
(a pydantic-ai `WrapperModel`). Its `request()` estimates the request's input tokens and sends it
through `with_retries`, which awaits `RateLimiter.acquire` before every attempt, the first and each
retry. The provider SDK's own retries are switched off (`max_retries=0` in the model settings), so
no request leaves without passing the limiter. pydantic-ai's `UsageLimits` and concurrency limits
count per run, not per minute, so they bound a run (`retrieve` uses `UsageLimits`) but cannot
replace this.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from markindex_core.config import (
    LLM_CHARS_PER_TOKEN,
    LLM_RETRY_ATTEMPTS,
    LLM_RETRY_BACKOFF_S,
    LLM_RETRY_MAX_WAIT_S,
    LLM_WINDOW_S,
)
from markindex_core.errors import InvalidArgument

T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]

_MIN_WAIT_S = 0.001  # a computed wait is never shorter: float rounding must not spin


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (
        0x3400 <= o <= 0x4DBF  # CJK extension A
        or 0x4E00 <= o <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= o <= 0xFAFF  # compatibility ideographs
        or 0x3040 <= o <= 0x30FF  # kana
        or 0xAC00 <= o <= 0xD7AF  # hangul syllables
        or 0x3000 <= o <= 0x303F  # CJK punctuation
        or 0xFF00 <= o <= 0xFFEF  # full-width forms
        or 0x20000 <= o <= 0x2FA1F  # extensions B-F, compatibility supplement
    )


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text`: a CJK character counts 1, other characters 1 per 4 (rounded up)."""
    cjk = sum(1 for ch in text if _is_cjk(ch))
    other = len(text) - cjk
    return cjk + -(-other // LLM_CHARS_PER_TOKEN)


class RateLimiter:
    """At most `rpm` requests and `tpm` estimated input tokens in any sliding window; FIFO.

    `None` leaves a limit off. `clock` and `sleep` are injectable so the property can be checked
    on a fake clock. `requests`, `tokens` and `waited_s` count what went through, for reports.
    """

    def __init__(
        self,
        rpm: int | None,
        tpm: int | None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        window: float = LLM_WINDOW_S,
    ) -> None:
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and value < 1:
                raise InvalidArgument(f"--{name} must be at least 1", f"got {value}")
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self._clock = clock
        self._sleep = sleep
        self._events: deque[tuple[float, int]] = deque()  # (granted at, estimated tokens)
        self._lock: asyncio.Lock | None = None
        self.requests = 0
        self.tokens = 0
        self.waited_s = 0.0

    @property
    def limited(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    async def acquire(self, estimated_tokens: int) -> None:
        """Wait until one more request of `estimated_tokens` fits in the window, then count it."""
        tokens = max(0, int(estimated_tokens))
        if not self.limited:
            self._count(tokens)
            return
        if self._lock is None:  # created on first use, inside the running loop
            self._lock = asyncio.Lock()
        async with self._lock:  # asyncio.Lock is fair: waiters proceed in arrival order
            while (wait := self._wait_for(tokens)) > 0:
                self.waited_s += wait
                await self._sleep(wait)
            self._events.append((self._clock(), tokens))
            self._count(tokens)

    def _count(self, tokens: int) -> None:
        self.requests += 1
        self.tokens += tokens

    def _wait_for(self, tokens: int) -> float:
        """Seconds until a request of `tokens` fits (0 when it fits now)."""
        now = self._clock()
        events = self._events
        while events and events[0][0] <= now - self.window:
            events.popleft()
        waits = [0.0]
        if self.rpm is not None and len(events) >= self.rpm:
            waits.append(events[len(events) - self.rpm][0] + self.window - now)
        if self.tpm is not None:
            waits.append(self._token_wait(tokens, now))
        wait = max(waits)
        return max(wait, _MIN_WAIT_S) if wait > 0 else 0.0

    def _token_wait(self, tokens: int, now: float) -> float:
        """Seconds until enough token-bearing events leave the window for `tokens` to fit."""
        assert self.tpm is not None
        used = sum(t for _, t in self._events)
        # A request above tpm passes alone: it needs a window with no tokens in it at all.
        budget = 0 if tokens > self.tpm else self.tpm - tokens
        if used <= budget:
            return 0.0
        for at, t in self._events:  # oldest first: drop events until the rest fits
            used -= t
            if used <= budget:
                return at + self.window - now
        return 0.0  # unreachable: an empty window always fits


@dataclass(frozen=True)
class Retry:
    """A failed attempt that may be retried; `after` is the server's retry-after in seconds."""

    after: float | None = None


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


async def with_retries(
    send: Callable[[], Awaitable[T]],
    *,
    limiter: RateLimiter | None,
    estimated_tokens: int,
    classify: Callable[[Exception], Retry | None],
    attempts: int = LLM_RETRY_ATTEMPTS,
    sleep: Sleep = asyncio.sleep,
    on_retry: Callable[[Exception, float], None] | None = None,
) -> T:
    """Send one request, retrying what `classify` calls retryable, each attempt through `limiter`.

    A retry waits the server's retry-after (up to 60 s; a longer one fails at once) or, without
    one, a doubling back-off. After `attempts` retries the last error is raised.
    """
    backoff, backoff_max = LLM_RETRY_BACKOFF_S
    attempt = 0
    while True:
        if limiter is not None:
            await limiter.acquire(estimated_tokens)
        try:
            return await send()
        except Exception as exc:
            advice = classify(exc)
            if advice is None or attempt >= attempts:
                raise
            if advice.after is not None and advice.after > LLM_RETRY_MAX_WAIT_S:
                raise
            if advice.after is not None:
                wait = advice.after
            else:
                wait, backoff = backoff, min(backoff * 2, backoff_max)
            attempt += 1
            if on_retry is not None:
                on_retry(exc, wait)
            await sleep(wait)

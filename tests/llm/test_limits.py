"""The rate limiter on a virtual clock: per 60 s window at most rpm requests and tpm estimated
tokens (a lone request above tpm excepted), granted first in, first out; and the retry helper."""

from __future__ import annotations

import asyncio
import heapq
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markindex_core.llm.limits import (
    RateLimiter,
    Retry,
    estimate_tokens,
    parse_retry_after,
    with_retries,
)

WINDOW = 60.0


class VirtualTime:
    """A clock that only moves when every task is asleep: then it jumps to the earliest wake-up."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        await fut

    async def run(self, tasks: list[asyncio.Task[None]]) -> None:
        while not all(t.done() for t in tasks):
            for _ in range(50):  # let every runnable task reach its next sleep or finish
                await asyncio.sleep(0)
            if self._sleepers:
                at, _, fut = heapq.heappop(self._sleepers)
                self.now = max(self.now, at)
                fut.set_result(None)
            elif not all(t.done() for t in tasks):
                raise AssertionError("tasks blocked without a sleeper: the limiter deadlocked")
        for t in tasks:
            t.result()


def _simulate(
    arrivals: list[tuple[float, int]], rpm: int | None, tpm: int | None
) -> tuple[list[int], list[int], list[tuple[float, int]]]:
    """Run one task per arrival (offset seconds, tokens); return call order, grant order, grants."""
    vt = VirtualTime()
    called: list[int] = []
    granted: list[int] = []
    grants: list[tuple[float, int]] = []

    async def one(i: int, at: float, tokens: int, limiter: RateLimiter) -> None:
        await vt.sleep(at)
        called.append(i)
        await limiter.acquire(tokens)
        granted.append(i)
        grants.append((vt.now, tokens))

    async def main() -> None:
        limiter = RateLimiter(rpm, tpm, clock=vt.clock, sleep=vt.sleep)
        tasks = [
            asyncio.create_task(one(i, at, tokens, limiter))
            for i, (at, tokens) in enumerate(arrivals)
        ]
        await vt.run(tasks)

    asyncio.run(main())
    return called, granted, grants


def _check_windows(grants: list[tuple[float, int]], rpm: int | None, tpm: int | None) -> None:
    """Every half-open window [t, t+60) starting at a grant holds at most rpm grants and tpm
    tokens, except a window whose only token-bearing grant is one above tpm."""
    times = sorted(grants)
    for start, _ in times:
        inside = [(t, k) for t, k in times if start <= t < start + WINDOW]
        if rpm is not None:
            assert len(inside) <= rpm, (start, inside)
        if tpm is not None:
            total = sum(k for _, k in inside)
            bearing = [k for _, k in inside if k > 0]
            assert total <= tpm or (len(bearing) == 1 and bearing[0] > tpm), (start, inside)


arrival = st.tuples(
    st.floats(min_value=0, max_value=200, allow_nan=False).map(lambda x: round(x, 3)),
    st.integers(min_value=0, max_value=3000),
)


@settings(max_examples=60, deadline=None)
@given(
    arrivals=st.lists(arrival, min_size=1, max_size=25),
    rpm=st.one_of(st.none(), st.integers(min_value=1, max_value=6)),
    tpm=st.one_of(st.none(), st.integers(min_value=1, max_value=5000)),
)
def test_every_window_holds_at_most_rpm_requests_and_tpm_tokens_fifo(
    arrivals: list[tuple[float, int]], rpm: int | None, tpm: int | None
) -> None:
    called, granted, grants = _simulate(arrivals, rpm, tpm)
    assert granted == called  # first in, first out
    assert len(grants) == len(arrivals)  # nobody starves
    _check_windows(grants, rpm, tpm)


def test_a_request_above_tpm_passes_alone_and_the_next_waits_for_it_to_leave() -> None:
    _, _, grants = _simulate([(0, 100), (0, 5000), (0, 100)], rpm=None, tpm=1000)
    assert [t for t, _ in grants] == [0.0, 60.0, 120.0]


def test_burst_at_rpm_two_is_spread_over_windows() -> None:
    called, granted, grants = _simulate([(0, 1)] * 5, rpm=2, tpm=None)
    assert granted == called
    assert [t for t, _ in grants] == [0.0, 0.0, 60.0, 60.0, 120.0]


def test_no_limits_never_waits() -> None:
    _, _, grants = _simulate([(0, 10**6)] * 50, rpm=None, tpm=None)
    assert {t for t, _ in grants} == {0.0}


def test_limits_must_be_positive() -> None:
    from markindex_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        RateLimiter(0, None)


def test_estimate_tokens_counts_cjk_one_each_and_other_text_by_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("职工员工") == 4
    assert estimate_tokens("职工 ab") == 3  # 2 CJK + ceil(3 / 4)


def test_parse_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    date = "Wed, 21 Oct 2015 07:28:10 GMT"
    assert parse_retry_after(date, now=lambda: 1445412480.0) == pytest.approx(10.0)


class Flaky(Exception):
    def __init__(self, after: float | None) -> None:
        super().__init__("flaky")
        self.after = after


def test_retries_wait_retry_after_and_pass_the_limiter_each_time() -> None:
    vt = VirtualTime()
    attempts: list[float] = []
    waits: list[float] = []

    async def send() -> str:
        attempts.append(vt.now)
        if len(attempts) < 3:
            raise Flaky(5.0 if len(attempts) == 1 else None)
        return "ok"

    async def main() -> tuple[str, RateLimiter]:
        limiter = RateLimiter(10, None, clock=vt.clock, sleep=vt.sleep)
        task = asyncio.create_task(
            with_retries(
                send,
                limiter=limiter,
                estimated_tokens=3,
                classify=lambda e: Retry(e.after) if isinstance(e, Flaky) else None,
                sleep=vt.sleep,
                on_retry=lambda _e, w: waits.append(w),
            )
        )
        holder: list[str] = []

        async def wrap() -> None:
            holder.append(await task)

        await vt.run([asyncio.create_task(wrap())])
        return holder[0], limiter

    result, limiter = asyncio.run(main())
    assert result == "ok"
    assert waits == [5.0, 1.0]  # the server's retry-after, then the first back-off step
    assert attempts == [0.0, 5.0, 6.0]
    assert limiter.requests == 3  # every attempt, retries too, went through the limiter


def test_retry_after_over_a_minute_or_a_non_retryable_error_fails_at_once() -> None:
    calls = 0

    async def send() -> None:
        nonlocal calls
        calls += 1
        raise Flaky(120.0)

    async def main() -> None:
        await with_retries(send, limiter=None, estimated_tokens=0, classify=lambda e: Retry(120.0))

    with pytest.raises(Flaky):
        asyncio.run(main())
    assert calls == 1

    async def main2() -> None:
        await with_retries(send, limiter=None, estimated_tokens=0, classify=lambda e: None)

    with pytest.raises(Flaky):
        asyncio.run(main2())
    assert calls == 2

"""A deadline for a parse that runs in the indexing process (small runs, see `Indexer._results`).

A worker that misses its deadline is killed; a parse in this process cannot be. A watchdog thread
raises `ParseTimedOut` in the parsing thread instead (CPython's `PyThreadState_SetAsyncExc`),
which lands at its next bytecode, so a parse stuck in a Python loop ends there and its document is
skipped, as a worker's would be. A parse stuck inside one native call (a regex, the segmenter)
ends only when that call returns: the watchdog logs it as an error when it does not, so a daemon
that stops updating says why. A daemon that stops ends a parse the same way (`interrupt`), with
`ParseInterrupted`: what the daemon raises is an Exception, which the parse would take for a
failure of the document.

The exception is raised only while that document is parsed: the parsing thread arms and disarms
under a lock, and withdraws a shot that has not landed yet, so it never lands in the code that
writes the index. A shot can land in a callback the interpreter runs between two bytecodes of the
parse (the garbage collector's, a weakref's), which swallows it ("Exception ignored") and lets the
parse go on: the watchdog raises it again every PARSE_RESHOOT_S until the parse ends, and such a
lost shot is logged at debug level instead of printed as a traceback.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from markindex_core.config import PARSE_RESHOOT_S, PARSE_STUCK_REPORT_S, POOL_WAIT_SLICE_S

T = TypeVar("T")
log = logging.getLogger("markindex.index")


class ParseTimedOut(BaseException):
    """Raised in a parse that ran past its deadline. A BaseException, as KeyboardInterrupt is:
    the `except Exception` that turns a parse failure into a skip reason must not swallow it
    and parse on."""


class ParseInterrupted(BaseException):
    """Raised in a parse that `interrupt` asked to end (a daemon stopping). A BaseException for
    the same reason: the stop itself is an Exception, which the parse's `except Exception` took
    for a failure of the document (recorded as skipped, its indexed version deleted). `run`
    raises what `interrupt` raises in its place."""


def timed_out(seconds: float) -> str:
    """The skip reason of a document whose parse missed its deadline (in a worker or here)."""
    return f"timed out: not parsed within {seconds:g} s"


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> bool:
    """Schedule `exc` in the thread (None withdraws a scheduled one); whether this Python can."""
    set_async_exc = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)
    if set_async_exc is None:  # not CPython: parses here have no deadline
        return False
    set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)
    return True


# The exception types a watchdog raises in a parse: one of them met by sys.unraisablehook was
# swallowed by a callback (and is raised again), not an error of the callback.
_SHOT_TYPES: tuple[type[BaseException], ...] = (ParseTimedOut, ParseInterrupted)
_hook_lock = threading.Lock()
_hooked = False


def _quiet_lost_shots() -> None:
    """Route a swallowed shot to the log instead of stderr; anything else to the hook before."""
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        _hooked = True
        previous = sys.unraisablehook

        def hook(unraisable: sys.UnraisableHookArgs) -> None:
            if unraisable.exc_type in _SHOT_TYPES:
                log.debug(
                    "a parse deadline's exception was lost in %r; raised again", unraisable.object
                )
                return
            previous(unraisable)

        sys.unraisablehook = hook


class ParseDeadline:
    """Runs one parse at a time with `seconds` to finish; a watchdog thread, started on the first
    run and ended by `close`, enforces it.

    `interrupt`, when given, is called by the watchdog every POOL_WAIT_SLICE_S while a parse
    runs, as a run calls it between documents; when it raises (a daemon stopping), the parse is
    ended with ParseInterrupted, so a stop does not wait for it, and `run` raises what
    `interrupt` raises (or, should it no longer, its type without arguments).
    """

    def __init__(self, seconds: float, interrupt: Callable[[], None] | None = None) -> None:
        self.seconds = seconds
        self.interrupt = interrupt
        self._lock = threading.Lock()  # plain lock: its `with` runs no Python code to interrupt
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        # The parse under way: its thread, what it parses, its deadline; what the watchdog shot
        # (None: not yet), when first and last, and when it last said the parse is stuck.
        self._target: int | None = None
        self._what = ""
        self._deadline = 0.0
        self._shot: type[BaseException] | None = None
        self._stop: type[BaseException] | None = None  # what `interrupt` raised, if it did
        self._shot_at = self._last_shot = self._reported_at = 0.0

    def run(self, what: str, parse: Callable[[], T]) -> T:
        """`parse()`, or ParseTimedOut (raised here, never later) when it runs past the deadline
        (or what `interrupt` raised)."""
        me = threading.get_ident()
        try:
            try:
                self._arm(me, what)
                return parse()
            finally:
                self._disarm(me)
        except BaseException as exc:
            self._disarm(me)  # when the shot landed inside the first `_disarm`
            if isinstance(exc, ParseInterrupted):
                raise self._stop_exception() from None
            raise

    def _stop_exception(self) -> BaseException:
        """What `interrupt` raises now, or an instance of the type it raised."""
        try:
            if self.interrupt is not None:
                self.interrupt()
        except BaseException as exc:
            return exc
        return (self._stop or ParseInterrupted)()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake.set()

    def __enter__(self) -> ParseDeadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _arm(self, me: int, what: str) -> None:
        with self._lock:
            self._target, self._what = me, what
            self._deadline = time.monotonic() + self.seconds
            self._shot = self._stop = None
            if self._thread is None:
                _quiet_lost_shots()
                self._thread = threading.Thread(
                    target=self._watch, name="markindex-parse-deadline", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _disarm(self, me: int) -> None:
        """Withdraw this thread's deadline. A shot landing in here (the watchdog raises again
        until disarmed) does not leave it armed: the disarm is tried again, then raised."""
        while True:
            try:
                with self._lock:
                    if self._target == me:
                        self._target = None
                        if self._shot is not None:
                            _raise_in(me, None)  # fired, not landed yet: it must not land later
                return
            except BaseException:
                if self._target != me:
                    raise

    def _watch(self) -> None:
        while True:
            self._wake.wait(self._sleep())
            self._wake.clear()
            with self._lock:
                if self._closed:
                    return
                if self._target is None:
                    continue
                now = time.monotonic()
                if self._shot is None:
                    stop = self._stop_requested()
                    if stop is None and now < self._deadline:
                        continue
                    shot = ParseInterrupted if stop else ParseTimedOut
                    if not _raise_in(self._target, shot):
                        self._target = None  # nothing to enforce it with
                        continue
                    self._stop = stop
                    self._shot, self._shot_at, self._last_shot = shot, now, now
                    self._reported_at = now
                    continue
                if now - self._last_shot >= PARSE_RESHOOT_S:  # lost in a callback, or not landed
                    _raise_in(self._target, self._shot)
                    self._last_shot = now
                if now - self._reported_at >= PARSE_STUCK_REPORT_S:
                    log.error(
                        "the parse of %s has not stopped %.0f s after its deadline (stuck in"
                        " native code?): this run waits for it",
                        self._what,
                        now - self._shot_at,
                    )
                    self._reported_at = now  # said again if it stays stuck

    def _stop_requested(self) -> type[BaseException] | None:
        """The type of what `interrupt` raises now, if anything."""
        if self.interrupt is None:
            return None
        try:
            self.interrupt()
        except BaseException as exc:
            return type(exc)
        return None

    def _sleep(self) -> float | None:
        with self._lock:
            if self._closed or self._target is None:
                return None
            if self._shot is not None:
                due = min(
                    self._last_shot + PARSE_RESHOOT_S, self._reported_at + PARSE_STUCK_REPORT_S
                )
            else:
                due = self._deadline
                if self.interrupt is not None:
                    due = min(due, time.monotonic() + POOL_WAIT_SLICE_S)
            return max(0.0, due - time.monotonic())

"""Driving the app with Textual's Pilot: shared by the tests and the screenshot script."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from markindex_core.library import Library
from markindex_tui.app import MarkindexApp

SIZE = (100, 30)  # the terminal the tests drive the app in

NEVER_DONE = frozenset({"watch"})  # the in-app watcher (--watch) runs until the app exits


async def settle(pilot: Pilot[None], rounds: int = 3) -> None:
    """Drain workers and repaint; a finished worker may have started another (tree → preview)."""
    for _ in range(rounds):
        busy = [w for w in pilot.app.workers if w.group not in NEVER_DONE]
        if busy:  # (an empty list would mean "all workers" to Textual)
            try:
                await pilot.app.workers.wait_for_complete(busy)
            except WorkerCancelled:
                pass  # replaced by a newer worker of an exclusive group: the next round waits for it
        await pilot.pause()


async def wait_until(pilot: Pilot[None], cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll the app (not the wall clock) until `cond` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


def fixed_clock(lib: Library) -> Callable[[], float]:
    """A clock frozen a few seconds after the last index run: 'indexed just now' on screen."""
    last = float(lib.store.get_meta("last_index_at") or 0)
    return lambda: last + 5


def app_for(lib: Library, **kwargs: Any) -> MarkindexApp:
    """The app as tests and screenshots run it: a frozen clock (once indexed), no cursor blink."""
    if lib.has_index():
        kwargs.setdefault("clock", fixed_clock(lib))
    kwargs.setdefault("cursor_blink", False)
    return MarkindexApp(lib, **kwargs)


def make_app(root: Path, db: Path | None = None, **kwargs: Any) -> MarkindexApp:
    return app_for(Library(root, db), **kwargs)

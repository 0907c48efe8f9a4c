"""Helpers for driving the terminal app with Textual's Pilot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from markindex_core.library import Library
from markindex_tui.app import MarkindexApp

SIZE = (100, 30)


async def settle(pilot: Pilot[None], rounds: int = 3) -> None:
    """Drain workers and repaint; a finished worker may have started another (tree → preview)."""
    for _ in range(rounds):
        # The in-app watcher (--watch) runs until the app exits: never wait for it.
        busy = [w for w in pilot.app.workers if w.group != "watch"]
        if busy:  # (an empty list would mean "all workers" to Textual)
            try:
                await pilot.app.workers.wait_for_complete(busy)
            except WorkerCancelled:
                pass  # replaced by a newer worker of an exclusive group: the next round waits for it
        await pilot.pause()


async def wait_until(pilot: Pilot[None], cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll the app (not the wall clock) until `cond` holds; fail after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


def fixed_clock(lib: Library) -> Callable[[], float]:
    """A clock frozen a few seconds after the last index run: 'indexed just now' on screen."""
    last = float(lib.store.get_meta("last_index_at") or 0)
    return lambda: last + 5


def make_app(root: Path, db: Path | None = None, **kwargs: object) -> MarkindexApp:
    lib = Library(root, db)
    if lib.has_index():
        kwargs.setdefault("clock", fixed_clock(lib))
    kwargs.setdefault("cursor_blink", False)
    return MarkindexApp(lib, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def sample_app(indexed_sample: Library) -> MarkindexApp:
    return make_app(indexed_sample.root)

"""Helpers for driving the terminal app with Textual's Pilot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from markindex_core.library import Library
from markindex_tui.app import MarkindexApp

SIZE = (100, 30)


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

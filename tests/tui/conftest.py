"""Fixtures for driving the terminal app (helpers live in markindex_tui.testing)."""

from __future__ import annotations

import pytest

from markindex_core.library import Library
from markindex_tui.app import MarkindexApp
from markindex_tui.testing import make_app


@pytest.fixture
def sample_app(indexed_sample: Library) -> MarkindexApp:
    return make_app(indexed_sample.root)

"""Sub-commands beyond index and tree. Each feature module registers its own parsers here,
so cli.py stays small and heavy imports (mcp, textual, watchdog) happen only when a command runs."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# Modules that define `register(sub, common, indexing_options)`.
REGISTRARS: tuple[str, ...] = (
    "markindex_core.cli_search",
    "markindex_core.cli_mcp",
    "markindex_core.cli_daemon",
    "markindex_core.cli_tui",
)


def register(sub: Any, common: Callable[..., None], indexing: Callable[..., None]) -> None:
    for name in REGISTRARS:
        importlib.import_module(name).register(sub, common, indexing)

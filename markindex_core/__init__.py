"""markindex core: parse, index, search and serve libraries of long Markdown documents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from markindex_core.errors import MarkindexError

if TYPE_CHECKING:
    from markindex_core.library import Library

__all__ = ["Library", "MarkindexError"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`Library` loads on first use: a parse worker imports only the parser, not the search,
    store and tools (a third of its start-up)."""
    if name == "Library":
        from markindex_core.library import Library

        return Library
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

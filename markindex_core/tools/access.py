"""What the tools need from a library: its index path, a read connection and search.

`markindex_core.library.Library` provides all three. The tools depend on this protocol, not on the
library layer above them, so `Library.call_tool` can import the tools without an import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from markindex_core.search.searcher import SearchResult
from markindex_core.store.db import Store


class IndexAccess(Protocol):
    @property
    def root(self) -> Path:
        """The library folder (resolved) whose index the tools may read."""
        ...

    @property
    def db_path(self) -> Path: ...

    @property
    def build_pending(self) -> bool:
        """A build was scheduled in this process and has not started writing yet."""
        ...

    def freshness_warning(self) -> str | None:
        """Why a live index in this process is not current (it retries, catches up), or None."""
        ...

    def command(self, name: str = "index") -> str:
        """`markindex NAME` with this library's folder and --db, for hints."""
        ...

    def report_damage(self, detail: str) -> None:
        """A read met a damaged index: a live index in this process rebuilds it."""
        ...

    @property
    def store(self) -> Store:
        """A read-only connection for the calling thread."""
        ...

    def search(
        self, query: str, *, folder: str | None = ..., doc_path: str | None = ..., limit: int = ...
    ) -> SearchResult: ...

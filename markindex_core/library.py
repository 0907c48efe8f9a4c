"""The public Python API: open a library, index it, read its trees, search it, call a tool."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markindex_core.config import DB_FILE_NAME, INDEX_DIR_NAME, SEARCH_DEFAULT_LIMIT
from markindex_core.errors import InvalidArgument, LibraryNotFound, ReadOnlyLibrary
from markindex_core.search.searcher import Searcher, SearchResult
from markindex_core.store.db import Store
from markindex_core.tools.contract import call_tool

if TYPE_CHECKING:  # the indexer (markdown-it, multiprocessing) loads only when indexing
    from markindex_core.index.indexer import IndexReport, Progress


def default_db_path(root: Path) -> Path:
    return root / INDEX_DIR_NAME / DB_FILE_NAME


class Library:
    """One folder of Markdown documents and its index file."""

    def __init__(self, root: str | Path, db: str | Path | None = None) -> None:
        root = Path(root).expanduser()
        if not root.is_dir():
            raise LibraryNotFound(
                f"library folder not found: {root}", "pass an existing folder of Markdown files"
            )
        self.root = root.resolve()
        self.db_path = Path(db).expanduser().resolve() if db else default_db_path(self.root)
        self._local = threading.local()

    # ----- writing ----------------------------------------------------------------------------
    def ensure_db_dir(self) -> None:
        """Create the index folder, or explain how to index a read-only library."""
        if self.db_path.is_dir():
            raise InvalidArgument(
                f"--db {self.db_path} is a folder", "pass a file path, e.g. --db /tmp/docs.db"
            )
        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            probe = self.db_path.parent / ".markindex-write-test"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            hint = "pass --db FILE to keep the index elsewhere"
            if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
                hint = "the library is read-only: " + hint
            raise ReadOnlyLibrary(
                f"cannot write the index to {self.db_path.parent} ({exc.strerror or exc})", hint
            ) from None

    def index(
        self,
        *,
        ignore: list[str] | None = None,
        setext: bool | None = None,
        progress: Progress | None = None,
        workers: int | None = None,
    ) -> IndexReport:
        """Bring the index in line with the folder (incremental). Fails fast if another writer runs."""
        from markindex_core.index.indexer import Indexer, open_for_writing

        self.ensure_db_dir()
        store, lock = open_for_writing(self.db_path)
        try:
            return Indexer(self.root, store, ignore=ignore, setext=setext, workers=workers).run(
                progress
            )
        finally:
            store.close()
            lock.release()

    # ----- reading ----------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """A read-only connection for the calling thread (APSW connections are per thread)."""
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = Store(self.db_path, readonly=True)
            self._local.store = store
        return store

    def has_index(self) -> bool:
        return self.db_path.exists()

    def document(self, path: str) -> dict[str, Any] | None:
        return self.store.document(path)

    def outline(self, path: str) -> list[dict[str, Any]]:
        doc = self.store.document(path)
        return self.store.nodes(doc["id"]) if doc else []

    def searcher(self) -> Searcher:
        """A searcher on this thread's read connection."""
        searcher: Searcher | None = getattr(self._local, "searcher", None)
        if searcher is None or searcher.store is not self.store:
            searcher = Searcher(self.store)
            self._local.searcher = searcher
        return searcher

    def search(
        self,
        query: str,
        *,
        folder: str | None = None,
        doc_path: str | None = None,
        limit: int = SEARCH_DEFAULT_LIMIT,
    ) -> SearchResult:
        """Keyword search (see `search.py`); scope by folder or document before ranking."""
        return self.searcher().search(query, folder=folder, doc_path=doc_path, limit=limit)

    def call_tool(self, name: str, args: dict[str, Any] | None = None) -> str:
        """Run one agent tool (see `tools.py`) and return its JSON envelope; never raises."""
        return call_tool(self, name, args)

    def close(self) -> None:
        searcher: Searcher | None = getattr(self._local, "searcher", None)
        if searcher is not None:
            searcher.close()
        store: Store | None = getattr(self._local, "store", None)
        if store is not None:
            store.close()
            self._local.store = None
            self._local.searcher = None

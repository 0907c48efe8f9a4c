"""The public Python API: open a library, index it, read its trees, search it, call a tool."""

from __future__ import annotations

import errno
import os
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from markindex_core.config import (
    DB_FILE_NAME,
    INDEX_DIR_NAME,
    MARKDOWN_SUFFIXES,
    RETRIEVE_MAX_STEPS,
    SEARCH_DEFAULT_LIMIT,
)
from markindex_core.errors import (
    IndexMissing,
    IndexReplaced,
    InvalidArgument,
    LibraryNotFound,
    MarkindexError,
    OtherLibrary,
    ReadOnlyLibrary,
)
from markindex_core.index.drift import cited_drift_warning
from markindex_core.store import runs
from markindex_core.store.db import (
    Store,
    check_replaceable,
    clean_relative,
    held_by_other_library,
)
from markindex_core.store.files import (
    damaged,
    file_id,
    has_moved,
    os_error,
    remove_db_files,
    write_error,
)

if TYPE_CHECKING:  # the indexer loads only when indexing, the searcher and tools only when
    # searching (~85 ms an index run does not spend)
    from markindex_core.index.indexer import AfterWrite, IndexReport, Progress
    from markindex_core.llm.agent import RetrieveResult
    from markindex_core.search.searcher import Searcher, SearchResult


def default_db_path(root: Path) -> Path:
    return root / INDEX_DIR_NAME / DB_FILE_NAME


def _require_utf8(what: str, path: Path) -> None:
    """Refuse a path whose name is not UTF-8 (a legacy name, kept by Python as surrogates): the
    index stores paths as text, and a daemon would fail later, at its first write."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise InvalidArgument(
            f"the {what} path holds bytes that are not valid UTF-8: {shown}",
            "rename it, or pass another path",
        ) from None


class _Reader:
    """One thread's read connection, its searcher, and the identity of the file it opened."""

    def __init__(self, db_path: Path) -> None:
        self.thread = threading.current_thread()
        self.opened = file_id(db_path)  # taken before opening: a swap in between only reopens
        self.store = Store(db_path, readonly=True)
        self.searcher: Searcher | None = None
        self.closed = False

    def close(self) -> None:
        """Close the connection; a reader still using it from another thread keeps it open (its
        owner sees `closed` and reopens, or the thread exits and releases it)."""
        self.closed = True
        if self.searcher is not None:
            self.searcher.close()
        try:
            self.store.close()
        except apsw.ThreadingViolationError:
            pass


class Library:
    """One folder of Markdown documents and its index file.

    Threads and connections (who owns what):

    - Writing: `index()` takes the writer lock, opens one writer connection on the calling thread
      and closes both before it returns. Parse workers are processes and never touch the index.
    - Reading: every thread that reads (the caller, each MCP tool thread, each terminal-app worker)
      owns exactly one read-only `Store`, opened on its first read, and one `Searcher` on it. The
      searcher owns one helper thread with one more read connection (node-level BM25 runs beside
      the passage query), so 8 MCP tool threads hold up to 16 read connections. A connection is
      only ever used by the thread that owns it.
    - Every read connection is listed in one registry under a lock. `close()` closes all of them,
      whichever thread opened them, and stops every searcher's helper thread (its connection
      closes as that thread ends); a thread whose connection was closed gets a new one on its
      next read. Connections of threads that have ended are closed when the next one registers.
    - Every `store` access costs one `os.stat` of the index path: when the file was replaced
      (a full rebuild swapped in, `rm -rf .markindex && markindex index`) or removed, the calling
      thread's connection is closed and reopened, or the call fails with IndexMissing. Threads
      notice on their own next read, so no thread ever closes a connection another is using.
    """

    def __init__(self, root: str | Path, db: str | Path | None = None) -> None:
        root = Path(root).expanduser()
        if not root.is_dir():
            if root.exists():  # a document given instead of its folder: name the folder
                raise LibraryNotFound(
                    f"{root} is a file, not a library folder",
                    f"pass the folder that holds it, e.g. {root.parent}",
                )
            raise LibraryNotFound(
                f"library folder not found: {root}", "pass an existing folder of Markdown files"
            )
        self.root = root.resolve()
        # The path as given, symlinks kept: a live index notices it leading elsewhere later.
        self.given_root = root.absolute()
        self.db_path = Path(db).expanduser().resolve() if db else default_db_path(self.root)
        for what, path in (("library folder", self.root), ("index file (--db)", self.db_path)):
            _require_utf8(what, path)
        if self.db_path.suffix.lower() in MARKDOWN_SUFFIXES:
            # Inside the library, every write of the index would look like an edited document.
            raise InvalidArgument(
                f"--db {self.db_path.name} names a Markdown file; the index is an SQLite file",
                f"pass another name, e.g. --db {self.db_path.with_suffix('.db')}",
            )
        self._local = threading.local()
        self._readers: list[_Reader] = []
        self._readers_lock = threading.Lock()
        self._build_pending = threading.Event()
        # Set by a live index (the daemon) in this process: why its index is not current now,
        # or None. Tool envelopes carry it, so an agent never reads a stale index unwarned.
        self.live_warning: Callable[[], str | None] | None = None
        # Set by a live index in this process: told when a read meets damage, so it rebuilds the
        # index (otherwise it would find out only at a write there, or its daily check).
        self.on_damage: Callable[[str], None] | None = None

    def command(self, name: str = "index") -> str:
        """`markindex NAME` for this library and this index, as a hint names it: the user's
        own folder and --db, never a placeholder to fill in."""
        command = f"markindex {name} {shlex.quote(str(self.root))}"
        if self.db_path != default_db_path(self.root):
            command += f" --db {shlex.quote(str(self.db_path))}"
        return command

    def build_hint(self) -> str:
        """The command that builds the missing index of this library (with its --db); where the
        index folder cannot be made, with --db FILE, since the plain command would fail."""
        command = self.command()
        if self.db_path != default_db_path(self.root):
            return f"run `{command}` to build it"
        folder = _nearest(self.db_path.parent)
        if not os.access(folder, os.W_OK):
            return (
                f"the folder {folder} is read-only: run `{command} --db FILE` to build the "
                "index in a writable place, and pass the same --db to every command"
            )
        return f"run `{command}` to build it"

    # ----- writing ----------------------------------------------------------------------------
    def ensure_db_dir(self) -> None:
        """Create the index folder, or say which folder is read-only and how to index anyway."""
        if self.db_path.is_dir():
            raise InvalidArgument(
                f"--db {self.db_path} is a folder", "pass a file path, e.g. --db /tmp/docs.db"
            )
        folder = self.db_path.parent
        existing = _nearest(folder)
        if not existing.is_dir():  # mkdir would say "File exists", which reads as read-only
            raise InvalidArgument(
                f"cannot put the index at {self.db_path}: {existing} is a file, not a folder",
                "pass --db with a path whose folders are folders (or do not exist yet)",
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / ".markindex-write-test"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise ReadOnlyLibrary(
                f"cannot write the index to {folder} ({exc.strerror or exc})",
                _read_only_hint(folder, self.root, exc),
            ) from None

    def expect_build(self) -> None:
        """Note that an `index()` run has been scheduled (e.g. `mcp --reindex-on-start`), so the
        tools say INDEX_BUILDING, not INDEX_MISSING, before the build has taken the writer lock."""
        self._build_pending.set()

    @property
    def build_pending(self) -> bool:
        return self._build_pending.is_set()

    def freshness_warning(self) -> str | None:
        """Why the index does not keep up with the folder, if it does not: the live index of
        this process says, else an index run that stopped before its end (`store.runs`)."""
        warning = self.live_warning() if self.live_warning is not None else None
        return warning or self.unfinished_run_warning()

    def drift_warning(self, doc_paths: list[str]) -> str | None:
        """`index.drift.cited_drift_warning` of those of `doc_paths` whose file changed since it was
        indexed: what an answer citing them says."""
        return cited_drift_warning(self.root, self.store, self.db_path, doc_paths)

    def unfinished_run_warning(self) -> str | None:
        """`store.runs.unfinished_warning` when the last index run stopped before its end."""
        try:
            mark = self.store.get_meta(runs.UNFINISHED_RUN)
        except (MarkindexError, apsw.Error):
            return None  # no readable index: the caller says so its own way
        run = runs.unfinished_run(mark, self.db_path)
        return runs.unfinished_warning(run) if run is not None else None

    def report_damage(self, detail: str) -> None:
        """A read met a damaged index (see `on_damage`)."""
        if self.on_damage is not None:
            self.on_damage(detail)

    def index(
        self,
        *,
        ignore: list[str] | None = None,
        setext: bool | None = None,
        progress: Progress | None = None,
        workers: int | None = None,
        after_write: AfterWrite | None = None,
        rebuild: bool = False,
        rehash: bool = False,
    ) -> IndexReport:
        """Bring the index in line with the folder (incremental). Fails fast if another writer runs.

        `after_write` runs once the documents are written, under the same lock: e.g.
        `markindex_core.llm.summaries.Summarizer(SummarySettings("openai:gpt-4o-mini"))`.
        `rebuild` builds a new index from the folder alone and swaps it in whole: the way out of a
        damaged index (see `store.integrity`), which it never needs to read. `rehash` reads and
        hashes every file, also those whose size and mtime are unchanged (see `Indexer`)."""
        try:
            if rebuild:
                return self._rebuild(ignore, setext, progress, workers, after_write)
            return self._index(ignore, setext, progress, workers, after_write, rehash)
        finally:
            self._build_pending.clear()

    def remembered_ignore(self) -> list[str]:
        """The --ignore patterns the old index remembers, when it can still be read."""
        from markindex_core.index.scan import IGNORE_META, ignore_from_meta

        return ignore_from_meta(self._stored_meta(IGNORE_META))

    def remembered_setext(self) -> bool | None:
        """The setext choice the old index remembers, when it can still be read."""
        stored = self._stored_meta("setext")
        return None if stored is None else stored != "0"

    def check_target(self, *, rebuild: bool = False) -> None:
        """Refuse, before a lock file or anything else is written beside it, an index path that
        holds another program's file, or (unless `rebuild` replaces it on purpose) the index of
        another library.

        `index B --db a.db` would otherwise remove every document of library A from it without
        a word. The index may follow its library when the recorded folder is gone (the library
        was moved) or when the index lives inside this folder (a copied library brings its own).
        """
        check_replaceable(self.db_path)
        if not rebuild:
            self.require_own_index()

    def require_own_index(self) -> None:
        """Refuse an index that holds another library (OTHER_LIBRARY): writing into it would
        remove that library's documents, and reading from it would cite them as this one's."""
        if not self.db_path.exists():
            return
        owner = self._stored_meta("root")
        if not held_by_other_library(owner, self.root, self.db_path):
            return
        raise OtherLibrary(
            f"{self.db_path} is the index of the library {owner}, not of {self.root}",
            "pass another --db for this library, or replace that index with this library's:"
            f" markindex index {shlex.quote(str(self.root))} --db"
            f" {shlex.quote(str(self.db_path))} --rebuild",
        )

    def _stored_meta(self, key: str) -> str | None:
        """One value of the existing index's meta table, when the index can still be read."""
        try:
            store = Store(self.db_path, readonly=True)
        except MarkindexError:
            return None
        try:
            return store.get_meta(key)
        except (apsw.Error, UnicodeDecodeError):  # a damaged index: a rebuild replaces it
            return None
        finally:
            store.close()

    def _rebuild(
        self,
        ignore: list[str] | None,
        setext: bool | None,
        progress: Progress | None,
        workers: int | None,
        after_write: AfterWrite | None,
    ) -> IndexReport:
        from markindex_core.index.indexer import rebuild_from_folder
        from markindex_core.store.lock import WriterLock

        self.ensure_db_dir()
        self.check_target(rebuild=True)
        lock = WriterLock(self.db_path)
        try:
            lock.acquire()
        except OSError as exc:  # the lock file: disk full, read-only folder
            raise os_error(exc, self.db_path) from None
        try:
            return rebuild_from_folder(
                self.root,
                self.db_path,
                reason="asked for (--rebuild)",
                ignore=ignore if ignore is not None else self.remembered_ignore(),
                setext=setext if setext is not None else self.remembered_setext(),
                workers=workers,
                after_write=after_write,
                progress=progress,
            )
        except (apsw.Error, OSError) as exc:
            if not self.db_path.parent.is_dir():  # `rm -rf` of the index folder while it ran
                raise self._replaced() from None
            raise write_error(exc, self.db_path, 0) from None
        finally:
            lock.release()

    def _replaced(self) -> IndexReplaced:
        return IndexReplaced(
            f"the index {self.db_path} was deleted or replaced while this run wrote it:"
            " what it wrote is lost",
            f"run `{self.command()}` again, and leave the index folder alone while it runs",
        )

    def _index(
        self,
        ignore: list[str] | None,
        setext: bool | None,
        progress: Progress | None,
        workers: int | None,
        after_write: AfterWrite | None = None,
        rehash: bool = False,
    ) -> IndexReport:
        from markindex_core.index.indexer import Indexer, open_for_writing

        self.ensure_db_dir()
        self.check_target()
        existed = self.db_path.exists()
        try:
            store, lock = open_for_writing(self.db_path)
        except OSError as exc:  # the lock file: disk full, read-only folder
            raise os_error(exc, self.db_path) from None
        done = False
        try:
            indexer = Indexer(
                self.root,
                store,
                ignore=ignore,
                setext=setext,
                workers=workers,
                after_write=after_write,
                rehash=rehash,
            )
            report = indexer.run(progress)
            if has_moved(store.conn):
                done = True  # the file at the path now is not this run's: never delete it
                raise self._replaced()
            done = True
            return report
        except (apsw.Error, OSError) as exc:
            errno_ = store.conn.system_errno if isinstance(exc, apsw.Error) else 0
            raise write_error(exc, self.db_path, errno_) from None
        except UnicodeDecodeError as exc:  # a stored value that is not UTF-8: see DAMAGE_ERRORS
            raise damaged(self.db_path, exc) from None
        finally:
            _close_writer(store, self.db_path, discard=not existed and not done)
            lock.release()

    # ----- reading ----------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The calling thread's read-only connection, reopened if the index file was replaced."""
        return self._reader().store

    def _reader(self) -> _Reader:
        reader: _Reader | None = getattr(self._local, "reader", None)
        if reader is not None and not reader.closed and reader.opened == file_id(self.db_path):
            return reader
        if reader is not None:
            self._forget(reader)
        try:
            reader = _Reader(self.db_path)
        except IndexMissing as exc:
            if self.db_path.exists():  # an empty file, another schema: its own hint holds
                raise
            raise IndexMissing(exc.message, self.build_hint()) from None
        with self._readers_lock:
            ended = [r for r in self._readers if not r.thread.is_alive()]
            self._readers = [r for r in self._readers if r.thread.is_alive()]
            self._readers.append(reader)
        for old in ended:
            old.close()
        self._local.reader = reader
        return reader

    def _forget(self, reader: _Reader) -> None:
        with self._readers_lock:
            if reader in self._readers:
                self._readers.remove(reader)
        reader.close()
        self._local.reader = None

    def has_index(self) -> bool:
        return self.db_path.exists()

    def document(self, path: str) -> dict[str, Any] | None:
        """The document at `path` as the tools and `tree` take it: `./a//b.md` is `a/b.md`, and a
        name typed in another Unicode normalization finds the stored one."""
        return self.store.lookup_document(clean_relative(path) or path)

    def outline(self, path: str) -> list[dict[str, Any]]:
        doc = self.document(path)
        return self.store.nodes(doc["id"]) if doc else []

    def searcher(self) -> Searcher:
        """A searcher on this thread's read connection."""
        from markindex_core.search.searcher import Searcher

        reader = self._reader()
        if reader.searcher is None:
            reader.searcher = Searcher(reader.store)
        return reader.searcher

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
        from markindex_core.tools.contract import call_tool

        return call_tool(self, name, args)

    def retrieve(
        self,
        question: str,
        *,
        model: str,
        max_steps: int = RETRIEVE_MAX_STEPS,
        max_input_tokens: int | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
        base_url: str | None = None,
    ) -> RetrieveResult:
        """Let a model (`provider:model`) find evidence with the five tools; return only the cited
        lines as the index holds them, with usage and the stop reason (`done`, `budget`,
        `max_steps`, `unusable_citations`). Needs the llm extra (`pip install 'markindex[llm]'`)."""
        from markindex_core.llm.agent import retrieve

        return retrieve(
            self,
            question,
            model=model,
            max_steps=max_steps,
            max_input_tokens=max_input_tokens,
            rpm=rpm,
            tpm=tpm,
            base_url=base_url,
        )

    def open_connections(self) -> int:
        """Read connections open now, over all threads (not counting searcher helpers)."""
        with self._readers_lock:
            return sum(1 for r in self._readers if not r.closed)

    def close(self) -> None:
        """Close every thread's read connection; the library stays usable (reads reopen)."""
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()
        self._local.reader = None


def _read_only_hint(folder: Path, root: Path, exc: OSError) -> str:
    """Which folder is read-only, and what to do about it."""
    hint = "pass --db FILE to keep the index elsewhere"
    if exc.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
        return hint
    inside = folder != root and folder.is_relative_to(root)
    if inside and folder.exists() and os.access(root, os.W_OK):
        return f"the index folder {folder} is read-only (the library itself is not): " + hint
    return f"the folder {_nearest(folder)} is read-only: " + hint


def _nearest(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _close_writer(store: Store, db_path: Path, *, discard: bool) -> None:
    """Close the writer connection. When the first build of a new index failed (e.g. on a full
    disk) before any document was committed, delete the file, so the next run starts clean
    instead of tripping over a half-written one."""
    empty = True
    if discard:
        try:
            empty = not store.has_documents()
        except apsw.Error:
            pass
    try:
        store.close()
    except apsw.Error:
        pass
    if discard and empty:
        remove_db_files(db_path)

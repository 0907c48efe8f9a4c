"""The SQLite index (APSW, WAL): schema, writes of whole documents, and the read queries.

All SQL of markindex lives in this package: here, search's queries in `search_queries.py` and the
fragment vocabulary in `vocabulary.py` (`scalar` runs any statement, for tests and diagnostics).
One writer at a time (see `lock.py`); readers open their own connections and see consistent
snapshots while the writer works.
"""

from __future__ import annotations

import glob
import json
import os
import re
import stat
import time
import urllib.parse
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import count, pairwise, repeat
from pathlib import Path
from typing import Any
from unicodedata import normalize

import apsw

from markindex_core.config import (
    BUSY_TIMEOUT_MS,
    FTS_MERGE_STEP_PAGES,
    LINE_BLOCK_SIZE,
    READER_CACHE_KB,
    SCHEMA_VERSION,
    UNCACHED_STATEMENT_BYTES,
    WRITER_CACHE_KB,
)
from markindex_core.errors import IndexMissing, IndexUnusable, MarkindexError
from markindex_core.model import DocumentRows, ParsedDocument
from markindex_core.store.files import (
    fsync_dir,
    open_error,
    os_error,
    pid_alive,
    read_only_file,
    remove_db_files,
    sqlite_header,
)
from markindex_core.store.rows import DocumentRow, LinkRow, NodeRow, named_rows
from markindex_core.text.safe import utf8_encodable
from markindex_core.text.segment import FTS_TOKENCHARS

# The text is stored pre-tokenized (see text.segment): terms of word characters and our connectors,
# lowercased, joined by spaces. FTS5's `ascii` tokenizer splits that exactly as `unicode61` did
# (non-ASCII characters are token characters to it) at ~20% less CPU for the inserts, which run
# in the one process that writes; unicode61 only also folded a Greek final sigma (ς) into σ.
_TOKENIZE = f"ascii tokenchars '{FTS_TOKENCHARS}'"

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    folder TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    front_matter TEXT,
    hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    line_count INTEGER NOT NULL,
    encoding TEXT NOT NULL,
    warnings TEXT NOT NULL,
    indexed_at REAL NOT NULL
);
CREATE INDEX documents_folder ON documents(folder, path);
CREATE TABLE nodes(
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    node_id TEXT NOT NULL,
    parent_id TEXT,
    depth INTEGER NOT NULL,
    kind TEXT NOT NULL,
    level INTEGER NOT NULL,
    title TEXT NOT NULL,
    key_items TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    subtree_end INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    subtree_tokens INTEGER NOT NULL,
    summary TEXT,
    content_hash TEXT NOT NULL
);
CREATE UNIQUE INDEX nodes_doc_ordinal ON nodes(doc_id, ordinal);
CREATE INDEX nodes_doc_node ON nodes(doc_id, node_id);
CREATE TABLE passages(
    id INTEGER PRIMARY KEY,
    node_rowid INTEGER NOT NULL,
    doc_id INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL
);
CREATE INDEX passages_doc ON passages(doc_id);
CREATE INDEX passages_node ON passages(node_rowid);
CREATE TABLE line_blocks(
    doc_id INTEGER NOT NULL,
    block INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY(doc_id, block)
);
CREATE TABLE links(doc_id INTEGER NOT NULL, line INTEGER NOT NULL, target TEXT NOT NULL, anchor TEXT NOT NULL);
CREATE INDEX links_doc ON links(doc_id);
CREATE INDEX links_target ON links(target);
CREATE TABLE skipped(path TEXT PRIMARY KEY, reason TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
CREATE VIRTUAL TABLE node_fts USING fts5(
    title, key_items, summary, body, content='', contentless_delete=1, tokenize="{_TOKENIZE}");
CREATE VIRTUAL TABLE passage_fts USING fts5(
    context, body, content='', contentless_delete=1, tokenize="{_TOKENIZE}");
INSERT INTO node_fts(node_fts, rank) VALUES('hashsize', 16777216);
INSERT INTO passage_fts(passage_fts, rank) VALUES('hashsize', 16777216);
"""
_FTS_TABLES = ("node_fts", "passage_fts")
# FTS5's segment merging: its defaults, which incremental writes rely on (each commit adds
# segments, automerge folds them), and none during a bulk build that `optimize` ends (crisismerge
# at FTS5's cap, 1999 segments a level, where merging starts again).
_FTS_MERGING = {"automerge": 4, "crisismerge": 16}
_FTS_NO_MERGING = {"automerge": 0, "crisismerge": 2000}

# Summaries a model wrote, by cache key (see llm/summaries.py). Not part of the documents: a full
# rebuild copies it into the new file and a schema change keeps it, so nothing is paid for twice.
SUMMARY_CACHE_TABLE = "summary_cache"
_SUMMARY_CACHE = f"""
CREATE TABLE IF NOT EXISTS {SUMMARY_CACHE_TABLE}(
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class DocState:
    id: int
    hash: str
    size: int
    mtime_ns: int


def connect(db_path: Path, *, readonly: bool = False) -> apsw.Connection:
    """Open the index file; writers create and migrate it, readers require it to exist.

    Every failure becomes one `MarkindexError` that says what is wrong (missing, permission,
    read-only, disk full, damaged) and what to do next (see `files.open_error`)."""
    if readonly and not db_path.exists():
        raise IndexMissing(
            f"no index at {db_path}", "run `markindex index ROOT` first (or pass --db FILE)"
        )
    _require_regular(db_path)
    if not readonly and not db_path.exists():
        _create(db_path)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    name = str(db_path)
    if readonly and _on_read_only_file_system(db_path):
        # No -shm file can be made beside it, and nothing can change it: read it as immutable
        # (an index copied to read-only media, a read-only mount).
        name = "file:" + urllib.parse.quote(str(db_path.absolute())) + "?immutable=1"
        flags |= apsw.SQLITE_OPEN_URI
    conn: apsw.Connection | None = None
    try:
        conn = apsw.Connection(name, flags=flags)
        _prepare(conn, db_path, readonly)
    except apsw.Error as exc:
        errno_ = conn.system_errno if conn is not None else 0
        if conn is not None:
            conn.close()
        raise open_error(exc, db_path, readonly=readonly, errno_=errno_) from None
    except MarkindexError:
        if conn is not None:
            conn.close()
        raise
    return conn


def _require_regular(db_path: Path) -> None:
    """Refuse a FIFO, socket or device at the index path: opening it would block, or read a
    device, instead of failing (`--db` pointed at the wrong file)."""
    try:
        mode = os.stat(db_path).st_mode
    except OSError:
        return  # missing (a writer creates it) or unreachable: opening says which
    if stat.S_ISDIR(mode):
        raise IndexUnusable(
            f"{db_path} is a folder, not an index file",
            "pass --db with the path of an index file, or a new file name to create one there",
        )
    if not stat.S_ISREG(mode):
        raise IndexUnusable(
            f"{db_path} is not an index (not a regular file: a FIFO, socket or device)",
            "pass --db with the path of an index file, or a new file name to create one there",
        )


def _create(db_path: Path) -> None:
    """Create a new index whole, under a private name, and link it into place.

    Creating the file in place would leave, if the writer were killed in its first instant, a
    file with a rollback journal that only a writer can undo: every reader would fail until then.
    Made aside and linked (never replacing a file another writer linked first), the index either
    does not exist yet or opens with its whole schema."""
    for stale in db_path.parent.glob(
        f"{glob.escape(db_path.name)}.new-*"
    ):  # left by a killed creator
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and not pid_alive(int(pid)):
            remove_db_files(stale)
    tmp = db_path.with_name(f"{db_path.name}.new-{os.getpid()}")
    remove_db_files(tmp)
    conn: apsw.Connection | None = None
    try:
        conn = apsw.Connection(str(tmp), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        _prepare(conn, tmp, readonly=False)
        conn.close()  # the only connection: SQLite folds and deletes the -wal and -shm
        conn = None
        try:
            os.link(tmp, db_path)
        except FileExistsError:  # another writer created it first: use theirs
            pass
        fsync_dir(db_path.parent)
    except apsw.Error as exc:
        errno_ = conn.system_errno if conn is not None else 0
        raise open_error(exc, db_path, readonly=False, errno_=errno_) from None
    except OSError as exc:
        raise os_error(exc, db_path) from None
    finally:
        if conn is not None:
            conn.close()
        remove_db_files(tmp)


def _on_read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows): opened the usual way
        return False


def _prepare(conn: apsw.Connection, db_path: Path, readonly: bool) -> None:
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    _check_ours(conn, db_path)
    _refuse_newer(conn, db_path)
    if not readonly:
        if conn.readonly("main"):  # SQLite fell back to read-only: say so before the first write
            raise read_only_file(db_path)
        conn.pragma("journal_mode", "wal")
        conn.pragma("synchronous", "normal")
    # Readers keep more pages: a query walks the FTS b-trees of every query word. The writer mostly
    # appends (and FTS5 holds its own pending terms), so a big cache would only grow its memory.
    conn.pragma("cache_size", -(READER_CACHE_KB if readonly else WRITER_CACHE_KB))
    # Double quotes name identifiers only, never strings (apsw.bestpractice.connection_dqs, set
    # here: importing apsw.bestpractice loads apsw.ext and ~40 modules, ~20 ms in every process).
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    if not readonly:
        _migrate(conn)
        return
    version = conn.pragma("user_version")
    if version == 0 and not _has_tables(conn):  # a zero-byte file (`touch`), never written
        raise IndexMissing(
            f"no index at {db_path} (an empty file)",
            "run `markindex index ROOT` first (or pass --db FILE)",
        )
    if version != SCHEMA_VERSION:
        raise IndexMissing(
            f"index at {db_path} has schema {version}, this markindex needs {SCHEMA_VERSION}",
            "run `markindex index ROOT` to rebuild it",
        )


def _has_tables(conn: apsw.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchone() is not None


def _check_ours(conn: apsw.Connection, db_path: Path) -> None:
    """Refuse a database another program made (`--db` pointed at the wrong file): migrating it
    would drop its tables, and a full rebuild would replace the whole file."""
    tables = {
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    if tables and not {"meta", "documents"} <= tables:
        shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
        raise IndexUnusable(
            f"{db_path} is a database of another program (tables: {shown}), not a markindex index",
            "pass --db with a new file name: markindex never changes a database it did not create",
        )


def _refuse_newer(conn: apsw.Connection, db_path: Path) -> None:
    """An index of a newer markindex is not rebuilt in this version's older format: the newer
    version would rebuild it again (two versions on one index take turns destroying it), and a
    reader's advice to re-index would do just that."""
    version = conn.pragma("user_version")
    if version > SCHEMA_VERSION:
        raise IndexUnusable(
            f"index at {db_path} was written by a newer markindex (format {version}; this "
            f"version reads format {SCHEMA_VERSION})",
            "upgrade markindex (pip install -U markindex), or pass --db FILE to keep an index "
            "for this version; `markindex index ROOT --rebuild` replaces it",
        )


def held_by_other_library(owner: str | None, root: Path, db_path: Path) -> bool:
    """Whether the index at `db_path`, recording library `owner` (meta root), holds another
    library than `root`: it belongs to the folder it records while that folder exists. It follows
    a library that moved, and an index inside `root` is `root`'s (a copied library brings its own)."""
    if not owner or owner == str(root) or db_path.is_relative_to(root):
        return False
    return Path(owner).is_dir()


def check_replaceable(db_path: Path) -> None:
    """Refuse to replace a file that is not a markindex index (`index --rebuild` with a wrong
    --db): only a missing, empty, markindex or damaged-beyond-telling file may be replaced."""
    try:
        size = db_path.stat().st_size
    except FileNotFoundError:
        return
    _require_regular(db_path)
    if size and not sqlite_header(db_path):
        raise IndexUnusable(
            f"{db_path} is not an index (not an SQLite database at all)",
            "pass --db with the path of an index: markindex never replaces a file it did not make",
        )
    try:
        conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return  # damaged beyond opening: nothing left to tell it by
    try:
        _check_ours(conn, db_path)
    except apsw.Error:
        return  # its schema cannot be read: damaged
    finally:
        conn.close()


def _migrate(conn: apsw.Connection) -> None:
    version = conn.pragma("user_version")
    if version == SCHEMA_VERSION:
        return
    with conn:
        if version == 2:  # the same layout without the summary cache: add it in place
            conn.execute(_SUMMARY_CACHE)
            conn.pragma("user_version", SCHEMA_VERSION)
            return
        if version not in (0, SCHEMA_VERSION):
            # Older layouts are rebuilt from the files: drop everything we own but the summary
            # cache (summaries cost money; its rows stay valid across layouts).
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_schema WHERE type IN ('table','view') "
                    "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts_%' AND name != ?",
                    (SUMMARY_CACHE_TABLE,),
                )
            ]
            for name in names:
                conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        conn.execute(_SCHEMA)
        conn.execute(_SUMMARY_CACHE)
        conn.pragma("user_version", SCHEMA_VERSION)


class Store:
    """A connection to one library's index with typed reads and whole-document writes.

    Typed readers return the frozen rows of `rows.py` (`document_row`, `node_rows`, `node_row`,
    `node_by_rowid`, `link_rows_from`); `document`, `nodes`, `node` and `links_from` return the
    same rows as dicts for callers not moved to typed rows yet.
    """

    def __init__(self, db_path: Path, *, readonly: bool = False) -> None:
        self.path = db_path
        self.readonly = readonly
        self.conn = connect(db_path, readonly=readonly)
        if not readonly:
            self._resume_merging()

    def close(self) -> None:
        self.conn.close()

    # ----- metadata -------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_meta(self, values: dict[str, str], *, drop: Iterable[str] = ()) -> None:
        """Set `values` and delete the `drop` keys, in one transaction."""
        with self.conn:
            self.conn.executemany(
                "INSERT INTO meta(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                list(values.items()),
            )
            self.conn.executemany("DELETE FROM meta WHERE key=?", [(k,) for k in drop])

    def all_meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def data_version(self) -> int:
        return int(self.conn.pragma("data_version"))

    # ----- writer side ----------------------------------------------------------------------
    def doc_states(self, under: Iterable[str] | None = None) -> dict[str, DocState]:
        """Each document's state by path: all of them, or those at or below the `under` paths.

        `under` keeps an update of a few files as cheap in a library of 50 000 documents as in
        one of 500: each path is one range of the path index, not a pass over every row.
        """
        rows = self._rows_under("SELECT path, id, hash, size, mtime_ns FROM documents", under)
        return {str(p): DocState(int(i), str(h), int(s), int(m)) for p, i, h, s, m in rows}

    def skipped_states(self, under: Iterable[str] | None = None) -> dict[str, tuple[int, int, str]]:
        """Skipped files' size, mtime and reason by path: all, or at or below the `under` paths."""
        rows = self._rows_under("SELECT path, size, mtime_ns, reason FROM skipped", under)
        return {str(p): (int(s), int(m), str(r)) for p, s, m, r in rows}

    def _rows_under(self, select: str, under: Iterable[str] | None) -> list[tuple[Any, ...]]:
        """Rows of `select` (path first): all, or those whose path is one of `under` or lies
        below one (a range of the path index from P to P + '0', '0' sorting right after '/'; the
        range also holds siblings such as `P-2.md`, left out here)."""
        prefixes = None if under is None else list(dict.fromkeys(under))
        if prefixes is None or "" in prefixes:  # '' is the library's root: everything
            return list(self.conn.execute(select))
        rows: list[tuple[Any, ...]] = []
        for prefix in prefixes:
            if not prefix.isascii() and not utf8_encodable(prefix):
                continue  # a name no stored path can have (its display form is stored instead)
            folder = prefix + "/"
            rows.extend(
                row
                for row in self.conn.execute(
                    select + " WHERE path >= ? AND path < ?", (prefix, prefix + "0")
                )
                if row[0] == prefix or str(row[0]).startswith(folder)
            )
        return rows

    def clear(self) -> None:
        """Drop every document at once (a full rebuild): ~3x faster than replacing them one by one,
        which leaves a delete marker in the search index for every old row."""
        with self.conn:
            for table in ("documents", "nodes", "passages", "line_blocks", "links", "skipped"):
                self.conn.execute(f"DELETE FROM {table}")
            for fts in _FTS_TABLES:
                self.conn.execute(f"INSERT INTO {fts}({fts}) VALUES('delete-all')")

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        with self.conn:
            self.conn.execute(
                "UPDATE documents SET size=?, mtime_ns=? WHERE path=?", (size, mtime_ns, path)
            )

    def write_documents(self, docs: Sequence[ParsedDocument | DocumentRows]) -> None:
        """Replace these documents, all in one transaction (never half a document)."""
        with self.conn:
            for doc in docs:
                self._delete(doc.path)
                self._insert(doc)

    def delete_documents(self, paths: Iterable[str]) -> None:
        with self.conn:
            for path in paths:
                self._delete(path)
                self.conn.execute("DELETE FROM skipped WHERE path=?", (path,))

    def record_skipped(self, path: str, reason: str, size: int, mtime_ns: int) -> None:
        with self.conn:
            self._delete(path)
            self.conn.execute(
                "INSERT OR REPLACE INTO skipped(path, reason, size, mtime_ns) VALUES(?,?,?,?)",
                (path, reason, size, mtime_ns),
            )

    def _delete(self, path: str) -> None:
        c = self.conn
        row = c.execute("SELECT id FROM documents WHERE path=?", (path,)).fetchone()
        if row is None:
            return
        doc_id = row[0]
        c.execute(
            "DELETE FROM node_fts WHERE rowid IN (SELECT id FROM nodes WHERE doc_id=?)", (doc_id,)
        )
        c.execute(
            "DELETE FROM passage_fts WHERE rowid IN (SELECT id FROM passages WHERE doc_id=?)",
            (doc_id,),
        )
        for table in ("nodes", "passages", "line_blocks", "links"):
            c.execute(f"DELETE FROM {table} WHERE doc_id=?", (doc_id,))
        c.execute("DELETE FROM documents WHERE id=?", (doc_id,))

    def _insert(self, doc: ParsedDocument | DocumentRows) -> None:
        d = doc if isinstance(doc, DocumentRows) else doc.rows()
        c = self.conn
        c.execute("DELETE FROM skipped WHERE path=?", (d.path,))
        c.execute(
            "INSERT INTO documents(path, folder, title, description, front_matter, hash, size,"
            " mtime_ns, tokens, line_count, encoding, warnings, indexed_at)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                d.path,
                d.path.rpartition("/")[0],
                d.title,
                d.description,
                d.front_matter,
                d.content_hash,
                d.size,
                d.mtime_ns,
                d.tokens,
                d.line_count,
                d.encoding,
                json.dumps(d.warnings, ensure_ascii=False),
                time.time(),
            ),
        )
        doc_id = c.last_insert_rowid()
        # Row ids are given, not read back row by row, so each table takes one executemany: they
        # are the ids SQLite would pick (one more than the largest), the writer being alone.
        # Rows are zipped from columns (in C), not built in Python.
        node_base = self._next_id("nodes")
        n_nodes = len(d.nodes)
        c.executemany(
            "INSERT INTO nodes(id, doc_id, ordinal, node_id, parent_id, depth, kind, level, title,"
            " key_items, start_line, end_line, subtree_end, tokens, subtree_tokens, content_hash)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(node_base + i, doc_id, i, *row) for i, row in enumerate(d.nodes)],
        )
        # A node's body terms are its passages' terms joined; its passages are consecutive.
        bounds = [bisect_left(d.passage_nodes, i) for i in range(n_nodes + 1)]
        terms = d.passage_terms
        # A cached statement keeps the memory of its largest value (its bound copy and record)
        # until it is run again: a big document's would stay allocated side by side, ~3x its
        # size. Its statements are prepared for it alone, and freed after use.
        cache = d.size < UNCACHED_STATEMENT_BYTES
        c.executemany(
            "INSERT INTO node_fts(rowid, title, key_items, summary, body) VALUES(?,?,?,'',?)",
            zip(
                range(node_base, node_base + n_nodes),
                *zip(*d.node_terms, strict=True),
                (b" ".join(terms[a:b]) for a, b in pairwise(bounds)),  # one at a time
                strict=True,
            )
            if n_nodes
            else (),
            can_cache=cache,
        )
        context = _passage_contexts(d)
        passage_base = self._next_id("passages")
        passage_ids = range(passage_base, passage_base + len(terms))
        c.executemany(
            "INSERT INTO passages(id, node_rowid, doc_id, start_line, end_line) VALUES(?,?+?,?,?,?)",
            zip(
                passage_ids,
                repeat(node_base),
                d.passage_nodes,
                repeat(doc_id),
                d.passage_starts,
                d.passage_ends,
            ),
        )
        c.executemany(
            "INSERT INTO passage_fts(rowid, context, body) VALUES(?, ?, ?)",
            zip(passage_ids, map(context.__getitem__, d.passage_nodes), terms, strict=True),
            can_cache=cache,
        )
        c.executemany(  # UTF-8 bytes, cast: stored as TEXT, as readers expect
            "INSERT INTO line_blocks(doc_id, block, text) VALUES(?,?,CAST(? AS TEXT))",
            zip(repeat(doc_id), count(), d.line_blocks),
            can_cache=cache,
        )
        c.executemany(
            "INSERT INTO links(doc_id, line, target, anchor) VALUES(?,?,?,?)",
            ((doc_id, line, target, anchor) for line, target, anchor in d.links),
        )

    def _next_id(self, table: str) -> int:
        """The row id SQLite gives the next row of `table` (no AUTOINCREMENT: largest + 1)."""
        return int(self.scalar(f"SELECT coalesce(max(id), 0) + 1 FROM {table}"))

    def optimize(self) -> None:
        with self.conn:
            self.conn.execute("INSERT INTO node_fts(node_fts) VALUES('optimize')")
            self.conn.execute("INSERT INTO passage_fts(passage_fts) VALUES('optimize')")

    @contextmanager
    def bulk_writes(self) -> Iterator[None]:
        """FTS segments unmerged while inside, for a bulk build that ends with `optimize`.

        Automerge merges a document's terms again at each level as segments pile up, then
        `optimize` merges them all once more: without it a full build's writes take ~15% less
        CPU and leave the same rows. Merging is back on afterwards, or, when the process was
        killed inside, as soon as a writer opens the index again."""
        self._set_fts(_FTS_NO_MERGING)
        try:
            yield
        finally:
            self._set_fts(_FTS_MERGING)

    def _resume_merging(self) -> None:
        """Merging back on when a bulk build was killed inside `bulk_writes` (a writer opens the
        index after the one before it is gone: no build is under way)."""
        if self.scalar("SELECT v FROM node_fts_config WHERE k='automerge'") == 0:
            self._set_fts(_FTS_MERGING)

    def _set_fts(self, settings: dict[str, int]) -> None:
        with self.conn:
            for table in _FTS_TABLES:
                for key, value in settings.items():
                    self.conn.execute(
                        f"INSERT INTO {table}({table}, rank) VALUES(?, ?)", (key, value)
                    )

    def merge_step(self, pages: int = FTS_MERGE_STEP_PAGES) -> bool:
        """Merge up to `pages` leaf pages of each FTS index toward one segment, each table in a
        transaction of its own; whether there was work (False: both are one segment already).

        Repeated until it returns False it leaves what `optimize` leaves, a step at a time: a
        write between two steps waits for one step, not for a rewrite of the whole index (which
        takes seconds on a large library). FTS5 did work when the change count moved by 2 or more.
        """
        worked = False
        for table in _FTS_TABLES:
            before = self.conn.total_changes()
            with self.conn:
                self.conn.execute(
                    f"INSERT INTO {table}({table}, rank) VALUES('merge', ?)", (-int(pages),)
                )
            worked = worked or self.conn.total_changes() - before >= 2
        return worked

    def checkpoint(self, mode: str = "truncate", *, busy_ms: int | None = None) -> None:
        """Copy the WAL into the database. `truncate` waits for readers (up to `busy_ms`, else
        the connection's busy timeout) and empties the WAL; `passive` copies what it can now."""
        if busy_ms is None:
            self.conn.pragma("wal_checkpoint", mode)
            return
        self.conn.set_busy_timeout(busy_ms)
        try:
            self.conn.pragma("wal_checkpoint", mode)
        finally:
            self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)

    # ----- readers --------------------------------------------------------------------------
    def document_row(self, path: str) -> DocumentRow | None:
        cursor = self.conn.execute(
            "SELECT id, path, title, description, front_matter, hash, size, mtime_ns, tokens,"
            " line_count, encoding, warnings, indexed_at FROM documents WHERE path=?",
            (path,),
        )
        return next((DocumentRow.from_columns(c) for c in named_rows(cursor)), None)

    def lookup_document(self, path: str) -> dict[str, Any] | None:
        """The document a person or an agent means by `path`: its exact name first, then the
        same name in the other Unicode normalization (`café` typed as one character, stored as
        `e` plus an accent, as macOS file systems write names)."""
        for form in _spellings(path):
            row = self.document_row(form)
            if row is not None:
                return row.to_dict()
        stored = self._same_text(path)
        row = self.document_row(stored) if stored else None
        return None if row is None else row.to_dict()

    def document(self, path: str) -> dict[str, Any] | None:
        """`document_row` as a dict (the form the public API and older callers use)."""
        row = self.document_row(path)
        return None if row is None else row.to_dict()

    def has_documents(self) -> bool:
        return self.conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is not None

    def document_paths(
        self, *, below: str = "", name_holding: str = "", limit: int = -1
    ) -> list[str]:
        """Paths in order: all of them, those in folder `below` (and its subfolders), or those
        holding `name_holding` (ASCII letters in any case); at most `limit` (-1: all)."""
        where = ""
        params: tuple[str, ...] = ()
        if below:
            where, params = " WHERE path >= ? AND path < ?", (below + "/", below + "0")
        elif name_holding:
            pattern = "%" + re.sub(r"([%_\\])", r"\\\1", name_holding) + "%"
            where, params = " WHERE path LIKE ? ESCAPE '\\'", (pattern,)
        sql = f"SELECT path FROM documents{where} ORDER BY path LIMIT ?"
        return [str(r[0]) for r in self.conn.execute(sql, (*params, limit))]

    def lookup_folder(self, folder: str) -> str | None:
        """The folder a person or an agent means by `folder`, as the index spells it: that
        name, else the same name in the other Unicode normalization (see `lookup_document`);
        None when no document lies below any of them."""
        found = next((form for form in _spellings(folder) if self.count_documents(form)), None)
        return found or self._same_text(folder, folder=True)

    def _same_text(self, name: str, *, folder: bool = False) -> str | None:
        """The stored document path (`folder`: folder) that is `name` in Unicode's eyes though
        spelled in neither whole-path form `_spellings` tries: a folder one system wrote in NFD
        (macOS) holding a file another wrote in NFC. Only paths that start with `name`'s ASCII
        head are read; no normalization changes it but for the letter an accent may join."""
        if name.isascii():
            return None
        key, depth = normalize("NFC", name), name.count("/") + 1
        first = next(i for i, c in enumerate(name) if not c.isascii())
        head = name[: max(0, first - 1)]
        for (path,) in self.conn.execute(
            "SELECT path FROM documents WHERE path >= ? AND path < ? ORDER BY path",
            (head, head + "\U0010ffff"),
        ):
            parts = str(path).split("/")
            if folder and len(parts) <= depth:
                continue
            candidate = "/".join(parts[:depth]) if folder else str(path)
            if normalize("NFC", candidate) == key:
                return candidate
        return None

    def count_documents(self, folder_prefix: str = "") -> int:
        if not folder_prefix:
            return int(self.scalar("SELECT count(*) FROM documents"))
        return int(
            self.scalar(
                "SELECT count(*) FROM documents WHERE path >= ? AND path < ?",
                (folder_prefix + "/", folder_prefix + "0"),
            )
        )

    def folder_entries(
        self, folder: str
    ) -> tuple[list[tuple[str, int, int]], list[dict[str, Any]]]:
        """Direct sub-folders (name, documents, tokens) and documents of `folder` ('' = root)."""
        if folder:
            lo, hi = folder + "/", folder + "0"  # '0' sorts right after '/'
        else:
            lo, hi = "", "\U0010ffff"
        subs: dict[str, list[int]] = {}
        # Sub-folder aggregation walks the distinct folders below, not the documents.
        for f, n, tok in self.conn.execute(
            "SELECT folder, count(*), sum(tokens) FROM documents WHERE folder >= ? AND folder < ?"
            " GROUP BY folder",
            (lo, hi) if folder else ("", hi),
        ):
            f = str(f)
            if f == folder:
                continue
            rest = f[len(lo) :] if folder else f
            name = rest.split("/", 1)[0]
            agg = subs.setdefault(name, [0, 0])
            agg[0] += int(n)
            agg[1] += int(tok or 0)
        docs = [
            {"path": str(p), "title": str(t), "description": str(d), "tokens": int(k)}
            for p, t, d, k in self.conn.execute(
                "SELECT path, title, description, tokens FROM documents WHERE folder=? ORDER BY path",
                (folder,),
            )
        ]
        return [(k, v[0], v[1]) for k, v in sorted(subs.items())], docs

    def folder_documents(
        self, folder: str, offset: int, limit: int
    ) -> tuple[int, list[dict[str, Any]]]:
        """One page of the documents directly in `folder` and how many there are in all.

        A page, so that a viewer never reads a folder of thousands of documents at once.
        """
        total = int(self.scalar("SELECT count(*) FROM documents WHERE folder=?", (folder,)))
        cursor = self.conn.execute(
            "SELECT path, title, description, tokens, size, line_count FROM documents"
            " WHERE folder=? ORDER BY path LIMIT ? OFFSET ?",
            (folder, limit, offset),
        )
        return total, list(named_rows(cursor))

    def folders(self) -> list[str]:
        return [str(r[0]) for r in self.conn.execute("SELECT DISTINCT folder FROM documents")]

    def node_rows(self, doc_id: int) -> list[NodeRow]:
        return self._node_rows(" WHERE doc_id=? ORDER BY ordinal", (doc_id,))

    def node_row(self, doc_id: int, node_id: str) -> NodeRow | None:
        return next(iter(self._node_rows(" WHERE doc_id=? AND node_id=?", (doc_id, node_id))), None)

    def node_by_rowid(self, rowid: int) -> NodeRow | None:
        return next(iter(self._node_rows(" WHERE id=?", (rowid,))), None)

    def nodes(self, doc_id: int) -> list[dict[str, Any]]:
        """`node_rows` as dicts, for callers not on typed rows yet."""
        return [n.to_dict() for n in self.node_rows(doc_id)]

    def node(self, doc_id: int, node_id: str) -> dict[str, Any] | None:
        """`node_row` as a dict, for callers not on typed rows yet."""
        row = self.node_row(doc_id, node_id)
        return None if row is None else row.to_dict()

    def _node_rows(self, where: str, args: Sequence[Any]) -> list[NodeRow]:
        return [
            NodeRow.from_columns(c)
            for c in named_rows(self.conn.execute(_NODE_SELECT + where, args))
        ]

    def read_lines(self, doc_id: int, start: int, end: int) -> list[str]:
        """Original lines start..end (1-based, inclusive) of a document."""
        if end < start:
            return []
        b0, b1 = (start - 1) // LINE_BLOCK_SIZE, (end - 1) // LINE_BLOCK_SIZE
        out: list[str] = []
        first = None
        for block, text in self.conn.execute(
            "SELECT block, text FROM line_blocks WHERE doc_id=? AND block BETWEEN ? AND ? ORDER BY block",
            (doc_id, b0, b1),
        ):
            if first is None:
                first = int(block)
            out.extend(str(text).split("\n"))
        if first is None:
            return []
        offset = start - 1 - first * LINE_BLOCK_SIZE
        return out[offset : offset + end - start + 1]

    def link_rows_from(self, doc_id: int) -> list[LinkRow]:
        cursor = self.conn.execute(
            "SELECT l.line AS line, l.target AS target, l.anchor AS anchor, d.id AS target_id"
            " FROM links l LEFT JOIN documents d ON d.path = l.target WHERE l.doc_id=?"
            " ORDER BY l.line",
            (doc_id,),
        )
        rows = [LinkRow.from_columns(c) for c in named_rows(cursor)]
        for i, row in enumerate(rows):
            if row.broken and (found := self.linked_path(row.target)):
                rows[i] = replace(row, target=found, broken=False)
        return rows

    def linked_path(self, target: str) -> str | None:
        """The stored path of the document a link's `target` names: that path, else the same
        name in the other Unicode normalization (a link typed `café.md` in NFC to the file
        macOS wrote in NFD, which opens under either spelling); None when it names none."""
        return next(
            (f for f in _spellings(target) if self.scalar(_PATH_KNOWN, (f,)) is not None), None
        )

    def links_from(self, doc_id: int) -> list[dict[str, Any]]:
        """`link_rows_from` as dicts, for callers not on typed rows yet."""
        return [link.to_dict() for link in self.link_rows_from(doc_id)]

    def links_to(self, path: str) -> list[dict[str, Any]]:
        """The links to the document at `path`, spelled as it is or in another normalization
        that names no other document (see `linked_path`)."""
        forms = _spellings(path)
        marks = ",".join("?" * len(forms))
        return [
            {"source": str(p), "line": int(line), "anchor": str(a)}
            for p, line, a, t in self.conn.execute(
                "SELECT d.path, l.line, l.anchor, l.target FROM links l"
                f" JOIN documents d ON d.id = l.doc_id WHERE l.target IN ({marks})"
                " ORDER BY d.path, l.line",
                forms,
            )
            if t == path or self.linked_path(str(t)) == path
        ]

    def broken_links(self) -> list[dict[str, Any]]:
        return [
            {"source": str(p), "line": int(line), "target": str(t)}
            for p, line, t in self.conn.execute(
                "SELECT d.path, l.line, l.target FROM links l JOIN documents d ON d.id = l.doc_id"
                " WHERE NOT EXISTS (SELECT 1 FROM documents x WHERE x.path = l.target)"
                " ORDER BY d.path, l.line"
            )
            if self.linked_path(str(t)) is None
        ]

    def anchored_links(self) -> list[dict[str, Any]]:
        """Links with an #anchor to an indexed document, its target the stored path (whether
        it has that anchor is for `store.anchors.missing_anchors` to say)."""
        rows = []
        for p, line, t, a, known in self.conn.execute(
            "SELECT d.path, l.line, l.target, l.anchor,"
            " EXISTS (SELECT 1 FROM documents x WHERE x.path = l.target)"
            " FROM links l JOIN documents d ON d.id = l.doc_id WHERE l.anchor != ''"
            " ORDER BY d.path, l.line"
        ):
            target = str(t) if known else self.linked_path(str(t))
            if target:
                rows.append(
                    {"source": str(p), "line": int(line), "target": target, "anchor": str(a)}
                )
        return rows

    def stats(self) -> dict[str, int]:
        return {
            "documents": int(self.scalar("SELECT count(*) FROM documents")),
            "nodes": int(self.scalar("SELECT count(*) FROM nodes")),
            "passages": int(self.scalar("SELECT count(*) FROM passages")),
            "links": int(self.scalar("SELECT count(*) FROM links")),
            "skipped": int(self.scalar("SELECT count(*) FROM skipped")),
            "tokens": int(self.scalar("SELECT coalesce(sum(tokens),0) FROM documents")),
        }

    def skipped(self) -> list[tuple[str, str]]:
        return [
            (str(p), str(r))
            for p, r in self.conn.execute("SELECT path, reason FROM skipped ORDER BY path")
        ]

    def scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """First column of the first row (None when there is no row)."""
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else row[0]


def clean_relative(path: str) -> str:
    """A library-relative path without empty and `.` parts (`./a//b/` is `a/b`, `.` is ``): how
    the index names a document or folder a person typed."""
    return "/".join(p for p in path.split("/") if p not in ("", "."))


def _spellings(name: str) -> list[str]:
    """`name`, then the same name in the other Unicode normalizations (NFC, NFD) when they
    differ: how a name typed on one system finds one a file system stored another way."""
    forms = [name]
    if not name.isascii():
        forms += [f for f in (normalize("NFC", name), normalize("NFD", name)) if f not in forms]
    return forms


def _passage_contexts(d: DocumentRows) -> list[str]:
    """Per node, the title path a passage is found under: the headings a reader sees above it."""
    context: list[str] = []
    for parent, (own, _) in zip(d.node_parents, d.node_terms, strict=True):
        context.append(f"{context[parent]} {own}" if parent >= 0 else own)
    return context


_PATH_KNOWN = "SELECT 1 FROM documents WHERE path=?"
_NODE_SELECT = (
    "SELECT id AS rowid, doc_id, ordinal, node_id, parent_id, depth, kind, level, title,"
    " key_items, start_line, end_line, subtree_end, tokens, subtree_tokens, summary FROM nodes"
)

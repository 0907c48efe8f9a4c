"""The read queries search runs: FTS candidates with BM25 scores, term statistics, hit details.

Kept beside `db.py` so that all SQL stays in the store layer while `search/` only ranks. Each
`SearchQueries` wraps one connection: search scores nodes on a second connection in a helper
thread, so the queries take the connection they run on instead of a `Store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import apsw

from markindex_core.config import (
    LINE_BLOCK_SIZE,
    NODE_CANDIDATES,
    PASSAGE_CANDIDATES,
    WEIGHT_BODY,
    WEIGHT_CONTEXT,
    WEIGHT_KEY_ITEMS,
    WEIGHT_SUMMARY,
    WEIGHT_TITLE,
)
from markindex_core.store.db import connect
from markindex_core.store.vocabulary import Version, VocabularyCache, snapshot_version

# Deeper than any outline can nest: only a guard against a corrupt parent cycle.
_MAX_ANCESTORS = 10_000


@dataclass(frozen=True)
class Scope:
    """Which documents a search may return: an extra WHERE clause with a `{t}` placeholder for
    the alias of the table carrying doc_id, and its arguments (applied inside the FTS query)."""

    sql: str = ""
    args: tuple[Any, ...] = ()

    @classmethod
    def of(cls, folder: str | None, doc_path: str | None) -> Scope:
        if doc_path:
            return cls(
                " AND {t}.doc_id IN (SELECT id FROM documents WHERE path = ?)",
                (doc_path.strip("/"),),
            )
        if folder and folder.strip("/"):
            f = folder.strip("/")
            return cls(
                " AND {t}.doc_id IN (SELECT id FROM documents WHERE path >= ? AND path < ?)",
                (f + "/", f + "0"),  # '0' sorts right after '/'
            )
        return cls()


@dataclass(frozen=True)
class PassageScore:
    """One candidate passage: its node, its line range, its BM25 score (higher is better) and
    its document (what ranking by document coherence groups by)."""

    id: int
    node_rowid: int
    start_line: int
    end_line: int
    score: float
    doc_id: int = 0


@dataclass(frozen=True)
class TitleRow:
    """One node on the way from a hit up to its document's top: enough to name the path."""

    node_id: str
    parent_id: str | None
    title: str
    kind: str


class SearchQueries:
    """The search queries on one connection (one per thread, like the connection)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._passage_vocab = False
        # Opened from the file name, not through a method of this object: a cycle would keep the
        # connection (and a replaced, deleted index file) open until the cyclic GC ran.
        self.vocabulary = VocabularyCache(
            conn, partial(connect, Path(conn.filename), readonly=True)
        )

    def passage_doc_frequency(self, term: str) -> int:
        """How many passages contain `term` (0 when none): the cost of ranking by it."""
        if not self._passage_vocab:  # a live view of the index's terms: created once
            self.conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.passage_vocab"
                " USING fts5vocab(main, passage_fts, row)"
            )
            self._passage_vocab = True
        row = self.conn.execute(
            "SELECT doc FROM temp.passage_vocab WHERE term=?", (term,)
        ).fetchone()
        return int(row[0] or 0) if row else 0

    def snapshot_version(self) -> Version:
        """Changes whenever the index does (see `vocabulary.snapshot_version`)."""
        return snapshot_version(self.conn)

    def passage_count(self) -> int:
        """The number of passages: the row count FTS5 keeps for BM25 (the N every passage score
        uses), read in O(1). Exact, not the largest id: a live index that replaced documents must
        weigh words as a fresh build of the same folder does. `count(*)` walks an index of every
        passage, and a live index asks again after each write."""
        counted = fts_row_count(self.conn, "passage_fts")
        if counted is not None:
            return counted
        row = self.conn.execute("SELECT count(*) FROM passages").fetchone()
        return int(row[0] or 0) if row else 0

    def node_vocabulary_like(self, fragment: str, limit: int = 20) -> list[str]:
        """Indexed node words containing `fragment`, the most widespread first (from the
        vocabulary at hand; from the current one when that finds none, see `VocabularyCache`)."""
        found = self.vocabulary.get().containing(fragment, limit)
        if not found and self.vocabulary.renewing():
            found = self.vocabulary.get(wait=True).containing(fragment, limit)
        return found

    def matching_nodes(self, match: str, scope: Scope) -> set[int]:
        """Rowids of nodes whose own text matches the FTS expression (at most NODE_CANDIDATES)."""
        return {
            int(r[0])
            for r in self.conn.execute(
                "SELECT node_fts.rowid FROM node_fts"
                + (" JOIN nodes n ON n.id = node_fts.rowid" if scope.sql else "")
                + f" WHERE node_fts MATCH ?{scope.sql.format(t='n')} LIMIT ?",
                (match, *scope.args, NODE_CANDIDATES),
            )
        }

    def node_scores(self, match: str, scope: Scope) -> dict[int, float]:
        """BM25 of nodes' own text (title 10, keyItems 5, summary 2, body 1), best first."""
        weights = f"{WEIGHT_TITLE}, {WEIGHT_KEY_ITEMS}, {WEIGHT_SUMMARY}, {WEIGHT_BODY}"
        return {
            int(rowid): float(score)
            for rowid, score in self.conn.execute(
                f"SELECT node_fts.rowid, -bm25(node_fts, {weights}) FROM node_fts"
                + (" JOIN nodes n ON n.id = node_fts.rowid" if scope.sql else "")
                + f" WHERE node_fts MATCH ?{scope.sql.format(t='n')} ORDER BY 2 DESC LIMIT ?",
                (match, *scope.args, NODE_CANDIDATES),
            )
        }

    def passage_scores(self, match: str, scope: Scope) -> list[PassageScore]:
        """The best-scoring passages (BM25 of context 2, body 1), at most PASSAGE_CANDIDATES."""
        if scope.sql:
            return [
                PassageScore(int(pid), int(node), int(a), int(b), float(score), int(doc))
                for pid, node, a, b, score, doc in self.conn.execute(
                    "SELECT p.id, p.node_rowid, p.start_line, p.end_line,"
                    f" -bm25(passage_fts, {WEIGHT_CONTEXT}, {WEIGHT_BODY}), p.doc_id"
                    " FROM passage_fts"
                    " JOIN passages p ON p.id = passage_fts.rowid"
                    f" WHERE passage_fts MATCH ?{scope.sql.format(t='p')} ORDER BY 5 DESC LIMIT ?",
                    (match, *scope.args, PASSAGE_CANDIDATES),
                )
            ]
        # No join before the LIMIT: metadata only for the candidates.
        scored = {
            int(rowid): float(score)
            for rowid, score in self.conn.execute(
                f"SELECT rowid, -bm25(passage_fts, {WEIGHT_CONTEXT}, {WEIGHT_BODY})"
                " FROM passage_fts WHERE passage_fts MATCH ? ORDER BY 2 DESC LIMIT ?",
                (match, PASSAGE_CANDIDATES),
            )
        }
        if not scored:
            return []
        ids = ",".join(str(i) for i in scored)
        return [
            PassageScore(int(pid), int(node), int(a), int(b), scored[int(pid)], int(doc))
            for pid, node, a, b, doc in self.conn.execute(
                "SELECT id, node_rowid, start_line, end_line, doc_id FROM passages"
                f" WHERE id IN ({ids})"
            )
        ]

    def node_titles(self, rowids: list[int]) -> dict[int, str]:
        """The titles of a few nodes (by rowid), in one query."""
        if not rowids:
            return {}
        id_list = ",".join(str(int(i)) for i in rowids)
        return {
            int(rowid): str(title)
            for rowid, title in self.conn.execute(
                f"SELECT id, title FROM nodes WHERE id IN ({id_list})"
            )
        }

    def passage_texts(self, ids: list[int]) -> dict[int, str]:
        """The original text of a few passages (by id), in one query over their line blocks."""
        if not ids:
            return {}
        blocks: dict[int, list[str]] = {}
        spans: dict[int, tuple[int, int, int]] = {}
        id_list = ",".join(str(int(i)) for i in ids)
        for pid, a, b, block, text in self.conn.execute(
            "SELECT p.id, p.start_line, p.end_line, lb.block, lb.text FROM passages p"
            " JOIN line_blocks lb ON lb.doc_id = p.doc_id"
            " AND lb.block BETWEEN (p.start_line - 1) / ?1 AND (p.end_line - 1) / ?1"
            f" WHERE p.id IN ({id_list}) ORDER BY p.id, lb.block",
            (LINE_BLOCK_SIZE,),
        ):
            if int(pid) not in spans:
                spans[int(pid)] = (int(a), int(b), int(block))
            blocks.setdefault(int(pid), []).append(str(text))
        out: dict[int, str] = {}
        for pid, (a, b, first) in spans.items():
            lines = "\n".join(blocks[pid]).split("\n")
            offset = a - 1 - first * LINE_BLOCK_SIZE
            out[pid] = "\n".join(lines[offset : offset + b - a + 1])
        return out

    def first_passage(self, node_rowid: int) -> tuple[int, int] | None:
        """The line range of a node's first passage (None for a node without passages)."""
        row = self.conn.execute(
            "SELECT start_line, end_line FROM passages WHERE node_rowid=?"
            " ORDER BY start_line LIMIT 1",
            (node_rowid,),
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def document_path(self, doc_id: int) -> str | None:
        row = self.conn.execute("SELECT path FROM documents WHERE id=?", (doc_id,)).fetchone()
        return str(row[0]) if row else None

    def ancestors(self, node_rowid: int) -> list[TitleRow]:
        """A node and every node above it in its document, in one query."""
        return [
            TitleRow(str(node_id), None if parent is None else str(parent), str(title), str(kind))
            for node_id, parent, title, kind in self.conn.execute(
                "WITH RECURSIVE up(doc_id, node_id, parent_id, title, kind, hops) AS ("
                " SELECT doc_id, node_id, parent_id, title, kind, 0 FROM nodes WHERE id=?"
                " UNION ALL"
                " SELECT n.doc_id, n.node_id, n.parent_id, n.title, n.kind, up.hops + 1"
                " FROM up JOIN nodes n ON n.doc_id = up.doc_id AND n.node_id = up.parent_id"
                " WHERE up.hops < ?)"
                " SELECT node_id, parent_id, title, kind FROM up",
                (node_rowid, _MAX_ANCESTORS),
            )
        ]


def fts_row_count(conn: apsw.Connection, table: str) -> int | None:
    """The rows of an FTS5 table, from its averages record (id 1 of `<table>_data`: a varint
    row count, then one varint of token totals per column; FTS5 keeps it current on every
    insert and delete). None if it can't be read."""
    try:
        row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    except apsw.Error:
        return None
    block = b"" if row is None else row[0]
    if not isinstance(block, bytes):
        return None
    return _varint(block) if block else 0  # as FTS5 reads it: no record, or an empty one, is 0


def _varint(data: bytes) -> int | None:
    """SQLite's variable-length integer at the start of `data` (7 bits a byte, big-endian, the
    9th byte whole); None when `data` ends inside it."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return None

"""Reading every page of an index to find damage that a normal run never sees.

A run reads only the pages it needs: an index damaged where nothing is read (a bad disk sector, a
copy cut short, a file edited by hand) opens, updates and answers "unchanged". `check_index` reads
everything: SQLite's own structure check over every table and index, then every term and posting
list of both full-text indexes (stored as blobs that SQLite cannot check), then every stored text
(which SQLite reads as bytes, never checking that it is UTF-8). About two seconds per
100 MB of index, so it is a command of its own, not part of every run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from markindex_core.store.db import SUMMARY_CACHE_TABLE, connect

_FTS_TABLES = ("node_fts", "passage_fts")
# Tables holding text: SQLite reads text as bytes, so only decoding every value finds a damaged
# one (all the text markindex writes is UTF-8); every reader would otherwise fail on it.
_TEXT_TABLES = (
    "meta",
    "documents",
    "nodes",
    "links",
    "skipped",
    "line_blocks",
    SUMMARY_CACHE_TABLE,
)
_PROBLEMS_SHOWN = 20


@dataclass
class IntegrityReport:
    path: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "db": self.path,
            "ok": self.ok,
            "problems": self.problems,
            "seconds": round(self.seconds, 3),
        }


def check_index(db_path: Path) -> IntegrityReport:
    """Every problem found in the index file (none: it is whole). Raises only when the file cannot
    be opened at all (missing, not an index), as every command does."""
    t0 = time.perf_counter()
    report = IntegrityReport(str(db_path))
    conn = connect(db_path, readonly=True)
    try:
        try:
            rows = [str(r[0]) for r in conn.execute(f"PRAGMA quick_check({_PROBLEMS_SHOWN})")]
            if rows != ["ok"]:
                report.problems.extend(rows)
        except apsw.Error as exc:
            report.problems.append(f"the structure check stopped: {exc}")
        for table in _FTS_TABLES:
            try:
                _walk_postings(conn, table)
            except apsw.Error as exc:
                report.problems.append(f"the search index {table} is damaged: {exc}")
        for table in _TEXT_TABLES:
            try:
                _decode_rows(conn, table)
            except UnicodeDecodeError:
                report.problems.append(f"the table {table} holds text that is not UTF-8 (damaged)")
            except apsw.Error as exc:
                report.problems.append(f"the table {table} cannot be read: {exc}")
    finally:
        conn.close()
    report.seconds = time.perf_counter() - t0
    return report


def _walk_postings(conn: apsw.Connection, table: str) -> None:
    """Decode every posting list of one FTS5 table (a malformed one raises)."""
    vocab = f"temp.check_{table}"
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {table}, row)")
    try:
        conn.execute(f"SELECT count(*), sum(cnt) FROM {vocab}").fetchall()
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {vocab}")


def _decode_rows(conn: apsw.Connection, table: str) -> None:
    """Read every value of `table` as Python does (a stored text that is not UTF-8 raises)."""
    for _ in conn.execute(f"SELECT * FROM {table}"):
        pass

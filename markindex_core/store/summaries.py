"""The store's side of model-written summaries: the cache, and writing summaries into the index.

Kept apart from the document writes in `db.py`: a document is written whole first (its nodes with
no summary), and summaries are added to its nodes afterwards, one batch per transaction, so a
run that is stopped midway keeps every batch it finished.

A node's summary is searchable: it fills the `summary` column of the node's row in `node_fts`
(weight 2). That table is contentless, so a row can only be replaced whole: its title, merged
headings and body terms are computed again here from the stored lines, exactly as the indexer
computed them (`segment.heading_terms`, and `segment.terms_text` of each passage's lines joined by spaces).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import apsw

from markindex_core.store.db import SUMMARY_CACHE_TABLE, Store
from markindex_core.text import segment


@dataclass(frozen=True)
class CachedSummary:
    """One answer to keep: `key` names exactly what was asked (see llm/summaries.py)."""

    key: str
    model: str
    text: str


def cached_texts(store: Store, keys: Iterable[str]) -> dict[str, str]:
    """The cached summaries of these keys (missing keys are left out)."""
    out: dict[str, str] = {}
    wanted = list(dict.fromkeys(keys))
    step = 500  # stay far below SQLite's limit on bound parameters
    for i in range(0, len(wanted), step):
        chunk = wanted[i : i + step]
        marks = ",".join("?" * len(chunk))
        for key, text in store.conn.execute(
            f"SELECT key, text FROM {SUMMARY_CACHE_TABLE} WHERE key IN ({marks})", chunk
        ):
            out[str(key)] = str(text)
    return out


def cache_size(store: Store) -> int:
    return int(store.scalar(f"SELECT count(*) FROM {SUMMARY_CACHE_TABLE}"))


def copy_cache(source: apsw.Connection, target: apsw.Connection) -> int:
    """Copy every cached summary from one index file into another (a full rebuild's new file)."""
    rows = list(source.execute(f"SELECT key, model, text, created_at FROM {SUMMARY_CACHE_TABLE}"))
    if rows:
        with target:
            target.executemany(
                f"INSERT OR IGNORE INTO {SUMMARY_CACHE_TABLE}(key, model, text, created_at)"
                " VALUES(?,?,?,?)",
                rows,
            )
    return len(rows)


def write_summaries(
    store: Store,
    cached: Sequence[CachedSummary],
    nodes: Sequence[tuple[int, str]],
    descriptions: Sequence[tuple[int, str]],
) -> None:
    """In one transaction: remember answers, set node summaries (rowid, text) and document
    descriptions (document id, text). Rows that vanished meanwhile are passed over."""
    now = time.time()
    with store.conn:
        store.conn.executemany(
            f"INSERT OR REPLACE INTO {SUMMARY_CACHE_TABLE}(key, model, text, created_at)"
            " VALUES(?,?,?,?)",
            [(c.key, c.model, c.text, now) for c in cached],
        )
        for rowid, text in nodes:
            _set_node_summary(store, rowid, text)
        store.conn.executemany(
            "UPDATE documents SET description=? WHERE id=?",
            [(text, doc_id) for doc_id, text in descriptions],
        )


def _set_node_summary(store: Store, rowid: int, text: str) -> None:
    c = store.conn
    row = c.execute("SELECT kind, title, key_items, doc_id FROM nodes WHERE id=?", (rowid,))
    found = row.fetchone()
    if found is None:
        return
    kind, title, key_items, doc_id = found
    t_title, t_keys = segment.heading_terms(
        str(title), json.loads(key_items), chunk=kind == "chunk"
    )
    bodies = [
        segment.terms_text("\n".join(store.read_lines(int(doc_id), int(a), int(b))))
        for a, b in list(
            c.execute(
                "SELECT start_line, end_line FROM passages WHERE node_rowid=? ORDER BY id",
                (rowid,),
            )
        )
    ]
    c.execute("UPDATE nodes SET summary=? WHERE id=?", (text, rowid))
    c.execute("DELETE FROM node_fts WHERE rowid=?", (rowid,))
    c.execute(
        "INSERT INTO node_fts(rowid, title, key_items, summary, body) VALUES(?,?,?,?,?)",
        (rowid, t_title, t_keys, segment.terms_text(text), " ".join(bodies)),
    )

"""The summary cache and summary text in the index, without any model (no network, no extra)."""

from __future__ import annotations

from pathlib import Path

import apsw

from markindex_core.config import SCHEMA_VERSION
from markindex_core.library import Library
from markindex_core.store.db import Store
from markindex_core.store.summaries import (
    CachedSummary,
    cache_size,
    cached_texts,
    write_summaries,
)
from markindex_core.text import segment
from tests.llm.summary_library import write_library


def _lib(tmp_path: Path) -> Library:
    root = tmp_path / "lib"
    write_library(root)
    lib = Library(root)
    lib.index()
    return lib


def _node(store: Store, path: str, title: str) -> int:
    doc = store.document_row(path)
    assert doc is not None
    return next(n.rowid for n in store.node_rows(doc.id) if n.title == title)


def _score(
    store: Store, rowid: int, query: str, weights: str = "10.0, 5.0, 2.0, 1.0"
) -> float | None:
    """BM25 of one node for `query` ("word" or "column:word", words as a user types them)."""
    query = " ".join(
        f"{col + ':' if col else ''}{segment.terms_text(word)}"
        for col, _, word in [q.rpartition(":") for q in query.split()]
    )
    row = store.conn.execute(
        f"SELECT bm25(node_fts, {weights}) FROM node_fts WHERE node_fts MATCH ? AND rowid=?",
        (query, rowid),
    ).fetchone()
    return None if row is None else float(row[0])


def test_a_summary_is_searchable_in_its_own_column_and_the_body_stays_the_same(
    tmp_path: Path,
) -> None:
    lib = _lib(tmp_path)
    store = Store(lib.db_path)
    try:
        rowid = _node(store, "guide.md", "Restore")
        body_before = _score(store, rowid, "restore")
        assert body_before is not None
        assert _score(store, rowid, "zanzibar") is None
        # The row is rebuilt from the stored lines exactly: with an empty summary (same row
        # length, bm25 counts every column's tokens) a body word scores the same to the last bit.
        write_summaries(store, [], [(rowid, "")], [])
        assert _score(store, rowid, "restore") == body_before
        write_summaries(
            store, [CachedSummary("k1", "m", "Zanzibar drills.")], [(rowid, "Zanzibar drills.")], []
        )
        # The summary word matches this node only, in the summary column, weighted 2.
        hits = [
            r[0]
            for r in store.conn.execute(
                "SELECT rowid FROM node_fts WHERE node_fts MATCH 'zanzibar'"
            )
        ]
        assert hits == [rowid]
        at_2 = _score(store, rowid, "summary:zanzibar")
        at_1 = _score(store, rowid, "summary:zanzibar", "10.0, 5.0, 1.0, 1.0")
        no_body = _score(store, rowid, "zanzibar", "10.0, 5.0, 2.0, 0.0")
        assert at_2 is not None and at_1 is not None and at_2 < at_1  # weight 2 ranks it higher
        assert no_body == _score(store, rowid, "zanzibar") == at_2  # the body has no part in it
        assert cached_texts(store, ["k1", "nope"]) == {"k1": "Zanzibar drills."}
    finally:
        store.close()
    result = lib.search("zanzibar")
    assert [(h.doc_path, h.title_path[-1]) for h in result.hits][:1] == [("guide.md", "Restore")]
    lib.close()


def test_the_cache_survives_a_full_rebuild(tmp_path: Path) -> None:
    lib = _lib(tmp_path)
    store = Store(lib.db_path)
    write_summaries(store, [CachedSummary("k1", "m", "kept")], [], [])
    store.close()
    report = lib.index(setext=False)  # a tree parameter changed: every document is rebuilt
    assert report.full_rebuild and len(report.updated) == 3
    store = Store(lib.db_path, readonly=True)
    assert cache_size(store) == 1 and cached_texts(store, ["k1"]) == {"k1": "kept"}
    store.close()
    lib.close()


def test_an_index_without_the_cache_gains_it_in_place(tmp_path: Path) -> None:
    lib = _lib(tmp_path)
    conn = apsw.Connection(str(lib.db_path))
    conn.execute("DROP TABLE summary_cache")
    conn.pragma("user_version", 2)
    conn.close()
    report = lib.index()
    assert report.unchanged == 3 and not report.full_rebuild  # nothing rebuilt
    store = Store(lib.db_path, readonly=True)
    assert store.conn.pragma("user_version") == SCHEMA_VERSION and cache_size(store) == 0
    store.close()
    lib.close()


def test_a_schema_change_rebuilds_the_documents_but_keeps_the_cache(tmp_path: Path) -> None:
    lib = _lib(tmp_path)
    store = Store(lib.db_path)
    write_summaries(store, [CachedSummary("k1", "m", "kept")], [], [])
    store.close()
    conn = apsw.Connection(str(lib.db_path))
    conn.pragma("user_version", 1)  # an older layout: everything but the cache is dropped
    conn.close()
    report = lib.index()
    assert len(report.added) == 3
    store = Store(lib.db_path, readonly=True)
    assert cached_texts(store, ["k1"]) == {"k1": "kept"}
    store.close()
    lib.close()

"""Small incremental commits leave FTS segments behind; the indexer folds them back in time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from markindex_core.config import FTS_OPTIMIZE_AFTER_WRITES
from markindex_core.index import indexer as indexer_module
from markindex_core.index.indexer import Indexer, open_for_writing
from markindex_core.library import Library
from markindex_core.store.db import Store
from tests.core.helpers import many_words


def _pending(lib: Library) -> int:
    store, lock = open_for_writing(lib.db_path)
    try:
        return int(store.get_meta("fts_pending_writes") or 0)
    finally:
        store.close()
        lock.release()


def test_segments_are_merged_after_enough_small_writes(sample_library: Path) -> None:
    lib = Library(sample_library)
    lib.index()
    start = _pending(lib)  # the first build's writes (4 documents) count too
    doc = sample_library / "guides" / "install.md"
    text = doc.read_text(encoding="utf-8")
    for i in range(FTS_OPTIMIZE_AFTER_WRITES - start - 1):
        doc.write_text(text + f"\nedit {i}\n", encoding="utf-8")
        assert lib.index().updated == ["guides/install.md"]
    assert _pending(lib) == FTS_OPTIMIZE_AFTER_WRITES - 1
    doc.write_text(text + "\nlast edit\n", encoding="utf-8")
    lib.index()
    assert _pending(lib) == 0
    assert lib.search("last edit", doc_path="guides/install.md").hits


def test_idle_tidy_runs_only_when_something_is_pending(sample_library: Path) -> None:
    lib = Library(sample_library)
    lib.index()
    store, lock = open_for_writing(lib.db_path)
    try:
        indexer = Indexer(lib.root, store)
        assert indexer.tidy(force=True)  # the first build's 4 writes were pending
        assert not indexer.tidy(force=True)  # nothing left to merge
    finally:
        store.close()
        lock.release()


def _big_library(parent: Path) -> Path:
    """Three documents of many distinct words: an FTS index of many leaf pages."""
    root = parent / "big"
    root.mkdir()
    for d in range(3):
        (root / f"doc{d}.md").write_text(many_words(d), encoding="utf-8")
    return root


def test_merge_steps_are_bounded_and_end_where_optimize_does(tmp_path: Path) -> None:
    """The daemon merges the segments small writes leave a step at a time: each step does a
    bounded part, the last says nothing is left, and the index then answers as before."""
    root = _big_library(tmp_path)
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    doc = root / "doc1.md"
    text = doc.read_text(encoding="utf-8")
    for i in range(4):  # one write each, as separate saves: a segment each
        doc.write_text(text + f"\nrevision {i}\n", encoding="utf-8")
        assert lib.index().updated == ["doc1.md"]
    before = [h.citation for h in lib.search("w1x7x30 common revision", limit=20).hits]
    assert before
    lib.close()
    store, lock = open_for_writing(lib.db_path)
    try:
        steps = 0
        while store.merge_step(pages=4):
            steps += 1
            assert steps < 10_000
        assert steps >= 3  # a few pages at a time takes several steps
        assert not store.merge_step()  # nothing left: what optimize would leave
        for table in ("node_fts", "passage_fts"):
            store.conn.execute(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
        indexer = Indexer(lib.root, store)
        assert _pending_of(store) > 0
        assert not indexer.merge_step()  # the indexer's step finds it merged and says so
        assert _pending_of(store) == 0
    finally:
        store.close()
        lock.release()
    after = Library(root, tmp_path / "index.db")
    assert [h.citation for h in after.search("w1x7x30 common revision", limit=20).hits] == before
    after.close()


def _pending_of(store: Store) -> int:
    return int(store.get_meta("fts_pending_writes") or 0)


FTS_DEFAULTS = {("automerge", 4), ("crisismerge", 16)}


def _merging(store: Store) -> set[tuple[str, int]]:
    """The merge settings of both FTS tables (equal in both: a set of one pair per setting)."""
    return {
        (key, store.scalar(f"SELECT v FROM {table}_config WHERE k=?", (key,)))
        for table in ("node_fts", "passage_fts")
        for key in ("automerge", "crisismerge")
    }


def test_a_bulk_build_merges_once_and_leaves_merging_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build of many documents writes without merging FTS segments (the `optimize` that ends it
    merges them all once), then turns FTS5's merging back on for the incremental writes after
    it, also when the build fails on the way."""
    store, lock = open_for_writing(tmp_path / "index.db")
    try:
        with pytest.raises(RuntimeError), store.bulk_writes():
            raise RuntimeError("interrupted")
        assert _merging(store) == FTS_DEFAULTS
        seen: list[set[tuple[str, int]]] = []
        write = store.write_documents

        def noting_write(docs: Any) -> None:
            seen.append(_merging(store))
            write(docs)

        monkeypatch.setattr(store, "write_documents", noting_write)
        monkeypatch.setattr(indexer_module, "BULK_WRITE_DOCS", 2)
        Indexer(_big_library(tmp_path), store).run()
        assert seen and all(s == {("automerge", 0), ("crisismerge", 2000)} for s in seen)
        assert _merging(store) == FTS_DEFAULTS
        assert _pending_of(store) == 0  # optimized at its end
    finally:
        store.close()
        lock.release()


def test_merging_is_back_on_when_a_writer_opens_an_index_a_killed_build_left(
    tmp_path: Path,
) -> None:
    """A bulk build killed inside `bulk_writes` leaves FTS merging off; the next writer to open
    the index turns it back on (readers leave it alone)."""
    store, lock = open_for_writing(tmp_path / "index.db")
    for table in ("node_fts", "passage_fts"):  # what a build killed inside `bulk_writes` leaves
        store.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('automerge', 0)")
        store.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('crisismerge', 2000)")
    store.close()
    lock.release()
    reader = Store(tmp_path / "index.db", readonly=True)
    assert ("automerge", 0) in _merging(reader)
    reader.close()
    store, lock = open_for_writing(tmp_path / "index.db")
    try:
        assert _merging(store) == FTS_DEFAULTS
    finally:
        store.close()
        lock.release()

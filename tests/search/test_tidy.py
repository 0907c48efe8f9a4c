"""Small incremental commits leave FTS segments behind; the indexer folds them back in time."""

from __future__ import annotations

from pathlib import Path

from markindex_core.config import FTS_OPTIMIZE_AFTER_WRITES
from markindex_core.index.indexer import Indexer, open_for_writing
from markindex_core.library import Library


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

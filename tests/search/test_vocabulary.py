"""The in-memory vocabulary answers fragment lookups like the SQL scan did, and follows writes."""

from __future__ import annotations

import apsw

from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_core.store.db import connect
from markindex_core.store.search_queries import SearchQueries
from markindex_core.store.vocabulary import Vocabulary, VocabularyCache


def _like(lib: Library, fragment: str, limit: int) -> list[str]:
    """The fragment lookup as SQL answers it: the reference the vocabulary must reproduce."""
    conn = lib.store.conn
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.ref_vocab USING fts5vocab(main, node_fts, row)"
    )
    pattern = "%" + fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return [
        str(t)
        for (t,) in conn.execute(
            "SELECT term FROM temp.ref_vocab WHERE term LIKE ? ESCAPE '\\'"
            " ORDER BY doc DESC LIMIT ?",
            (pattern, limit),
        )
    ]


def test_fragments_match_what_sql_like_returns(indexed_sample: Library) -> None:
    conn = indexed_sample.store.conn
    with conn:
        vocab = Vocabulary.load(conn)
    terms = vocab.text.strip("\n").split("\n")
    assert len(terms) > 50
    fragments = ["zzqxv", "_", "%", "\\", "数据", "ing", "con", "er", "e"]
    fragments += [t[1:4] for t in terms[::7] if len(t) >= 4]
    for fragment in fragments:
        for limit in (1, 3, 20):
            assert vocab.containing(fragment, limit) == _like(indexed_sample, fragment, limit), (
                fragment,
                limit,
            )
    assert vocab.containing("", 20) == [] and vocab.containing("a\nb", 20) == []


def test_a_new_word_is_found_by_its_fragment_after_a_write(indexed_sample: Library) -> None:
    assert indexed_sample.search("orblat").mode == "none"  # fills the vocabulary
    queries = SearchQueries(indexed_sample.store.conn)
    with indexed_sample.store.conn:
        assert queries.node_vocabulary_like("orblat") == []
    (indexed_sample.root / "new.md").write_text(
        "# Zorblatation\n\nThe zorblatation step.\n", encoding="utf-8"
    )
    indexed_sample.index()
    result = indexed_sample.search("orblat")
    assert result.mode == "substring"
    assert result.hits and result.hits[0].doc_path == "new.md"
    (indexed_sample.root / "new.md").unlink()
    indexed_sample.index()
    assert indexed_sample.search("orblat").mode == "none"


def test_after_a_write_fragments_are_answered_at_once_and_the_new_words_follow(
    indexed_sample: Library,
) -> None:
    """A fragment the vocabulary at hand can answer is answered from it while the new one loads
    on a connection of its own (walking the vocabulary grows with the library); the next
    searches find the words just written."""
    root = indexed_sample.root
    (root / "old.md").write_text("# Zorblatation\n\nThe zorblatation step.\n", encoding="utf-8")
    indexed_sample.index()
    conn = indexed_sample.store.conn
    queries = SearchQueries(conn)
    with conn:
        assert queries.node_vocabulary_like("orblat") == ["zorblat"]  # loaded: the first use
    (root / "new.md").write_text("# Zorblatomic\n\nA zorblatomic word.\n", encoding="utf-8")
    indexed_sample.index()
    with conn:
        assert queries.node_vocabulary_like("orblat") == ["zorblat"]  # the one at hand
        assert queries.vocabulary.renewing()
    queries.vocabulary.wait(10)
    with conn:
        assert sorted(queries.node_vocabulary_like("orblat")) == ["zorblat", "zorblatom"]
        assert not queries.vocabulary.renewing()


def test_a_renewal_that_fails_keeps_the_vocabulary_and_is_retried(indexed_sample: Library) -> None:
    conn = indexed_sample.store.conn
    opened: list[int] = []

    def broken() -> apsw.Connection:
        opened.append(1)
        raise MarkindexError("the index went away", "run `markindex index ROOT`")

    cache = VocabularyCache(conn, broken)
    with conn:
        before = cache.get()
    (indexed_sample.root / "new.md").write_text("# Quaxelbrot\n\nquaxelbrot.\n", encoding="utf-8")
    indexed_sample.index()
    with conn:
        assert cache.get() is before  # starts a renewal, which fails
    cache.wait(10)
    with conn:
        assert cache.get() is before  # the change is still unseen: a renewal is tried again
    cache.wait(10)
    assert opened == [1, 1]
    with conn:
        fresh = cache.get(wait=True)  # it fails once more: this connection walks instead
    assert opened == [1, 1, 1]
    assert fresh.containing("xelbr", 5) == ["quaxelbrot"]


def test_search_queries_are_freed_as_soon_as_they_are_dropped(indexed_sample: Library) -> None:
    """No reference cycle: a searcher's helper thread ends and its connection (perhaps to an
    index file already replaced and deleted) must close then, not whenever the cyclic GC runs."""
    import gc
    import weakref

    conn = connect(indexed_sample.db_path, readonly=True)
    queries = SearchQueries(conn)
    with conn:
        assert queries.node_vocabulary_like("ing")  # the vocabulary is loaded and in use
    gone = weakref.ref(queries)
    gc.disable()
    try:
        del queries
        assert gone() is None
    finally:
        gc.enable()
        conn.close()

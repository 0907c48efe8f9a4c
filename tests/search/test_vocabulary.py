"""The in-memory vocabulary answers fragment lookups like the SQL scan did, and follows writes."""

from __future__ import annotations

from markindex_core.library import Library
from markindex_core.store.search_queries import SearchQueries
from markindex_core.store.vocabulary import Vocabulary


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

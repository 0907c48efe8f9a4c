"""The store's search queries: the one-query title path and scope agree with the document rows."""

from __future__ import annotations

from pathlib import Path

from markindex_core.library import Library
from markindex_core.store.outline import title_path
from markindex_core.store.search_queries import (
    Scope,
    SearchQueries,
    _varint,
    fts_row_count,
)


def test_hit_title_paths_match_the_outline_of_their_document(indexed_sample: Library) -> None:
    seen = 0
    for query in ("max_conn", "upgrading", "数据泄露", "mem_quota_query 默认值", "install"):
        for hit in indexed_sample.search(query, limit=20).hits:
            doc = indexed_sample.document(hit.doc_path)
            assert doc is not None
            by_id = {n["node_id"]: n for n in indexed_sample.store.nodes(doc["id"])}
            assert hit.title_path == title_path(by_id, hit.node_id)
            seen += 1
    assert seen >= 5


def test_ancestors_walk_up_to_the_top_in_one_query(indexed_sample: Library) -> None:
    store = indexed_sample.store
    queries = SearchQueries(store.conn)
    deepest = 0
    for path in store.document_paths():
        doc = store.document(path)
        assert doc is not None
        nodes = store.nodes(doc["id"])
        by_id = {n["node_id"]: n for n in nodes}
        for node in nodes:
            chain = [a.node_id for a in queries.ancestors(node["rowid"])]
            walked = [node["node_id"]]
            while by_id[walked[-1]]["parent_id"] is not None:
                walked.append(by_id[walked[-1]]["parent_id"])
            assert chain == walked
            deepest = max(deepest, len(chain))
    assert deepest >= 2


def test_scope_keeps_only_its_documents(indexed_sample: Library) -> None:
    queries = SearchQueries(indexed_sample.store.conn)
    everywhere = queries.passage_scores('"widget"', Scope())
    one_doc = queries.passage_scores('"widget"', Scope.of(None, "/guides/install.md"))
    assert one_doc and len(one_doc) < len(everywhere)
    doc = indexed_sample.document("guides/install.md")
    assert doc is not None
    own = {n["rowid"] for n in indexed_sample.store.nodes(doc["id"])}
    assert {p.node_rowid for p in one_doc} <= own


def test_typed_rows_match_the_dict_readers(indexed_sample: Library) -> None:
    store = indexed_sample.store
    for path in store.document_paths():
        row = store.document_row(path)
        assert row is not None and row.path == path
        assert row.to_dict() == store.document(path)
        links = store.link_rows_from(row.id)
        assert [link.to_dict() for link in links] == store.links_from(row.id)
        for node in store.node_rows(row.id):
            assert store.node_row(row.id, node.node_id) == node
            assert store.node_by_rowid(node.rowid) == node
            assert node.start_line <= node.end_line <= node.subtree_end
    assert store.document_row("no/such.md") is None


def _counted(lib: Library) -> tuple[int, int]:
    conn = lib.store.conn
    exact = int(lib.store.scalar("SELECT count(*) FROM passages"))
    assert fts_row_count(conn, "passage_fts") == SearchQueries(conn).passage_count()
    return SearchQueries(conn).passage_count(), exact


def test_passage_count_follows_writes_and_deletes(sample_library: Path) -> None:
    """The O(1) count FTS5 keeps equals count(*) through a build, an edit and a removal."""
    lib = Library(sample_library, sample_library.parent / "index.db")
    try:
        lib.index()
        built, exact = _counted(lib)
        assert built == exact > 0
        doc = sample_library / "guides" / "install.md"
        doc.write_text(doc.read_text(encoding="utf-8") * 3, encoding="utf-8")
        lib.index()
        grown, exact = _counted(lib)
        assert grown == exact > built
        doc.unlink()
        lib.index()
        shrunk, exact = _counted(lib)
        assert shrunk == exact < built
    finally:
        lib.close()


def test_passage_count_of_an_empty_library_is_zero(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    lib = Library(tmp_path / "lib", tmp_path / "index.db")
    try:
        lib.index()
        assert _counted(lib) == (0, 0)
    finally:
        lib.close()


def test_varint_reads_sqlite_encoding() -> None:
    assert _varint(bytes([0x05])) == 5
    assert _varint(bytes([0x82, 0x2C, 0xFF])) == 300
    assert _varint(bytes([0xFF] * 8 + [0x01])) == (2**56 - 1) << 8 | 1
    assert _varint(bytes([0x81])) is None  # cut inside the integer

"""Outline entries name the subtree's end `subtree_end` inside and publish it as `end_line`."""

from __future__ import annotations

from typing import Any

from markindex_core.library import Library
from markindex_core.store.outline import OutlineEntry, nest, outline


def _walk(entries: list[OutlineEntry]) -> list[OutlineEntry]:
    out: list[OutlineEntry] = []
    for e in entries:
        out.append(e)
        out.extend(_walk(e.children or []))
    return out


def test_outline_entries_span_subtrees_and_publish_the_old_keys(indexed_sample: Library) -> None:
    checked = 0
    for path in indexed_sample.store.document_paths():
        doc = indexed_sample.document(path)
        assert doc is not None
        typed = indexed_sample.store.node_rows(doc["id"])
        rows = {n["node_id"]: n for n in indexed_sample.store.nodes(doc["id"])}
        assert [n.to_dict() for n in typed] == list(rows.values())
        entries = _walk(outline(typed))
        assert len(entries) == len(rows)
        for e in entries:
            row = rows[e.node_id]
            assert (e.start_line, e.subtree_end, e.own_end_line) == (
                row["start_line"],
                row["subtree_end"],
                row["end_line"],
            )
            assert e.subtree_tokens == row["subtree_tokens"]
            if e.children:
                assert e.subtree_end == max(c.subtree_end for c in e.children)
            checked += 1
        published: list[dict[str, Any]] = nest(list(rows.values()))
        assert published == nest(typed)
        top = published[0]
        assert list(top)[:7] == [
            "node_id",
            "kind",
            "title",
            "start_line",
            "end_line",
            "own_end_line",
            "tokens",
        ]
        assert top["end_line"] == rows[top["node_id"]]["subtree_end"]
    assert checked >= 10

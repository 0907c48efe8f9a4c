"""Nest a document's flat node rows into an outline (for `tree`, tools and the UI)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class TitleNode(Protocol):
    """What naming a path needs of a node: typed rows (`NodeRow`, `TitleRow`) provide it."""

    @property
    def parent_id(self) -> str | None: ...
    @property
    def title(self) -> str: ...
    @property
    def kind(self) -> str: ...


def nest(
    nodes: list[dict[str, Any]], *, depth: int | None = None, root_id: str | None = None
) -> list[dict[str, Any]]:
    """Nested outline; each entry spans its whole subtree (`start_line`..`end_line`).

    `depth` counts levels below the starting point (1 = only the top entries); `root_id` starts
    at one node's subtree instead of the document's top level.
    """
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    for n in nodes:
        by_parent.setdefault(n["parent_id"], []).append(n)

    def build(n: dict[str, Any], level: int) -> dict[str, Any]:
        kids = by_parent.get(n["node_id"], [])
        entry: dict[str, Any] = {
            "node_id": n["node_id"],
            "kind": n["kind"],
            "title": n["title"],
            "start_line": n["start_line"],
            "end_line": n["subtree_end"],
            "own_end_line": n["end_line"],
            "tokens": n["subtree_tokens"],
        }
        if n["key_items"]:
            entry["key_items"] = n["key_items"]
        if n.get("summary"):
            entry["summary"] = n["summary"]
        if depth is None or level < depth:
            entry["children"] = [build(k, level + 1) for k in kids]
        elif kids:
            entry["children_count"] = len(kids)
        return entry

    if root_id is None:
        return [build(n, 1) for n in by_parent.get(None, [])]
    for n in nodes:
        if n["node_id"] == root_id:
            return [build(n, 1)]
    return []


def title_path(
    nodes_by_id: Mapping[str, TitleNode] | Mapping[str, Mapping[str, Any]], node_id: str
) -> list[str]:
    """Titles from the top of the document down to `node_id` (untitled nodes named by kind).

    Takes typed rows, or the dict rows that `Store.nodes` still returns for older callers.
    """
    out: list[str] = []
    cur: str | None = node_id
    while cur is not None and cur in nodes_by_id:
        parent, label = _parent_and_label(nodes_by_id[cur])
        out.append(label)
        cur = parent
    return out[::-1]


def _parent_and_label(n: TitleNode | Mapping[str, Any]) -> tuple[str | None, str]:
    if isinstance(n, Mapping):
        return n["parent_id"], n["title"] or n["kind"]
    return n.parent_id, n.title or n.kind

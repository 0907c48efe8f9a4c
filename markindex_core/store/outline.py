"""Nest a document's flat node rows into an outline (for `tree`, tools and the UI).

Line ranges mean different things in rows and outlines; this is the one place that says how:

- a node row (`nodes` table, `NodeRow`, a search hit) has `start_line`..`end_line`: the lines
  the node owns itself, without its children, and `subtree_end`: the last line of its subtree;
- an outline entry spans its whole section. Inside the code it is `OutlineEntry.subtree_end`
  (and `subtree_tokens`). Its published JSON (`tree --json`, `get_document_structure`) keeps the
  keys `end_line` for the subtree's end, `own_end_line` for the node's own end, and `tokens` for
  the subtree's tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from markindex_core.store.rows import NodeRow


class TitleNode(Protocol):
    """What naming a path needs of a node: typed rows (`NodeRow`, `TitleRow`) provide it."""

    @property
    def parent_id(self) -> str | None: ...
    @property
    def title(self) -> str: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class OutlineEntry:
    """One section of an outline, spanning its whole subtree (see the module docstring)."""

    node_id: str
    kind: str
    title: str
    start_line: int
    subtree_end: int
    own_end_line: int
    subtree_tokens: int
    key_items: list[str] = field(default_factory=list)
    summary: str | None = None
    children: list[OutlineEntry] | None = None  # None: below the requested depth
    children_count: int = 0  # hidden children, when `children` is None

    def to_json(self) -> dict[str, Any]:
        """The published form (key names and order are part of the tool contract)."""
        entry: dict[str, Any] = {
            "node_id": self.node_id,
            "kind": self.kind,
            "title": self.title,
            "start_line": self.start_line,
            "end_line": self.subtree_end,
            "own_end_line": self.own_end_line,
            "tokens": self.subtree_tokens,
        }
        if self.key_items:
            entry["key_items"] = self.key_items
        if self.summary:
            entry["summary"] = self.summary
        if self.children is not None:
            entry["children"] = [c.to_json() for c in self.children]
        elif self.children_count:
            entry["children_count"] = self.children_count
        return entry


def nest(
    nodes: Sequence[NodeRow] | Sequence[Mapping[str, Any]],
    *,
    depth: int | None = None,
    root_id: str | None = None,
) -> list[dict[str, Any]]:
    """The outline in its published form: nested dicts, as `tree --json` and the tools show.

    Takes typed rows, or the dict rows that `Store.nodes` still returns for older callers.
    """
    rows = [n if isinstance(n, NodeRow) else NodeRow.from_dict(n) for n in nodes]
    return [e.to_json() for e in outline(rows, depth=depth, root_id=root_id)]


def outline(
    nodes: Sequence[NodeRow], *, depth: int | None = None, root_id: str | None = None
) -> list[OutlineEntry]:
    """Nested outline of a document's node rows (in document order).

    `depth` counts levels below the starting point (1 = only the top entries); `root_id` starts
    at one node's subtree instead of the document's top level.
    """
    by_parent: dict[str | None, list[NodeRow]] = {}
    for n in nodes:
        by_parent.setdefault(n.parent_id, []).append(n)

    def build(n: NodeRow, level: int) -> OutlineEntry:
        kids = by_parent.get(n.node_id, [])
        shown = depth is None or level < depth
        return OutlineEntry(
            node_id=n.node_id,
            kind=n.kind,
            title=n.title,
            start_line=n.start_line,
            subtree_end=n.subtree_end,
            own_end_line=n.end_line,
            subtree_tokens=n.subtree_tokens,
            key_items=n.key_items,
            summary=n.summary,
            children=[build(k, level + 1) for k in kids] if shown else None,
            children_count=0 if shown else len(kids),
        )

    if root_id is None:
        return [build(n, 1) for n in by_parent.get(None, [])]
    for n in nodes:
        if n.node_id == root_id:
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

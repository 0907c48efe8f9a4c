"""Typed rows the store returns: one frozen dataclass per kind of record read from the index.

Rows are built from columns by name (`from_columns`), never by position, so a SELECT can list
its columns in any order. `to_dict` gives the older dict form (same keys, same order) for
callers that have not moved to typed rows yet.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import apsw


class _DictForm:
    """`to_dict`: the dataclass's fields in declaration order, values not copied."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class DocumentRow(_DictForm):
    """One indexed document (front matter and warnings decoded from their JSON columns)."""

    id: int
    path: str
    title: str
    description: str
    front_matter: Any  # the decoded YAML mapping, None without front matter
    hash: str
    size: int
    mtime_ns: int
    tokens: int
    line_count: int
    encoding: str
    warnings: list[str]
    indexed_at: float

    @classmethod
    def from_columns(cls, c: Mapping[str, Any]) -> DocumentRow:
        return cls(
            id=int(c["id"]),
            path=str(c["path"]),
            title=str(c["title"]),
            description=str(c["description"]),
            # NaN and ±Infinity (YAML's .nan, .inf) as strings: they are not JSON, and a tool's
            # answer holding them fails to parse (stored so by an older markindex).
            front_matter=json.loads(c["front_matter"], parse_constant=str)
            if c["front_matter"]
            else None,
            hash=str(c["hash"]),
            size=int(c["size"]),
            mtime_ns=int(c["mtime_ns"]),
            tokens=int(c["tokens"]),
            line_count=int(c["line_count"]),
            encoding=str(c["encoding"]),
            warnings=json.loads(c["warnings"]),
            indexed_at=float(c["indexed_at"]),
        )


@dataclass(frozen=True)
class NodeRow(_DictForm):
    """One node of a document's section tree.

    `start_line`..`end_line` is the node's own text; `subtree_end` ends its whole subtree (see
    `outline.py` for how outlines publish these).
    """

    rowid: int
    doc_id: int
    ordinal: int
    node_id: str
    parent_id: str | None
    depth: int
    kind: str
    level: int
    title: str
    key_items: list[str]
    start_line: int
    end_line: int
    subtree_end: int
    tokens: int
    subtree_tokens: int
    summary: str | None

    @classmethod
    def from_columns(cls, c: Mapping[str, Any]) -> NodeRow:
        return cls(
            rowid=int(c["rowid"]),
            doc_id=int(c["doc_id"]),
            ordinal=int(c["ordinal"]),
            node_id=str(c["node_id"]),
            parent_id=None if c["parent_id"] is None else str(c["parent_id"]),
            depth=int(c["depth"]),
            kind=str(c["kind"]),
            level=int(c["level"]),
            title=str(c["title"]),
            key_items=json.loads(c["key_items"]),
            start_line=int(c["start_line"]),
            end_line=int(c["end_line"]),
            subtree_end=int(c["subtree_end"]),
            tokens=int(c["tokens"]),
            subtree_tokens=int(c["subtree_tokens"]),
            summary=None if c["summary"] is None else str(c["summary"]),
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeRow:
        """Back from `to_dict` (for callers that still hold dict rows)."""
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class LinkRow(_DictForm):
    """A link out of a document: its line, target document and anchor; broken if the target
    is not indexed."""

    line: int
    target: str
    anchor: str
    broken: bool

    @classmethod
    def from_columns(cls, c: Mapping[str, Any]) -> LinkRow:
        return cls(
            line=int(c["line"]),
            target=str(c["target"]),
            anchor=str(c["anchor"]),
            broken=c["target_id"] is None,
        )


def named_rows(cursor: apsw.Cursor) -> Iterator[dict[str, Any]]:
    """The rows of an executed statement as {column name: value}."""
    names: list[str] | None = None
    for row in cursor:
        if names is None:
            names = [d[0] for d in cursor.get_description()]
        yield dict(zip(names, row, strict=True))

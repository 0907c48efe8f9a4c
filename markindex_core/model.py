"""Records shared across the core: sections, passages and parsed documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


@dataclass
class Section:
    """One node of a document's optimized section tree (1-based, inclusive line numbers)."""

    node_id: str
    parent_id: str | None
    kind: str  # "document" | "preface" | "section" | "chunk"
    level: int  # heading level 1..6; 0 for document / preface / chunk
    title: str
    key_items: list[str]
    start_line: int  # own range: the lines this node owns, not its children's
    end_line: int
    subtree_end: int  # last line of the node's whole subtree
    tokens: int  # own text
    subtree_tokens: int
    depth: int
    content_hash: str
    body_start: int  # first own line after the heading (== start_line for untitled nodes)


class Passage(NamedTuple):
    """A block-aligned range inside one node: the unit of evidence a search result cites.

    A named tuple, not a dataclass: a full build makes ~100,000 of them on each side of the
    parse worker pipe, and a tuple is built and pickled in a fraction of the time."""

    node_index: int  # index into ParsedDocument.sections
    start_line: int
    end_line: int
    # Space-joined search terms of the passage text, UTF-8 encoded: FTS5 tokenizes a blob as its
    # UTF-8 text, so the store binds it as is; as a str, the indexing process would decode it
    # from the worker's pickle and APSW encode it again (twice: passage and node body).
    terms: bytes


@dataclass
class ParsedDocument:
    """Everything the store needs to write one document, built in a worker process."""

    path: str
    content_hash: str
    size: int
    mtime_ns: int
    encoding: str
    title: str
    description: str
    front_matter: dict[str, Any] | None
    line_count: int
    # The original lines, LINE_BLOCK_SIZE to a block, each joined by newlines and UTF-8 encoded:
    # the rows of `line_blocks` as they are bound (the store casts them to TEXT). Built by the
    # worker, so the indexing process neither splits a document into lines nor encodes them.
    line_blocks: list[bytes]
    sections: list[Section]
    passages: list[Passage]
    section_terms: list[tuple[str, str, bytes]]  # per section: title, key items, body terms
    links: list[tuple[int, str, str]]  # (line, target path, anchor)
    warnings: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sections)


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str

"""Records shared across the core: sections, passages and parsed documents."""

from __future__ import annotations

import json
from collections.abc import Sequence
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
    # Per section: title and key item terms (its body terms are its passages' terms, joined).
    section_terms: list[tuple[str, str]]
    links: list[tuple[int, str, str]]  # (line, target path, anchor)
    warnings: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    def rows(self) -> DocumentRows:
        """This document in the shape the store binds (see `DocumentRows`)."""
        index_of = {s.node_id: i for i, s in enumerate(self.sections)}
        nodes = [
            (
                s.node_id,
                s.parent_id,
                s.depth,
                s.kind,
                s.level,
                s.title,
                json.dumps(s.key_items, ensure_ascii=False) if s.key_items else "[]",
                s.start_line,
                s.end_line,
                s.subtree_end,
                s.tokens,
                s.subtree_tokens,
                s.content_hash,
            )
            for s in self.sections
        ]
        # Columns, in C: no tuple per passage is pickled, sent or unpickled.
        passages = tuple(zip(*self.passages, strict=True)) if self.passages else ((), (), (), ())
        p_nodes, p_starts, p_ends, p_terms = passages
        return DocumentRows(
            path=self.path,
            content_hash=self.content_hash,
            size=self.size,
            mtime_ns=self.mtime_ns,
            encoding=self.encoding,
            title=self.title,
            description=self.description,
            front_matter=None
            if self.front_matter is None
            else json.dumps(self.front_matter, ensure_ascii=False),
            tokens=self.tokens,
            line_count=self.line_count,
            line_blocks=self.line_blocks,
            nodes=nodes,
            node_parents=[
                -1 if s.parent_id is None else index_of[s.parent_id] for s in self.sections
            ],
            node_terms=self.section_terms,
            passage_nodes=p_nodes,
            passage_starts=p_starts,
            passage_ends=p_ends,
            passage_terms=p_terms,
            links=self.links,
            warnings=self.warnings,
        )


NodeRow = tuple[str, str | None, int, str, int, str, str, int, int, int, int, int, str]


class DocumentRows(NamedTuple):
    """A parsed document in the shape the store binds: what a parse worker sends.

    The indexing process writes what the workers parse, and its CPU is the bottleneck of a full
    build: here it finds the rows ready, with JSON already encoded, and the passages as columns
    that it zips into rows in C. Rebuilding ~100,000 passage and section objects from the pickles
    (and binding rows built from them in Python) cost it ~0.5 s on the evaluation corpus.
    Node body terms are not sent: they are the node's passage terms joined (see
    `document._section_terms`); the store joins them.
    """

    path: str
    content_hash: str
    size: int
    mtime_ns: int
    encoding: str
    title: str
    description: str
    front_matter: str | None  # JSON
    tokens: int
    line_count: int
    line_blocks: list[bytes]  # see `ParsedDocument.line_blocks`
    # Per node, in order: its `nodes` columns from node_id to content_hash (key items as JSON).
    nodes: list[NodeRow]
    node_parents: list[int]  # index of each node's parent, -1 for none
    node_terms: list[tuple[str, str]]  # title terms, key item terms
    # Per passage, in document order (so by node): its node's index, lines, terms (UTF-8).
    passage_nodes: Sequence[int]
    passage_starts: Sequence[int]
    passage_ends: Sequence[int]
    passage_terms: Sequence[bytes]
    links: list[tuple[int, str, str]]
    warnings: list[str]


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str

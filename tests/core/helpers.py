"""Shared checks for the core tests: build a document in-process and verify its tree invariants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from markindex_core.config import TreeParams
from markindex_core.index.document import build_document
from markindex_core.model import ParsedDocument, Section, SkippedFile
from markindex_core.store.db import SUMMARY_CACHE_TABLE, Store
from tests.paths import REPO

REPO_ROOT = REPO


def markindex(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, from the repository, with no stdin."""
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *argv],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def doc_lines(doc: ParsedDocument) -> list[str]:
    """The document's original lines, from the line blocks it stores."""
    return "\n".join(b.decode() for b in doc.line_blocks).split("\n") if doc.line_count else []


def build(src: str | bytes, path: str = "doc.md", **params: Any) -> ParsedDocument:
    """Parse `src` with the given tree parameters; fail the test if the file is skipped."""
    data = src.encode("utf-8") if isinstance(src, str) else src
    doc = build_document(path, data, 0, TreeParams(**params))
    assert not isinstance(doc, SkippedFile), doc.reason
    return doc


def check_tree(sections: list[Section], line_count: int) -> None:
    """Own ranges tile 1..line_count in pre-order; subtrees nest; parents and depths agree."""
    if line_count == 0:
        assert sections == []
        return
    assert sections, "a document with lines has at least one node"
    expected = 1
    for s in sections:
        assert s.start_line == expected, (s, expected)
        assert s.end_line >= s.start_line, s
        expected = s.end_line + 1
    assert expected == line_count + 1, (expected, line_count)
    ids = [s.node_id for s in sections]
    assert len(set(ids)) == len(ids), "node ids are unique within a document"
    by_id = {s.node_id: s for s in sections}
    kid_tokens: dict[str, int] = {}
    stack: list[Section] = []

    def close(s: Section, next_start: int) -> None:
        # A subtree ends where the next node outside it begins, and sums its children.
        assert s.subtree_end == next_start - 1, (s, next_start)
        assert s.subtree_tokens == s.tokens + kid_tokens.get(s.node_id, 0), s
        if s.parent_id is not None:
            kid_tokens[s.parent_id] = kid_tokens.get(s.parent_id, 0) + s.subtree_tokens

    for s in sections:
        while stack and stack[-1].node_id != s.parent_id:
            close(stack.pop(), s.start_line)
        if s.parent_id is None:
            assert not stack and s.depth == 0
        else:
            assert stack, f"parent of {s} is not an open ancestor (pre-order broken)"
            parent = by_id[s.parent_id]
            assert s.depth == parent.depth + 1
            assert parent.start_line <= s.start_line <= s.subtree_end <= parent.subtree_end
        stack.append(s)
    while stack:
        close(stack.pop(), line_count + 1)


def tree_shape(doc: ParsedDocument) -> list[tuple[object, ...]]:
    return [
        (
            s.node_id,
            s.parent_id,
            s.kind,
            s.level,
            s.title,
            tuple(s.key_items),
            s.start_line,
            s.end_line,
            s.subtree_end,
            s.tokens,
        )
        for s in doc.sections
    ]


COUNT_QUERIES = {
    "documents": "SELECT count(*) FROM documents",
    "nodes": "SELECT count(*) FROM nodes",
    "passages": "SELECT count(*) FROM passages",
    "line_blocks": "SELECT count(*) FROM line_blocks",
    "links": "SELECT count(*) FROM links",
    "skipped": "SELECT count(*) FROM skipped",
    "node_fts": "SELECT count(*) FROM node_fts",
    "passage_fts": "SELECT count(*) FROM passage_fts",
}


def index_fingerprint(db: Path) -> dict[str, object]:
    """Everything that must match between an incrementally updated index and a fresh build."""
    store = Store(db, readonly=True)
    try:
        out: dict[str, object] = {k: store.scalar(q) for k, q in COUNT_QUERIES.items()}
        docs = {}
        for path in store.document_paths():
            d = store.document(path)
            assert d is not None
            nodes = [
                (
                    n["node_id"],
                    n["parent_id"],
                    n["kind"],
                    n["title"],
                    n["start_line"],
                    n["end_line"],
                    n["subtree_end"],
                    n["tokens"],
                    tuple(n["key_items"]),
                )
                for n in store.nodes(d["id"])
            ]
            lines = store.read_lines(d["id"], 1, d["line_count"])
            assert len(lines) == d["line_count"]
            docs[path] = (
                d["hash"],
                d["title"],
                d["line_count"],
                d["tokens"],
                nodes,
                hash(tuple(lines)),
                tuple(tuple(x.values()) for x in store.links_from(d["id"])),
            )
        out["docs"] = docs
        out["skipped_paths"] = store.skipped()
        # FTS rows must point at live nodes and passages only.
        out["orphan_node_fts"] = store.scalar(
            "SELECT count(*) FROM node_fts WHERE rowid NOT IN (SELECT id FROM nodes)"
        )
        return out
    finally:
        store.close()


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def make_library(root: Path, n: int = 12) -> Path:
    """A small library with folders, links, Chinese and English text, front matter."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        folder = ("guides", "laws/cn", "specs", "")[i % 4]
        rel = f"{folder}/doc{i}.md" if folder else f"doc{i}.md"
        body = "\n\n".join(
            f"## Part {j}\n\nParagraph {j} of document {i}, 第{j}条 数据处理者应当履行义务。 "
            + "words " * (20 + 37 * ((i + j) % 5))
            for j in range(1 + i % 6)
        )
        fm = f"---\ntitle: Doc {i}\n---\n" if i % 3 == 0 else ""
        write(root, rel, f"{fm}# Document {i}\n\nSee [next](/doc{(i + 1) % n}.md).\n\n{body}\n")
    return root


def check_store_consistent(db: Path) -> int:
    """The index opens, passes SQLite's check, and every document is whole. Returns doc count."""
    store = Store(db, readonly=True)
    try:
        assert store.scalar("PRAGMA quick_check") == "ok"
        return check_documents_whole(store)
    finally:
        store.close()


def check_documents_whole(store: Store) -> int:
    """Every document has nodes tiling its lines, all its lines, and nothing is orphaned."""
    paths = store.document_paths()
    for path in paths:
        d = store.document(path)
        assert d is not None
        nodes = store.nodes(d["id"])
        expected = 1
        for n in nodes:
            assert n["start_line"] == expected, (path, n)
            expected = n["end_line"] + 1
        assert expected == d["line_count"] + 1, path
        assert len(store.read_lines(d["id"], 1, d["line_count"])) == d["line_count"]
    orphans = (
        store.scalar("SELECT count(*) FROM nodes WHERE doc_id NOT IN (SELECT id FROM documents)")
        + store.scalar(
            "SELECT count(*) FROM passages WHERE doc_id NOT IN (SELECT id FROM documents)"
        )
        + store.scalar(
            "SELECT count(*) FROM line_blocks WHERE doc_id NOT IN (SELECT id FROM documents)"
        )
    )
    assert orphans == 0
    return len(paths)


def damage_pages(db: Path, table: str, share: float = 0.5) -> int:
    """Overwrite the last `share` of `table`'s leaf pages on disk (found with SQLite's `dbstat`),
    as a bad sector or a copy cut short would: each keeps its first bytes, the rest is noise.
    Returns the number of pages damaged."""
    import os

    import apsw

    conn = apsw.Connection(str(db))
    conn.pragma("wal_checkpoint(TRUNCATE)")
    page_size = int(conn.pragma("page_size"))
    leaves = [
        int(r[0])
        for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,)
        )
    ]
    conn.close()
    damaged = leaves[int(len(leaves) * (1 - share)) :] or leaves[-1:]
    with db.open("r+b") as f:
        for page in damaged:
            f.seek((page - 1) * page_size + 8)  # past the page header's type byte
            f.write(os.urandom(page_size - 16))
    return len(damaged)


def many_words(n: int, sections: int = 40) -> str:
    """A document of many distinct words (`w<n>x<section>x<i>`): its FTS rows fill many pages."""
    lines = [f"# Document {n}", ""]
    for s in range(sections):
        lines += [f"## Section {s}", ""]
        for j in range(0, 240, 12):
            lines.append(" ".join(f"w{n}x{s}x{i} common" for i in range(j, j + 12)))
        lines.append("")
    return "\n".join(lines)


def two_libraries(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Libraries A and B of one document each, and A's index (`a.db`): for the cases where B is
    served or watched with A's index."""
    from markindex_core.library import Library

    a, b = tmp_path / "A", tmp_path / "B"
    for root, name in ((a, "a.md"), (b, "b.md")):
        write(root, name, "# Doc\n\nwords\n")
    db = tmp_path / "a.db"
    Library(a, db).index()
    return a, b, db


def damage_text(db: Path, text: bytes) -> int:
    """Overwrite the first byte of every copy of `text` in the file with 0xFF, as a flipped bit
    on disk would: the pages stay well-formed to SQLite, the stored value is no longer UTF-8.
    Returns the number of copies damaged."""
    import apsw

    conn = apsw.Connection(str(db))
    conn.pragma("wal_checkpoint(TRUNCATE)")
    conn.close()
    data = db.read_bytes()
    copies = data.count(text)
    db.write_bytes(data.replace(text, b"\xff" + text[1:]))
    return copies


PAID_SUMMARY = "a paid-for summary"


def cache_a_summary(db: Path) -> None:
    """Put one model summary (key `k1`) in the index's summary cache: what a rebuild must keep."""
    store = Store(db)
    try:
        with store.conn:
            store.conn.execute(
                f"INSERT INTO {SUMMARY_CACHE_TABLE}(key, model, text, created_at) VALUES(?,?,?,?)",
                ("k1", "test:model", PAID_SUMMARY, 1.0),
            )
    finally:
        store.close()


def cached_summary(db: Path) -> str | None:
    """The summary `cache_a_summary` put in, if the index still holds it."""
    store = Store(db, readonly=True)
    try:
        text = store.scalar(f"SELECT text FROM {SUMMARY_CACHE_TABLE} WHERE key='k1'")
        return None if text is None else str(text)
    finally:
        store.close()

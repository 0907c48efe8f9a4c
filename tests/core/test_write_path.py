"""The fast write path: what workers send and what the store writes equals the plain path."""

from __future__ import annotations

import pickle
from pathlib import Path

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from markindex_core.config import TreeParams
from markindex_core.index.document import build_document
from markindex_core.index.workers import Job, WorkerPool, load, pack, unpack
from markindex_core.model import ParsedDocument, SkippedFile
from markindex_core.store.db import Store
from markindex_core.text import segment

from .helpers import make_library

SAMPLES = {
    "empty.md": b"",
    "one-empty-line.md": b"\n",
    "blank-tail.md": b"# A\n\ntext\n\n\n",
    "front.md": b"---\ntitle: T\ntags: [a, b]\n---\n# Head\n\nbody [x](other.md#s)\n",
    "cjk.md": "# 第一章 总则\n\n第一条 为了规范 TiDB 的 tidb_mem_quota_query 设置。\n\n## 小节\n\n- 列表\n".encode(),
    "crlf.md": b"# T\r\n\r\nline one\r\nline two\r\n",
}


def _docs() -> list[ParsedDocument]:
    out = []
    for name, data in SAMPLES.items():
        doc = build_document(name, data, 1, TreeParams(setext=True))
        assert isinstance(doc, ParsedDocument)
        out.append(doc)
    return out


def test_packed_documents_arrive_equal() -> None:
    for doc in _docs():
        assert unpack(pickle.loads(pickle.dumps(pack(doc)))) == doc
    skipped = SkippedFile("x.md", "binary")
    assert unpack(pickle.loads(pickle.dumps(pack(skipped)))) == skipped


def test_worker_results_equal_in_process_results(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    for name, data in SAMPLES.items():
        (root / name).write_bytes(data)
    rels = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
    jobs = [Job(str(root), rel, TreeParams(setext=True)) for rel in rels]
    pool = WorkerPool(2, "forkserver", 60.0)
    pool.start()
    by_rel = {getattr(r, "path", ""): r for r in pool.results(jobs)}
    assert len(by_rel) == len(jobs)
    for job in jobs:
        assert by_rel[job.rel] == load(job)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_word_pattern_matches_unicode_pattern(text: str) -> None:
    assert segment._WORD_ASCII.findall(text) == segment._WORD.findall(text)


def _ids(conn: apsw.Connection, sql: str) -> list[int]:
    return sorted(int(r[0]) for r in conn.execute(sql))


def test_given_row_ids_link_nodes_passages_and_search_rows(tmp_path: Path) -> None:
    """After writes, deletes and rewrites every FTS row sits on its node or passage id."""
    store = Store(tmp_path / "index.db")
    docs = _docs()
    store.write_documents(docs)
    store.delete_documents([docs[2].path])
    store.write_documents([docs[4], docs[2]])  # replaced and re-added: fresh ids past the old
    c = store.conn
    assert _ids(c, "SELECT rowid FROM node_fts") == _ids(c, "SELECT id FROM nodes")
    assert _ids(c, "SELECT rowid FROM passage_fts") == _ids(c, "SELECT id FROM passages")
    wrong = "SELECT count(*) FROM passages p JOIN nodes n ON n.id = p.node_rowid"
    assert store.scalar(wrong + " WHERE n.doc_id != p.doc_id") == 0
    assert store.scalar("SELECT count(*) FROM passages") == sum(len(d.passages) for d in docs)
    store.close()

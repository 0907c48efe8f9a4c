"""The tools on the evaluation corpus (in-process): every folder page, the largest document read
whole through its pages, and every dev question searched; all within the response budget."""

from __future__ import annotations

import json

from markindex_core.library import Library
from tests.mcp.helpers import LARGEST_DOC, join_pieces, ok, read_all_parts
from tests.paths import CORPUS, EVAL_DIR, needs_corpus

pytestmark = needs_corpus


def test_browse_walks_every_folder(corpus_library: Library) -> None:
    folders, docs = [""], 0
    while folders:
        folder = folders.pop()
        first = ok(corpus_library, "browse_documents", {"folder": folder})
        pages = [first] + [
            ok(corpus_library, "browse_documents", {"folder": folder, "part": p})
            for p in range(2, first["parts"] + 1)
        ]
        for page in pages:
            folders += [f["path"] for f in page["folders"]]
            docs += len(page["documents"])
    assert docs == corpus_library.store.count_documents()


def test_largest_document_structure_and_every_line(corpus_library: Library) -> None:
    info = ok(corpus_library, "get_document", {"doc_path": LARGEST_DOC})
    assert info["read_structure_first"] is True and info["tokens"] > 15_000
    args = {"doc_path": LARGEST_DOC, "depth": 32}
    first = ok(corpus_library, "get_document_structure", args)
    entries = list(first["nodes"])
    for part in range(2, first["parts"] + 1):
        entries += ok(corpus_library, "get_document_structure", {**args, "part": part})["nodes"]
    assert len(entries) == first["entries_total"] == info["node_count"]
    ids = [n["node_id"] for n in info["top_level_nodes"]]
    lines: dict[int, str] = {}
    for i in range(0, len(ids), 20):
        chunk = join_pieces(
            read_all_parts(
                corpus_library,
                {"doc_path": LARGEST_DOC, "node_ids": ids[i : i + 20], "subtree": True},
            )
        )
        assert not set(chunk) & set(lines)
        lines.update(chunk)
    file_lines = (CORPUS / LARGEST_DOC).read_text(encoding="utf-8").splitlines()
    assert sorted(lines) == list(range(1, info["line_count"] + 1))
    assert [lines[n] for n in sorted(lines)][: len(file_lines)] == file_lines


def test_every_dev_question_searches_within_budget(corpus_library: Library) -> None:
    questions = [
        json.loads(line)["question"]
        for path in sorted(EVAL_DIR.glob("questions-dev-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert questions
    for q in questions:
        data = ok(corpus_library, "search_documents", {"query": q, "limit": 50})
        assert data["results"], q
        for r in data["results"]:
            lo, hi = r["passage_lines"]
            assert r["citation"] == f"[{r['doc_path']}, L{lo}-{hi}]"

"""A tool call reads one snapshot of the index, even when a writer commits in the middle of it.

The writer is the real indexer, run from SQLite's statement hook on the reading connection just
before the call reads a document's lines: the same moment a daemon's commit can land.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from markindex_core.library import Library
from tests.mcp.helpers import content_lines, ok


def _section(word: str) -> str:
    return "".join(f"{word} line {i} " + "word " * 30 + "\n" for i in range(12))


OLD = f"# Guide\n\nintro\n\n## Alpha\n\n{_section('alpha')}\n## Beta\n\n{_section('beta')}"
NEW = OLD.replace("intro\n", "intro\nnew 1\nnew 2\nnew 3\n", 1)  # every section moves down 3


def test_lines_read_during_a_commit_match_their_numbers(tmp_path: Path) -> None:
    root, db = tmp_path / "lib", tmp_path / "index.db"
    root.mkdir()
    (root / "a.md").write_text(OLD, encoding="utf-8")
    Library(root, db=db).index()
    lib = Library(root, db=db)
    outline = ok(lib, "get_document_structure", {"doc_path": "a.md"})["nodes"]
    beta = next(n for n in outline if n["title"] == "Beta")
    old_lines = OLD.split("\n")

    fired: list[str] = []

    def commit_a_new_version(cursor: Any, sql: str, bindings: Any) -> bool:
        if "line_blocks" in sql and not fired:
            fired.append(sql)
            (root / "a.md").write_text(NEW, encoding="utf-8")
            Library(root, db=db).index()
        return True

    lib.store.conn.exec_trace = commit_a_new_version
    try:
        data = ok(lib, "get_node_content", {"doc_path": "a.md", "node_ids": [beta["node_id"]]})
    finally:
        lib.store.conn.exec_trace = None
    assert fired  # the commit landed mid-call
    lines = content_lines(data["nodes"])
    assert lines[0] == (beta["start_line"], " ## Beta")
    for number, text in lines:  # every line is the text the file had at that number
        assert text[1:] == old_lines[number - 1], (number, text)
    # The next call sees the new version, with its own numbers.
    again = json.loads(
        lib.call_tool("get_node_content", {"doc_path": "a.md", "node_ids": [beta["node_id"]]})
    )
    assert content_lines(again["data"]["nodes"])[0] == (beta["start_line"] + 3, " ## Beta")

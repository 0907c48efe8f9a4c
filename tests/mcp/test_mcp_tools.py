"""The tool contract in-process (`Library.call_tool`): envelopes, every tool on the sample library,
pagination within the budget, path safety, stale ids, hostile input, missing and building index."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from markindex_core.config import RESPONSE_CHAR_BUDGET
from markindex_core.library import Library
from markindex_core.store.lock import WriterLock
from markindex_core.tools.check import BadInput, validate
from markindex_core.tools.contract import AGENT_INSTRUCTIONS, TOOLS, call_tool_result
from tests.mcp.helpers import (
    TOOL_NAMES,
    call,
    content_lines,
    hostile_calls,
    join_pieces,
    ok,
    read_all_parts,
    write_big_library,
)

DOC = "guides/install.md"


def test_contract_names_schemas_and_instructions() -> None:
    assert set(TOOLS) == TOOL_NAMES
    for spec in TOOLS.values():
        schema = spec.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert spec.description and spec.title
        for prop in schema["properties"].values():
            assert prop.get("description"), (spec.name, prop)
        validate(schema, _minimal_args(spec.name))
    for words in ("browse_documents", "get_document_structure", "[doc_path, L<start>-<end>]", "│"):
        assert words in AGENT_INSTRUCTIONS


def _minimal_args(name: str) -> dict[str, Any]:
    args: dict[str, dict[str, Any]] = {
        "browse_documents": {},
        "get_document": {"doc_path": DOC},
        "get_document_structure": {"doc_path": DOC},
        "get_node_content": {"doc_path": DOC, "node_ids": ["abc"]},
        "search_documents": {"query": "x"},
    }
    return args[name]


def test_validator_fills_defaults_and_names_the_field() -> None:
    schema = TOOLS["get_document_structure"].input_schema
    assert validate(schema, {"doc_path": "a.md"}) == {
        "doc_path": "a.md",
        "node_id": None,
        "depth": 2,
        "part": 1,
        "version": None,
    }
    assert validate(schema, {"doc_path": "a.md", "depth": 3.0})["depth"] == 3
    with pytest.raises(BadInput, match="`depth` must be an integer, got a boolean"):
        validate(schema, {"doc_path": "a.md", "depth": True})
    with pytest.raises(BadInput, match="limit is 1024"):
        validate(schema, {"doc_path": "a" * 1025})


def test_browse_root_and_folder(indexed_sample: Library) -> None:
    root = ok(indexed_sample, "browse_documents")
    assert [f["path"] for f in root["folders"]] == ["guides", "laws", "specs"]
    assert [d["path"] for d in root["documents"]] == ["README.md"]
    assert root["documents_below"] == 4 and root["parts"] == 1
    guides = ok(indexed_sample, "browse_documents", {"folder": "guides/"})
    assert guides["folder"] == "guides"
    assert guides["documents"][0] == {
        "path": DOC,
        "title": "Installing Widget Server",
        "description": "How to install, configure and upgrade Widget Server on Linux.",
        "tokens": guides["documents"][0]["tokens"],
        "read_structure_first": False,
    }


def test_unknown_paths_come_with_suggestions(indexed_sample: Library) -> None:
    env = call(indexed_sample, "get_document", {"doc_path": "guides/instal.md"})
    assert env["code"] == "NOT_FOUND" and DOC in env["details"]["similar"]
    assert env["next_steps"]["calls"][0] == {"tool": "get_document", "arguments": {"doc_path": DOC}}
    env = call(indexed_sample, "browse_documents", {"folder": "guide"})
    assert env["code"] == "NOT_FOUND" and env["details"]["similar"] == ["guides"]
    env = call(indexed_sample, "browse_documents", {"folder": DOC})
    assert "is a document" in env["error"]
    env = call(indexed_sample, "get_document", {"doc_path": "guides"})
    assert env["next_steps"]["calls"][0]["tool"] == "browse_documents"


def test_get_document_metadata_and_link_graph(indexed_sample: Library) -> None:
    data = ok(indexed_sample, "get_document", {"doc_path": DOC})
    assert data["title"] == "Installing Widget Server"
    assert data["front_matter"]["tags"] == ["install", "linux"]
    assert data["line_count"] == 56 and data["size_bytes"] > 0
    assert data["read_structure_first"] is False
    links = data["links"]
    assert {"line": 10, "target": "specs/配置参考.md", "anchor": "", "broken": False} in links[
        "outgoing"
    ]
    assert links["broken_total"] == 1
    assert {b["source"] for b in links["backlinks"]} == {"README.md", "specs/配置参考.md"}
    assert [n["title"] for n in data["top_level_nodes"]][-1] == "Installing Widget Server"


def test_structure_depth_subtree_and_stale_ids(indexed_sample: Library) -> None:
    full = ok(indexed_sample, "get_document_structure", {"doc_path": DOC})
    titles = [n["title"] for n in full["nodes"]]
    assert "Requirements" in titles and "Troubleshooting" in titles
    assert "content" not in json.dumps(full["nodes"])  # outline only, no body
    top = ok(indexed_sample, "get_document_structure", {"doc_path": DOC, "depth": 1})
    main = next(n for n in top["nodes"] if n["title"] == "Installing Widget Server")
    assert main["children_hidden"] and main["children"] == 5
    assert main["start_line"] == 7 and main["end_line"] == 56 and main["own_end_line"] == 11
    sub = ok(
        indexed_sample, "get_document_structure", {"doc_path": DOC, "node_id": main["node_id"]}
    )
    assert sub["nodes"][0]["node_id"] == main["node_id"] and len(sub["nodes"]) == 6
    stale = call(indexed_sample, "get_document_structure", {"doc_path": DOC, "node_id": "0" * 12})
    assert stale["code"] == "NODE_NOT_FOUND"
    assert stale["next_steps"]["calls"][0]["tool"] == "get_document_structure"


def test_node_content_has_real_line_numbers(indexed_sample: Library, sample_library: Path) -> None:
    file_lines = (sample_library / DOC).read_text(encoding="utf-8").split("\n")
    outline = ok(indexed_sample, "get_document_structure", {"doc_path": DOC})
    req = next(n for n in outline["nodes"] if n["title"] == "Requirements")
    data = ok(indexed_sample, "get_node_content", {"doc_path": DOC, "node_ids": [req["node_id"]]})
    node = data["nodes"][0]
    assert node["title_path"] == ["Installing Widget Server", "Requirements"]
    assert node["content"].startswith("12│ ## Requirements\n13│ ")
    for number, rest in content_lines(data["nodes"]):
        assert rest == " " + file_lines[number - 1]
    assert (node["first_line"], node["last_line"], node["complete"]) == (12, 17, True)
    assert (
        "[guides/install.md, L12-17]"
        in call(
            indexed_sample, "get_node_content", {"doc_path": DOC, "node_ids": [req["node_id"]]}
        )["next_steps"]["message"]
    )


def test_node_content_subtree_reads_the_whole_document_once(
    indexed_sample: Library, sample_library: Path
) -> None:
    file_lines = (sample_library / DOC).read_text(encoding="utf-8").split("\n")
    info = ok(indexed_sample, "get_document", {"doc_path": DOC})
    ids = [n["node_id"] for n in info["top_level_nodes"]]
    lines = join_pieces(
        read_all_parts(
            indexed_sample, {"doc_path": DOC, "node_ids": ids + ids[:1], "subtree": True}
        )
    )
    assert sorted(lines) == list(range(1, info["line_count"] + 1))
    assert all(lines[n] == file_lines[n - 1] for n in lines)


def test_search_results_carry_citations_and_scope(indexed_sample: Library) -> None:
    data = ok(indexed_sample, "search_documents", {"query": "install pip"})
    hit = data["results"][0]
    assert hit["doc_path"] == DOC and hit["rank"] == 1
    lo, hi = hit["passage_lines"]
    assert hit["citation"] == f"[{DOC}, L{lo}-{hi}]"
    assert hit["node_lines"][0] <= lo <= hi <= hit["node_lines"][1]
    assert hit["title_path"][0] == "Installing Widget Server" and hit["snippet"]
    assert data["mode"] in ("strict", "relaxed", "substring") and "notice" in data
    scoped = ok(indexed_sample, "search_documents", {"query": "数据", "folder": "laws"})
    assert scoped["results"] and all(r["doc_path"].startswith("laws/") for r in scoped["results"])
    one = ok(indexed_sample, "search_documents", {"query": "数据", "doc_path": "specs/配置参考.md"})
    assert all(r["doc_path"] == "specs/配置参考.md" for r in one["results"])
    both = {"query": "数据", "doc_path": "specs/配置参考.md", "folder": "laws"}
    narrowest = ok(indexed_sample, "search_documents", both)  # folder was dropped silently
    assert narrowest["results"] == one["results"] and narrowest["scope"]["folder"] is None
    assert narrowest["notice"].startswith("`folder` was ignored: `doc_path` names one document")
    relaxed = ok(indexed_sample, "search_documents", {"query": "install zzzunknownword"})
    assert relaxed["relaxed"] and relaxed["notice"]
    env = call(indexed_sample, "search_documents", {"query": "x", "doc_path": "guides/instal.md"})
    assert env["code"] == "NOT_FOUND" and DOC in env["details"]["similar"]


def test_hostile_calls_all_fail_cleanly(indexed_sample: Library) -> None:
    calls = hostile_calls()
    assert len(calls) >= 40
    for name, args in calls:
        text, success = call_tool_result(indexed_sample, name, args)
        env = json.loads(text)
        assert not success and env["success"] is False, (name, str(args)[:100])
        assert len(text) < 5_000, "errors never echo huge input back"
        assert env["code"] in {
            "INVALID_INPUT",
            "NOT_FOUND",
            "NODE_NOT_FOUND",
            "OUT_OF_RANGE",
            "UNKNOWN_TOOL",
        }, env
    assert ok(indexed_sample, "browse_documents")["documents_below"] == 4


def test_tools_never_write(indexed_sample: Library, sample_library: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in sample_library.rglob("*")}
    for name in TOOL_NAMES:
        call(indexed_sample, name, {"doc_path": DOC} if "doc" in name else {})
    after = {p: p.stat().st_mtime_ns for p in sample_library.rglob("*")}
    assert {p for p in after if "-wal" not in p.name and "-shm" not in p.name} == {
        p for p in before if "-wal" not in p.name and "-shm" not in p.name
    }


def test_missing_index_and_index_being_built(sample_library: Path) -> None:
    lib = Library(sample_library)
    env = call(lib, "browse_documents")
    assert env["code"] == "INDEX_MISSING" and "markindex index" in env["next_steps"]["message"]
    assert not (sample_library / ".markindex").exists(), "tools create nothing"
    (sample_library / ".markindex").mkdir()
    lock = WriterLock(lib.db_path)
    assert lock.try_acquire()
    try:
        env = call(lib, "search_documents", {"query": "install"})
        assert env["code"] == "INDEX_BUILDING" and "being built" in env["error"]
    finally:
        lock.release()
    lib.index()
    assert ok(lib, "browse_documents")["documents_below"] == 4
    lib.close()


def test_an_emptied_library_under_a_writer_answers_with_nothing(sample_library: Path) -> None:
    """Every file deleted while a daemon holds the writer lock: the index is empty because the
    library is, and tools say so (no hits), not "being built" for as long as the daemon runs."""
    lib = Library(sample_library)
    lib.index()
    for doc in sample_library.rglob("*.md"):
        doc.unlink()
    lib.index()
    lock = WriterLock(lib.db_path)
    assert lock.try_acquire()
    try:
        assert ok(lib, "search_documents", {"query": "install"})["results"] == []
        assert ok(lib, "browse_documents")["documents_below"] == 0
    finally:
        lock.release()
        lib.close()


@pytest.fixture(scope="module")
def big_library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    root = tmp_path_factory.mktemp("big") / "library"
    write_big_library(root)
    lib = Library(root)
    lib.index()
    yield lib
    lib.close()
    shutil.rmtree(root, ignore_errors=True)


def test_browse_pages_a_large_folder(big_library: Library) -> None:
    first = ok(big_library, "browse_documents", {"folder": "many"})
    assert first["parts"] >= 3 and first["total_documents"] == 450
    seen = [d["path"] for d in first["documents"]]
    for part in range(2, first["parts"] + 1):
        seen += [
            d["path"]
            for d in ok(big_library, "browse_documents", {"folder": "many", "part": part})[
                "documents"
            ]
        ]
    assert seen == sorted(f"many/doc-{i:03d}.md" for i in range(450))
    env = call(big_library, "browse_documents", {"folder": "many", "part": first["parts"] + 1})
    assert env["code"] == "OUT_OF_RANGE" and env["details"]["parts"] == first["parts"]


def test_structure_pages_a_large_outline(big_library: Library) -> None:
    args = {"doc_path": "outline.md", "depth": 32}
    first = ok(big_library, "get_document_structure", args)
    assert first["parts"] > 1
    ids = [n["node_id"] for n in first["nodes"]]
    for part in range(2, first["parts"] + 1):
        ids += [
            n["node_id"]
            for n in ok(big_library, "get_document_structure", {**args, "part": part})["nodes"]
        ]
    assert len(ids) == len(set(ids)) == first["entries_total"] >= 300


@pytest.mark.parametrize("doc", ["long.md", "giant.md"])
def test_content_pages_return_every_line_once(big_library: Library, doc: str) -> None:
    root = big_library.root
    file_lines = (root / doc).read_text(encoding="utf-8").split("\n")
    info = ok(big_library, "get_document", {"doc_path": doc})
    ids = [n["node_id"] for n in info["top_level_nodes"]]
    args = {"doc_path": doc, "node_ids": ids, "subtree": True}
    parts = ok(big_library, "get_node_content", args)["parts"]
    assert parts > 1
    for part in range(1, parts + 1):  # every page is within the budget (checked in envelope())
        assert (
            len(big_library.call_tool("get_node_content", {**args, "part": part}))
            <= RESPONSE_CHAR_BUDGET
        )
    lines = join_pieces(read_all_parts(big_library, args))
    assert sorted(lines) == list(range(1, info["line_count"] + 1))
    assert all(lines[n] == file_lines[n - 1] for n in lines)


def test_every_path_the_index_returns_can_be_opened(tmp_path: Path) -> None:
    """An agent can open every document it was shown: odd but legal names pass the path checks."""
    root = tmp_path / "lib"
    names = ["~draft.md", "a b.md", "中文 文档.md", "#hash.md", "%20.md", "dir.with.dots/x..y.md"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n\nbody text\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    listed = [
        d["path"] for d in json.loads(lib.call_tool("browse_documents", {}))["data"]["documents"]
    ]
    listed += [
        d["path"]
        for d in json.loads(lib.call_tool("browse_documents", {"folder": "dir.with.dots"}))["data"][
            "documents"
        ]
    ]
    assert sorted(listed) == sorted(names)
    for path in listed:
        env = json.loads(lib.call_tool("get_document", {"doc_path": path}))
        assert env["success"], env
    lib.close()


def test_front_matter_numbers_json_has_not_are_strings(tmp_path: Path) -> None:
    """YAML's .nan and .inf would make the answer invalid JSON (JSON.parse fails on NaN)."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("---\nn: .nan\ni: -.inf\nok: 1.5\n---\n# T\n\nx\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()

    def strict(constant: str) -> None:
        raise AssertionError(f"{constant} in a tool answer")

    answer = lib.call_tool("get_document", {"doc_path": "a.md"})
    json.loads(answer, parse_constant=strict)
    front_matter = ok(lib, "get_document", {"doc_path": "a.md"})["front_matter"]
    assert front_matter == {"n": "nan", "i": "-inf", "ok": 1.5}, front_matter


@pytest.mark.parametrize("keys", [300, 15_000])
def test_huge_front_matter_still_answers_get_document(tmp_path: Path, keys: int) -> None:
    """Too large to show, front matter is replaced by its keys; with 15 000 keys the list of
    keys alone passed the answer budget and the document could not be described at all."""
    root = tmp_path / "lib"
    root.mkdir()
    fields = "".join(f"key_{i:05d}: {'v' * 80}\n" for i in range(keys))
    (root / "a.md").write_text(f"---\n{fields}---\n# T\n\nx\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    data = ok(lib, "get_document", {"doc_path": "a.md"})
    listed = data["front_matter"]["keys"]
    assert listed[0] == "key_00000" and listed == sorted(listed)
    assert "only its keys are listed" in data["front_matter_note"]
    if keys == 300:
        assert len(listed) == 300
    else:
        assert 100 < len(listed) < keys and f"of {keys}" in data["front_matter_note"]


def test_search_answers_within_the_budget_whatever_json_escapes(tmp_path: Path) -> None:
    """Titles and text full of quotes and backslashes double in JSON: the last results give way
    (and the answer says how many), the answer itself never fails for its size."""
    root = tmp_path / "lib"
    root.mkdir()
    q, b = chr(34) * 150, chr(92) * 150  # each doubles in JSON
    words = " ".join(f"word{k}" for k in range(250))  # sections too big to be merged
    body = "\n\n".join(
        "\n\n".join(f"{'#' * d} {q} {b} {i}.{d}\n\nzebu {q}{b} {words}" for d in range(1, 7))
        for i in range(12)
    )
    (root / "q.md").write_text(f"{body}\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    text = lib.call_tool("search_documents", {"query": "zebu", "limit": 50})
    env = json.loads(text)
    assert env["success"], env
    assert len(text) <= RESPONSE_CHAR_BUDGET
    data = env["data"]
    assert data["count"] == len(data["results"]) > 0
    assert data["left_out"] > 0 and data["count"] + data["left_out"] == 50, data["left_out"]
    assert f"{data['left_out']} more results" in env["next_steps"]["message"]


def test_node_content_pages_count_title_paths_as_json(tmp_path: Path) -> None:
    """Titles of quotes take twice their length in JSON: pages count them."""
    root = tmp_path / "lib"
    root.mkdir()
    words = " ".join(f"word{k}" for k in range(700))
    title = chr(34) * 280
    body = "\n\n".join(
        "\n\n".join(f"{'#' * d} {title} {i}.{d}\n\n{words}" for d in range(1, 7)) for i in range(4)
    )
    (root / "c.md").write_text(body + "\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    doc = lib.store.document("c.md")
    assert doc is not None
    ids = [n["node_id"] for n in lib.store.nodes(doc["id"])][:20]
    assert len(ids) == 20
    part, seen = 1, []
    while True:
        text = lib.call_tool(
            "get_node_content", {"doc_path": "c.md", "node_ids": ids, "part": part}
        )
        env = json.loads(text)
        assert env["success"], env
        assert len(text) <= RESPONSE_CHAR_BUDGET
        seen += [n["node_id"] for n in env["data"]["nodes"]]
        if part == env["data"]["parts"]:
            break
        part += 1
    assert set(seen) == set(ids)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("get_document", {"doc_path": "\ud800.md"}),
        ("search_documents", {"query": "zebra \udfff"}),
        ("browse_documents", {"folder": "a\ud83d"}),
    ],
)
def test_lone_surrogates_from_python_callers_are_invalid_input(
    indexed_sample: Library, tool: str, args: dict[str, Any]
) -> None:
    env = json.loads(indexed_sample.call_tool(tool, args))
    assert env["code"] == "INVALID_INPUT" and "lone surrogates" in env["error"], env


def test_a_name_in_the_other_unicode_normalization_finds_the_document(tmp_path: Path) -> None:
    """A file named on macOS (`e` + combining accent) is found by the name as one types it."""
    import unicodedata

    root = tmp_path / "lib"
    root.mkdir()
    stored = unicodedata.normalize("NFD", "café.md")
    (root / stored).write_text("# Café\n\nespresso notes\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    typed = unicodedata.normalize("NFC", stored)
    assert typed != stored and lib.store.document_paths() == [stored]
    data = ok(lib, "get_document", {"doc_path": typed})
    assert data["doc_path"] == stored
    found = ok(lib, "search_documents", {"query": "espresso", "doc_path": typed})
    assert found["count"] == 1 and found["scope"]["doc_path"] == stored
    assert lib.document(typed) is not None and lib.outline(typed)


def test_a_folder_in_the_other_unicode_normalization_is_that_folder(tmp_path: Path) -> None:
    """A folder named on macOS is browsed and searched by the name as one types it: through
    the tools and `markindex search --folder`."""
    import unicodedata

    root = tmp_path / "lib"
    stored = unicodedata.normalize("NFD", "dossier-é")
    (root / stored).mkdir(parents=True)
    (root / stored / "notes.md").write_text("# Notes\n\nespresso notes\n", encoding="utf-8")
    (root / "other.md").write_text("# Other\n\nespresso elsewhere\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    typed = unicodedata.normalize("NFC", stored)
    assert typed != stored
    assert ok(lib, "browse_documents", {"folder": typed})["documents_below"] == 1
    found = ok(lib, "search_documents", {"query": "espresso", "folder": typed})
    assert found["count"] == 1 and found["results"][0]["doc_path"] == f"{stored}/notes.md"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "markindex_core",
            "search",
            str(root),
            "espresso",
            "--db",
            str(tmp_path / "index.db"),
            "--folder",
            typed,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    assert [h["doc_path"] for h in json.loads(cli.stdout)["hits"]] == [f"{stored}/notes.md"]
    lib.close()


@pytest.mark.parametrize("tool", ["get_node_content", "get_document_structure"])
def test_a_later_part_of_a_document_that_changed_is_refused(tmp_path: Path, tool: str) -> None:
    # Parts are read one call at a time: an edit between two of them moves the lines, so the
    # next part of the new text would not continue the part read (lines skipped or repeated).
    root = tmp_path / "lib"
    root.mkdir()
    body = "\n\n".join(f"## Section {i}\n\n" + f"Line of section {i}. " * 60 for i in range(1200))
    (root / "long.md").write_text(f"# Long\n\n{body}\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    top = ok(lib, "get_document", {"doc_path": "long.md"})["top_level_nodes"]
    if tool == "get_node_content":
        args: dict[str, Any] = {"doc_path": "long.md", "node_ids": [top[0]["node_id"]]}
        args["subtree"] = True
    else:
        args = {"doc_path": "long.md", "depth": 4}
    first = call(lib, tool, args)
    assert first["success"] and first["data"]["parts"] > 1
    version = first["data"]["version"]
    (next_call,) = [c for c in first["next_steps"]["calls"] if c["arguments"].get("part") == 2]
    assert next_call["arguments"]["version"] == version  # following next_steps passes it
    assert ok(lib, tool, next_call["arguments"])["part"] == 2  # unchanged: served

    text = (root / "long.md").read_text(encoding="utf-8")
    (root / "long.md").write_text("Intro line.\n\n" + text, encoding="utf-8")
    lib.index()
    env = call(lib, tool, next_call["arguments"])
    assert not env["success"] and env["code"] == "DOCUMENT_CHANGED"
    assert env["details"]["version"] != version
    restart = env["next_steps"]["calls"][0]["arguments"]
    assert restart["part"] == 1 and "version" not in restart
    again = ok(lib, tool, restart)
    assert again["version"] == env["details"]["version"]
    assert ok(lib, tool, {**next_call["arguments"], "version": again["version"]})["part"] == 2
    assert ok(lib, tool, {**args, "part": 2})["part"] == 2  # no version given: served as before
    lib.close()

"""An adversarial client: a real `mcp` ClientSession talking to `markindex mcp` over stdio, with
documents and arguments chosen to break the contract (sizes, echoes, escapes, path checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from markindex_core.config import BLOB_WORD_CHARS, RESPONSE_CHAR_BUDGET
from markindex_core.library import Library
from tests.mcp.helpers import envelope, server_command
from tests.paths import REPO


def indexed(root: Path, db: Path, files: dict[str, str], *options: str) -> None:
    """Write `files` under `root` and index them into `db` with the real command."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), *options],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def session(root: Path, db: Path, errlog: Path) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession on a server process; its stderr goes to `errlog`."""
    command, args = server_command(root, db)
    params = StdioServerParameters(
        command=command, args=args, cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    with errlog.open("w", encoding="utf-8") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as client,
        ):
            await client.initialize()
            yield client


async def call(client: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call: the envelope, checked for shape, size and its `isError` flag."""
    result = await client.call_tool(name, args)
    text = result.content[0].text  # type: ignore[union-attr]
    env = envelope(text)
    assert env["success"] is (not result.is_error)
    return env


async def test_a_fragment_of_a_huge_word_keeps_the_search_answer_bounded(tmp_path: Path) -> None:
    """A query that matched only a fragment of a long indexed word put that word whole into
    `notice` and `terms`: with a 32 768-character word (an inlined base64 image, indexed then)
    the answer passed the response budget and came back as RESPONSE_TOO_LARGE instead of the
    hit. Such a blob is no longer indexed at all; a word at the longest a word may be still
    matches by its fragment, and the answer stays small."""
    word = "iVBORw0KGgo" + "QUJDRA" * ((BLOB_WORD_CHARS - 11) // 6)
    blob = "iVBORw0KGgo" + "QUJDRA" * 10_000
    files = {
        "img.md": f"# Image\n\n![logo](data:image/png;base64,{blob})\n\nA caption.\n",
        "key.md": f"# Key\n\nThe key:\n\n{word}\n",
    }
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, files)
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            env = await call(client, "search_documents", {"query": "QUJDRAQUJD"})
    assert env["success"], env["error"]
    data = env["data"]
    assert data["mode"] == "substring", data
    assert [r["doc_path"] for r in data["results"]] == ["key.md"], data  # not the blob's
    assert len(json.dumps(env, ensure_ascii=False)) < RESPONSE_CHAR_BUDGET // 4


async def test_a_huge_integer_argument_is_refused_without_being_echoed(tmp_path: Path) -> None:
    """JSON numbers have no size limit: `part` with 4 000 digits was quoted whole in the error
    (a 4 200-character message), and from Python 10**5000 could not even be written out (the
    int-to-str limit): an INTERNAL_ERROR with a traceback on stderr."""
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {"a.md": "# A\n\ntext\n"})
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            for args in ({"part": 10**4000}, {"part": -(10**4000)}, {"part": 10**20}):
                env = await call(client, "browse_documents", args)
                assert env["code"] == "INVALID_INPUT" and len(env["error"]) < 200, env["error"]
    lib = Library(root, db)
    env = json.loads(
        lib.call_tool("get_document_structure", {"doc_path": "a.md", "depth": 10**5000})
    )
    assert env["code"] == "INVALID_INPUT" and len(env["error"]) < 200, env["error"]
    lib.close()


async def test_c1_control_characters_in_a_path_are_invalid_input(tmp_path: Path) -> None:
    """The README promises control characters in a path are INVALID_INPUT, and the scanner
    skips names holding C1 controls (U+0080-U+009F); the tools checked only C0 and DEL, so
    `a.md` + NEL (U+0085) or CSI (U+009B) came back as NOT_FOUND, suggestions and all."""
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {"a.md": "# A\n\ntext\n"})
    calls = [
        ("get_document", {"doc_path": "a.md\x85"}),
        ("get_document_structure", {"doc_path": "\x9ba.md"}),
        ("browse_documents", {"folder": "docs\x9b31m"}),
        ("search_documents", {"query": "text", "doc_path": "a.md\x80"}),
        ("search_documents", {"query": "text", "folder": "\x9f"}),
    ]
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            for name, args in calls:
                env = await call(client, name, args)
                assert env["code"] == "INVALID_INPUT", (name, args, env)
                assert "control characters" in env["error"]


async def test_an_unknown_field_name_is_quoted_with_its_controls_escaped(tmp_path: Path) -> None:
    """Error messages are what a person reads; every other echo of the caller's text (a path,
    a tool name) is escaped, but unknown field names went in raw: ESC sequences and a bidi
    override (U+202E) reached whoever reads the error."""
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {"a.md": "# A\n\ntext\n"})
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            env = await call(client, "browse_documents", {"\x1b]52;c;eA==\x07\u202eevil": 1})
    assert env["code"] == "INVALID_INPUT"
    assert env["error"] == "unknown field(s): \\x1b]52;c;eA==\\x07\\u202eevil", env["error"]
    assert env["details"]["unknown"] == ["\x1b]52;c;eA==\x07\u202eevil"]  # data stays as sent


async def test_a_later_part_after_a_reindex_with_other_settings_is_refused(
    tmp_path: Path,
) -> None:
    """`version` was the document's content hash alone; `markindex index --no-setext` keeps the
    text and drops the setext sections, so part 2 of the new outline was served under the old
    version: 140 sections between part 1's end and part 2's start were skipped without a word."""
    body = "".join(
        f"## ATX heading {k} {'padding words ' * 6}\n\ntext {k}\n\n"
        f"Setext heading {k} {'padding words ' * 6}\n----------\n\nmore {k}\n\n"
        for k in range(700)
    )
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {"doc.md": f"# Top\n\n{body}"})
    args: dict[str, Any] = {"doc_path": "doc.md", "depth": 32}
    with anyio.fail_after(120):
        async with session(root, db, tmp_path / "stderr.log") as client:
            first = await call(client, "get_document_structure", args)
            assert first["data"]["parts"] > 2
            (next_part,) = [c for c in first["next_steps"]["calls"] if "part" in c["arguments"]]
            indexed(root, db, {}, "--no-setext")  # the same text, other settings
            env = await call(client, "get_document_structure", next_part["arguments"])
            assert env.get("code") == "DOCUMENT_CHANGED", "a part of another outline was served"
            again = await call(
                client, "get_document_structure", env["next_steps"]["calls"][0]["arguments"]
            )
            assert again["data"]["entries_total"] < first["data"]["entries_total"]


async def test_get_document_fits_its_lists_into_one_answer(tmp_path: Path) -> None:
    """get_document has no parts: it lists up to 100 top-level sections, outgoing links and
    backlinks each. A generated reference page (large front matter, 100 long headings, 100 links
    to long-named pages that link back) came to 121 924 characters: RESPONSE_TOO_LARGE, so the
    document could not even be described."""

    def page(i: int) -> str:
        return f"reference/{'generated-api-reference-page-name-' * 5}{i:03d}.md"

    front = "".join(f"key{i}: {'v' * 180}\n" for i in range(100))
    sections = "".join(
        f"# Heading {i} {'with a rather long descriptive title ' * 9}\n\n"
        f"See [page {i}](../{page(i)}#{'anchor-' * 10}).\n\n"
        for i in range(100)
    )
    files = {"guide/target.md": f"---\n{front}---\n{sections}"}
    back = f"# Page\n\nback to [guide](../guide/target.md#{'heading-' * 12})\n"
    files.update({page(i): back for i in range(100)})
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, files)
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            env = await call(client, "get_document", {"doc_path": "guide/target.md"})
    assert env["success"], env["error"]
    data = env["data"]
    links = data["links"]
    assert links["outgoing_total"] == links["backlinks_total"] == 100
    shown = len(data["top_level_nodes"]) + len(links["outgoing"]) + len(links["backlinks"])
    assert 0 < shown < 300 and "fit" in data["lists_note"]


async def test_many_unknown_fields_give_a_bounded_error(tmp_path: Path) -> None:
    """Each unknown field name was cut to 64 characters, but all of them were listed, twice
    (message and details): 300 000 of them made a 5.4 MB error envelope."""
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {"a.md": "# A\n\ntext\n"})
    args = {f"field_{i:06d}": i for i in range(100_000)}
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            env = await call(client, "search_documents", {"query": "text", **args})
    assert env["code"] == "INVALID_INPUT"
    assert len(json.dumps(env)) < 2_000, len(json.dumps(env))
    assert env["details"]["unknown_total"] == 100_000
    assert env["details"]["unknown"][0] == "field_000000" and "100000" in env["error"]


async def test_error_messages_escape_bidi_controls_of_indexed_paths(tmp_path: Path) -> None:
    """A file name may hold a bidi override (the scanner refuses only C0 and C1 controls), and
    some errors named the document raw: `unknown node id(s) in <U+202E>gpj.md` reads reversed.
    Errors that quote what the caller sent were escaped already (repr)."""
    name = "invoice-\u202egpj.md"
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {name: "# Invoice\n\ntext\n"})
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            env = await call(client, "get_node_content", {"doc_path": name, "node_ids": ["0" * 12]})
            structure = await call(client, "get_document_structure", {"doc_path": name, "part": 9})
    assert env["code"] == "NODE_NOT_FOUND" and "invoice-\\u202egpj.md" in env["error"], env
    assert env["details"]["doc_path"] == name  # data stays as indexed
    assert structure["code"] == "OUT_OF_RANGE" and "\u202e" not in structure["error"]


async def test_every_suggested_call_fits_the_published_schema(tmp_path: Path) -> None:
    """next_steps offers ready-made calls; the published schemas leave `null` out (single-type
    dialects refuse it), but the next-part call of an outline passed `"node_id": null`: a host
    that checks arguments against the schema refused the very call the server suggested."""
    body = "".join(f"## Section {k} {'padding words ' * 8}\n\ntext {k}\n\n" for k in range(1500))
    root, db = tmp_path / "lib", tmp_path / "index.db"
    indexed(root, db, {"doc.md": f"# Top\n\n{body}"})
    with anyio.fail_after(60):
        async with session(root, db, tmp_path / "stderr.log") as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            answers = [
                await call(client, "get_document_structure", {"doc_path": "doc.md", "depth": 3}),
                await call(client, "get_document_structure", {"doc_path": "doc.md", "part": 99}),
                await call(client, "get_document", {"doc_path": "doc.md"}),
                await call(client, "search_documents", {"query": "padding"}),
            ]
    suggested = [c for env in answers for c in env["next_steps"].get("calls", [])]
    assert len(suggested) >= 4
    for suggestion in suggested:
        jsonschema.validate(suggestion["arguments"], schemas[suggestion["tool"]])

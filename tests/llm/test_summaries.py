"""Summaries and descriptions through the command line, against the scripted server (no network).

The library (tests/llm/summary_library.py) needs 9 answers: guide.md has no front-matter
description (1 description) and a root and three sections of 500+ tokens (4 summaries);
policy.md has its own description and a root and two long sections (3); note.md is small (only
its description).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from markindex_core.config import SUMMARY_COMMIT_EVERY
from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_core.store.db import Store
from tests.daemon.helpers import wait_for
from tests.llm.scripted_server import LoggedRequest, ScriptedServer, Step, error, reply
from tests.llm.summary_library import paragraph, write_library
from tests.paths import REPO

MODEL = "openai-chat:scripted"
PLANNED = 9


def answer(req: LoggedRequest) -> Step:
    """A summary naming the section it was asked about (its title path, from the prompt)."""
    user = next(m["content"] for m in req.messages if m["role"] == "user")
    head = user.splitlines()[1] if user.startswith("Document:") else user.splitlines()[0]
    word = "kickoff" if head.endswith("Restore") else "overview"
    return reply(f"About {head.split(': ', 1)[1]}: {word}.")


def markindex(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    base["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "markindex_core.cli.main", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
    )


def summarize(root: Path, server: ScriptedServer, *extra: str, code: int = 0) -> dict[str, Any]:
    """`markindex index ROOT --summary-model … --json`; its report (exit status `code`)."""
    p = markindex(
        "index", str(root), "--summary-model", MODEL, "--base-url", server.base_url, "--json",
        *extra,
    )  # fmt: skip
    assert p.returncode == code, p.stderr
    report: dict[str, Any] = json.loads(p.stdout)
    return report


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_library(tmp_path / "lib")
    return tmp_path / "lib"


def test_a_second_run_makes_no_request(root: Path, server: ScriptedServer) -> None:
    server.fallback = answer
    first = summarize(root, server)
    assert first["summaries"]["requests"] == PLANNED == len(server.requests)
    assert first["summaries"]["written"] == PLANNED and first["summary_errors"] == 0
    for req in server.requests:  # plain text: no tools offered
        assert "tools" not in req.body
    again = summarize(root, server)
    assert len(server.requests) == PLANNED
    assert again["summaries"]["requests"] == 0 and again["summaries"]["from_cache"] == 0
    # A full rebuild (a tree parameter changed) takes every answer from the cache.
    rebuilt = summarize(root, server, "--no-setext")
    assert rebuilt["full_rebuild"] and len(server.requests) == PLANNED
    assert rebuilt["summaries"]["from_cache"] == PLANNED


def test_editing_one_section_asks_again_for_it_only(root: Path, server: ScriptedServer) -> None:
    server.fallback = answer
    summarize(root, server)
    policy = root / "policy.md"
    edited = paragraph("erasure")
    policy.write_text(
        policy.read_text(encoding="utf-8").replace(paragraph("deletion"), edited), encoding="utf-8"
    )
    report = summarize(root, server)
    assert report["updated"] == ["policy.md"]
    assert report["summaries"]["requests"] == 1 and len(server.requests) == PLANNED + 1
    # The one request is the edited section's; the document's other sections came from the cache.
    assert edited[:200] in server.requests[-1].text and "Deletion" in server.requests[-1].text
    assert report["summaries"]["from_cache"] == 2


def test_estimate_makes_no_request(root: Path, server: ScriptedServer) -> None:
    estimate = summarize(root, server, "--estimate")
    assert list(estimate) == ["calls", "input_tokens", "output_tokens", "cost_usd"]
    assert estimate["calls"] == PLANNED and estimate["cost_usd"] is None  # no price known
    assert estimate["input_tokens"] > PLANNED * 100 and estimate["output_tokens"] > 0
    assert server.requests == []
    # A priced model: no key needed, no request, a cost from the price table.
    p = markindex(
        "index", str(root), "--summary-model", "openai:gpt-4o-mini", "--estimate", "--json"
    )
    assert p.returncode == 0, p.stderr
    priced = json.loads(p.stdout)
    assert priced["calls"] == PLANNED and priced["cost_usd"] > 0
    # Only what the cache lacks counts.
    server.fallback = answer
    summarize(root, server)
    assert summarize(root, server, "--estimate")["calls"] == 0


def test_summaries_are_searched_and_shown(root: Path, server: ScriptedServer) -> None:
    server.fallback = answer
    summarize(root, server)
    # "kickoff" is only in the Restore section's summary, indexed at weight 2.
    p = markindex("search", str(root), "kickoff", "--json")
    assert p.returncode == 0, p.stderr
    hits = json.loads(p.stdout)["hits"]
    assert [(h["doc_path"], h["title_path"][-1]) for h in hits] == [("guide.md", "Restore")]
    tree = json.loads(markindex("tree", str(root), "guide.md", "--json").stdout)
    restore = tree["nodes"][0]["children"][1]
    assert restore["summary"] == "About Operations guide › Restore: kickoff."
    lib = Library(root)
    try:
        structure = json.loads(lib.call_tool("get_document_structure", {"doc_path": "guide.md"}))
        shown = {n["title"]: n.get("summary") for n in structure["data"]["nodes"]}
        assert shown["Restore"] == "About Operations guide › Restore: kickoff."
        browse = json.loads(lib.call_tool("browse_documents", {"folder": ""}))
        described = {d["path"]: d["description"] for d in browse["data"]["documents"]}
    finally:
        lib.close()
    assert described["guide.md"] == "About Operations guide: overview."  # the model's
    assert described["policy.md"] == "How long records are kept."  # the author's own


def test_summaries_are_escaped_in_human_output(root: Path, server: ScriptedServer) -> None:
    server.fallback = lambda req: reply("Evil \x1b]52;c;cGF3bmVk\x07 summary")
    summarize(root, server)
    out = markindex("tree", str(root), "guide.md").stdout
    assert "\x1b]52" not in out and "\\x1b]52;c;cGF3bmVk\\x07" in out


class _Garbage(ScriptedServer):
    """Answers one request with a 200 whose body is no chat completion at all."""

    garbage_left = 1

    def answer(self, logged: LoggedRequest) -> tuple[int, list[tuple[str, str]], dict[str, Any]]:
        if self.garbage_left:
            self.garbage_left -= 1
            self.requests.append(logged)
            return 200, [], {"surprise": "not a completion"}
        return super().answer(logged)


def test_failed_summaries_are_counted_and_the_index_stays_whole(root: Path) -> None:
    with _Garbage(fallback=answer) as server:
        server.push(*[error(503, retry_after=0)] * 5)  # one request: its first try and 4 retries
        server.push(reply("   "))  # an empty answer
        report = summarize(root, server, "--summary-concurrency", "1")
        assert report["summary_errors"] == 3 and report["summaries"]["written"] == PLANNED - 3
        assert len(report["summaries"]["error_messages"]) == 3
        assert sorted(report["added"]) == ["guide.md", "note.md", "policy.md"]
        p = markindex("search", str(root), "restore procedure", "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["hits"]
        # The next run asks only for what failed.
        asked = len(server.requests)
        again = summarize(root, server)
        assert again["summaries"]["requests"] == 3 and len(server.requests) == asked + 3
        assert again["summary_errors"] == 0


def test_a_wrong_key_stops_the_run_at_once(root: Path, server: ScriptedServer) -> None:
    server.push(Step(status=401, body={"error": {"message": "bad key"}}))
    report = summarize(root, server, "--summary-concurrency", "1", code=1)  # none written
    assert len(server.requests) == 1 and report["summary_errors"] == PLANNED
    assert report["summaries"]["error_messages"] == ["the model answered HTTP 401: stopped asking"]


def test_indexing_without_a_summary_model_makes_no_request(
    root: Path, server: ScriptedServer
) -> None:
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-not-a-real-key"}
    p = markindex("index", str(root), "--json", env=env)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert "summaries" not in report and "summary_errors" not in report
    assert server.requests == []
    lib = Library(root)
    try:
        assert all(n["summary"] is None for n in lib.outline("guide.md"))
    finally:
        lib.close()


def test_summary_options_need_a_model(root: Path) -> None:
    p = markindex("index", str(root), "--summary-rpm", "60")
    assert p.returncode != 0 and "--summary-rpm needs --summary-model" in p.stderr


def _kept(db: Path) -> tuple[int, int]:
    """(cached answers, nodes with a summary) in the index now; (0, 0) before it exists."""
    try:
        store = Store(db, readonly=True)
    except MarkindexError:
        return 0, 0
    try:
        cached = int(store.scalar("SELECT count(*) FROM summary_cache"))
        nodes = int(store.scalar("SELECT count(*) FROM nodes WHERE summary IS NOT NULL"))
        return cached, nodes
    except apsw.Error:
        return 0, 0
    finally:
        store.close()


def slow_summary_run(
    tmp_path: Path, server: ScriptedServer, stderr: int
) -> tuple[Path, subprocess.Popen[str]]:
    """A library of one document with 40 sections, and `markindex index --summary-model` on it in
    a subprocess, its model answering one request at a time every 0.2 s."""
    root = tmp_path / "lib"
    root.mkdir()
    sections = "".join(f"## Topic {i}\n\n{paragraph(f'topic{i}')}\n\n" for i in range(40))
    text = "---\ndescription: Forty topics.\n---\n\n# Topics\n\n" + sections
    (root / "big.md").write_text(text, encoding="utf-8")
    server.fallback = lambda req: reply("A summary.", delay_s=0.2)
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    args = ["index", str(root), "--summary-model", MODEL, "--base-url", server.base_url]
    proc = subprocess.Popen(
        [sys.executable, "-m", "markindex_core.cli.main", *args, "--summary-concurrency", "1"],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
        env={**base, "PYTHONPATH": str(REPO)},
    )
    return root, proc


def test_a_killed_run_keeps_what_it_finished(tmp_path: Path, server: ScriptedServer) -> None:
    root, proc = slow_summary_run(tmp_path, server, subprocess.DEVNULL)
    planned = 41  # the root and its 40 sections; the document has its own description
    db = root / ".markindex" / "index.db"
    try:
        wait_for(lambda: _kept(db)[0] >= SUMMARY_COMMIT_EVERY, timeout=120)
    finally:
        proc.kill()
        proc.wait()
    cached, nodes = _kept(db)
    assert SUMMARY_COMMIT_EVERY <= cached < planned and nodes == cached  # whole batches only
    server.fallback = lambda req: reply("A summary.")
    asked = len(server.requests)
    report = summarize(root, server)
    assert report["summaries"]["requests"] == planned - cached == len(server.requests) - asked
    assert _kept(db) == (planned, planned)


def test_ctrl_c_says_how_many_summaries_were_kept(tmp_path: Path, server: ScriptedServer) -> None:
    """Stopped with Ctrl-C, a run printed 'interrupted' and no report: a user paying for the
    answers could not tell that those received were kept, or how many."""
    import re
    import signal

    root, proc = slow_summary_run(tmp_path, server, subprocess.PIPE)
    db = root / ".markindex" / "index.db"
    try:
        wait_for(lambda: _kept(db)[0] >= SUMMARY_COMMIT_EVERY, timeout=120)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    said = re.search(r"summaries stopped: the (\d+) summaries received are kept", err)
    assert said is not None, err
    assert int(said.group(1)) == _kept(db)[1] >= SUMMARY_COMMIT_EVERY

"""A hostile or broken model server: what it answers never crashes a command, corrupts the
index or goes unbounded. Everything runs against the scripted server (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from markindex_core.config import LLM_RETRY_ATTEMPTS
from markindex_core.errors import ModelCallFailed
from markindex_core.library import Library
from markindex_core.llm.agent import MAX_CITATIONS, retrieve
from markindex_core.llm.models import resolve_model
from tests.llm.scripted_server import ScriptedServer, Step, error, repeat, reply, tool_call
from tests.llm.summary_library import write_library
from tests.llm.test_retrieve import DOC, MODEL
from tests.llm.test_summaries import PLANNED, markindex, summarize


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_library(tmp_path / "lib")
    return tmp_path / "lib"


def test_a_summary_holding_a_lone_surrogate_is_stored_with_a_replacement_character(
    root: Path, server: ScriptedServer
) -> None:
    # JSON may carry "\ud800" (a half of a surrogate pair); no UTF-8 text can hold it.
    server.fallback = lambda _req: reply("Covers \ud800 backups.")
    report = summarize(root, server)
    assert report["summaries"]["written"] == PLANNED and report["summary_errors"] == 0
    tree = markindex("tree", str(root), "guide.md", "--json")
    assert tree.returncode == 0, tree.stderr
    summaries = {n["summary"] for n in json.loads(tree.stdout)["nodes"]}
    assert summaries == {"Covers \ufffd backups."}


@pytest.mark.parametrize(
    ("refusal", "said"),
    [
        (  # OpenAI's answer when the account has no credit left: waiting does not help
            Step(status=429, body={"error": {"message": "No quota", "code": "insufficient_quota"}}),
            "quota or credit is used up",
        ),
        (Step(status=402, body={"error": {"message": "payment required"}}), "quota or credit"),
        (error(429, retry_after=3600), "asked to wait 3600 s"),
    ],
)
def test_a_refusal_every_request_would_meet_stops_the_summary_run_at_once(
    root: Path, server: ScriptedServer, refusal: Step, said: str
) -> None:
    server.push(refusal)
    server.fallback = lambda _req: reply("A summary.")
    report = summarize(root, server, "--summary-concurrency", "1", code=1)
    assert len(server.requests) == 1
    assert report["summary_errors"] == PLANNED and report["summaries"]["written"] == 0
    (message,) = report["summaries"]["error_messages"]
    assert said in message and "stopped asking" in message


def test_the_budget_holds_when_the_server_reports_no_input_tokens(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    # Some servers report usage 0 (or none at all); the budget must still bound the run.
    server.fallback = repeat(tool_call("browse_documents", {"folder": ""}, prompt_tokens=0))
    budget = 10_000
    result = retrieve(
        indexed_sample, "q", model=MODEL, base_url=server.base_url, max_input_tokens=budget,
        max_steps=40,
    )  # fmt: skip
    assert result.stop_reason == "budget" and result.usage.input_tokens == 0
    # The same run against a server that reports its usage makes 3 requests (each ~2 500+).
    assert len(server.requests) <= 4


def test_a_server_that_trickles_its_answer_times_out_and_the_request_is_retried(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    # Headers, then a space every 0.2 s: each read succeeds, so only a limit on the whole
    # attempt ends it.
    server.push(
        Step(stall=True),
        tool_call(
            "submit_evidence", {"citations": [{"doc_path": DOC, "start_line": 7, "end_line": 7}]}
        ),
    )
    model = resolve_model(MODEL, server.base_url, timeout=1.0)
    result = retrieve(indexed_sample, "title?", model=model)
    assert result.stop_reason == "done" and result.evidence[0].text == "# Installing Widget Server"
    assert len(server.requests) == 2


def test_a_server_that_never_finishes_fails_the_run_with_one_line(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.fallback = repeat(Step(stall=True))
    model = resolve_model(MODEL, server.base_url, timeout=0.5)
    with pytest.raises(ModelCallFailed) as info:
        retrieve(indexed_sample, "title?", model=model)
    assert "ModelTimeoutError" in info.value.message and "0.5 s" in info.value.message
    assert len(server.requests) == 1 + LLM_RETRY_ATTEMPTS


def test_only_the_first_thousand_citations_of_an_answer_are_looked_at(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    good = {"doc_path": DOC, "start_line": 7, "end_line": 7}
    junk = [{"doc_path": f"nope-{i}.md", "start_line": 1, "end_line": 2} for i in range(1200)]
    server.push(tool_call("submit_evidence", {"citations": [good, good, *junk]}))
    result = retrieve(indexed_sample, "title?", model=MODEL, base_url=server.base_url)
    assert [e.text for e in result.evidence] == ["# Installing Widget Server"]
    assert result.rejected[0] == f"{1202 - MAX_CITATIONS} citations over {MAX_CITATIONS} ignored"
    assert len(result.rejected) == 1 + MAX_CITATIONS - 2  # the junk within the first thousand


def test_a_ten_megabyte_text_answer_gives_its_cited_lines(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(reply(f"[{DOC}, L7-7] " * 500_000))  # 10 MB
    result = retrieve(indexed_sample, "title?", model=MODEL, base_url=server.base_url)
    assert [e.text for e in result.evidence] == ["# Installing Widget Server"]


def test_a_text_citation_of_line_zero_is_passed_over_and_the_others_kept(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(reply(f"See [{DOC}, L0-1] and [{DOC}, L7-7]."))
    result = retrieve(indexed_sample, "title?", model=MODEL, base_url=server.base_url)
    assert result.stop_reason == "done" and len(server.requests) == 1
    assert [e.text for e in result.evidence] == ["# Installing Widget Server"]


@pytest.mark.timeout(60)
def test_a_text_answer_of_blanks_after_a_bracket_does_not_hang_retrieve(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    """The pattern that reads citations out of a text answer was cubic in a run of blanks after
    a bracket: `"[" + 5000 spaces + ","` took 122 s, so these 20 000 (and a hostile model's
    megabyte) would hang retrieve for hours. Now linear; the real citation after them is kept."""
    blanks = " " * 20_000
    server.push(reply(f"[{blanks}, L{blanks}x [{blanks}, see [{DOC}, L7-7] [a] " * 3))
    result = retrieve(indexed_sample, "title?", model=MODEL, base_url=server.base_url)
    assert [e.text for e in result.evidence] == ["# Installing Widget Server"]

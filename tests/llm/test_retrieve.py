"""retrieve() against the scripted server: evidence is the file's own lines, bad calls come back
as envelopes, and every stop reason (done, budget, max_steps, unusable_citations) is reached the way it should be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from markindex_core.errors import ModelCallFailed
from markindex_core.library import Library
from markindex_core.llm.agent import RETRIEVE_INSTRUCTIONS, STOP_REASONS, retrieve
from markindex_core.llm.tooldefs import anthropic_tools, openai_tools, tool_names
from tests.llm.scripted_server import ScriptedServer, error, reply, tool_call
from tests.paths import REPO

DOC = "guides/install.md"
MODEL = "openai-chat:scripted"


def _node(lib: Library, path: str, title: str) -> dict[str, Any]:
    return next(n for n in lib.outline(path) if n["title"] == title)


def _file_lines(lib: Library, path: str, start: int, end: int) -> str:
    lines = (lib.root / path).read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[start - 1 : end])


def _tool_results(server: ScriptedServer) -> list[dict[str, Any]]:
    """Every tool result the model was sent, parsed (the last request carries all of them)."""
    last = server.requests[-1].messages
    return [
        json.loads(m["content"]) for m in last if m["role"] == "tool" and m["content"][0] == "{"
    ]


def test_a_tool_call_sequence_ends_in_evidence_equal_to_the_files_lines(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    lib = indexed_sample
    node = _node(lib, DOC, "Installation")
    start, end = int(node["start_line"]), int(node["end_line"])
    server.push(
        tool_call("browse_documents", {"folder": ""}),
        tool_call("browse_documents", {"folder": "guides"}),
        tool_call("get_document_structure", {"doc_path": DOC}),
        tool_call("get_node_content", {"doc_path": DOC, "node_ids": [node["node_id"]]}),
        tool_call(
            "submit_evidence",
            {"citations": [{"doc_path": DOC, "start_line": start + 2, "end_line": start + 6}]},
        ),
    )
    result = lib.retrieve("How do I install it?", model=MODEL, base_url=server.base_url)
    assert result.stop_reason == "done"
    assert len(result.evidence) == 1
    ev = result.evidence[0]
    assert (ev.doc_path, ev.start_line, ev.end_line) == (DOC, start + 2, start + 6)
    assert ev.text == _file_lines(lib, DOC, start + 2, start + 6)
    assert ev.title_path == ["Installing Widget Server", "Installation"]
    assert result.usage.requests == 5 == len(server.requests)
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == 50
    assert result.steps == 5 and result.tool_calls == 4
    assert all(r["success"] for r in _tool_results(server))
    assert set(result.to_json()) == {"evidence", "usage", "stop_reason"}
    assert end >= start + 6


def test_the_instructions_and_the_five_tools_reach_the_model(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(tool_call("submit_evidence", {"citations": []}))
    result = retrieve(indexed_sample, "anything", model=MODEL, base_url=server.base_url)
    assert result.stop_reason == "done" and result.evidence == []
    body = server.requests[0].body
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"] == RETRIEVE_INSTRUCTIONS
    assert "untrusted data" in system["content"]
    sent = {t["function"]["name"] for t in body["tools"]}
    assert sent == {*tool_names(), "submit_evidence"}


def test_a_text_answer_with_citations_is_accepted(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(reply(f"The steps are in [{DOC}, L20-24]. Ignore everything else."))
    result = retrieve(indexed_sample, "install?", model=MODEL, base_url=server.base_url)
    assert [(e.start_line, e.end_line) for e in result.evidence] == [(20, 24)]
    assert result.evidence[0].text == _file_lines(indexed_sample, DOC, 20, 24)


def test_malformed_tool_arguments_come_back_as_an_envelope_and_the_run_goes_on(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(
        tool_call("get_node_content", '{"doc_path": "guides/install.md", "node_ids": [oops'),
        tool_call("get_node_content", {"doc_path": DOC}),  # JSON, but node_ids is missing
        tool_call("no_such_tool", {}),
        tool_call(
            "submit_evidence", {"citations": [{"doc_path": DOC, "start_line": 9, "end_line": 10}]}
        ),
    )
    result = retrieve(indexed_sample, "install?", model=MODEL, base_url=server.base_url)
    assert result.stop_reason == "done"
    assert result.evidence[0].text == _file_lines(indexed_sample, DOC, 9, 10)
    envelopes = _tool_results(server)
    assert [e["code"] for e in envelopes[:2]] == ["INVALID_INPUT", "INVALID_INPUT"]
    assert "not a JSON object" in str(envelopes[0]["error"])
    assert "node_ids" in json.dumps(envelopes[1])
    unknown = [m for m in server.requests[-1].messages if m["role"] == "tool"][2]["content"]
    assert "no_such_tool" in unknown  # pydantic-ai names the unknown tool back to the model


def test_unusable_citations_are_sent_back_then_a_good_one_is_kept(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(
        tool_call(
            "submit_evidence",
            {"citations": [{"doc_path": "nope.md", "start_line": 1, "end_line": 2}]},
        ),
        tool_call(
            "submit_evidence",
            {
                "citations": [
                    {"doc_path": DOC, "start_line": 14, "end_line": 16},
                    {"doc_path": DOC, "start_line": 15, "end_line": 18},  # overlaps: merged
                    {"doc_path": DOC, "start_line": 9000, "end_line": 9001},  # past the end
                ]
            },
        ),
    )
    result = retrieve(indexed_sample, "requirements?", model=MODEL, base_url=server.base_url)
    assert "unknown document 'nope.md'" in server.requests[1].text
    assert [(e.start_line, e.end_line) for e in result.evidence] == [(14, 18)]
    assert result.evidence[0].text == _file_lines(indexed_sample, DOC, 14, 18)
    assert len(result.rejected) == 1 and "past its end" in result.rejected[0]


def test_a_model_that_only_cites_what_does_not_exist_gets_no_evidence_and_why(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    """Three submissions in a row with no usable citation ended the run with ModelCallFailed
    ('kept making unusable calls'), and the agent eval counted a failed model call. It is an
    answer: no evidence, stop reason `unusable_citations`, and the reasons in `rejected`."""
    bad = {"citations": [{"doc_path": "nope.md", "start_line": 1, "end_line": 2}]}
    server.push(*[tool_call("submit_evidence", bad)] * 3)
    result = retrieve(indexed_sample, "requirements?", model=MODEL, base_url=server.base_url)
    assert result.stop_reason == "unusable_citations" and result.evidence == []
    assert len(result.rejected) == 1 and "unknown document 'nope.md'" in result.rejected[0]
    assert result.usage.requests == 3 == len(server.requests)
    assert result.to_json()["stop_reason"] == "unusable_citations"
    # Named wherever the stop reasons are listed (they said done, budget or max_steps only).
    assert result.stop_reason in STOP_REASONS
    helped = subprocess.run(
        [sys.executable, "-m", "markindex_core", "retrieve", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert "unusable_citations" in helped.stdout
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `retrieve` |"))
    assert "`unusable_citations`" in row


def test_a_model_that_never_stops_ends_at_max_steps(indexed_sample: Library) -> None:
    def forever(_request: object) -> object:
        return tool_call("search_documents", {"query": "install"})

    with ScriptedServer(fallback=forever) as server:  # type: ignore[arg-type]
        result = retrieve(
            indexed_sample, "install?", model=MODEL, base_url=server.base_url, max_steps=4
        )
    assert result.stop_reason == "max_steps"
    assert result.usage.requests == 4 == len(server.requests)
    assert result.evidence == []


def test_a_prompt_over_budget_is_never_sent(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    result = retrieve(
        indexed_sample, "install?", model=MODEL, base_url=server.base_url, max_input_tokens=50
    )
    assert result.stop_reason == "budget"
    assert server.requests == [] and result.usage.requests == 0


def test_the_budget_counts_the_tokens_already_used(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(tool_call("browse_documents", {"folder": ""}, prompt_tokens=9000))
    result = retrieve(
        indexed_sample, "install?", model=MODEL, base_url=server.base_url, max_input_tokens=10_000
    )
    assert result.stop_reason == "budget"
    assert len(server.requests) == 1 and result.usage.input_tokens == 9000


def test_429_with_retry_after_then_success(indexed_sample: Library, server: ScriptedServer) -> None:
    server.push(
        error(429, retry_after=0.5),
        tool_call(
            "submit_evidence", {"citations": [{"doc_path": DOC, "start_line": 7, "end_line": 7}]}
        ),
    )
    result = retrieve(indexed_sample, "title?", model=MODEL, base_url=server.base_url, rpm=30)
    assert result.stop_reason == "done" and result.evidence[0].text == "# Installing Widget Server"
    assert [r.status for r in server.requests] == [429, 200]
    assert server.requests[1].at - server.requests[0].at >= 0.5
    assert result.usage.requests == 1  # the refused attempt is not a model response


def test_5xx_is_retried_and_a_lasting_one_fails_with_one_line(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(error(502, retry_after=0.1), tool_call("submit_evidence", {"citations": []}))
    assert (
        retrieve(indexed_sample, "q", model=MODEL, base_url=server.base_url).stop_reason == "done"
    )
    server.push(*[error(503, retry_after=0.05)] * 5)
    with pytest.raises(ModelCallFailed) as info:
        retrieve(indexed_sample, "q", model=MODEL, base_url=server.base_url)
    assert "HTTP 503" in info.value.message
    assert [r.status for r in server.requests[2:]] == [503] * 5  # 1 try + 4 retries


def test_tool_definitions_in_openai_and_anthropic_formats() -> None:
    names = tool_names()
    assert names == [
        "browse_documents",
        "get_document",
        "get_document_structure",
        "get_node_content",
        "search_documents",
    ]
    oa = openai_tools()
    an = anthropic_tools()
    assert [t["function"]["name"] for t in oa] == names == [t["name"] for t in an]
    for o, a in zip(oa, an, strict=True):
        assert o["type"] == "function"
        assert o["function"]["parameters"] == a["input_schema"]
        assert a["input_schema"]["type"] == "object"
        assert "library-path" not in json.dumps(a) and "node-id" not in json.dumps(a)
    content = next(t for t in an if t["name"] == "get_node_content")
    assert content["input_schema"]["required"] == ["doc_path", "node_ids"]


def _cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=full_env,
    )


def test_cli_json_prints_exactly_evidence_usage_and_stop_reason(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    server.push(
        tool_call("search_documents", {"query": "proxy"}),
        tool_call(
            "submit_evidence", {"citations": [{"doc_path": DOC, "start_line": 9, "end_line": 10}]}
        ),
    )
    root = str(indexed_sample.root)
    out = _cli(
        ["retrieve", root, "proxy?", "--model", MODEL, "--base-url", server.base_url, "--json"]
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert list(data) == ["evidence", "usage", "stop_reason"]
    assert data["stop_reason"] == "done"
    assert list(data["usage"]) == ["requests", "input_tokens", "output_tokens"]
    assert data["usage"]["requests"] == 2
    (ev,) = data["evidence"]
    assert list(ev) == ["doc_path", "start_line", "end_line", "title_path", "text"]
    assert ev["text"] == _file_lines(indexed_sample, DOC, 9, 10)


def test_cli_missing_key_and_missing_extra_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    out = _cli(["retrieve", str(tmp_path), "q", "--model", "anthropic:claude-sonnet-4-5"])
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "error: no API key for anthropic: set ANTHROPIC_API_KEY (hint: export "
        "ANTHROPIC_API_KEY=... in the environment; for a local OpenAI-compatible server use "
        "openai-chat:NAME --base-url URL)"
    ]
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "from markindex_core.cli.main import main\n"
        f"sys.exit(main(['retrieve', {str(tmp_path)!r}, 'q', '--model', 'openai:gpt-5']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1
    assert "pip install 'markindex[llm]'" in out.stderr


def test_cli_never_prints_the_key(indexed_sample: Library, server: ScriptedServer) -> None:
    secret = "sk-cli-test-9876543210-secret"
    server.push(error(401, message=f"Incorrect API key provided: {secret}"))
    root = str(indexed_sample.root)
    out = _cli(
        ["retrieve", root, "q", "--model", MODEL, "--base-url", server.base_url],
        env={"OPENAI_API_KEY": secret},
    )
    assert out.returncode == 1
    assert "HTTP 401" in out.stderr
    assert secret not in out.stderr + out.stdout
    assert server.requests[0].headers["authorization"] == f"Bearer {secret}"


def test_no_index_fails_before_any_model_request(tmp_path: Path, server: ScriptedServer) -> None:
    from markindex_core.errors import IndexMissing

    (tmp_path / "a.md").write_text("# A\n", encoding="utf-8")
    with pytest.raises(IndexMissing):
        Library(tmp_path).retrieve("q", model=MODEL, base_url=server.base_url)
    assert server.requests == []


def test_the_exported_toolset_serves_a_plain_pydantic_ai_agent(
    indexed_sample: Library, server: ScriptedServer
) -> None:
    from pydantic_ai import Agent

    from markindex_core.llm.models import resolve_model
    from markindex_core.llm.tooldefs import AGENT_INSTRUCTIONS, toolset

    server.push(tool_call("get_document", {"doc_path": DOC}), reply("read it"))
    model = resolve_model(MODEL, base_url=server.base_url)
    agent = Agent(model, instructions=AGENT_INSTRUCTIONS, toolsets=[toolset(indexed_sample)])
    assert agent.run_sync("what is in the install guide?").output == "read it"
    (envelope,) = _tool_results(server)
    assert envelope["success"] and envelope["data"]["doc_path"] == DOC
    assert json.loads(indexed_sample.call_tool("get_document", {"doc_path": DOC})) == envelope


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_exit_status_without_evidence_is_1_with_or_without_json(
    indexed_sample: Library, as_json: bool
) -> None:
    """`retrieve` exited 1 when the model cited nothing, but 0 with --json: a script could not
    tell an answer from none by the status. Both now exit 1, as `search` does when nothing
    matched."""

    def forever(_request: object) -> object:
        return tool_call("search_documents", {"query": "install"})

    root = str(indexed_sample.root)
    argv = ["retrieve", root, "q", "--model", MODEL, "--max-steps", "2"]
    with ScriptedServer(fallback=forever) as server:  # type: ignore[arg-type]
        out = _cli([*argv, "--base-url", server.base_url, *(["--json"] if as_json else [])])
    assert out.returncode == 1, out.stderr
    if as_json:
        data = json.loads(out.stdout)
        assert data["evidence"] == [] and data["stop_reason"] == "max_steps"


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        # A comma: file names often hold one, and the tools list them as they are.
        ("Meeting notes, March.md", "It is in [{name}, L3-4] and [{name},L6]."),
        # Brackets: `[draft] …` names are common; a bracketed word before a citation is no part
        # of its path.
        ("[draft] plan.md", "It is in [{name}, L3-4]; see [a] and [{name}, L6]."),
    ],
)
def test_a_text_citation_of_a_document_with_commas_or_brackets_in_its_name_is_kept(
    tmp_path: Path, server: ScriptedServer, name: str, answer: str
) -> None:
    """`[Meeting notes, March.md, L3-4]` and `[[draft] plan.md, L3-4]` in a text answer gave no
    evidence: the citation's path could hold neither a comma nor a bracket."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / name).write_text("# Notes\n\nfirst point\nsecond point\n\nlast\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    server.push(reply(answer.format(name=name)))
    result = retrieve(lib, "points?", model=MODEL, base_url=server.base_url)
    assert [(e.doc_path, e.start_line, e.end_line) for e in result.evidence] == [
        (name, 3, 4),
        (name, 6, 6),
    ]
    assert result.evidence[0].text == "first point\nsecond point"
    assert result.rejected == []
    lib.close()

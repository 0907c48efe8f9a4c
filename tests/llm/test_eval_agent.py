"""Agent-mode eval against the scripted server: the search-mode measures on cited evidence, per
language and overall, plus requests, tokens and steps per question; a failing question is a miss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from markindex_core.cli.main import main
from markindex_core.library import Library
from tests.llm.scripted_server import LoggedRequest, ScriptedServer, Step, error, tool_call

LAW = "laws/数据安全管理办法.md"
GUIDE = "guides/install.md"
QUESTIONS = [
    # question, lang, gold, what the scripted model cites
    ("数据分为哪几级？", "zh", {"doc_path": LAW, "start_line": 13, "end_line": 13}, (LAW, 13, 13)),
    ("谁来备案评估结果？", "zh", {"doc_path": LAW, "start_line": 15, "end_line": 15}, (LAW, 5, 5)),
    ("How much memory is needed?", "en", {"doc_path": GUIDE, "start_line": 15, "end_line": 15}, (GUIDE, 14, 16)),
    ("What breaks the model?", "en", {"doc_path": GUIDE, "start_line": 1, "end_line": 3}, None),
]  # fmt: skip


class Script:
    """Per question: one search, then the citation; the last question's model always fails."""

    def __call__(self, request: LoggedRequest) -> Step:
        question = next(m["content"] for m in request.messages if m["role"] == "user")
        _, _, _, cite = next(q for q in QUESTIONS if q[0] == question)
        if cite is None:
            return error(500, retry_after=0.01)
        if not any(m["role"] == "tool" for m in request.messages):
            return tool_call("search_documents", {"query": question}, delay_s=0.05)
        doc, start, end = cite
        return tool_call(
            "submit_evidence",
            {"citations": [{"doc_path": doc, "start_line": start, "end_line": end}]},
            prompt_tokens=1000,
        )


def _questions(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": q, "lang": lang, "gold": [gold]}) + "\n"
            for i, (q, lang, gold, _) in enumerate(QUESTIONS)
        ),
        encoding="utf-8",
    )
    return path


def test_agent_mode_reports_quality_and_cost_per_language(
    indexed_sample: Library, tmp_path: Path, capsys: Any
) -> None:
    with ScriptedServer(fallback=Script()) as server:
        out = tmp_path / "report.json"
        code = main(
            [
                "eval",
                str(indexed_sample.root),
                "--questions",
                str(_questions(tmp_path)),
                "--mode",
                "agent",
                "--model",
                "openai-chat:scripted",
                "--base-url",
                server.base_url,
                "--concurrency",
                "2",
                "--rpm",
                "1000",
                "--out",
                str(out),
                "--json",
            ]
        )
    assert code == 0
    metrics = json.loads(capsys.readouterr().out)
    assert set(metrics) == {"overall", "zh", "en"}
    zh, en, overall = metrics["zh"], metrics["en"], metrics["overall"]
    assert zh["questions"] == 2 and zh["hit@1"] == 0.5 and zh["precision@1"] == 0.5
    assert en["hit@1"] == 0.5 and en["errors"] == 1
    assert en["median_evidence_lines"] == 1.5  # 3 lines cited, and 0 for the failed question
    assert overall["hit@5"] == 0.5 and overall["mrr"] == 0.5
    assert overall["stop_reasons"] == {"done": 3, "error": 1}
    assert overall["requests"] == 6 and overall["requests_per_question"] == 1.5
    assert overall["steps_per_question"] == 1.5
    assert overall["tool_calls_per_question"] == 0.75
    assert overall["output_tokens"] == 60
    assert overall["input_tokens"] >= 3000
    report = json.loads(out.read_text(encoding="utf-8"))
    failed = next(q for q in report["questions"] if q["id"] == "q3")
    assert failed["mode"] == "error" and "HTTP 500" in failed["error"]
    ok = next(q for q in report["questions"] if q["id"] == "q2")
    assert ok["top"][0]["citation"] == f"[{GUIDE}, L14-16]" and ok["precision"] == 1 / 3
    assert ok["requests"] == 2 and ok["steps"] == 2

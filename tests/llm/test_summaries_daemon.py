"""The daemon and summaries: no request unless started with --summary-model; with it, a changed
section is summarized again (only it) while the index stays live."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from markindex_core.store.db import Store
from tests.daemon.helpers import running_daemon, wait_for
from tests.llm.scripted_server import LoggedRequest, ScriptedServer, Step, reply
from tests.llm.summary_library import paragraph, write_library
from tests.llm.test_summaries import MODEL, PLANNED, answer


def _summaries(db: Path) -> dict[str, str]:
    """Section title -> summary, for every node that has one."""
    store = Store(db, readonly=True)
    try:
        return {
            str(t): str(s)
            for t, s in store.conn.execute(
                "SELECT title, summary FROM nodes WHERE summary IS NOT NULL"
            )
        }
    finally:
        store.close()


def _answer(req: LoggedRequest) -> Step:
    """As `answer`, and says "inspection" when the section's text is about it."""
    if "inspection procedure" in req.text:
        return reply("About inspection.")
    return answer(req)


def _edit(root: Path) -> str:
    policy = root / "policy.md"
    edited = paragraph("erasure")
    text = policy.read_text(encoding="utf-8").replace(paragraph("deletion"), edited)
    policy.write_text(text.replace("## Deletion", "## Erasure"), encoding="utf-8")
    return edited


def test_the_daemon_summarizes_only_when_started_with_a_model(
    tmp_path: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, db = tmp_path / "lib", tmp_path / "idx" / "index.db"
    write_library(root)
    server.fallback = _answer
    # Without --summary-model: even with a provider configured in the environment, no request.
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with running_daemon(root, db) as d:
        since = time.time()
        _edit(root)
        d.wait_settled(since)
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert server.requests == [] and _summaries(db) == {}
    # With it: the library is caught up (the two policy sections were already edited), then an
    # edit is summarized again, alone.
    with running_daemon(root, db, "--summary-model", MODEL, "--base-url", server.base_url):
        wait_for(lambda: len(_summaries(db)) == PLANNED - 2, timeout=60)  # 7 sections, 2 docs
        assert len(server.requests) == PLANNED
        guide = root / "guide.md"
        guide.write_text(
            guide.read_text(encoding="utf-8").replace(paragraph("audit"), paragraph("inspection")),
            encoding="utf-8",
        )
        # The run's answers are written when it ends: once the new summary is in, it is over.
        wait_for(lambda: "inspection" in _summaries(db).get("Audit", ""), timeout=60)
        assert len(server.requests) == PLANNED + 1  # the Audit section alone (the description
        assert "inspection procedure" in server.requests[-1].text  # reads no further than it)

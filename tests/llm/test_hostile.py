"""A hostile or broken model server: what it answers never crashes a command, corrupts the
index or goes unbounded. Everything runs against the scripted server (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm.scripted_server import ScriptedServer, reply
from tests.llm.summary_library import write_library
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

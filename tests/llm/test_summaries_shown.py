"""Summaries through the Python API, and in the terminal app's preview (escaped)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from markindex_core.index.indexer import IndexReport
from markindex_core.library import Library
from markindex_core.llm.summaries import Summarizer, SummarySettings
from markindex_core.store.db import Store
from markindex_core.store.summaries import write_summaries
from markindex_tui.data import Ref, preview
from markindex_tui.widgets.doc_info import render_info
from tests.llm.scripted_server import ScriptedServer, reply
from tests.llm.summary_library import write_library
from tests.llm.test_summaries import MODEL, PLANNED, answer


def test_the_library_api_writes_summaries_through_after_write(
    tmp_path: Path, server: ScriptedServer
) -> None:
    write_library(tmp_path / "lib")
    server.fallback = answer
    lib = Library(tmp_path / "lib")
    hook = Summarizer(SummarySettings(MODEL, base_url=server.base_url, rpm=600, concurrency=2))
    try:
        report = lib.index(after_write=hook)
        assert report.summaries is not None and report.summaries["written"] == PLANNED
        assert report.to_json()["summary_errors"] == 0
        outline = {n["title"]: n["summary"] for n in lib.outline("guide.md")}
        assert outline["Backup"] == "About Operations guide › Backup: overview."
        # The same hook again (as a daemon keeps it): only changed documents are planned.
        again = lib.index(after_write=hook)
        assert again.summaries is None and len(server.requests) == PLANNED
    finally:
        hook.close()
        lib.close()


def test_the_terminal_app_preview_shows_a_nodes_summary_escaped(tmp_path: Path) -> None:
    write_library(tmp_path / "lib")
    lib = Library(tmp_path / "lib")
    lib.index()
    store = Store(lib.db_path)
    doc = store.document_row("guide.md")
    assert doc is not None
    node = next(n for n in store.node_rows(doc.id) if n.title == "Restore")
    write_summaries(store, [], [(node.rowid, "Restores \x1b[2J from backups.")], [])
    store.close()
    try:
        ref = Ref("node", "guide.md", node.node_id, node.start_line, node.subtree_end)
        shown = preview(lib, ref, None)
        assert shown.summary == "Restores \x1b[2J from backups."
        console = Console(width=100, record=True, color_system=None)
        console.print(render_info(shown))
        text = console.export_text()
        assert "summary" in text and "Restores \\x1b[2J from backups." in text
        assert "\x1b" not in text
        other = preview(lib, Ref("node", "guide.md", "nope", 1, 2), None)
        assert other.summary is None
    finally:
        lib.close()


def test_a_time_slice_leaves_the_rest_pending_for_the_next_call(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """How the daemon keeps its writer free: each call asks for at most one slice's worth."""
    write_library(tmp_path / "lib")
    server.fallback = lambda req: reply("A summary.", delay_s=0.3)
    lib = Library(tmp_path / "lib")
    settings = SummarySettings(MODEL, base_url=server.base_url, concurrency=1)
    hook = Summarizer(settings, slice_seconds=1.0)
    try:
        first = lib.index(after_write=hook).summaries
        assert first is not None and first["deferred"] > 0 and hook.pending
        assert first["written"] + first["deferred"] == PLANNED
        calls = 1
        store = Store(lib.db_path)
        try:
            while hook.pending:  # what the daemon does when writes pause
                hook(store, IndexReport(), None)
                calls += 1
                assert calls <= PLANNED
        finally:
            store.close()
        assert hook.last is not None and hook.last.deferred == 0 and calls > 1
        assert len(server.requests) == PLANNED  # nothing was asked twice
    finally:
        hook.close()
        lib.close()

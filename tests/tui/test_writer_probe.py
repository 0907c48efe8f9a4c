"""The app's writer probe (every few seconds, here every 20 ms) never makes a real writer fail."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

import markindex_tui.screens.browse as browse
from markindex_core.library import Library
from markindex_tui.data import Status
from markindex_tui.screens.browse import BrowseScreen
from markindex_tui.testing import SIZE, make_app, settle
from markindex_tui.widgets.status_bar import StatusBar

pytestmark = pytest.mark.timeout(180)
RUNS = 5
DOCS = 150  # enough work that each run holds the writer lock for a while


def write_docs(root: Path, run: int) -> None:
    for i in range(DOCS):
        body = "\n\n".join(f"## Part {k}\n\nrun{run} word{i} text {k}" for k in range(4))
        (root / f"doc{i:03d}.md").write_text(f"# Doc {i}\n\n{body}\n", encoding="utf-8")


async def index_while_polling(root: Path, bar: StatusBar) -> tuple[int, str, int]:
    """Run `markindex index` in a child process; sample the status bar until it exits."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "markindex_core",
        "index",
        str(root),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONWARNDEFAULTENCODING": "0"},
    )
    seen: dict[int, Status] = {}
    communicate = asyncio.ensure_future(proc.communicate())
    deadline = time.monotonic() + 60
    while not communicate.done():
        assert time.monotonic() < deadline, "markindex index did not finish in 60 s"
        if bar.status is not None:
            seen[id(bar.status)] = bar.status
        await asyncio.sleep(0.005)
    out, err = communicate.result()
    busy = sum(1 for s in seen.values() if s.writer == "writer")
    return proc.returncode or 0, (out + err).decode(errors="replace"), busy


async def test_index_runs_succeed_while_the_app_polls_the_writer_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browse, "TUI_WRITER_POLL_SECONDS", 0.02)
    root = tmp_path / "lib"
    root.mkdir()
    write_docs(root, 0)
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowseScreen)
        bar = app.screen.query_one(StatusBar)
        busy_seen = 0
        for run in range(1, RUNS + 1):
            write_docs(root, run)
            rc, output, busy = await index_while_polling(root, bar)
            assert rc == 0, f"run {run}: {output}"
            busy_seen += busy
        # The probe really ran while a writer held the lock (else this test proves nothing).
        assert busy_seen > 0
        await settle(pilot)
    assert Library(root).search("run5").hits

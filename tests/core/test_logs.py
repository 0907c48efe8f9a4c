"""One logging set-up for every command: every `markindex.*` logger (even one created later) and
other libraries' warnings come out in the chosen format, once; tool errors are MarkindexErrors."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from markindex_core.cli.main import build_parser
from markindex_core.config import DAEMON_QUIET_MS, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT
from markindex_core.errors import MarkindexError
from markindex_core.logs import LOGGER_NAME, setup_logging
from markindex_core.tools.check import BadInput, ToolFailure, steps

from .helpers import REPO_ROOT


@pytest.fixture
def clean_logging() -> Iterator[None]:
    """Leave the process's loggers as they were (setup_logging changes global state)."""
    ours, root = logging.getLogger(LOGGER_NAME), logging.getLogger()
    saved = (list(ours.handlers), ours.level, list(root.handlers))
    yield
    ours.handlers[:], root.handlers[:] = saved[0], saved[2]
    ours.setLevel(saved[1])


@pytest.mark.usefixtures("clean_logging")
def test_json_lines_for_every_child_logger_and_library_warnings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(json=True)
    setup_logging(json=True)  # a second set-up replaces the first: still one line per record
    logging.getLogger("markindex.daemon").info("daemon line")
    logging.getLogger("markindex.someday.new").warning("new child line")
    logging.getLogger("markindex.tools").debug("not shown without verbose")
    logging.getLogger("some.library").warning("library warning")
    logging.getLogger("some.library").info("library info stays quiet")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(x["logger"], x["level"], x["message"]) for x in lines] == [
        ("markindex.daemon", "info", "daemon line"),
        ("markindex.someday.new", "warning", "new child line"),
        ("some.library", "warning", "library warning"),
    ]


@pytest.mark.usefixtures("clean_logging")
def test_text_lines_escape_control_characters_and_verbose_shows_debug(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(verbose=True)
    logging.getLogger("markindex.watch").debug("skipped a\x1b]0;title\x07b.md")
    err = capsys.readouterr().err
    assert "markindex.watch DEBUG: skipped a\\x1b]0;title\\x07b.md" in err
    assert "\x1b" not in err and "\x07" not in err


@pytest.mark.usefixtures("clean_logging")
def test_records_still_reach_root_capture(caplog: pytest.LogCaptureFixture) -> None:
    setup_logging()
    with caplog.at_level(logging.INFO, logger="markindex.watch"):
        logging.getLogger("markindex.watch").info("seen by capture")
    assert "seen by capture" in caplog.text


def test_mcp_json_logs_are_json_lines(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", "mcp", str(root), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.decode().splitlines()]
    assert any(x["logger"] == "markindex.mcp" and "no index" in x["message"] for x in lines)


def test_tool_errors_are_markindex_errors_with_the_same_fields() -> None:
    bad = BadInput("`depth` must be an integer", "depth", minimum=1)
    assert isinstance(bad, MarkindexError) and bad.code == "INVALID_INPUT"
    assert str(bad) == bad.message == "`depth` must be an integer"
    assert bad.details == {"field": "depth", "minimum": 1}
    failure = ToolFailure("NOT_FOUND", "no such document", next_steps=steps("browse first"))
    assert isinstance(failure, MarkindexError) and failure.code == "NOT_FOUND"
    assert failure.message == "no such document" and failure.hint == "browse first"
    assert failure.details == {} and failure.next_steps == {"message": "browse first"}


def test_cli_defaults_come_from_config() -> None:
    parser = build_parser()
    args = parser.parse_args(["search", "lib", "words"])
    assert args.limit == SEARCH_DEFAULT_LIMIT
    sub = next(a for a in parser._actions if a.dest == "command")
    choices = cast("dict[str, argparse.ArgumentParser]", sub.choices)
    assert f"1-{SEARCH_MAX_LIMIT}" in choices["search"].format_help()
    assert f"default {DAEMON_QUIET_MS}" in choices["daemon"].format_help()

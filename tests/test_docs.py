"""The README documents every sub-command, and every sub-command explains itself with --help."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from markindex_core.cli.main import build_parser
from tests.paths import REPO


def _commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


def test_readme_starts_with_install_and_test_commands() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first_block = text.split("```bash", 1)[1].split("```", 1)[0]
    assert "pip install" in first_block and "markindex index" in first_block
    assert "pytest" in first_block


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_in_the_readme_and_has_help(command: str) -> None:
    assert f"markindex {command}" in (REPO / "README.md").read_text(encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "markindex_core", command, "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "usage:" in out.stdout and len(out.stdout) > 200


def _keys(value: object) -> set[str]:
    """Every key of every object in a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _documented(readme: str, label: str) -> set[str]:
    """The backticked names in the README's JSON-output row of `label`."""
    rows = [line for line in readme.splitlines() if line.startswith(f"| `{label}` |")]
    assert len(rows) == 1, f"the README's JSON output table has no row for `{label}`"
    row = rows[0]
    return set(re.findall(r"`([^`]+)`", row.split("|")[2]))


def test_every_json_key_is_documented_in_the_readme(tmp_path: Path) -> None:
    """The README promised `--json` on every command but named the keys of none of them, so
    an agent developer had to reverse-engineer each shape from a run. It now has a table of
    every command's JSON keys; this runs each command and checks no key goes unnamed there,
    that stdout is one JSON document, and that an error leaves stdout empty."""
    root = tmp_path / "library"
    shutil.copytree(REPO / "examples" / "library", root)
    (root / "anchors.md").write_text("# Anchors\n\n[gone](guides/install.md#no-such-part)\n")
    db = str(tmp_path / "index.db")
    questions = tmp_path / "q.jsonl"
    gold = {"doc_path": "guides/install.md"}
    questions.write_text(
        json.dumps({"id": "1", "question": "install", "lang": "en", "gold": [gold]}) + "\n"
    )
    runs = {
        "index": ["index", str(root)],
        "tree": ["tree", str(root), "guides/install.md"],
        "search": ["search", str(root), "port"],
        "links ROOT": ["links", str(root)],
        "links ROOT DOC": ["links", str(root), "guides/install.md"],
        "backlinks": ["backlinks", str(root), "guides/install.md"],
        "status": ["status", str(root)],
        "check": ["check", str(root)],
        "eval": ["eval", str(root), "--questions", str(questions)],
    }
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    cli = [sys.executable, "-m", "markindex_core"]
    for label, argv in runs.items():
        done = subprocess.run(
            [*cli, *argv, "--db", db, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        broken = label.startswith("links")  # the sample's broken link and anchors.md's
        assert done.returncode == (1 if broken else 0), (label, done.stderr)
        undocumented = _keys(json.loads(done.stdout)) - _documented(readme, label)
        assert not undocumented, (label, undocumented)
    failed = subprocess.run(
        [*cli, "tree", str(root), "nope.md", "--db", db, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 1 and failed.stdout == "", failed.stdout
    assert set(json.loads(failed.stderr)) == {"error", "hint", "code"}, failed.stderr


@pytest.mark.parametrize("argv", [["daemon", "--no-mcp"], ["mcp", "--watch"], ["mcp"]])
def test_help_gives_the_exit_status_ctrl_c_gives(tmp_path: Path, argv: list[str]) -> None:
    """`mcp --help` said SIGINT stops the server with 0, and `daemon --help` that Ctrl-C exits
    130: the other way round. A live index (`daemon`, `mcp --watch`) stops cleanly on SIGINT,
    with 0; a plain server is interrupted (130). Each help now says what the command does, and
    the live index does it."""
    cli = [sys.executable, "-m", "markindex_core"]
    helped = subprocess.run(
        [*cli, argv[0], "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "1000"},
    )
    text = " ".join(helped.stdout.split("Exit status:", 1)[1].split())
    stopped_cleanly = text.split("; 1 when", 1)[0]  # "0 when …"
    assert "SIGINT" in stopped_cleanly, text
    if argv[0] == "daemon":
        assert "130" not in text, text
        overview = subprocess.run([*cli, "--help"], capture_output=True, text=True).stdout
        assert "except the live index (daemon, mcp --watch)" in " ".join(overview.split())
    else:
        assert "with --watch also SIGTERM, SIGINT" in stopped_cleanly, text
        assert "130 when interrupted (Ctrl-C) without --watch" in text, text
    if argv == ["mcp"]:
        return

    root = tmp_path / "library"
    shutil.copytree(REPO / "examples" / "library", root)
    log = tmp_path / "stderr.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*cli, argv[0], str(root), "--db", str(tmp_path / "index.db"), *argv[1:]],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while b"watching" not in log.read_bytes():
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

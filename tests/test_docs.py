"""The README documents every sub-command, and every sub-command explains itself with --help."""

from __future__ import annotations

import subprocess
import sys

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

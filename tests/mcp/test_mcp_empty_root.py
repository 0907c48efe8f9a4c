"""`markindex mcp` refuses a folder that holds no Markdown files and no index, with a clear line,
instead of serving an empty library (a relative ROOT from a host's working directory)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from markindex_core.index.scan import holds_markdown
from tests.paths import REPO


def run_mcp(root: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", "mcp", root, *extra],
        cwd=cwd,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},  # a host's minimal env
    )


def test_an_empty_folder_is_refused_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "lib" / "sub").mkdir(parents=True)
    (tmp_path / "lib" / "notes.txt").write_text("not markdown", encoding="utf-8")
    (tmp_path / "lib" / ".hidden").mkdir()
    (tmp_path / "lib" / ".hidden" / "x.md").write_text("# hidden\n", encoding="utf-8")
    proc = run_mcp("lib", tmp_path)  # relative, as a host started in the wrong folder would
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "holds no Markdown files" in lines[0] and "absolute path" in lines[0]
    assert str(tmp_path / "lib") in lines[0]
    assert proc.stdout == ""  # nothing on the wire
    assert not (tmp_path / "lib" / ".markindex").exists()


def test_a_folder_with_markdown_or_an_index_is_served(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (lib / "deep" / "er").mkdir(parents=True)
    (lib / "deep" / "er" / "a.markdown").write_text("# A\n", encoding="utf-8")
    assert holds_markdown(lib)
    proc = run_mcp(str(lib), tmp_path)  # stdin closes at once: the server starts and ends cleanly
    assert proc.returncode == 0, proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    db = tmp_path / "db" / "index.db"
    db.parent.mkdir()
    db.write_bytes(b"")  # an index file exists: the server answers INDEX_* envelopes, not refuses
    assert run_mcp(str(empty), tmp_path, "--db", str(db)).returncode == 0


def test_the_check_is_bounded(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}.txt").write_text("x", encoding="utf-8")
    assert not holds_markdown(tmp_path)
    assert holds_markdown(tmp_path, budget=10)  # past the budget it does not refuse

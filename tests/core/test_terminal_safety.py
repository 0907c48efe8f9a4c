"""Hostile document text never reaches the terminal raw: every human output escapes control bytes.

Each command runs as a real subprocess on a library whose file names, folder name, headings, body
text, link targets and question sets carry ESC, OSC, BEL, CSI and C1 sequences.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO_ROOT

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x1b\\"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"

# Any C0 byte but newline, DEL, (once decoded) any C1 character, and the bidi controls that
# reorder what a terminal shows (`Invoice \u202efdp.exe` reads as `Invoice exe.pdf`).
RAW_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
BIDI = "\u202efdp.exe"

# Enough ordinary prose that the few control characters don't make the file look binary.
PROSE = "Ordinary words keep the share of control characters low. " * 40


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / f"lib{CLEAR}"
    root.mkdir()
    (root / "esc.md").write_text(
        f"# T{TITLE} heading :x: {BIDI}\n\nzqosc {OSC52} end {C1_CSI} and\tbell\x07 here\n\n"
        # Link destinations in <…>: a bare one holds no control characters (CommonMark).
        f"## Sub {CLEAR} zqosc\n\nsee [next](<name{TITLE}.md>) and [gone](<gone{CLEAR}.md#a{TITLE}>)"
        f"\n\n{PROSE}\n",
        encoding="utf-8",
    )
    (root / "named.md").write_text(
        f"# Named {C1_CSI}\n\nzqosc body\n\n[back](<esc.md#x{TITLE}>)\n\n{PROSE}\n",
        encoding="utf-8",
    )
    # A name with control characters is skipped at scan time; its skip line must still be safe.
    (root / f"name{TITLE}.md").write_text(f"# Bad name\n\n{PROSE}\n", encoding="utf-8")
    (root / "bin.md").write_bytes(b"\x00\x1b]0;bin\x07")
    return root, tmp_path / "db" / "index.db"


def markindex(*argv: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm-256color"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=60,
        env=env,
    )


def assert_no_raw_control(proc: subprocess.CompletedProcess[bytes], *argv: str) -> str:
    out = proc.stdout.decode("utf-8") + proc.stderr.decode("utf-8")
    found = RAW_CONTROL.findall(out)
    assert not found, (argv, found, out)
    return out


def test_every_human_output_escapes_control_characters(hostile: tuple[Path, Path]) -> None:
    root, db = hostile
    lib = [str(root), "--db", str(db)]
    questions = root.parent / "q.jsonl"
    gold = [{"doc_path": "esc.md", "start_line": 1, "end_line": 3}]
    questions.write_text(
        json.dumps({"question": "zqosc", "lang": f"en{TITLE}", "gold": gold}) + "\n",
        encoding="utf-8",
    )
    commands = [
        ["index", *lib],
        ["search", *lib, "zqosc"],
        ["search", *lib, "heading pwned"],
        ["tree", *lib, "esc.md"],
        ["tree", *lib, "named.md"],
        ["tree", *lib, f"name{TITLE}.md"],
        ["tree", *lib, f"missing{TITLE}.md"],
        ["links", *lib, "esc.md"],
        ["links", *lib],
        ["backlinks", *lib, "esc.md"],
        ["backlinks", *lib, "named.md"],
        ["status", *lib],
        ["eval", *lib, "--questions", str(questions)],
    ]
    outputs = {}
    for argv in commands:
        proc = markindex(*argv)
        outputs[" ".join(argv[:1] + argv[4:])] = assert_no_raw_control(proc, *argv)
    # The escapes are visible, not dropped: a reader can see something odd is in the text.
    assert "\\x1b]52;c;" in outputs["search zqosc"]
    assert "\\x1b]0;pwned\\x07" in outputs["tree esc.md"]
    assert "heading :x: \\u202efdp.exe" in outputs["tree esc.md"]  # no emoji, no reordering
    assert not any("\u274c" in out for out in outputs.values())  # the emoji :x: would become
    assert "\\x1b[2J" in outputs["status"]
    assert "\\x9b31m" in outputs["tree named.md"]
    assert "name\\x1b]0;pwned\\x07.md" in outputs["index"]  # skipped, and said safely
    assert "\\x1b]0;pwned\\x07" in outputs[f"tree name{TITLE}.md"]
    assert "\\x1b]0;pwned\\x07" in outputs[f"tree missing{TITLE}.md"]
    assert "\\x1b[2J" in outputs["links"]  # the broken target
    assert "x\\x1b]0;pwned\\x07" in outputs["links"]  # the missing anchor
    assert "\\x1b]0;pwned\\x07" in outputs["eval --questions " + str(questions)]


def test_json_output_stays_exact(hostile: tuple[Path, Path]) -> None:
    root, db = hostile
    assert markindex("index", str(root), "--db", str(db), "--json").returncode == 0
    proc = markindex("search", str(root), "--db", str(db), "--json", "zqosc")
    assert proc.returncode == 0
    assert_no_raw_control(proc)  # C0 escaped by JSON itself, DEL and C1 by us
    hits = json.loads(proc.stdout)["hits"]
    assert any(OSC52 in h["snippet"] for h in hits)
    assert any(C1_CSI in h["snippet"] for h in hits)
    assert any(h["doc_path"] == "named.md" for h in hits)
    assert not any(h["doc_path"] == f"name{TITLE}.md" for h in hits)  # skipped at scan time
    proc = markindex("tree", str(root), "--db", str(db), "--json", "esc.md")
    assert json.loads(proc.stdout)["title"].startswith(f"T{TITLE}")
    proc = markindex("tree", str(root), "--db", str(db), "--json", f"gone{C1_CSI}.md")
    assert proc.returncode == 1
    assert_no_raw_control(proc)
    assert json.loads(proc.stderr)["code"] == "NOT_FOUND"


def test_line_and_paragraph_separators_are_escaped_in_human_output(tmp_path: Path) -> None:
    """U+2028 and U+2029 in a file name were printed raw: `search` cited `[a<LS>b.md, L1-3]`
    and `index`, `tree` and `links` printed the name with a character editors, log viewers and
    Python's `splitlines` take for a line break, so a one-line message or citation broke in
    two (and read as `a b.md`, a name that finds nothing). They are shown as escapes now."""
    root = tmp_path / "lib"
    root.mkdir()
    names = ["a\u2028b.md", "c\u2029d.md"]
    for name in names:
        (root / name).write_text("# Sep\n\nzqsep words\n", encoding="utf-8")
    (root / "src.md").write_text("# Src\n\n[x](a%E2%80%A8b.md) [y](gone%E2%80%A9.md)\n", "utf-8")
    lib = [str(root), "--db", str(tmp_path / "index.db")]
    for argv in (
        ["index", *lib],
        ["search", *lib, "zqsep"],
        ["tree", *lib, names[0]],
        ["links", *lib, "src.md"],
        ["links", *lib],
        ["backlinks", *lib, names[0]],
    ):
        proc = markindex(*argv)
        out = proc.stdout.decode("utf-8") + proc.stderr.decode("utf-8")
        assert "\u2028" not in out and "\u2029" not in out, (argv, out)
        if argv[0] in ("search", "tree") or argv[-1] == "src.md":
            assert "a\\u2028b.md" in out, (argv, out)
        if argv[0] == "links":
            assert "gone\\u2029.md" in out, (argv, out)

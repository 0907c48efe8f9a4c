"""The `index` and `tree` commands: JSON shapes, human output, one-line errors with exit 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from markindex_core.cli.main import main

from .helpers import REPO_ROOT, make_library, write

REPORT_KEYS = {
    "added",
    "updated",
    "removed",
    "unchanged",
    "skipped",
    "warnings",
    "errors",
    "full_rebuild",
    "seconds",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def lib(tmp_path: Path) -> tuple[Path, Path]:
    root = make_library(tmp_path / "lib", 6)
    write(root, "warn.md", "# A\n\nline one\nline two\n---\n\nbody\n")
    write(root, "bin.md", b"\x00\x01\x02")
    return root, tmp_path / "db" / "index.db"


def test_index_json_summary(lib: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, db = lib
    code, out, err = run(capsys, "index", str(root), "--db", str(db), "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert set(report) == REPORT_KEYS
    assert len(report["added"]) == 7 and report["unchanged"] == 0
    assert report["skipped"] == [{"path": "bin.md", "reason": report["skipped"][0]["reason"]}]
    assert (
        report["warnings"][0]["path"] == "warn.md" and "setext" in report["warnings"][0]["warning"]
    )
    assert report["full_rebuild"] is None and report["seconds"] >= 0
    code, out, _ = run(capsys, "index", str(root), "--db", str(db), "--json", "--no-setext")
    again = json.loads(out)
    assert "setext" in again["full_rebuild"] and len(again["updated"]) == 7


def test_index_human_output(lib: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, db = lib
    code, out, err = run(capsys, "index", str(root), "--db", str(db))
    assert code == 0
    assert "added 7, updated 0, removed 0, unchanged 0, skipped 1, warnings 1" in out
    assert "warning warn.md: line 3: setext h2" in err
    assert "skipped bin.md: binary" in err
    code, out, _ = run(capsys, "index", str(root), "--db", str(db))
    assert "added 0, updated 0, removed 0, unchanged 7" in out


def test_a_folder_without_markdown_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`markindex index` of a folder holding no Markdown file (the wrong folder, or notes kept
    as .txt) printed 'added 0, …' and exited 0 like any healthy run, and every search then said
    'nothing matched'. It now warns that no .md or .markdown file was found and what to check,
    in the human output and in --json's warnings; the run still succeeds."""
    root = tmp_path / "notes"
    write(root, "todo.txt", "# not markdown\n")
    db = tmp_path / "index.db"
    code, out, err = run(capsys, "index", str(root), "--db", str(db))
    assert code == 0 and "added 0" in out
    assert "warning: no Markdown file (.md, .markdown) under" in err and str(root) in err, err
    code, out, _ = run(capsys, "index", str(root), "--db", str(db), "--json")
    report = json.loads(out)
    assert code == 0 and set(report) == REPORT_KEYS
    assert [w["path"] for w in report["warnings"]] == [""], report
    assert "no Markdown file" in report["warnings"][0]["warning"]
    write(root, "a.md", "# A\n")
    _, out, err = run(capsys, "index", str(root), "--db", str(db))
    assert "added 1" in out and "no Markdown file" not in err


def test_doc_and_folder_given_as_the_shell_completes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document or folder typed with tab completion (`docs/guides/doc0.md` from the folder
    above the library, or an absolute path) was 'no document … in this library', as only
    paths relative to ROOT were taken. A path that names a file or folder inside ROOT on
    disk is now taken as what it names; ROOT-relative paths still come first."""
    root = make_library(tmp_path / "docs", 8)
    db = str(tmp_path / "index.db")
    assert run(capsys, "index", str(root), "--db", db)[0] == 0
    monkeypatch.chdir(tmp_path)
    for doc in ("docs/guides/doc0.md", str(root / "guides" / "doc0.md")):
        code, out, err = run(capsys, "tree", "docs", doc, "--db", db, "--json")
        assert code == 0 and json.loads(out)["path"] == "guides/doc0.md", err
        code, out, err = run(capsys, "links", "docs", doc, "--db", db, "--json")
        assert code == 1 and json.loads(out)["path"] == "guides/doc0.md", err  # /doc1.md: broken
        code, out, err = run(capsys, "backlinks", "docs", doc, "--db", db, "--json")
        assert code == 0 and json.loads(out)["path"] == "guides/doc0.md", err
        code, out, err = run(capsys, "search", "docs", "words", "--doc", doc, "--db", db, "--json")
        assert code == 0, err
        assert {h["doc_path"] for h in json.loads(out)["hits"]} == {"guides/doc0.md"}
    code, out, err = run(capsys, "search", "docs", "words", "--folder", "docs/laws", "--db", db)
    assert code == 0 and "laws/cn/" in out, err
    assert run(capsys, "tree", "docs", "docs/nope.md", "--db", db)[0] == 1  # still a typo


def _check_spans(entries: list[dict[str, Any]], lo: int, hi: int) -> int:
    """Entries tile lo..hi; each spans its own lines then its children's."""
    expected = lo
    count = 0
    for e in entries:
        assert e["start_line"] == expected and e["start_line"] <= e["own_end_line"] <= e["end_line"]
        kids = e.get("children", [])
        if kids:
            count += _check_spans(kids, e["own_end_line"] + 1, e["end_line"])
        else:
            assert e["own_end_line"] == e["end_line"]
        expected = e["end_line"] + 1
        count += 1
    assert expected == hi + 1
    return count


def test_tree_json_is_nested_with_subtree_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "lib"
    body = "A paragraph long enough that the sections are not merged into their parent. " * 30
    src = f"Intro.\n\n# One\n\n{body}\n\n## One.a\n\n{body}\n\n### Deep\n\n{body}\n\n## One.b\n\n{body}\n\n# Two\n\n{body}\n"
    write(root, "guide/doc.md", src)
    db = tmp_path / "index.db"
    assert run(capsys, "index", str(root), "--db", str(db), "--json")[0] == 0
    code, out, err = run(capsys, "tree", str(root), "guide/doc.md", "--db", str(db), "--json")
    assert code == 0 and err == ""
    tree = json.loads(out)
    assert tree["path"] == "guide/doc.md" and tree["title"] == "One"
    assert tree["lines"] == len(src.splitlines())
    assert _check_spans(tree["nodes"], 1, tree["lines"]) == 6
    titles = [(n["kind"], n["title"]) for n in tree["nodes"]]
    assert titles == [("preface", ""), ("section", "One"), ("section", "Two")]
    one = tree["nodes"][1]
    assert [c["title"] for c in one["children"]] == ["One.a", "One.b"]
    assert one["children"][0]["children"][0]["title"] == "Deep"
    # --depth cuts the outline and counts what is hidden
    code, out, _ = run(
        capsys, "tree", str(root), "guide/doc.md", "--db", str(db), "--json", "--depth", "1"
    )
    shallow = json.loads(out)["nodes"]
    assert shallow[1]["children_count"] == 2 and "children" not in shallow[1]
    code, out, _ = run(capsys, "tree", str(root), "guide/doc.md", "--db", str(db))
    assert code == 0 and "One.a" in out and "Deep" in out


def one_line_error(code: int, err: str) -> str:
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_errors_are_one_line_and_exit_1(
    lib: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, db = lib
    line = one_line_error(*run(capsys, "tree", str(root), "doc3.md", "--db", str(db))[::2])
    assert "index" in line  # no index yet: says how to build one
    run(capsys, "index", str(root), "--db", str(db), "--json")
    line = one_line_error(*run(capsys, "tree", str(root), "doc33.md", "--db", str(db))[::2])
    assert "doc33.md" in line and "doc3.md" in line  # suggests the near miss
    line = one_line_error(*run(capsys, "index", str(tmp_path / "missing"), "--db", str(db))[::2])
    assert "not found" in line
    # A file given as ROOT (a document instead of its folder) is named as such, not "not found".
    doc = str(root / "doc3.md")
    line = one_line_error(*run(capsys, "search", doc, "words", "--db", str(db))[::2])
    assert "is a file, not a library folder" in line and str(root) in line, line
    line = one_line_error(
        *run(capsys, "index", str(root), "--db", str(db), "--ignore", "../x")[::2]
    )
    assert "--ignore" in line
    code, _, err = run(capsys, "index", str(root), "--db", str(db), "--json", "--ignore", "/etc")
    payload = json.loads(one_line_error(code, err))
    assert payload["code"] == "INVALID_INPUT" and payload["hint"]
    # An unknown search scope is said as such (with the near miss), not as "nothing matched".
    search = ["search", str(root), "words", "--db", str(db)]
    line = one_line_error(*run(capsys, *search, "--doc", "doc33.md")[::2])
    assert "no document 'doc33.md'" in line and "doc3.md" in line, line
    line = one_line_error(*run(capsys, *search, "--folder", "guidez")[::2])
    assert "no folder 'guidez'" in line, line
    assert run(capsys, *search, "--folder", "./guides/", "--doc", "./guides/doc0.md")[0] == 0
    with pytest.raises(SystemExit):  # argparse: the range is said, not clamped silently
        run(capsys, *search, "--limit", "0")
    assert "0 is out of range (1-50)" in capsys.readouterr().err


def test_cli_as_a_subprocess(lib: tuple[Path, Path]) -> None:
    root, db = lib
    proc = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and set(json.loads(proc.stdout)) == REPORT_KEYS
    for cmd in (["index", "--help"], ["tree", "--help"], ["--help"]):
        help_proc = subprocess.run(
            [sys.executable, "-m", "markindex_core", *cmd],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert help_proc.returncode == 0
        assert ("--db" if cmd[0] != "--help" else "index") in help_proc.stdout


def test_db_that_is_a_folder_is_refused_without_side_effects(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.md").write_text("# A\n", encoding="utf-8")
    folder = tmp_path / "dbdir"
    folder.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(lib), "--db", str(folder)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "is a folder" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "dbdir.lock").exists()


def test_db_below_a_file_is_refused_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--db f/index.db` where `f` is a file: said so, not blamed on permissions."""
    root = make_library(tmp_path / "lib", 2)
    (tmp_path / "f").write_text("a file\n", encoding="utf-8")
    code, _, err = run(capsys, "index", str(root), "--db", str(tmp_path / "f" / "sub" / "i.db"))
    assert code == 1 and "is a file, not a folder" in err and "read-only" not in err, err


def test_tree_shows_titles_as_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Titles are text, never markup: a trailing backslash is shown once, `[red]` as written."""
    root = tmp_path / "lib"
    body = "words " * 400  # sections too big to be merged into their parent
    write(root, "a.md", f"# Paths C:\\\n\n{body}\n\n## Colors `[red]x[/red]` code\n\n{body}\n")
    db = tmp_path / "index.db"
    assert run(capsys, "index", str(root), "--db", str(db))[0] == 0
    code, out, _ = run(capsys, "tree", str(root), "a.md", "--db", str(db))
    assert code == 0 and "Paths C:\\ " in out and "Paths C:\\\\" not in out, out
    assert "[red]x[/red]" in out, out


@pytest.mark.parametrize(
    "command",
    [["index"], ["index", "--rebuild"], ["search", "x"], ["status"], ["check"], ["tree", "a.md"]],
)
def test_db_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, command: list[str]) -> None:
    """Opening a FIFO blocks until a writer comes: `--db` naming one must fail at once."""
    import os

    root = make_library(tmp_path / "lib", 2)
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    verb, *rest = command
    args = [sys.executable, "-m", "markindex_core", verb, str(root), *rest, "--db", str(fifo)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    assert "not a regular file" in out.stderr + out.stdout and "Traceback" not in out.stderr


def test_usage_errors_with_json_are_json(
    lib: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A script that asks for --json reads a JSON error even when argparse refuses the call."""
    root, db = lib
    for argv in (
        ["search", str(root), "q", "--db", str(db), "--json", "--limit", "0"],
        ["tree", str(root), "a.md", "--db", str(db), "--json", "--depth", "abc"],
        ["bogus", "--json"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = json.loads(capsys.readouterr().err)
        assert err["code"] == "USAGE" and "--help" in err["hint"], err
    with pytest.raises(SystemExit):
        main(["search", str(root), "q", "--limit", "0"])
    assert "usage: markindex search" in capsys.readouterr().err  # without --json: argparse's text


def test_an_index_named_like_a_markdown_file_is_refused(
    lib: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """In the library, every write of it would be an edited document (a daemon reconciled
    twenty times a second, for ever); nowhere is such a name an index."""
    root, _ = lib
    code, _, err = run(capsys, "index", str(root), "--db", str(root / "index.md"), "--json")
    assert code == 1 and json.loads(err)["code"] == "INVALID_INPUT", err
    assert "Markdown" in err and "index.db" in err
    assert not (root / "index.md").exists()


def test_an_index_of_another_library_is_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`index B --db a.db` used to remove every document of A without a word. It is refused
    (index and daemon alike) and the index is left whole; --rebuild replaces it on purpose, and
    an index whose library was moved, or that lives inside the library, follows it."""
    a = make_library(tmp_path / "a", 3)
    b = make_library(tmp_path / "b", 2)
    db = tmp_path / "a.db"
    assert run(capsys, "index", str(a), "--db", str(db))[0] == 0
    for command, *flags in (["index"], ["daemon", "--no-mcp"]):
        code, _, err = run(capsys, command, str(b), "--db", str(db), "--json", *flags)
        error = json.loads(err)
        assert code == 1 and error["code"] == "OTHER_LIBRARY", err
        assert str(a) in error["error"] and "--rebuild" in error["hint"]
    code, out, _ = run(capsys, "index", str(a), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["unchanged"] == 3  # nothing of A was removed
    # status reports it, and exits 1 as for no index: it exited 0, a healthy index of B
    code, out, _ = run(capsys, "status", str(b), "--db", str(db), "--json")
    status = json.loads(out)
    assert code == 1 and status["indexed_root"] == str(a.resolve()) and status["other_library"]
    code, out, _ = run(capsys, "status", str(b), "--db", str(db))
    assert code == 1 and "the index of another library" in out
    code, out, _ = run(capsys, "status", str(a), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["other_library"] is False

    assert run(capsys, "index", str(b), "--db", str(db), "--rebuild")[0] == 0
    moved = b.rename(tmp_path / "b-moved")
    code, out, _ = run(capsys, "index", str(moved), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["unchanged"] == 2 and json.loads(out)["removed"] == []

    copy = tmp_path / "a-copy"
    shutil.copytree(a, copy)
    inside = copy / ".markindex" / "index.db"
    assert run(capsys, "index", str(a), "--db", str(inside))[0] == 0  # recorded as A's
    code, out, _ = run(capsys, "index", str(copy), "--json")  # its own index, inside it
    assert code == 0 and json.loads(out)["unchanged"] == 3


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["tree", "ROOT", "doc0.md", "--depth", "0"], "--depth: 0 is out of range (1 or more)"),
        (["tree", "ROOT", "doc0.md", "--depth", "-2"], "--depth: -2 is out of range (1 or more)"),
        (["search", "ROOT", "q", "--limit", "x"], "--limit: 'x' is not a whole number"),
        (["tui", "ROOT"], "the terminal app needs a terminal"),
    ],
)
def test_arguments_that_cannot_work_are_refused(
    lib: tuple[Path, Path], argv: list[str], expected: str
) -> None:
    """`tree --depth 0` printed the whole tree; `tui` with no terminal drew escape codes into
    its output and waited for keys for ever. Both now stop with one line."""
    root, db = lib
    args = [str(root) if a == "ROOT" else a for a in argv]
    out = subprocess.run(
        [sys.executable, "-m", "markindex_core", *args, "--db", str(db)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode in (1, 2) and expected in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "\x1b" not in out.stdout


@pytest.mark.parametrize("command", ["daemon", "index", "status"])
def test_paths_that_are_not_utf8_are_refused_in_one_line(tmp_path: Path, command: str) -> None:
    """The daemon crashed with two tracebacks on such a library folder (its status file could
    not be written, so status then called the index healthy); every command now refuses it."""
    root = Path(os.fsdecode(bytes(tmp_path) + b"/R\xff"))
    write(root, "r.md", "# R\n")
    out = subprocess.run(
        [sys.executable, "-m", "markindex_core", command, str(root), "--db", str(tmp_path / "i.db")]
        + (["--no-mcp"] if command == "daemon" else []),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "not valid UTF-8" in out.stderr and "R\\udcff" in out.stderr, out.stderr


def subprocess_run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`markindex ARGV` in a child process with `env`, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _column(out: str, index: int) -> str:
    """The text of one table column, its wrapped pieces joined (borders and spaces dropped)."""
    cells = [line.split("│")[1 + index] for line in out.splitlines() if line.startswith("│")]
    return "".join(c.strip() for c in cells)


@pytest.mark.parametrize("columns", ["80", "40"])
def test_paths_and_citations_are_never_cut_in_tables(tmp_path: Path, columns: str) -> None:
    """In a file, a pipe (80 columns) or a narrow terminal, `links`, `backlinks` and `search`
    cut long document paths to `OWASP-CheatSheetSeries/cheatshe…`: the broken links could not be
    found, nor a citation copied. Paths and citations now wrap within their cell, whole."""
    root = tmp_path / "lib"
    deep = "a-rather-long-folder-name/another-long-sub-folder/the-document-with-a-long-name.md"
    write(
        root,
        deep,
        "# Deep\n\nzqunique words here, see [gone](missing-target-with-a-long-name.md).\n",
    )
    write(root, "b.md", f"# B\n\n[deep](/{deep})\n")
    db = tmp_path / "index.db"
    env = {**os.environ, "COLUMNS": columns}

    def human(*argv: str, status: int = 0) -> str:
        done = subprocess_run([*argv, "--db", str(db)], env)
        assert done.returncode == status, done.stderr
        return done.stdout

    human("index", str(root))
    broken = human("links", str(root), status=1)  # 1: it found a broken link
    assert _column(broken, 0) == deep, broken
    assert _column(broken, 2) == deep.rsplit("/", 1)[0] + "/missing-target-with-a-long-name.md"
    assert _column(human("links", str(root), "b.md"), 1) == deep
    assert _column(human("backlinks", str(root), deep), 0) == "b.md"
    assert "…" not in broken, broken


@pytest.mark.parametrize("columns", ["80", "40"])
def test_search_prints_each_citation_whole_on_one_line(tmp_path: Path, columns: str) -> None:
    """In a pipe (80 columns) or a narrow terminal, `search` folded a long citation inside its
    table cell (`…/the-document-with-a-lo │` then `│ ng-name.md, L1-3]`), so neither copying it
    nor `grep` gave it back whole. Each hit now starts with its citation on a line of its own,
    never folded by markindex (a terminal wraps it softly), and section and snippet follow,
    indented, with no trailing spaces."""
    root = tmp_path / "lib"
    deep = "a-rather-long-folder-name/another-long-sub-folder/the-document-with-a-long-name.md"
    write(root, deep, "# Deep\n\nzqunique words here, and more words after them.\n")
    write(root, "b.md", "# B\n\nzqunique too\n")
    db = tmp_path / "index.db"
    env = {**os.environ, "COLUMNS": columns}
    assert subprocess_run(["index", str(root), "--db", str(db)], env).returncode == 0
    found = subprocess_run(["search", str(root), "zqunique", "--db", str(db)], env)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    for citation in (f"[{deep}, L1-3]", "[b.md, L1-3]"):
        assert any(citation in line for line in lines), found.stdout
    words = " ".join(found.stdout.split())
    assert "Deep" in words and "zqunique words here, and more words after them." in words, words
    # Section and snippet lines are indented under the citation and never padded to the width
    # with trailing spaces (they were: a diff or `grep ' $'` of the output showed every line).
    assert not [line for line in lines if line != line.rstrip()], found.stdout
    assert any(line.startswith(" " * 8 + "Deep") for line in lines), found.stdout


def test_tree_into_a_pipe_shows_every_line_range(tmp_path: Path) -> None:
    """Into a file or a pipe (80 columns), `tree` cut each line at the 80th column: a long
    section title lost its line range and tokens ('section Required changes for a WATCH
    request with the S'), and a long document path its title, so the outline named sections
    without saying where they are. Long lines now wrap, as in a terminal, and nothing is cut."""
    root = tmp_path / "lib"
    title = "Required changes for a WATCH request with the SendInitialEvents=true parameter"
    body = "words of a section long enough to stay a node of its own. " * 40
    write(root, "deep/folder/doc.md", f"# Top\n\n## {title}\n\n{body}\n\n## Other\n\n{body}\n")
    db = tmp_path / "index.db"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    assert subprocess_run(["index", str(root), "--db", str(db)], env).returncode == 0
    done = subprocess_run(["tree", str(root), "deep/folder/doc.md", "--db", str(db)], env)
    assert done.returncode == 0, done.stderr
    words = " ".join(done.stdout.replace("│", " ").split())
    assert title in words and "L3-6 · " in words, done.stdout


def test_output_to_a_file_keeps_each_message_on_one_line(lib: tuple[Path, Path]) -> None:
    """Into a file or a pipe (no terminal: 80 columns), `index` wrote a stray empty line on
    stderr (its progress bar) and broke its summary before the index path and each long
    warning or skip line in two, so a log or `grep` lost half of each. Each message now stays
    one line, and no progress bar is drawn where no one watches it."""
    root, _ = lib
    db = root.parent / ("a-long-folder-name-for-the-index-" * 3) / "index.db"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess_run(["index", str(root), "--db", str(db)], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [done.stdout.strip()], done.stdout
    assert done.stdout.strip().endswith(str(db)), done.stdout
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith(("warning ", "skipped ")) for line in lines), lines


COMMANDS = "index tree search links backlinks retrieve eval mcp daemon status check tui".split()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_shows_examples_and_exit_status(command: str) -> None:
    """Most commands' --help said neither how to call them nor what their exit status means
    (tree, links, backlinks, retrieve, eval, mcp, daemon, tui), and `mcp --json` claimed to
    'print machine-readable JSON' where stdout is the MCP wire. Each help now ends with
    examples kept one per line and the exit statuses, and says what --json does there."""
    text, examples = _help(command)
    assert examples and all(e.startswith(f"  markindex {command} ") for e in examples), text
    flat = " ".join(text.split())  # where a line wraps is not the point
    assert "exit status: 0 " in flat.lower() and "2 " in flat.split("xit status", 1)[1], text
    if command in ("mcp", "daemon", "tui"):
        assert "print machine-readable JSON" not in text and "log" in text.split("--json")[2]


def test_top_level_help_shows_a_start_and_the_exit_statuses() -> None:
    """`markindex --help`, the first thing a new user runs, listed the commands but no example
    of how to start and no exit status, where every command's own help has both. It now ends
    with the first commands to run and the exit statuses all commands share."""
    text, examples = _help()
    commands = [e.split()[1] for e in examples]
    assert commands[:2] == ["index", "search"] and "tui" in commands and "mcp" in commands, text
    assert all(e.startswith("  markindex ") for e in examples), text
    statuses = text.split("Exit status:", 1)[1]
    assert all(f"{n} " in statuses for n in (0, 1, 2, 130)), text
    assert "COMMAND --help" in " ".join(text.split()), text


def test_markindex_alone_shows_how_to_start(capsys: pytest.CaptureFixture[str]) -> None:
    """`markindex` with no command printed only argparse's 'the following arguments are
    required: COMMAND'. It now prints the whole help, examples included, on stderr, and still
    exits 2 (a usage error), so a script that forgot the command fails as before."""
    code, out, err = run(capsys)
    assert code == 2 and out == "", out
    assert "markindex index" in err and "Exit status:" in err and "required" not in err, err


def _help(*command: str) -> tuple[str, list[str]]:
    """`markindex [COMMAND] --help` at 100 columns: its text and its example lines."""
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", *command, "--help"],
        cwd=REPO_ROOT,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    examples = done.stdout.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return done.stdout, examples


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "B", "document"],
        ["tree", "B", "guides/doc0.md"],
        ["links", "B"],
        ["backlinks", "B", "doc1.md"],
        ["eval", "B", "--questions", "Q"],
    ],
)
def test_reading_the_index_of_another_library_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """`search B q --db a.db` answered from library A's index as if it were B's: A's documents
    were cited for B, and `links B` listed A's broken links, all with exit 0 (the MCP tools
    already refused such an index with OTHER_LIBRARY). The reading commands now refuse it too."""
    a = make_library(tmp_path / "a", 3)
    b = make_library(tmp_path / "b", 2)
    db = tmp_path / "a.db"
    questions = tmp_path / "q.jsonl"
    record = {"id": "q1", "question": "doc", "lang": "en", "gold": [{"doc_path": "doc0.md"}]}
    questions.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert run(capsys, "index", str(a), "--db", str(db))[0] == 0
    args = [str(b) if x == "B" else str(questions) if x == "Q" else x for x in argv]
    code, out, err = run(capsys, *args, "--db", str(db), "--json")
    assert code == 1 and out == "", out
    error = json.loads(err)
    assert error["code"] == "OTHER_LIBRARY" and str(a) in error["error"], error
    own = run(capsys, *[str(a) if x == str(b) else x for x in args], "--db", str(db))
    assert own[0] == (1 if argv[0] == "links" else 0), own  # A's `/docN.md` links are broken


def test_status_lists_the_remembered_ignore_patterns_and_clear_ignore_forgets_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The index remembers --ignore patterns; status says which, so a file left out is never
    a mystery, and `--clear-ignore` is the way back."""
    root = tmp_path / "lib"
    write(root, "a.md", "# A\n\nalpha\n")
    write(root, "drafts/d.md", "# D\n\nzqdraft\n")
    db = str(tmp_path / "index.db")
    assert run(capsys, "index", str(root), "--db", db, "--ignore", "drafts/")[0] == 0
    code, out, _ = run(capsys, "status", str(root), "--db", db, "--json")
    st = json.loads(out)
    assert code == 0 and st["ignore"] == ["drafts/"] and st["changed_on_disk"]["added"] == 0, st
    code, out, _ = run(capsys, "status", str(root), "--db", db)
    assert "left out by --ignore (remembered): drafts/" in out and "--clear-ignore" in out, out
    code, out, _ = run(capsys, "index", str(root), "--db", db, "--clear-ignore", "--json")
    assert code == 0 and json.loads(out)["added"] == ["drafts/d.md"], out
    assert json.loads(run(capsys, "status", str(root), "--db", db, "--json")[1])["ignore"] == []


def test_a_remembered_ignore_pattern_means_what_it_meant_when_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An absolute path given to --ignore is remembered as the library-relative pattern it
    stood for. It was remembered as typed and read as a path of this machine on every later run:
    once the library was moved the drafts came back, and once the anchored `/tmp/` was emptied
    out of the library (so only the machine's /tmp was left), every `index` and `status` failed
    with 'an absolute path outside the library'."""
    root = tmp_path / "lib"
    write(root, "a.md", "# A\n\nalpha\n")
    write(root, "drafts/d.md", "# D\n\nzqdraft\n")
    write(root, "tmp/t.md", "# T\n\nzqscratch\n")
    db = str(tmp_path / "index.db")
    given = [str(root / "drafts") + "/", "/tmp/"]
    code, out, _ = run(
        capsys, "index", str(root), "--db", db, "--ignore", given[0], "--ignore", given[1]
    )
    assert code == 0 and json.loads(run(capsys, "status", str(root), "--db", db, "--json")[1])[
        "ignore"
    ] == ["/drafts/", "/tmp/"]
    shutil.rmtree(root / "tmp")
    moved = tmp_path / "moved"
    root.rename(moved)
    code, out, err = run(capsys, "status", str(moved), "--db", db, "--json")
    drift = json.loads(out)["changed_on_disk"]
    assert code == 0 and drift["added"] + drift["changed"] + drift["removed"] == 0, (out, err)
    code, out, err = run(capsys, "index", str(moved), "--db", db, "--json")
    assert code == 0 and json.loads(out)["added"] == [], (out, err)


def test_a_remembered_ignore_pattern_that_is_not_valid_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A remembered pattern that no longer passes --ignore's checks (a damaged meta value, or
    rules tightened by a later version) is damage, as unreadable JSON there is: it is left out
    and the valid ones still apply. It failed every `index`, `status` and daemon start with
    "--ignore '../x' leaves the library", an option the user had not given."""
    from markindex_core.index.scan import IGNORE_META
    from markindex_core.store.db import Store

    root = tmp_path / "lib"
    write(root, "a.md", "# A\n\nalpha\n")
    write(root, "drafts/d.md", "# D\n\nzqdraft\n")
    db = str(tmp_path / "index.db")
    assert run(capsys, "index", str(root), "--db", db, "--ignore", "drafts/")[0] == 0
    store = Store(Path(db))
    store.set_meta({IGNORE_META: json.dumps(["../x", "drafts/", "[z-a]", "~/y"])})
    store.close()
    code, out, err = run(capsys, "status", str(root), "--db", db, "--json")
    st = json.loads(out)
    assert code == 0 and st["ignore"] == ["drafts/"], (out, err)
    assert st["changed_on_disk"]["added"] == 0, st
    code, out, err = run(capsys, "index", str(root), "--db", db, "--json")
    assert code == 0 and json.loads(out)["added"] == [], (out, err)


def test_options_that_would_do_nothing_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--ignore x --clear-ignore` let the patterns win without a word, and `mcp --ignore x`
    (no --watch, no --reindex-on-start) was accepted and did nothing."""
    root = tmp_path / "lib"
    write(root, "a.md", "# A\n\nalpha\n")
    with pytest.raises(SystemExit) as usage:
        main(["index", str(root), "--ignore", "x", "--clear-ignore"])
    assert usage.value.code == 2 and "not allowed with" in capsys.readouterr().err
    code, _, err = run(capsys, "mcp", str(root), "--ignore", "x")
    assert code == 2 and "apply when mcp indexes" in err and "--watch" in err, err


def test_options_refused_after_parsing_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Options that cannot go together, or a value out of range, exit 2 with code USAGE, as
    argparse's own usage errors do (the README's exit statuses): they exited 1, which scripts
    read as a failure of the work itself."""
    root = tmp_path / "lib"
    write(root, "a.md", "# A\n\nalpha\n")
    db = str(tmp_path / "idx" / "index.db")
    refused = [
        (["mcp", str(root), "--db", db, "--watch", "--transport", "streamable-http"], "--watch"),
        (["mcp", str(root), "--db", db, "--allowed-host", "x.example"], "HTTP only"),
        (["daemon", str(root), "--db", db, "--quiet-ms", "-5"], "--quiet-ms"),
        (["daemon", str(root), "--db", db, "--sweep-s", "-1"], "--sweep-s"),
        (["index", str(root), "--db", db, "--summary-rpm", "5"], "--summary-model"),
    ]
    for words, said in refused:
        code, _, err = run(capsys, *words, "--json")
        error = json.loads(err.strip().splitlines()[-1])
        assert code == 2 and error["code"] == "USAGE" and said in error["error"], (words, err)
    assert not (tmp_path / "idx").exists()  # refused before anything was written

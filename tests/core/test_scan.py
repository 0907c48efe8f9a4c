"""Which files a library holds: Markdown suffixes, ignore files at every level, --ignore, dots, links."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from markindex_core.errors import InvalidArgument
from markindex_core.index.scan import IgnoreRules, normalize_ignore_pattern, scan

from .helpers import write


def files(root: Path, extra: list[str] | None = None) -> list[str]:
    result = scan(root, IgnoreRules(root, extra))
    assert result.errors == []
    return sorted(result.files)


def test_markdown_suffixes_only(tmp_path: Path) -> None:
    for name in ("a.md", "b.markdown", "C.MD", "d.txt", "e.mdx", "f.md.bak", "noext"):
        write(tmp_path, name, "# x\n")
    assert files(tmp_path) == ["C.MD", "a.md", "b.markdown"]


def test_dot_directories_and_dot_files_are_skipped(tmp_path: Path) -> None:
    for rel in (".git/x.md", ".markindex/y.md", "a/.hidden/z.md", ".dot.md", "ok/keep.md"):
        write(tmp_path, rel, "x")
    assert files(tmp_path) == ["ok/keep.md"]


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.md", "x")
    root = tmp_path / "lib"
    write(root, "real.md", "x")
    (root / "dirlink").symlink_to(outside, target_is_directory=True)
    (root / "filelink.md").symlink_to(outside / "secret.md")
    (root / "loop").symlink_to(root, target_is_directory=True)
    assert files(root) == ["real.md"]


def test_nested_gitignore_and_negation(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.draft.md\nbuild/\n!keep.draft.md\n")
    write(tmp_path, "sub/.gitignore", "private.md\n!notes.draft.md\n/only-here.md\n")
    write(tmp_path, "sub/deeper/.gitignore", "!private.md\n")
    for rel in (
        "a.md",
        "x.draft.md",
        "keep.draft.md",
        "build/out.md",
        "docs/build/out.md",
        "sub/private.md",
        "sub/notes.draft.md",
        "sub/other.draft.md",
        "sub/only-here.md",
        "sub/deeper/only-here.md",
        "sub/deeper/private.md",
        "only-here.md",
    ):
        write(tmp_path, rel, "x")
    assert files(tmp_path) == [
        "a.md",
        "keep.draft.md",
        "only-here.md",
        "sub/deeper/only-here.md",
        "sub/deeper/private.md",
        "sub/notes.draft.md",
    ]


def test_markindexignore_and_ignore_option(tmp_path: Path) -> None:
    write(tmp_path, ".markindexignore", "# comment\narchive/\n")
    for rel in ("a.md", "archive/old.md", "drafts/d.md", "x/drafts/d.md", "top.md", "x/top.md"):
        write(tmp_path, rel, "x")
    assert files(tmp_path) == ["a.md", "drafts/d.md", "top.md", "x/drafts/d.md", "x/top.md"]
    # a leading ./ is dropped (the pattern then matches at any depth); a leading / anchors
    assert files(tmp_path, ["./drafts/", "/top.md"]) == ["a.md", "x/top.md"]
    assert files(tmp_path, ["/drafts/"]) == ["a.md", "top.md", "x/drafts/d.md", "x/top.md"]
    assert files(tmp_path, ["top.md"]) == ["a.md", "drafts/d.md", "x/drafts/d.md"]


def test_absolute_paths_inside_the_root_become_anchored_patterns(tmp_path: Path) -> None:
    for rel in ("a.md", "drafts/d.md", "x/drafts/d.md"):
        write(tmp_path, rel, "x")

    def given(path: Path, slash: str = "") -> list[str]:  # as cli.common.ignore_patterns does
        return [normalize_ignore_pattern(str(path) + slash, tmp_path)]

    assert files(tmp_path, given(tmp_path / "drafts", "/")) == ["a.md", "x/drafts/d.md"]
    assert files(tmp_path, given(tmp_path / "a.md")) == ["drafts/d.md", "x/drafts/d.md"]


def test_ignore_patterns_only_add_exclusions(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "hidden.md\n")
    write(tmp_path, "hidden.md", "x")
    write(tmp_path, "shown.md", "x")
    # a negation given on the command line cannot bring back what .gitignore excludes
    assert files(tmp_path, ["!hidden.md"]) == ["shown.md"]


def test_gitignore_escapes_for_names_starting_with_hash_or_bang(tmp_path: Path) -> None:
    """`\\#x.md` is gitignore's way to name `#x.md` (a bare `#` starts a comment); it was
    refused as a Windows path."""
    for name in ("#x.md", "!y.md", "z.md"):
        write(tmp_path, name, "x")
    assert files(tmp_path, ["\\#x.md", "\\!y.md"]) == ["z.md"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("./a/", "a/"),
        ("././b.md", "b.md"),
        ("/anchored.md", "/anchored.md"),
        ("*.tmp.md", "*.tmp.md"),
    ],
)
def test_ignore_pattern_normalization(pattern: str, expected: str) -> None:
    assert normalize_ignore_pattern(pattern) == expected


@pytest.mark.parametrize(
    "pattern",
    ["", "  ", "../x", "a/../../x", "~/x", "C:\\x", "//server/x", "!../x", "\\server\\x"],
)
def test_bad_ignore_patterns_are_rejected(pattern: str) -> None:
    with pytest.raises(InvalidArgument):
        normalize_ignore_pattern(pattern)


def test_absolute_ignore_pattern_outside_the_root_is_rejected_with_a_hint(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib, "a.md", "x")
    write(tmp_path, "other/b.md", "x")
    for bad in (str(tmp_path / "other"), str(tmp_path / "other/b.md"), str(lib)):
        with pytest.raises(InvalidArgument) as err:
            normalize_ignore_pattern(bad, lib)  # where a pattern is given (cli.common)
        assert err.value.hint


def test_unreadable_folder_is_an_error_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "x")
    write(tmp_path, "sub/b.md", "x")
    rules = IgnoreRules(tmp_path)
    (tmp_path / "sub").rename(tmp_path / "gone")  # vanish between listing and scanning is fine too
    result = scan(tmp_path, rules)
    assert sorted(result.files) == ["a.md", "gone/b.md"]


def test_invalid_ignore_lines_are_left_out_with_a_warning(tmp_path: Path) -> None:
    """Git ignores a line that is no valid pattern; so does the scan, and it says so each run."""
    from markindex_core.library import Library

    root = tmp_path / "lib"
    (root / "deep").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    (root / "deep" / "b.md").write_text("# B\n\nbeta\n", encoding="utf-8")
    (root / "deep" / "c.md").write_text("# C\n\ngamma\n", encoding="utf-8")
    (root / "deep" / ".gitignore").write_text("[z-a].md\n!\nb.md\n", encoding="utf-8")
    (root / ".markindexignore").write_text("\\\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    for _ in range(2):
        report = lib.index()
        assert ("deep/.gitignore", "not a valid ignore pattern, left out: '[z-a].md', '!'") in (
            report.warnings
        )
        assert any(path == ".markindexignore" for path, _ in report.warnings)
        assert not report.errors
    assert sorted(lib.store.document_paths()) == ["a.md", "deep/c.md"]  # b.md: the valid line
    with pytest.raises(InvalidArgument, match="not a valid gitignore pattern"):
        IgnoreRules(root, ["[z-a]"])


def test_an_ignore_file_that_is_a_fifo_is_left_out_without_hanging(tmp_path: Path) -> None:
    """Opening a FIFO blocks until someone writes to it: ignore files are opened without
    blocking and read only when they are regular files."""
    import json
    import subprocess
    import sys

    from tests.paths import REPO

    root = tmp_path / "lib"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "one.md").write_text("# One\n\nalpha\n", encoding="utf-8")
    os.mkfifo(root / "sub" / ".gitignore")
    os.mkfifo(root / ".markindexignore")
    argv = [sys.executable, "-m", "markindex_core", "index", str(root), "--json"]
    argv += ["--db", str(tmp_path / "index.db")]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["added"] == ["sub/one.md"]
    warned = {w["path"]: w["warning"] for w in report["warnings"]}
    assert "not a regular file" in warned["sub/.gitignore"], warned
    assert "not a regular file" in warned[".markindexignore"], warned


def test_a_folder_gone_between_listing_and_reading_is_not_unreadable(tmp_path: Path) -> None:
    """A checkout removed a folder after its parent was listed: the scan called it unreadable,
    so the daemon warned 'part of the library cannot be read (specs)' and kept the folder's
    documents in the index. A folder or file gone meanwhile is simply not on disk."""
    root = tmp_path / "lib"
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "a.md").write_text("# A\n", encoding="utf-8")
    (root / "b.md").write_text("# B\n", encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        entries = real_scandir(path)
        if not isinstance(path, int) and Path(path) == root:  # then a checkout removes specs/
            listed = list(entries)
            shutil.rmtree(root / "specs")
            return iter(listed)
        return entries

    os.scandir = scandir  # type: ignore[assignment]
    try:
        result = scan(root, IgnoreRules(root))
    finally:
        os.scandir = real_scandir
    assert set(result.files) == {"b.md"} and not result.unreadable and not result.errors, result

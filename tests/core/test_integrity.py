"""`markindex check` finds damage a normal run never reads; `index --rebuild` is the way out.

The damage is real: pages of the passage search index are overwritten on disk, found with SQLite's
own `dbstat` table, as a bad sector or a copy cut short would leave them.
"""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from markindex_core.library import Library
from markindex_core.store.db import Store

from .helpers import (
    PAID_SUMMARY,
    cache_a_summary,
    cached_summary,
    check_store_consistent,
    damage_pages,
    make_library,
    write,
)
from .test_cli import run


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    root = make_library(tmp_path / "lib", 40)
    for i in range(40):  # enough distinct words for a search index of many pages
        write(root, f"extra/w{i}.md", f"# W{i}\n\n" + " ".join(f"t{i}x{j}" for j in range(800)))
    db = tmp_path / "db" / "index.db"
    Library(root, db).index()
    return root, db


def test_check_finds_damage_an_update_never_reads_and_rebuild_mends_it(
    indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, db = indexed
    code, out, _ = run(capsys, "check", str(root), "--db", str(db))
    assert code == 0 and "whole" in out

    assert damage_pages(db, "passage_fts_data") > 2
    # An update reads only what it needs: the damage goes unseen there, which is why check exists.
    code, out, _ = run(capsys, "index", str(root), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["unchanged"] == 80

    code, out, _ = run(capsys, "check", str(root), "--db", str(db), "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"] and report["problems"], report
    code, _, err = run(capsys, "check", str(root), "--db", str(db))
    assert code == 1 and "damaged" in err and "--rebuild" in err

    code, out, err = run(capsys, "index", str(root), "--db", str(db), "--rebuild")
    assert code == 0, err
    assert "full rebuild: asked for (--rebuild)" in out and "added 80" in out
    code, out, _ = run(capsys, "check", str(root), "--db", str(db))
    assert code == 0 and "whole" in out
    assert check_store_consistent(db) == 80
    lib = Library(root, db)
    assert [h.doc_path for h in lib.search("t7x500").hits] == ["extra/w7.md"]
    lib.close()


def test_rebuild_keeps_cached_summaries_and_the_setext_choice(
    indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, db = indexed
    write(root, "setext.md", "Title\n=====\n\nbody text\n")
    assert run(capsys, "index", str(root), "--db", str(db), "--no-setext")[0] == 0
    cache_a_summary(db)

    assert run(capsys, "index", str(root), "--db", str(db), "--rebuild")[0] == 0
    assert cached_summary(db) == PAID_SUMMARY
    store = Store(db, readonly=True)
    try:
        assert store.get_meta("setext") == "0"
    finally:
        store.close()


def test_rebuild_never_replaces_a_file_it_did_not_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_library(tmp_path / "lib", 3)
    foreign = tmp_path / "app.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n", encoding="utf-8")
    for path in (foreign, text):
        before = path.read_bytes()
        code, _, err = run(capsys, "index", str(root), "--db", str(path), "--rebuild")
        assert code == 1 and "not" in err and "index" in err, err
        assert "Traceback" not in err
        assert path.read_bytes() == before
        assert not path.with_name(path.name + ".rebuild").exists()


def test_rebuild_fails_fast_while_another_process_writes(
    indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from markindex_core.store.lock import WriterLock

    root, db = indexed
    lock = WriterLock(db)
    lock.acquire()
    try:
        code, _, err = run(capsys, "index", str(root), "--db", str(db), "--rebuild")
    finally:
        lock.release()
    assert code == 1 and "Traceback" not in err and err.strip()
    assert check_store_consistent(db) == 80


def test_a_problem_of_several_lines_is_shown_as_lines(
    indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite's structure check answers '*** in database main ***' and the problem on the next
    line, as one text: `check` printed it with the newline escaped, as
    '*** in database main ***\\nTree 11 page 11: …'. Each line of it is now a line."""
    root, db = indexed
    conn = apsw.Connection(str(db))
    conn.pragma("wal_checkpoint(TRUNCATE)")
    page_size = int(conn.pragma("page_size"))
    page = int(
        next(conn.execute("SELECT pageno FROM dbstat WHERE name = 'passages_doc' LIMIT 1"))[0]
    )
    conn.close()
    with db.open("r+b") as f:
        f.seek((page - 1) * page_size + 3)  # the b-tree page's cell count: a broken page
        f.write(b"\x7f\x7f")
    code, _, err = run(capsys, "check", str(root), "--db", str(db))
    assert code == 1 and "damaged" in err, err
    assert "\\n" not in err and "  *** in database main ***\n" in err, err


def test_stored_text_that_is_not_utf8_is_damage_not_a_crash(tmp_path: Path) -> None:
    """A flipped bit in a stored path leaves pages SQLite finds well-formed, but the value is no
    longer UTF-8: an index run, and every tool, must say the index is damaged (and the tools tell
    a live index, which rebuilds it), not fail with a traceback or an INTERNAL_ERROR."""
    import subprocess
    import sys

    from .helpers import REPO_ROOT, damage_text

    root = make_library(tmp_path / "lib", 12)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index()
    assert damage_text(db, b"guides/doc4.md") >= 1

    proc = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "damaged" in lines[0] and "--rebuild" in lines[0], proc.stderr

    lib = Library(root, db)
    told: list[str] = []
    lib.on_damage = told.append
    for name, args in (
        ("browse_documents", {"folder": "guides"}),
        ("search_documents", {"query": "document"}),
    ):
        answer = json.loads(lib.call_tool(name, args))
        assert answer["code"] == "INDEX_UNUSABLE" and "damaged" in answer["error"], answer
    assert len(told) == 2
    lib.close()

    proc = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--rebuild"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert check_store_consistent(db) == 12


def test_check_finds_stored_text_that_is_not_utf8(tmp_path: Path) -> None:
    """SQLite's structure check reads text as bytes: a stored value no longer UTF-8 passes it,
    and `check` must not call such an index whole (the daemon's idle check relies on it)."""
    import subprocess
    import sys

    from .helpers import REPO_ROOT, damage_text

    root = make_library(tmp_path / "lib", 12)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index()
    assert damage_text(db, b"Paragraph 2 of document 5") >= 1

    proc = subprocess.run(
        [sys.executable, "-m", "markindex_core", "check", str(root), "--db", str(db), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"], proc.stdout + proc.stderr
    assert any("not UTF-8" in p for p in report["problems"]), report


def test_readers_say_stored_text_that_is_not_utf8_is_damage(tmp_path: Path) -> None:
    """`search`, `status` and `tree` meeting a stored value that is no longer UTF-8 say in one
    line that the index is damaged and how to rebuild it, as for any other damage: no traceback."""
    import subprocess
    import sys

    from .helpers import REPO_ROOT, damage_text

    root = make_library(tmp_path / "lib", 12)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index()
    assert damage_text(db, b"guides/doc4.md") >= 1
    for command in (
        ["search", str(root), "document"],
        ["status", str(root)],
        ["tree", str(root), "guides/doc4.md"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "markindex_core", *command, "--db", str(db)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1, (command, proc.stderr)
        assert "damaged" in lines[0] and "not UTF-8" in lines[0] and "--rebuild" in lines[0]

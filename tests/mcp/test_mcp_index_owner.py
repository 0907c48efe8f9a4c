"""Tools answer only from an index they can read as their own: `--db` naming another library's
index is refused, as indexing into it is, while an index that followed its library (moved, or
inside the library) is served; an index another version rewrote in place is named as such."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import apsw

from markindex_core.config import SCHEMA_VERSION
from markindex_core.library import Library
from tests.mcp.helpers import call, ok


def _two_libraries(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "secret.md").write_text("# Secret\n\nonly library a has this\n", encoding="utf-8")
    (b / "public.md").write_text("# Public\n\nlibrary b\n", encoding="utf-8")
    db = tmp_path / "a.db"
    Library(a, db=db).index()
    return a, b, db


def test_another_librarys_index_is_refused(tmp_path: Path) -> None:
    _, b, db = _two_libraries(tmp_path)
    lib = Library(b, db=db)
    for name, args in (
        ("browse_documents", {}),
        ("get_document", {"doc_path": "secret.md"}),
        ("search_documents", {"query": "only library"}),
    ):
        env = call(lib, name, args)
        assert not env["success"] and env["code"] == "OTHER_LIBRARY", env
        assert "secret.md" not in str(env["details"]) + env["error"]
    lib.close()


def test_an_index_that_followed_its_library_is_served(tmp_path: Path) -> None:
    a, b, db = _two_libraries(tmp_path)
    shutil.rmtree(b)
    a.rename(b)  # the library moved: its old folder is gone
    lib = Library(b, db=db)
    assert [d["path"] for d in ok(lib, "browse_documents")["documents"]] == ["secret.md"]
    lib.close()


def test_an_index_inside_the_library_is_that_librarys(tmp_path: Path) -> None:
    _, b, db = _two_libraries(tmp_path)
    (b / ".markindex").mkdir()
    shutil.copy(db, b / ".markindex" / "index.db")  # a copied library brings its own index
    lib = Library(b)
    assert ok(lib, "get_document", {"doc_path": "secret.md"})["title"] == "Secret"
    lib.close()


def test_an_index_changed_in_place_by_another_version_is_named(sample_library: Path) -> None:
    """A markindex of another version migrates the index file the server has open (same file,
    new format): the tools say so, as they do for such a file at start, not INTERNAL_ERROR."""
    lib = Library(sample_library)
    lib.index()
    assert ok(lib, "search_documents", {"query": "install"})["results"]
    conn = apsw.Connection(str(lib.db_path))
    with conn:  # what a future format's migration could do: a changed table, a new version
        conn.execute("ALTER TABLE nodes RENAME COLUMN title TO heading")
        conn.pragma("user_version", SCHEMA_VERSION + 1)
    conn.close()
    for name, args in (
        ("search_documents", {"query": "install"}),
        ("get_document_structure", {"doc_path": "guides/install.md"}),
        ("browse_documents", {}),
    ):
        env = call(lib, name, args)
        assert env["code"] == "INDEX_MISSING", env
        assert f"format {SCHEMA_VERSION + 1}" in env["error"]
    lib.close()


def test_mcp_refuses_to_start_on_another_librarys_index(tmp_path: Path) -> None:
    """`markindex mcp B --db a.db` started and served, every tool answering OTHER_LIBRARY, so
    an MCP host showed a working server whose tools all failed (where `daemon` refused at
    once). It now exits 1 at start with the one-line OTHER_LIBRARY error and its hint, as a
    wrong folder is refused."""
    _, b, db = _two_libraries(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", "mcp", str(b), "--db", str(db)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert f"{db} is the index of the library" in done.stderr, done.stderr
    assert "--rebuild" in done.stderr and "Traceback" not in done.stderr

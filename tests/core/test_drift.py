"""Answers that cite a document whose file changed since it was indexed say so (index/drift.py):
the cited lines are the indexed version, and may have moved in the file a reader opens."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from markindex_core.cli.main import main
from markindex_core.index.drift import folder_drift
from markindex_core.library import Library
from tests.mcp.helpers import envelope

from .helpers import write

FOX = "# Alpha\n\nThe quick brown fox jumps.\n\n## Beta\n\nSecond section about foxes.\n"
A_MINUTE_AGO_NS = 60 * 10**9


def _edit(root: Path, rel: str, text: str) -> None:
    """An edit made a minute ago: a change still under way (DRIFT_GRACE_S) is not reported."""
    path = write(root, rel, text)
    then = time.time_ns() - A_MINUTE_AGO_NS
    os.utime(path, ns=(then, then))


def _delete(root: Path, rel: str) -> None:
    (root / rel).unlink()
    then = time.time_ns() - A_MINUTE_AGO_NS
    os.utime((root / rel).parent, ns=(then, then))


@pytest.fixture
def library(tmp_path: Path) -> Library:
    root = tmp_path / "lib"
    write(root, "a.md", FOX)
    write(root, "b.md", "# Other\n\nA fox in another document.\n")
    write(root, "c.md", "# Unrelated\n\nNothing to see here.\n")
    lib = Library(root)
    lib.index()
    return lib


def _warnings(lib: Library) -> dict[str, str | None]:
    """The warning of each answer that cites documents: search, and reading a.md."""
    search = envelope(lib.call_tool("search_documents", {"query": "fox"}))
    read = envelope(lib.call_tool("get_document_structure", {"doc_path": "a.md"}))
    hits = [h.doc_path for h in lib.search("fox").hits]
    return {
        "search": search.get("warning"),
        "read": read.get("warning"),
        "api": lib.drift_warning(hits),
    }


def test_an_edited_document_is_said_to_have_changed(library: Library) -> None:
    assert _warnings(library) == {"search": None, "read": None, "api": None}
    _edit(library.root, "a.md", "# Alpha\n\nTwo new lines.\nPushing the rest down.\n\n" + FOX[9:])
    warnings = _warnings(library)
    for where, warning in warnings.items():
        assert warning is not None, where
        assert warning.startswith("a.md changed on disk since it was indexed"), warning
        assert "b.md" not in warning and "markindex index" in warning
    library.index()
    assert _warnings(library) == {"search": None, "read": None, "api": None}


def test_a_new_mtime_with_the_same_content_is_no_change(library: Library) -> None:
    """A checkout or a copy gives files new mtimes: the content decides."""
    path = library.root / "a.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - A_MINUTE_AGO_NS))
    assert _warnings(library) == {"search": None, "read": None, "api": None}
    _edit(library.root, "a.md", FOX.replace("quick", "swift"))  # same size, new text
    assert _warnings(library)["search"] is not None


def test_a_deleted_document_is_said_to_have_changed(library: Library) -> None:
    _delete(library.root, "b.md")
    warning = envelope(library.call_tool("search_documents", {"query": "fox"})).get("warning")
    assert warning is not None and warning.startswith("b.md changed on disk"), warning


def test_search_on_the_command_line_warns(
    library: Library, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(library.root, "a.md", FOX + "\nOne more line about a fox.\n")
    _edit(library.root, "b.md", "# Other\n\nA fox in another, longer document now.\n")
    root, db = str(library.root), str(library.db_path)
    assert main(["search", root, "fox", "--db", db, "--json"]) == 0
    warning = json.loads(capsys.readouterr().out)["warning"]
    assert {"a.md", "b.md"} <= set(warning.split(" changed on disk since")[0].split(", "))
    assert "since they were indexed" in warning
    assert main(["search", root, "fox", "--db", db]) == 0
    err = " ".join(capsys.readouterr().err.split())  # wrapped to the terminal's width
    assert err.startswith("warning: ") and "changed on disk since they were indexed" in err


def test_a_change_under_way_is_not_reported_yet(library: Library) -> None:
    """A live index takes a save in within a second or two: answers meanwhile raise no alarm,
    for an edit or a deletion. A static index says so once DRIFT_GRACE_S have passed."""
    write(library.root, "a.md", FOX + "\nJust saved.\n")
    (library.root / "b.md").unlink()
    assert _warnings(library) == {"search": None, "read": None, "api": None}


def test_an_edit_stamped_in_the_future_is_said_to_have_changed(library: Library) -> None:
    """A file synced from a machine whose clock is ahead (or `touch -d tomorrow`) has an mtime
    after now. It was taken for a change under way, so its answers were silent until the clock
    caught up (an hour here), while `markindex index` would update it at once. Only an mtime
    within DRIFT_GRACE_S of now, on either side, is a change under way; so for a deleted file's
    folder."""
    path = write(library.root, "a.md", "# Alpha\n\nTwo new lines.\nMore.\n\n" + FOX[9:])
    later = time.time_ns() + 3600 * 10**9
    os.utime(path, ns=(later, later))
    (library.root / "b.md").unlink()
    os.utime(library.root, ns=(later, later))
    warning = _warnings(library)["search"]
    assert warning is not None and warning.startswith("a.md, b.md changed on disk"), warning


def test_a_removed_folder_is_said_to_have_changed(library: Library) -> None:
    """The cited file's folder is gone too: its nearest folder still there says when."""
    write(library.root, "sub/deep/d.md", "# Deep\n\nA fox deep down.\n")
    library.index()
    shutil.rmtree(library.root / "sub")
    assert envelope(library.call_tool("search_documents", {"query": "fox"})).get("warning") is None
    then = time.time_ns() - A_MINUTE_AGO_NS
    os.utime(library.root, ns=(then, then))
    warning = envelope(library.call_tool("search_documents", {"query": "fox"})).get("warning")
    assert warning is not None and warning.startswith("sub/deep/d.md changed on disk"), warning


def _status(lib: Library, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    root, db = str(lib.root), str(lib.db_path)
    code = main(["status", root, "--db", db, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert main(["status", root, "--db", db]) == code
    return code, data["changed_on_disk"], " ".join(capsys.readouterr().out.split())


def test_status_says_how_the_folder_differs_from_the_index(
    library: Library, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a daemon, `status` compares the whole folder with the index: what a run of
    `markindex index` would do. A new mtime alone is no change; the exit status stays 0."""
    code, drift, text = _status(library, capsys)
    assert code == 0 and drift == {"changed": 0, "added": 0, "removed": 0, "examples": []}
    assert "the folder matches the index" in text
    path = library.root / "c.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - A_MINUTE_AGO_NS))
    write(library.root, "a.md", FOX + "\nEdited.\n")
    write(library.root, "sub/new.md", "# New\n\nA new note.\n")
    (library.root / "b.md").unlink()
    code, drift, text = _status(library, capsys)
    assert code == 0
    assert drift == {
        "changed": 1,
        "added": 1,
        "removed": 1,
        "examples": ["a.md", "sub/new.md", "b.md"],
    }
    assert "since then, in the folder: 1 changed, 1 new, 1 gone (a.md, sub/new.md, b.md)" in text
    assert "run `markindex index`" in text
    library.index()
    assert _status(library, capsys)[1]["changed"] == 0


def test_a_folder_that_cannot_be_listed_is_not_compared(library: Library, tmp_path: Path) -> None:
    """Documents under a folder that cannot be listed are not gone: nothing is compared. An
    empty folder, though, has lost every document."""
    store = library.store
    (tmp_path / "not-a-folder").write_text("x")
    assert folder_drift(tmp_path / "not-a-folder", store) is None
    (tmp_path / "empty").mkdir()
    drift = folder_drift(tmp_path / "empty", store)
    assert drift is not None and len(drift.removed) == 3 and drift.count == 3


def test_a_document_this_user_may_not_reach_now_is_not_said_to_have_changed(
    library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cited file below a folder that became unreadable was reported as changed, with 'run
    `markindex index`', which cannot help: a run keeps what the index holds below a folder it
    may not read. Nothing is said when there is no telling."""
    real_stat = os.stat
    denied = str(library.root / "a.md")

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real_stat(path, *args, **kwargs)

    _edit(library.root, "a.md", FOX + "\nAn edit nobody can see now.\n")
    then = time.time_ns() - A_MINUTE_AGO_NS
    os.utime(library.root, ns=(then, then))  # no change under way in its folder either
    monkeypatch.setattr(os, "stat", stat)
    assert _warnings(library) == {"search": None, "read": None, "api": None}


def test_a_restamped_file_is_read_once_for_many_answers(library: Library) -> None:
    """A new mtime with the same size makes the answer hash the file; a static index after a
    checkout re-stamps every file, and each answer read each cited file again (up to 64 MB).
    The hash is kept for the file as it is (inode, size, mtime, ctime)."""
    from markindex_core.index import drift

    path = library.root / "a.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - A_MINUTE_AGO_NS))
    drift._hash.cache_clear()
    for _ in range(5):
        assert library.drift_warning(["a.md"]) is None
    info = drift._hash.cache_info()
    assert info.misses == 1 and info.hits == 4, info


def test_an_index_being_written_says_it_is_catching_up(library: Library) -> None:
    """While a writer holds the index (a daemon catching up, an index run), the warning told the
    reader to run `markindex index`, which would only fail with 'another process writes'."""
    from markindex_core.store.lock import WriterLock

    _edit(library.root, "a.md", FOX + "\nAdded while a writer runs.\n")
    lock = WriterLock(library.db_path)
    lock.acquire()
    try:
        warning = library.drift_warning(["a.md"])
    finally:
        lock.release()
    assert warning is not None and "being updated now" in warning, warning
    assert "markindex index" not in warning

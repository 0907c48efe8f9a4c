"""Incremental indexing: rebuild exactly what changed; the result equals a fresh build."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from markindex_core.library import Library
from markindex_core.store.db import Store

from .helpers import index_fingerprint, make_library, write


def fresh_equals(root: Path, db: Path, tmp: Path, **kw: object) -> None:
    """The incrementally maintained index equals a fresh build of the same folder."""
    fresh_db = tmp / f"fresh-{os.urandom(4).hex()}.db"
    Library(root, fresh_db).index(**kw)  # type: ignore[arg-type]
    assert index_fingerprint(db) == index_fingerprint(fresh_db)


@pytest.fixture
def lib(tmp_path: Path) -> Library:
    root = make_library(tmp_path / "lib")
    return Library(root, tmp_path / "db" / "index.db")


def test_first_run_adds_everything_second_changes_nothing(lib: Library, tmp_path: Path) -> None:
    first = lib.index()
    assert len(first.added) == 12 and not first.updated and not first.removed
    assert first.full_rebuild is None
    before = index_fingerprint(lib.db_path)
    second = lib.index()
    assert (second.added, second.updated, second.removed, second.unchanged) == ([], [], [], 12)
    assert index_fingerprint(lib.db_path) == before


def test_edit_add_delete_rename(lib: Library, tmp_path: Path) -> None:
    lib.index()
    root = lib.root
    write(root, "doc3.md", (root / "doc3.md").read_text(encoding="utf-8") + "\nAn added line.\n")
    write(root, "new/fresh.md", "# Fresh\n\nNew document.\n")
    (root / "specs/doc2.md").unlink()
    (root / "guides/doc4.md").rename(root / "guides/renamed.md")
    r = lib.index()
    assert r.updated == ["doc3.md"]
    assert sorted(r.added) == ["guides/renamed.md", "new/fresh.md"]
    assert sorted(r.removed) == ["guides/doc4.md", "specs/doc2.md"]
    assert r.unchanged == 9
    fresh_equals(root, lib.db_path, tmp_path)


def test_touch_without_change_is_unchanged(lib: Library) -> None:
    lib.index()
    path = lib.root / "doc3.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    r = lib.index()
    assert not r.changed and r.unchanged == 12
    # the new mtime is remembered: the next run does not hash the file again
    assert _field(lib, "doc3.md", "mtime_ns") == st.st_mtime_ns + 5_000_000_000


def test_an_edit_that_keeps_size_and_mtime_is_found_by_rehash(lib: Library, tmp_path: Path) -> None:
    """`cp -p` / `rsync -t` / `touch -r` keep size and mtime: a plain run takes the file for
    unchanged (that is what its stat says), `rehash` reads every file and finds it."""
    lib.index()
    path = lib.root / "doc3.md"
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("a", "o", 1), encoding="utf-8")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    assert not lib.index().changed
    r = lib.index(rehash=True)
    assert r.updated == ["doc3.md"] and r.unchanged == 11, r
    fresh_equals(lib.root, lib.db_path, tmp_path)
    assert not lib.index(rehash=True).changed


def test_newly_ignored_and_unignored(lib: Library, tmp_path: Path) -> None:
    lib.index()
    write(lib.root, ".gitignore", "specs/\n")
    r = lib.index()
    assert sorted(r.removed) == ["specs/doc10.md", "specs/doc2.md", "specs/doc6.md"]
    fresh_equals(lib.root, lib.db_path, tmp_path)
    (lib.root / ".gitignore").unlink()
    r = lib.index()
    assert sorted(r.added) == ["specs/doc10.md", "specs/doc2.md", "specs/doc6.md"]


def test_ignore_option_removes_then_restores(lib: Library, tmp_path: Path) -> None:
    """--ignore patterns are remembered by the index, as the setext choice is. They applied to
    one run only: `index --ignore drafts/` then a plain `index` (or a daemon) indexed the drafts
    after all, and `status` counted them as new files. Patterns given replace the remembered
    ones, [] (`--clear-ignore`) forgets them, and a rebuild keeps them."""
    from markindex_core.index.drift import folder_drift

    lib.index()
    r = lib.index(ignore=["./guides/", "/doc3.md"])
    assert sorted(r.removed) == ["doc3.md", "guides/doc0.md", "guides/doc4.md", "guides/doc8.md"]
    fresh_equals(lib.root, lib.db_path, tmp_path, ignore=["guides/", "/doc3.md"])
    again = lib.index()
    assert not again.added and not again.removed
    drift = folder_drift(lib.root, lib.store)
    assert drift is not None and drift.count == 0, drift
    assert lib.remembered_ignore() == ["./guides/", "/doc3.md"]
    lib.index(rebuild=True)
    assert "doc3.md" not in set(lib.store.document_paths())
    assert len(lib.index(ignore=["/doc3.md"]).added) == 3
    assert sorted(lib.index(ignore=[]).added) == ["doc3.md"]
    assert lib.remembered_ignore() == [] and not lib.index().added


def test_setext_setting_is_stored_and_changing_it_rebuilds(lib: Library, tmp_path: Path) -> None:
    write(lib.root, "setext.md", "Title\n=====\n\nbody\n\nSub\n---\n\ntext\n")
    first = lib.index()
    assert lib.store.get_meta("setext") == "1" and first.full_rebuild is None
    off = lib.index(setext=False)
    assert off.full_rebuild and "setext" in off.full_rebuild
    assert len(off.updated) == 13 and not off.added
    lib.close()
    assert lib.store.get_meta("setext") == "0"
    kept = lib.index()  # no flag: the stored setting stays
    assert not kept.changed and kept.full_rebuild is None
    assert _field(lib, "setext.md", "title") == "setext"
    fresh_equals(lib.root, lib.db_path, tmp_path, setext=False)
    back = lib.index(setext=True)
    assert back.full_rebuild and len(back.updated) == 13
    lib.close()
    assert _field(lib, "setext.md", "title") == "Title"


def test_format_change_rebuilds_everything(lib: Library) -> None:
    lib.index()
    store = Store(lib.db_path)
    store.set_meta({"fingerprint": "format=0;R=150;max=8000;setext=1;segmenter=old"})
    store.close()
    r = lib.index()
    assert r.full_rebuild and "format 0 -> " in r.full_rebuild
    assert len(r.updated) == 12


def test_file_becoming_binary_is_removed_and_skipped_then_restored(
    lib: Library, tmp_path: Path
) -> None:
    lib.index()
    good = (lib.root / "doc11.md").read_bytes()
    (lib.root / "doc11.md").write_bytes(b"\x00\x01binary" * 100)
    r = lib.index()
    assert r.removed == ["doc11.md"] and [p for p, _ in r.skipped] == ["doc11.md"]
    assert lib.store.document("doc11.md") is None
    assert [p for p, _ in lib.store.skipped()] == ["doc11.md"]
    assert (
        lib.store.scalar(
            "SELECT count(*) FROM nodes WHERE doc_id NOT IN (SELECT id FROM documents)"
        )
        == 0
    )
    again = lib.index()  # still skipped, reported again, nothing rebuilt
    assert not again.changed and [p for p, _ in again.skipped] == ["doc11.md"]
    fresh_equals(lib.root, lib.db_path, tmp_path)
    (lib.root / "doc11.md").write_bytes(good)
    r = lib.index()
    assert r.added == ["doc11.md"] and lib.store.skipped() == []


def test_deleting_a_skipped_file_forgets_it(lib: Library) -> None:
    write(lib.root, "bad.md", b"bad \xff\xfa not text \x81")
    lib.index()
    assert [p for p, _ in lib.store.skipped()] == ["bad.md"]
    (lib.root / "bad.md").unlink()
    lib.index()
    assert lib.store.skipped() == []


def test_paths_scoped_runs(lib: Library, tmp_path: Path) -> None:
    from markindex_core.index.indexer import Indexer, open_for_writing

    lib.index()
    root = lib.root
    write(root, "guides/doc0.md", "# Changed\n")
    write(root, "guides/extra.md", "# Extra\n")
    (root / "specs/doc2.md").unlink()
    store, lock = open_for_writing(lib.db_path)
    try:
        idx = Indexer(root, store)
        r = idx.run(paths=["guides"])
        assert r.updated == ["guides/doc0.md"] and r.added == ["guides/extra.md"] and not r.removed
        r = idx.run(paths=["./specs/doc2.md"])
        assert r.removed == ["specs/doc2.md"]
        outside = tmp_path / "outside.md"
        outside.write_text("# Outside\n", encoding="utf-8")
        assert not idx.run(paths=["../outside.md", str(outside), "/etc/passwd"]).changed
        write(root, "doc11.md", "# Abs\n")
        assert idx.run(paths=[str(root / "doc11.md")]).updated == ["doc11.md"]
        write(root, "doc3.md", "# Root\n")
        assert idx.run(paths=["."]).updated == ["doc3.md"]
        write(root, "doc7.md", "# Root again\n")
        assert idx.run(paths=[str(root)]).updated == ["doc7.md"]
        assert not idx.run(paths=[""]).changed
    finally:
        store.close()
        lock.release()
    assert store is not None
    fresh_equals(root, lib.db_path, tmp_path)


@pytest.mark.parametrize(
    "rules", [["*.md", "!README.md"], ["?.md"], ["x*"]], ids=["whitelist", "one-letter", "x-prefix"]
)
def test_a_scoped_run_on_a_folder_agrees_with_a_full_scan(tmp_path: Path, rules: list[str]) -> None:
    """What the daemon does for a folder event (touch, chmod, mkdir, a folder renamed or moved
    in) must leave the index as a full scan would, whatever the ignore rules say of files."""
    from markindex_core.index.indexer import Indexer, open_for_writing

    root = tmp_path / "lib"
    write(root, ".markindexignore", "\n".join(rules) + "\n")
    write(root, "a/README.md", "# A readme\n\nwombat\n")
    write(root, "a/other.md", "# Other\n")
    write(root, "a/x.md", "# X\n")
    store, lock = open_for_writing(tmp_path / "index.db")
    try:
        Indexer(root, store).run()
        full = set(store.doc_states())
        assert "a/README.md" in full
        Indexer(root, store).run(paths=["a"])  # the folder itself changed
        assert set(store.doc_states()) == full
        write(root, "b/README.md", "# B readme\n\nkoala\n")
        write(root, "b/x.md", "# X\n")
        Indexer(root, store).run(paths=["b"])  # a new folder, its files folded into it
        scoped = set(store.doc_states())
        Indexer(root, store).run()
        assert scoped == set(store.doc_states()) and "b/README.md" in scoped
    finally:
        store.close()
        lock.release()


def test_a_scoped_run_sees_only_what_lies_at_or_below_its_paths(lib: Library) -> None:
    """The index's rows for a scoped run are read by path range: `notes` covers `notes/a.md`,
    never the siblings that share its first letters (`notes.md`, `notes-2.md`)."""
    from markindex_core.index.indexer import Indexer, open_for_writing

    root = lib.root
    for rel in ("notes.md", "notes-2.md", "notes/a.md", "notes/b.md", "notes0.md"):
        write(root, rel, f"# {rel}\n")
    write(root, "notes/bad.md", b"bad \xff\xfa not text \x81")
    write(root, "notes-bad.md", b"bad \xff\xfa not text \x81")
    lib.index()
    for rel in ("notes.md", "notes-2.md", "notes/a.md", "notes/bad.md", "notes-bad.md"):
        (root / rel).unlink()
    store, lock = open_for_writing(lib.db_path)
    try:
        under = store.doc_states(["notes"])
        assert sorted(under) == ["notes/a.md", "notes/b.md"]
        assert sorted(store.skipped_states(["notes"])) == ["notes/bad.md"]
        assert set(store.doc_states([""])) == set(store.doc_states())  # '' is the root
        r = Indexer(root, store).run(paths=["notes"])
        assert r.removed == ["notes/a.md"] and not r.added and not r.updated
        assert "notes.md" in store.doc_states() and "notes-2.md" in store.doc_states()
        assert sorted(store.skipped_states()) == ["notes-bad.md"]  # notes/bad.md forgotten
        r = Indexer(root, store).run(paths=["notes.md", "notes-bad.md"])
        assert r.removed == ["notes.md"]
        assert "notes-2.md" in store.doc_states() and not store.skipped_states()
    finally:
        store.close()
        lock.release()


def test_paths_scoped_run_does_not_follow_symlinked_folders(lib: Library, tmp_path: Path) -> None:
    from markindex_core.index.indexer import Indexer, open_for_writing

    lib.index()
    other = make_library(tmp_path / "other", 2)
    (lib.root / "link").symlink_to(other, target_is_directory=True)
    store, lock = open_for_writing(lib.db_path)
    try:
        r = Indexer(lib.root, store).run(paths=["link", "link/doc0.md", "link/guides"])
        assert not r.changed
    finally:
        store.close()
        lock.release()


def test_scoped_run_removes_newly_ignored_path(lib: Library) -> None:
    from markindex_core.index.indexer import Indexer, open_for_writing

    lib.index()
    write(lib.root, "guides/.gitignore", "doc0.md\n")
    store, lock = open_for_writing(lib.db_path)
    try:
        r = Indexer(lib.root, store).run(paths=["guides/doc0.md"])
        assert r.removed == ["guides/doc0.md"]
    finally:
        store.close()
        lock.release()


def test_incremental_matches_fresh_after_many_random_edits(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    root = make_library(tmp_path / "lib", 20)
    lib = Library(root, tmp_path / "i.db")
    lib.index()
    for step in range(6):
        files = sorted(p for p in root.rglob("*.md"))
        for p in rng.sample(files, 4):
            op = rng.choice(["edit", "delete", "rename", "retitle"])
            if op == "edit":
                p.write_text(p.read_text(encoding="utf-8") + f"\nmore {step}\n", encoding="utf-8")
            elif op == "delete":
                p.unlink()
            elif op == "rename":
                p.rename(p.with_name(f"r{step}-{p.name}"))
            else:
                p.write_text(
                    f"# New title {step}\n\n## Sub\n\n" + p.read_text(encoding="utf-8"),
                    encoding="utf-8",
                )
        write(root, f"added/s{step}.md", f"# Added {step}\n")
        lib.index()
    fresh_equals(root, lib.db_path, tmp_path)
    shutil.rmtree(root / "added")
    removed = lib.index().removed
    assert removed and all(p.startswith("added/") for p in removed)


def _field(lib: Library, path: str, key: str) -> Any:
    doc = lib.store.document(path)
    assert doc is not None, path
    return doc[key]


def test_a_folder_gone_while_a_scoped_run_looks_at_it_is_not_unreadable(lib: Library) -> None:
    """A folder moved in and out of the library in a loop: the daemon's run for it found it
    there, then could not list it, and called it unreadable ('d/.: No such file or directory'
    in the log and status errors; 'part of the library cannot be read' until its next event)
    while the index kept its documents. A folder gone since it was looked at is not on disk."""
    from markindex_core.index.indexer import Indexer, open_for_writing

    lib.index()
    root = lib.root
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if not isinstance(path, int) and Path(path) == root / "specs":  # moved away just now
            shutil.rmtree(root / "specs")
        return real_scandir(path)

    store, lock = open_for_writing(lib.db_path)
    os.scandir = scandir  # type: ignore[assignment]
    try:
        r = Indexer(root, store).run(paths=["specs"])
    finally:
        os.scandir = real_scandir
        store.close()
        lock.release()
    assert not r.errors and not r.unreadable, r
    assert sorted(r.removed) == ["specs/doc10.md", "specs/doc2.md", "specs/doc6.md"], r

"""Bad input never crashes a run or loses a document: it is indexed, or skipped with a reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from markindex_core.config import MAX_FILE_BYTES
from markindex_core.errors import InvalidArgument, ReadOnlyLibrary
from markindex_core.library import Library

from .helpers import REPO_ROOT, check_store_consistent, write

GB_TEXT = "# 数据安全管理办法\n\n第一条 为了规范数据处理活动。\n\n## 第二章 附则\n\n第二条 本办法自公布之日起施行。\n"
U16_TEXT = "# Title\r\n\r\nBody é 中文\r\n\r\n## Second\r\n\r\ntext\r\n"


@pytest.fixture(scope="module")
def bad_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad")
    write(root, "good.md", "# Good\n\nfine\n")
    write(root, "invalid-utf8.md", b"# Caf\xe9\n\nna\xefve text in latin-1 \xe0 la carte\n")
    write(root, "gb18030.md", GB_TEXT.encode("gb18030"))
    write(root, "utf16.md", ("\ufeff" + U16_TEXT).encode("utf-16-le"))
    write(root, "binary.md", bytes(range(256)) * 40)
    write(
        root, "nested.md", "".join(f"{'#' * (1 + i % 6)} h{i}\n\nbody {i}\n" for i in range(10_000))
    )
    write(root, "deep-quote.md", ">" * 5000 + " deep\n" + "- " * 3000 + "x\n")
    write(root, "one-line.md", "word " * 420_000)  # a 2 MB single line
    write(root, "cjk-line.md", "字" * 700_000)
    write(root, "empty.md", b"")
    write(root, "bom-only.md", b"\xef\xbb\xbf")
    (root / "folder.md").mkdir()
    os.mkfifo(root / "pipe.md")
    with open(root / "huge.md", "wb") as fh:  # sparse: costs no disk
        fh.truncate(MAX_FILE_BYTES + 1)
    return root


@pytest.fixture(scope="module")
def bad_index(bad_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    lib = Library(bad_library, tmp_path_factory.mktemp("bad-db") / "index.db")
    lib.index()
    yield lib
    lib.close()


def index_json(root: Path, db: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_bad_files_are_indexed_or_skipped_with_a_reason(bad_library: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    report = index_json(bad_library, db)
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert set(skipped) == {"invalid-utf8.md", "binary.md", "huge.md"}
    assert "UTF-8" in skipped["invalid-utf8.md"]
    assert "binary" in skipped["binary.md"]
    assert "too large" in skipped["huge.md"] and "> 64 MB)" in skipped["huge.md"]
    assert sorted(report["added"]) == [
        "bom-only.md",
        "cjk-line.md",
        "deep-quote.md",
        "empty.md",
        "gb18030.md",
        "good.md",
        "nested.md",
        "one-line.md",
        "utf16.md",
    ]
    assert check_store_consistent(db) == 9
    lib = Library(bad_library, db)
    store = lib.store
    assert sorted(p for p, _ in store.skipped()) == sorted(skipped)
    # A second run reports the same skips and rebuilds nothing.
    again = index_json(bad_library, db)
    assert again["added"] == again["updated"] == again["removed"] == []
    assert {s["path"] for s in again["skipped"]} == set(skipped)
    lib.close()


@pytest.mark.parametrize(
    ("name", "text", "encoding"),
    [("gb18030.md", GB_TEXT, "gb18030"), ("utf16.md", U16_TEXT, "utf-16")],
)
def test_legacy_encodings_keep_line_numbers(
    bad_index: Library, name: str, text: str, encoding: str
) -> None:
    lib = bad_index
    doc = lib.document(name)
    assert doc is not None and doc["encoding"] == encoding
    lines = text.replace("\r\n", "\n").split("\n")[:-1]
    assert doc["line_count"] == len(lines)
    assert lib.store.read_lines(doc["id"], 1, len(lines)) == lines
    for node in lib.store.nodes(doc["id"]):
        if node["kind"] == "section":
            assert lines[node["start_line"] - 1].lstrip("# ") == node["title"]


def test_nested_headings_and_huge_lines(bad_index: Library) -> None:
    lib = bad_index
    nested = lib.document("nested.md")
    assert nested is not None and nested["line_count"] == 30_000
    assert len(lib.store.nodes(nested["id"])) > 1
    line = lib.document("one-line.md")
    assert line is not None and line["line_count"] == 1
    assert len(lib.store.read_lines(line["id"], 1, 1)[0]) == 5 * 420_000


def test_a_previously_indexed_file_that_turns_bad_is_skipped_not_lost(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    write(root, "a.md", "# A\n\ntext\n")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    write(root, "a.md", b"# A\n\n\xff\xfe broken now \x80\n")
    report = lib.index()
    assert report.removed == ["a.md"] and report.skipped[0][0] == "a.md"
    lib.close()


def test_file_disappearing_mid_run(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    for i in range(10):
        write(root, f"d{i}.md", f"# Doc {i}\n\ntext\n")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    for i in range(10):
        write(root, f"d{i}.md", f"# Doc {i} edited\n\ntext\n")
    write(root, "new.md", "# New\n")

    def progress(done: int, total: int, path: str) -> None:
        if done == 1:  # after the scan, before the rest is read
            (root / "d9.md").unlink()
            (root / "new.md").unlink()

    report = lib.index(progress=progress)
    assert "d9.md" in report.removed and "new.md" not in report.added
    assert sorted(lib.store.document_paths()) == [f"d{i}.md" for i in range(9)]
    assert not lib.index().changed
    lib.close()


def test_fifty_megabyte_file(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    line = "simple line of text " * 50  # ~1000 characters: few lines, as long documents have
    n = 50_000_000 // (len(line) + 1)
    write(root, "big.md", "# Big\n\n" + "\n".join([line] * n) + "\n\n# End\n\nbye\n")
    lib = Library(root, tmp_path / "index.db")
    t0 = time.perf_counter()
    report = lib.index()
    seconds = time.perf_counter() - t0
    assert report.added == ["big.md"], report.skipped
    doc = lib.document("big.md")
    assert doc is not None and doc["line_count"] == n + 6
    assert lib.store.read_lines(doc["id"], n + 6, n + 6) == ["bye"]
    assert check_store_consistent(lib.db_path) == 1
    assert seconds < 60
    lib.close()


def test_read_only_library_without_db_suggests_db(tmp_path: Path) -> None:
    ro = Path("/sys/kernel")  # a real file system this process may not write, even as root
    if not ro.is_dir():
        pytest.skip("no sysfs")
    lib = Library(ro)
    with pytest.raises(ReadOnlyLibrary) as err:
        lib.ensure_db_dir()
    assert "--db" in err.value.hint
    proc = subprocess.run(
        [sys.executable, "-m", "markindex_core", "index", str(ro)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "--db" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_index_folder_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    write(tmp_path / "lib", "a.md", "# A\n")
    with pytest.raises(InvalidArgument) as err:
        Library(tmp_path / "lib", tmp_path / "file" / "index.db").index()
    assert "is a file, not a folder" in err.value.message and "--db" in err.value.hint


def test_a_file_is_read_in_one_piece_and_whole_whatever_its_stat_said(tmp_path: Path) -> None:
    """A document is read in one read of the size its stat gave: in 1 MB chunks joined, a big
    file's bytes were held twice (peak 2x its size, now ~1x). A file that grew or shrank since
    its stat is read whole all the same, and never past the limit."""
    import tracemalloc

    from markindex_core.index.reading import read_at_most, read_regular

    data = os.urandom(3 << 20)
    path = tmp_path / "big.md"
    path.write_bytes(data)
    size = len(data)
    for expect, limit in ((size + 1, size + 1), (10, size + 1), (0, size + 1), (size + 1, 1000)):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert read_at_most(fd, limit, expect) == data[:limit], (expect, limit)
        finally:
            os.close(fd)
    tracemalloc.start()
    try:
        read, _ = read_regular(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == data
    assert peak < 1.5 * size, peak / size

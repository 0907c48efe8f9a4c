"""One clear error line (never a traceback) for what the disk or the permissions refuse.

The permission cases run the real command as the unprivileged user `nobody` (root reads and writes
anything), in a temporary folder everyone may enter. A full disk is simulated two ways: a file size
limit (RLIMIT_FSIZE with SIGXFSZ ignored, so writes fail with EFBIG) and, where this process may
mount one, a tiny tmpfs (real ENOSPC).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from markindex_core.library import Library
from tests.disks import small_tmpfs
from tests.unprivileged import AS_NOBODY, CHILD_ENV

from .helpers import REPO_ROOT, check_store_consistent, make_library, write


def run_child(
    cmd: Sequence[str | bytes], *, nobody: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `cmd` from the repository (as `nobody` when asked), capturing text output."""
    return subprocess.run(
        [*(AS_NOBODY if nobody else []), *cmd],
        cwd=REPO_ROOT,
        env=CHILD_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def markindex(*args: str, nobody: bool = False, prefix: list[str] | None = None) -> tuple[int, str]:
    """Run the real command; return its exit code and stderr."""
    cmd = (
        [*prefix, *args] if prefix is not None else [sys.executable, "-m", "markindex_core", *args]
    )
    proc = run_child(cmd, nobody=nobody)
    return proc.returncode, proc.stderr


def one_clear_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and "(hint: " in lines[0], stderr
    return lines[0]


def chown_tree(path: Path, user: str = "nobody") -> None:
    uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam("nogroup").gr_gid
    for p in [path, *path.rglob("*")]:
        os.chown(p, uid, gid)


# ----- permissions -------------------------------------------------------------------------------
def test_another_user_cannot_read_a_root_owned_index(shared_tmp: Path) -> None:
    root = make_library(shared_tmp / "lib")
    Library(root).index()  # as root: .markindex/ is 0755, the index 0644, no -shm after close
    db = root / ".markindex" / "index.db"
    code, err = markindex("search", str(root), "document", nobody=True)
    line = one_clear_line(err)
    assert code == 1 and "permission denied" in line and "index.db-shm" in line, line
    assert "owned by root" in line and "--db" in line and "delete" not in line, line
    db.chmod(0o600)
    code, err = markindex("search", str(root), "document", nobody=True)
    line = one_clear_line(err)
    assert code == 1 and f"permission denied reading the index {db}" in line, line
    assert "owned by root" in line and "--db" in line and "delete" not in line, line
    script = (
        "import sys; from markindex_core.library import Library; "
        "print(Library(sys.argv[1]).call_tool('browse_documents', {}))"
    )
    proc = run_child([sys.executable, "-c", script, str(root)], nobody=True)
    env = json.loads(proc.stdout)
    assert env["code"] == "PERMISSION_DENIED", env
    assert "permission denied" in env["error"] and "owner" in env["next_steps"]["message"], env
    assert "must run `markindex index" not in env["next_steps"]["message"], env


def test_read_only_index_file_is_one_clear_error(shared_tmp: Path) -> None:
    root = make_library(shared_tmp / "lib")
    chown_tree(root)
    code, err = markindex("index", str(root), nobody=True)
    assert code == 0, err
    db = root / ".markindex" / "index.db"
    db.chmod(0o444)
    write(root, "new.md", "# New\n\nA new document.\n")
    os.chown(root / "new.md", pwd.getpwnam("nobody").pw_uid, -1)
    code, err = markindex("index", str(root), nobody=True)
    line = one_clear_line(err)
    assert code == 1 and f"the index file {db} is read-only" in line and "0444" in line, line
    assert "chmod u+w" in line and "--db" in line, line


def test_read_only_index_folder_names_that_folder_not_the_library(shared_tmp: Path) -> None:
    root = make_library(shared_tmp / "lib")
    chown_tree(root)
    (root / ".markindex").mkdir(mode=0o755)  # root's: only the index folder is read-only
    code, err = markindex("index", str(root), nobody=True)
    line = one_clear_line(err)
    assert code == 1 and f"the index folder {root / '.markindex'} is read-only" in line, line
    assert "the library itself is not" in line and "--db" in line, line
    other = shared_tmp / "elsewhere.db"
    (shared_tmp / "ro").mkdir(mode=0o755)
    code, err = markindex("index", str(root), "--db", str(shared_tmp / "ro" / "x.db"), nobody=True)
    line = one_clear_line(err)
    assert f"the folder {shared_tmp / 'ro'} is read-only" in line, line
    assert not other.exists()


def test_status_of_a_library_without_index_says_how_to_build_one(shared_tmp: Path) -> None:
    """`markindex status` of a library never indexed printed 'not indexed' and nothing else:
    no command to run, and for a read-only library no word of --db, without which the
    obvious next step fails. It now names the command, with --db where the folder is
    read-only."""
    root = make_library(shared_tmp / "lib")  # root's: read-only for nobody
    status = [sys.executable, "-m", "markindex_core", "status", str(root)]
    done = run_child(status)
    assert done.returncode == 1 and "not indexed" in done.stdout, done.stdout
    assert f"run `markindex index {root}` to build it" in done.stdout, done.stdout
    done = run_child(status, nobody=True)
    assert done.returncode == 1 and "not indexed" in done.stdout, done.stdout
    assert f"the folder {root} is read-only" in done.stdout, done.stdout
    assert f"markindex index {root} --db FILE" in done.stdout, done.stdout
    db = shared_tmp / "elsewhere" / "index.db"
    done = run_child([*status, "--db", str(db)])
    assert f"run `markindex index {root} --db {db}` to build it" in done.stdout, done.stdout


def test_no_index_yet_names_the_command_that_builds_it(shared_tmp: Path) -> None:
    """`search`, `tree`, `links` … on a library never indexed said 'run `markindex index ROOT`
    first (or pass --db FILE)': ROOT to fill in, the --db given left out, and for a read-only
    library a command that fails. The hint is now the command to run for this library (and
    this --db), with --db FILE where the index folder cannot be made."""
    root = make_library(shared_tmp / "lib")  # root's: read-only for nobody
    search = [sys.executable, "-m", "markindex_core", "search", str(root), "words"]
    line = one_clear_line(run_child(search).stderr)
    assert f"run `markindex index {root}` to build it" in line, line
    db = shared_tmp / "elsewhere" / "index.db"
    line = one_clear_line(run_child([*search, "--db", str(db)]).stderr)
    assert f"run `markindex index {root} --db {db}` to build it" in line, line
    check = [sys.executable, "-m", "markindex_core", "check", str(root), "--db", str(db)]
    line = one_clear_line(run_child(check).stderr)  # `check` said ROOT too
    assert f"run `markindex index {root} --db {db}` to build it" in line, line
    line = one_clear_line(run_child(search, nobody=True).stderr)
    assert f"the folder {root} is read-only" in line, line
    assert f"markindex index {root} --db FILE" in line, line


def test_unreadable_folders_keep_their_documents_in_the_index(shared_tmp: Path) -> None:
    """A folder that can't be listed says nothing about the documents in it: they stay indexed.
    When the library folder itself can't be listed the run fails and changes nothing."""
    root = make_library(shared_tmp / "lib")
    db = shared_tmp / "db" / "index.db"
    db.parent.mkdir()
    chown_tree(root)
    chown_tree(db.parent)
    code, err = markindex("index", str(root), "--db", str(db), nobody=True)
    assert code == 0, err
    before = Library(root, db).store.document_paths()
    assert any(p.startswith("guides/") for p in before)
    (root / "guides").chmod(0o000)
    args = ["index", str(root), "--db", str(db), "--json"]
    try:
        run = run_child([sys.executable, "-m", "markindex_core", *args], nobody=True)
        report = json.loads(run.stdout)
        assert report["removed"] == [] and report["errors"], report
        assert run.returncode == 1  # a script must not take a partial run for success
        root.chmod(0o000)
        code, err = markindex("index", str(root), "--db", str(db), nobody=True)
        line = one_clear_line(err)
        assert code == 1 and f"cannot list the library folder {root}" in line, line
    finally:
        root.chmod(0o755)
        (root / "guides").chmod(0o755)
    assert Library(root, db).store.document_paths() == before


# ----- a full disk -------------------------------------------------------------------------------
def limited(size: int) -> list[str]:
    """A `markindex` command line whose process may write files of at most `size` bytes."""
    code = (
        "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({size}, {size})); "
        "sys.argv[0] = 'markindex'; runpy.run_module('markindex_core', run_name='__main__')"
    )
    return [sys.executable, "-c", code]


def big_docs(root: Path, n: int = 80) -> Path:
    for i in range(n):
        write(root, f"d{i:03d}.md", f"# Doc {i}\n\n" + f"sentence {i} with words. " * 2000)
    return root


def test_file_size_limit_while_indexing_is_one_clear_error(tmp_path: Path) -> None:
    """The limit is named as such, with how to raise it: it read 'no space left … free some
    space on that disk', sending the user to a disk with room to spare."""
    root = big_docs(tmp_path / "lib")
    db = tmp_path / "db" / "index.db"
    for _ in range(2):  # the second run must not blame a damaged file
        code, err = markindex("index", str(root), "--db", str(db), prefix=limited(300_000))
        line = one_clear_line(err)
        assert code == 1 and f"the index {db} reached the file size limit of 300,000" in line
        assert "ulimit -f" in line and "no space" not in line and "delete" not in line, line
    assert not db.with_name("index.db-wal").exists()
    code, err = markindex("index", str(root), "--db", str(db))
    assert code == 0, err
    assert check_store_consistent(db) == 80


def test_lock_file_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    code, err = markindex("index", str(root), prefix=limited(0))
    line = one_clear_line(err)
    assert code == 1 and "reached the file size limit of 0 bytes" in line, line


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs, when this process may mount one."""
    with small_tmpfs(tmp_path / "disk", "512k") as mnt:
        yield mnt


def test_full_disk_is_one_clear_error_and_the_next_run_recovers(
    tmp_path: Path, tiny_disk: Path
) -> None:
    root = big_docs(tmp_path / "lib")
    db = tiny_disk / "index.db"
    for _ in range(2):
        code, err = markindex("index", str(root), "--db", str(db))
        line = one_clear_line(err)
        assert code == 1 and f"no space left to write the index {db}" in line, line
        assert "delete" not in line, line
    assert not db.with_name("index.db-wal").exists(), "no uncommitted WAL is left behind"
    subprocess.run(
        ["mount", "-o", "remount,size=64m", str(tiny_disk)], check=True, capture_output=True
    )
    code, err = markindex("index", str(root), "--db", str(db))
    assert code == 0, err
    assert check_store_consistent(db) == 80


def test_a_lock_file_that_cannot_be_written_is_not_kept_locked(tmp_path: Path) -> None:
    """A long-running process (a server with --reindex-on-start) that met a full disk while taking
    the writer lock must not keep holding it: the next build (and other writers) can go ahead."""
    root = make_library(tmp_path / "lib")
    script = """
import resource, signal, sys
from markindex_core.errors import DiskFull
from markindex_core.library import Library
from markindex_core.store.lock import lock_path_for, writer_active
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
lib = Library(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
try:
    lib.index()
except DiskFull as exc:
    print("diskfull", exc.message)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print("locked", writer_active(lock_path_for(lib.db_path)))
print("added", len(lib.index().added))
"""
    proc = run_child([sys.executable, "-c", script, str(root)])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("diskfull the index") and "file size limit" in lines[0]
    assert lines[1:] == ["locked False", "added 12"], proc.stdout


def few_descriptors() -> list[str]:
    """A `markindex` command line whose process may open one file more than it has open."""
    code = (
        "import os, resource, runpy, sys; n = len(os.listdir('/proc/self/fd')); "
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]; "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard)); "
        "sys.argv[0] = 'markindex'; runpy.run_module('markindex_core', run_name='__main__')"
    )
    return [sys.executable, "-c", code]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")
def test_running_out_of_file_descriptors_names_ulimit(tmp_path: Path) -> None:
    """SQLite says only 'unable to open database file', which sent the user to the file, its
    folder and the disk: the limit is named, with how to raise it."""
    root = make_library(tmp_path / "lib", n=3)
    db = tmp_path / "db" / "index.db"
    code, err = markindex("index", str(root), "--db", str(db))
    assert code == 0, err
    for command in (["index", str(root)], ["search", str(root), "install"]):
        code, err = markindex(*command, "--db", str(db), prefix=few_descriptors())
        line = one_clear_line(err)
        assert code == 1 and "ran out of file descriptors" in line and "ulimit -n" in line, line
        code, err = markindex(*command, "--db", str(db), "--json", prefix=few_descriptors())
        assert code == 1 and "ulimit -n" in json.loads(err)["hint"], err
    assert check_store_consistent(db) == 3


@pytest.mark.parametrize("version", [0, 7])
def test_a_database_of_another_program_is_never_changed(tmp_path: Path, version: int) -> None:
    """`--db` pointed at the wrong file: refused, and the file keeps every byte."""
    import sqlite3

    root = make_library(tmp_path / "lib", n=2)
    other = tmp_path / "places.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE moz_places(url)")
    conn.execute("INSERT INTO moz_places VALUES('https://example.org')")
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    for args in (
        ["index", str(root)],
        ["index", str(root), "--no-setext"],
        ["index", str(root), "--rebuild"],
        ["daemon", str(root), "--no-mcp"],
        ["search", str(root), "x"],
    ):
        code, err = markindex(*args, "--db", str(other))
        line = one_clear_line(err)
        assert code == 1 and "a database of another program (tables: moz_places)" in line, line
    assert other.read_bytes() == before
    assert sorted(f.name for f in tmp_path.iterdir()) == ["lib", "places.sqlite"]  # no lock file
    note = root / "guides" / "doc0.md"
    text = note.read_bytes()
    code, err = markindex("index", str(root), "--db", str(note))
    line = one_clear_line(err)
    assert code == 1 and "names a Markdown file" in line, line  # refused by its name first
    assert note.read_bytes() == text
    plain = tmp_path / "notes.txt"
    plain.write_text("not a database\n", encoding="utf-8")
    code, err = markindex("index", str(root), "--db", str(plain))
    line = one_clear_line(err)
    assert code == 1 and "is not an index (not an SQLite database at all)" in line, line
    assert "delete" not in line and plain.read_text(encoding="utf-8") == "not a database\n"


def test_a_damaged_index_or_a_refused_path_is_one_clear_line(tmp_path: Path) -> None:
    """Damage found while reading, a name too long, a path that is not UTF-8: no traceback."""
    root = tmp_path / "lib"
    for i in range(40):
        parts = "".join(
            f"## Part {j}\n\n" + f"alpha beta word{j} " * 60 + "\n\n" for j in range(30)
        )
        write(root, f"d{i}.md", f"# Doc {i}\n\n{parts}")
    db = tmp_path / "index.db"
    assert markindex("index", str(root), "--db", str(db))[0] == 0
    size = db.stat().st_size
    with db.open("r+b") as f:  # the first pages (header, schema) stay: the file still opens
        for offset in range(size // 3, size, size // 6):
            f.seek(offset - offset % 4096)
            f.write(b"\xaa" * 4096)
    code, err = markindex("search", str(root), "word7", "--db", str(db))
    line = one_clear_line(err)
    assert code == 1 and "the index is damaged" in line and "markindex index" in line, line
    code, err = markindex("index", str(root), "--db", str(tmp_path / ("x" * 300 + ".db")))
    assert code == 1 and "a name is too long" in one_clear_line(err), err
    odd = os.fsencode(str(tmp_path)) + b"/db\xff.db"
    proc = run_child([sys.executable, "-m", "markindex_core", "index", str(root), "--db", odd])
    assert proc.returncode == 1 and "not valid UTF-8" in one_clear_line(proc.stderr), proc.stderr


def test_an_index_on_a_read_only_file_system_is_searched(tmp_path: Path, tiny_disk: Path) -> None:
    """An index copied to read-only media: no -shm file can be made beside it, so it is read as
    immutable instead of failing with a permission error that blames the user."""
    subprocess.run(
        ["mount", "-o", "remount,size=64m", str(tiny_disk)], check=True, capture_output=True
    )
    root = make_library(tmp_path / "lib")
    db = tiny_disk / "index.db"
    assert markindex("index", str(root), "--db", str(db))[0] == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True, capture_output=True)
    for files in os.listdir(tiny_disk):
        assert not files.endswith(("-wal", "-shm")) or (tiny_disk / files).stat().st_size == 0
    code, err = markindex("search", str(root), "数据处理者", "--db", str(db))
    assert code == 0, err
    assert Library(root, db).search("words").hits


def test_an_index_of_a_newer_markindex_is_refused_not_downgraded(tmp_path: Path) -> None:
    """An index written by a newer markindex (a higher format) was taken for an old one: `index`
    dropped its tables and rebuilt it in this version's format (the newer version then rebuilt it
    again), and readers said to run `markindex index` to rebuild it. Every command now refuses it
    in one line that names the newer version, and the file keeps every byte; `--rebuild` still
    replaces it on purpose."""
    import apsw

    from markindex_core.config import SCHEMA_VERSION

    root = make_library(tmp_path / "lib", n=2)
    db = tmp_path / "index.db"
    Library(root, db).index()
    conn = apsw.Connection(str(db))
    conn.pragma("user_version", SCHEMA_VERSION + 1)
    conn.pragma("wal_checkpoint(TRUNCATE)")
    conn.close()
    before = db.read_bytes()
    for args in (["index", str(root)], ["search", str(root), "doc"], ["links", str(root)]):
        code, err = markindex(*args, "--db", str(db))
        line = one_clear_line(err)
        assert code == 1 and "newer markindex" in line and "upgrade" in line, line
        assert "run `markindex index ROOT` to rebuild" not in line, line
    assert db.read_bytes() == before
    code, err = markindex("index", str(root), "--db", str(db), "--rebuild")
    assert code == 0, err
    assert check_store_consistent(db) == 2


def test_a_writer_stopped_mid_wal_update_is_named_not_a_disk_problem(tmp_path: Path) -> None:
    """A reader meeting a writer stopped (Ctrl-Z) while it updated the WAL's shared index gets
    SQLite's 'locking protocol' after seconds of retries; it was 'cannot use the index …: locking
    protocol (check the file, its folder and the disk)', which sends the user to the wrong place."""
    import apsw

    from markindex_core.errors import WriterBusy
    from markindex_core.store.files import open_error

    error = open_error(apsw.ProtocolError("locking protocol"), tmp_path / "index.db", readonly=True)
    assert isinstance(error, WriterBusy)
    assert "stopped with Ctrl-Z" in error.message and "kill -CONT" in error.hint

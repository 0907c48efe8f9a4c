"""Hostile files and processes: each one is skipped with a reason and everything else is indexed.

Bad names, files swapped for a FIFO or a link to /dev/zero, stuck and killed parse workers, YAML
alias bombs, exponential .gitignore patterns and permission skips. Runs that could hang run in a
child process with a generous timeout, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markindex_core.index.indexer import Indexer, open_for_writing
from markindex_core.index.scan import _spec
from markindex_core.store.db import Store
from tests.daemon.helpers import find, running_daemon, wait_for
from tests.unprivileged import CHILD_ENV

from .helpers import build

MARKINDEX = [sys.executable, "-m", "markindex_core"]


def _markindex(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MARKINDEX, *args], capture_output=True, text=True, timeout=timeout, env=CHILD_ENV
    )


def _python(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=CHILD_ENV,
        preexec_fn=_limit_memory,
    )


def _limit_memory() -> None:
    """A runaway read or expansion fails in the child instead of exhausting the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _indexed(db: Path) -> set[str]:
    store = Store(db, readonly=True)
    try:
        return set(store.doc_states())
    finally:
        store.close()


def _library(root: Path, count: int, body: str = "word\n") -> set[str]:
    root.mkdir(parents=True, exist_ok=True)
    names = {f"doc{i:02d}.md" for i in range(count)}
    for name in names:
        (root / name).write_text(f"# {name}\n\n{body}", encoding="utf-8")
    return names


# ----- bad names (issue 10 items 1 and 10) --------------------------------------------------------
def test_a_name_that_is_not_utf8_is_skipped_and_every_other_file_indexed(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    good = _library(lib, 30)
    with open(os.fsencode(lib) + b"/doc10\xff\xfename.md", "wb") as fh:
        fh.write(b"# b\n")
    (lib / "sub\udcfe").mkdir()
    (lib / "sub\udcfe" / "inner.md").write_text("# inner\n", encoding="utf-8")
    db = tmp_path / "db" / "index.db"
    for _ in range(2):  # the second run must neither fail nor churn
        proc = _markindex("index", str(lib), "--db", str(db), "--json")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        skipped = {s["path"]: s["reason"] for s in report["skipped"]}
        assert skipped == {
            "doc10\\xff\\xfename.md": "file name is not valid UTF-8: rename it",
            "sub\\xfe": "file name is not valid UTF-8: rename it",
        }
        assert report["removed"] == []
        assert _indexed(db) == good
    assert "Traceback" not in proc.stderr


def test_names_with_control_characters_are_skipped_at_scan_time(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    good = _library(lib, 3)
    for name in ("new\nline.md", "tab\there.md", "esc\x1b]0;title\x07.md", "back\\slash.md"):
        (lib / name).write_text("# hostile name\n", encoding="utf-8")
    db = tmp_path / "index.db"
    proc = _markindex("index", str(lib), "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    skipped = {s["path"]: s["reason"] for s in json.loads(proc.stdout)["skipped"]}
    assert set(skipped) == {
        "new\\x0aline.md",
        "tab\\x09here.md",
        "esc\\x1b]0;title\\x07.md",
        "back\\slash.md",
    }
    assert all("rename it" in r for r in skipped.values())
    assert _indexed(db) == good
    proc = _markindex("search", str(lib), "hostile", "--db", str(db), "--json")
    assert proc.returncode == 1 and not proc.stderr, proc.stderr  # nothing matched
    assert "hostile" not in proc.stdout.replace('"hostile"', "")  # no hit, only the echoed query


def test_path_scoped_runs_skip_bad_names_too(tmp_path: Path) -> None:
    """The daemon reconciles the paths of file events: the same rule holds there."""
    lib = tmp_path / "lib"
    good = _library(lib, 2)
    bad = "bad\udcff.md"
    (lib / bad).write_text("# b\n", encoding="utf-8")
    (lib / "ctl\n.md").write_text("# c\n", encoding="utf-8")
    (lib / "dir\udcfe").mkdir()
    (lib / "dir\udcfe" / "x.md").write_text("# x\n", encoding="utf-8")
    store, lock = open_for_writing(tmp_path / "index.db")
    try:
        indexer = Indexer(lib, store, workers=1)
        indexer.run()
        report = indexer.run(paths=[bad, "ctl\n.md", "dir\udcfe", "doc00.md"])
        assert dict(report.skipped) == {
            "bad\\xff.md": "file name is not valid UTF-8: rename it",
            "ctl\\x0a.md": "file name contains control characters (newline, tab, escape…): rename it",
            "dir\\xfe": "file name is not valid UTF-8: rename it",
        }
        assert report.removed == [] and report.errors == []
        assert set(store.doc_states()) == good
        assert {p for p, _ in store.skipped()} == set(dict(report.skipped))
    finally:
        store.close()
        lock.release()


def test_the_daemon_skips_a_bad_name_and_keeps_indexing(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    _library(lib, 2)
    db = tmp_path / "idx" / "index.db"
    with running_daemon(lib, db) as daemon:
        with open(os.fsencode(lib) + b"/bad\xff\xfename.md", "wb") as fh:
            fh.write(b"# b\n\nzqbad\n")
        (lib / "tab\tname.md").write_text("# t\n\nzqbad\n", encoding="utf-8")
        (lib / "later.md").write_text("# Later\n\nzqlater\n", encoding="utf-8")
        wait_for(lambda: find(db, lib, "zqlater") == {"later.md"}, timeout=30)
        (lib / "later.md").write_text("# Later\n\nzqedited\n", encoding="utf-8")
        wait_for(lambda: find(db, lib, "zqedited") == {"later.md"}, timeout=30)
        assert find(db, lib, "zqbad") == set()
        assert not daemon.status().get("errors"), daemon.log


# ----- swapped files, stuck and killed workers (issue 10 item 2) ----------------------------------
_SWAP_SCRIPT = """
    import json, os, sys
    from pathlib import Path
    from markindex_core.index.indexer import Indexer, open_for_writing

    lib, db, workers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    swapped = False

    def swap(done, total, path):
        # After the scan and the first document: swap two files that are read last.
        global swapped
        if not swapped:
            swapped = True
            os.unlink(lib / "zz-fifo.md")
            os.mkfifo(lib / "zz-fifo.md")
            os.unlink(lib / "zz-zero.md")
            os.symlink("/dev/zero", lib / "zz-zero.md")

    store, lock = open_for_writing(db)
    report = Indexer(lib, store, workers=workers).run(swap)
    print(json.dumps(report.to_json()))
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_files_swapped_for_a_fifo_or_a_link_to_dev_zero_are_skipped(
    tmp_path: Path, workers: int
) -> None:
    lib = tmp_path / "lib"
    good = _library(lib, 8, body="words and more words\n" * 15000)  # > 2 MB: parallel
    for name in ("zz-fifo.md", "zz-zero.md"):
        (lib / name).write_text("# small, so parsed last\n", encoding="utf-8")
    db = tmp_path / "index.db"
    proc = _python(_SWAP_SCRIPT, str(lib), str(db), str(workers), timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert skipped == {
        "zz-fifo.md": "not a regular file (a FIFO, socket or device)",
        "zz-zero.md": "is a symbolic link (links are never followed)",
    }
    assert _indexed(db) == good


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return found


def _state(pid: int) -> str:
    """The process state letter (R running, S sleeping, Z zombie, …), or "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _running(pid: int) -> bool:
    """Alive and not a zombie."""
    return _state(pid) not in ("", "Z")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _wait_gone(pids: set[int], timeout: float = 15.0) -> set[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        alive = {p for p in pids if _running(p)}
        if not alive:
            return alive
        time.sleep(0.05)
    return {p for p in pids if _running(p)}


_STOP_SCRIPT = """
    import json, os, signal, sys
    from pathlib import Path
    from markindex_core.index.indexer import Indexer, open_for_writing

    def children():
        me = os.getpid()
        out = []
        for task in os.listdir(f"/proc/{me}/task"):
            out += [int(c) for c in Path(f"/proc/{me}/task/{task}/children").read_text().split()]
        return out

    lib, db = Path(sys.argv[1]), Path(sys.argv[2])
    stopped = []

    def stop_workers(done, total, path):
        # A worker that stops answering (here: SIGSTOP) must cost its document, not the run.
        if not stopped:
            stopped.extend(children())
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)

    store, lock = open_for_writing(db)
    indexer = Indexer(lib, store, workers=2, parse_timeout=5.0)
    report = indexer.run(stop_workers)
    print(json.dumps({"report": report.to_json(), "stopped": stopped, "left": children()}))
"""


def test_a_stuck_parse_worker_times_out_and_the_run_finishes(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    names = _library(lib, 12, body="words and more words\n" * 12000)
    db = tmp_path / "index.db"
    proc = _python(_STOP_SCRIPT, str(lib), str(db), timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["stopped"]) == 2 and out["left"] == []
    skipped = {s["path"]: s["reason"] for s in out["report"]["skipped"]}
    # The two documents handed to the stopped workers time out; fresh workers do the rest (on a
    # very busy machine a fresh worker may miss the deadline too: that costs a document, no more).
    assert 2 <= len(skipped) <= 4
    assert set(skipped.values()) == {"timed out: not parsed within 5 s"}
    assert _indexed(db) == names - set(skipped)
    assert _wait_gone(set(out["stopped"])) == set()


def _workers_of(pid: int) -> set[int]:
    """Parse workers: the children running the worker loop."""
    return {c for c in _children(pid) if "serve_fd" in _cmdline(c)}


def test_a_killed_parse_worker_does_not_stop_markindex_index(tmp_path: Path) -> None:
    """The OOM killer's SIGKILL of a worker: its document is parsed again, nothing is lost."""
    lib = tmp_path / "lib"
    names = _library(lib, 120, body="words and more words\n" * 3000)
    db = tmp_path / "index.db"
    proc = subprocess.Popen(
        [*MARKINDEX, "index", str(lib), "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
    )
    seen: set[int] = set()
    killed: int | None = None
    end = time.monotonic() + 60
    try:
        while killed is None and proc.poll() is None and time.monotonic() < end:
            busy = [w for w in _workers_of(proc.pid) if _state(w) == "R"]  # parsing, not idle
            if busy:
                killed = busy[0]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.005)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed is not None, "the run ended before a parse worker could be killed"
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["skipped"] == [] and report["errors"] == []
    assert _indexed(db) == names
    seen.add(killed)
    assert _wait_gone(seen) == set()


def test_ctrl_c_while_the_workers_start_shows_no_traceback(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches every process of the foreground group, workers included,
    possibly while they are still importing: `index` says "interrupted", nothing else."""
    lib = tmp_path / "lib"
    _library(lib, 60, body="words and more words\n" * 3000)
    proc = subprocess.Popen(
        [*MARKINDEX, "index", str(lib), "--db", str(tmp_path / "index.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    end = time.monotonic() + 60
    while not _workers_of(proc.pid) and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.002)
    workers = _workers_of(proc.pid)
    assert workers, "the run ended before it started workers"
    time.sleep(0.05)  # the workers' interpreters are up and importing
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert _wait_gone(workers) == set()


def test_no_parse_worker_outlives_a_run(tmp_path: Path) -> None:
    """Every worker is gone when `index` has exited, and no process but the workers ran beside it
    (no fork server or resource tracker: they cost memory and outlive nothing useful)."""
    lib = tmp_path / "lib"
    _library(lib, 60, body="words and more words\n" * 3000)
    cmd = [*MARKINDEX, "index", str(lib), "--db", str(tmp_path / "index.db")]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
    )
    seen: set[int] = set()
    others: set[str] = set()
    end = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < end:
        # Each child's command line read once: a child that execs between two reads would
        # otherwise be seen as a non-worker showing the worker's command line.
        lines = {c: _cmdline(c) for c in _children(proc.pid)}
        workers = {c for c, line in lines.items() if "serve_fd" in line}
        seen |= workers
        others |= {line for c, line in lines.items() if c not in workers}
        time.sleep(0.01)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert seen, "no parse worker was ever seen"
    # A worker caught between fork and exec still shows the indexer's command line; "" is one
    # already gone when its command line was read.
    assert others <= {"", " ".join(cmd) + " "}, others
    assert _wait_gone(seen) == set()


# ----- YAML alias bomb (issue 10 item 3) ----------------------------------------------------------
_BOMB = """---
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
---
# Bomb

zqbody survives
"""


def test_a_yaml_alias_bomb_is_refused_and_the_body_indexed(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "bomb.md").write_text(_BOMB, encoding="utf-8")
    (lib / "plain.md").write_text("---\ntitle: Plain\n---\n# P\n", encoding="utf-8")
    db = tmp_path / "index.db"
    proc = subprocess.run(
        [*MARKINDEX, "index", str(lib), "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=CHILD_ENV,
        preexec_fn=_limit_memory,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["skipped"] == [] and sorted(report["added"]) == ["bomb.md", "plain.md"]
    assert report["warnings"] == [
        {
            "path": "bomb.md",
            "warning": "front matter: YAML aliases (*name) are not supported: front matter ignored",
        }
    ]
    proc = _markindex("search", str(lib), "zqbody", "--db", str(db), "--json")
    assert proc.returncode == 0 and "bomb.md" in proc.stdout


def test_front_matter_without_aliases_still_parses() -> None:
    doc = build("---\ntitle: T\ntags: [a, '*b']\nnote: a * b & c\n---\n# H\n")
    assert doc.front_matter == {"title": "T", "tags": ["a", "*b"], "note": "a * b & c"}
    assert doc.warnings == []


# ----- exponential .gitignore (issue 10 item 4) ---------------------------------------------------
_GITIGNORE_SCRIPT = """
    import sys, time
    from pathlib import Path
    from markindex_core.index.scan import IgnoreRules, scan

    root = Path(sys.argv[1])
    t0 = time.perf_counter()
    result = scan(root, IgnoreRules(root))
    print(f"{time.perf_counter() - t0:.3f}")
    print("\\n".join(sorted(result.files)))
"""


def test_a_gitignore_pattern_with_many_stars_is_matched_in_linear_time(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / ".gitignore").write_text("*a" * 16 + "*b\n", encoding="utf-8")
    (lib / ("a" * 40 + ".md")).write_text("# kept: the pattern needs a final b\n", encoding="utf-8")
    ignored = lib / ("a" * 17 + "b")
    ignored.mkdir()
    (ignored / "x.md").write_text("# ignored with its folder\n", encoding="utf-8")
    proc = _python(_GITIGNORE_SCRIPT, str(lib), timeout=120)  # 57 s of CPU before the fix
    assert proc.returncode == 0, proc.stderr
    seconds, *files = proc.stdout.split("\n")
    assert float(seconds) < 10
    assert [f for f in files if f] == ["a" * 40 + ".md"]


_PIECES = ["*", "**", "a", "b", "?", "[ab]", "/", "\\*", "*a", "a*"]


@settings(max_examples=300, deadline=None)
@given(
    pattern=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=7).map("".join),
    name=st.text(alphabet="ab/*", min_size=1, max_size=10),
)
def test_linear_gitignore_matching_agrees_with_pathspec(pattern: str, name: str) -> None:
    import pathspec

    name = name.strip("/") or "a"
    expected = pathspec.GitIgnoreSpec.from_lines([pattern], backend="simple")
    assert _spec([pattern]).match_file(name) == expected.match_file(name), (pattern, name)


# ----- permission skips are retried (issue 10 item 6) ---------------------------------------------
_NOBODY_SCRIPT = """
    import importlib.util, json, os, sys
    from pathlib import Path
    import yaml  # imported now: after dropping privileges the interpreter's files may be closed
    from markindex_core.index.indexer import Indexer, open_for_writing
    import markindex_core.index.document  # the parse stack, with the stdlib modules it loads
    from markindex_core.text import segment

    segment.warm()
    segment.engine()
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    assert os.geteuid() != 0
    lib, db = Path(sys.argv[1]), Path(sys.argv[2])
    store, lock = open_for_writing(db)
    report = Indexer(lib, store, workers=1).run()
    print(json.dumps({"uid": os.geteuid(), "report": report.to_json()}))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A temporary folder an unprivileged user can work in (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="markindex-perm-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_permission_skip_is_retried_after_chmod(shared_dir: Path) -> None:
    """Runs the indexer as `nobody` (root reads everything): the interpreter starts as the test's
    user, loads what it needs, then drops its privileges before it indexes."""
    lib = shared_dir / "lib"
    good = _library(lib, 2)
    locked = lib / "locked.md"
    locked.write_text("# locked\n", encoding="utf-8")
    locked.chmod(0)
    lib.chmod(0o777)
    db_dir = shared_dir / "db"
    db_dir.mkdir(mode=0o777)
    db_dir.chmod(0o777)
    db = db_dir / "index.db"
    proc = _python(_NOBODY_SCRIPT, str(lib), str(db))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["uid"] != 0
    assert out["report"]["skipped"] == [
        {"path": "locked.md", "reason": "cannot read: Permission denied"}
    ]
    before = locked.stat()
    locked.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    after = locked.stat()
    assert (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns)
    proc = _python(_NOBODY_SCRIPT, str(lib), str(db))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["report"]
    assert report["skipped"] == [] and report["added"] == ["locked.md"]
    assert _indexed(db) == good | {"locked.md"}


def test_a_document_with_a_data_uri_is_indexed_without_its_blob(tmp_path: Path) -> None:
    """An image pasted into a document as a data URI is indexed as the text around it: none of
    its base64 becomes search terms (5 MB of it took 11 s and 12 MB of terms), and a search for
    the words after it finds them."""
    import base64

    lib = tmp_path / "lib"
    lib.mkdir()
    blob = base64.b64encode(os.urandom(300_000)).decode()
    (lib / "pasted.md").write_text(
        f"# Pasted\n\nThe diagram below.\n\n![d](data:image/png;base64,{blob})\n\nquokka after\n",
        encoding="utf-8",
    )
    db = tmp_path / "db" / "index.db"
    proc = _markindex("index", str(lib), "--db", str(db), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["added"] == ["pasted.md"], proc.stderr
    found = _markindex("search", str(lib), "quokka", "--db", str(db), "--json")
    assert found.returncode == 0 and "pasted.md" in found.stdout, found.stdout
    store = Store(db, readonly=True)
    try:
        store.conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, passage_fts, row)")
        lengths = [len(str(term)) for (term,) in store.conn.execute("SELECT term FROM temp.v")]
    finally:
        store.close()
    assert max(lengths) < 20 and len(lengths) < 30, lengths  # the words around it, no base64

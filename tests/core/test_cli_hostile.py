"""Hostile option values and paths given to the command line: refused in one line before any
work, never turned into a damaged index, a lost document or a process that hangs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from markindex_core.store.db import Store

from .helpers import REPO_ROOT, check_store_consistent, make_library, markindex


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A library, its index (in the default place) and a question file."""
    root = make_library(tmp_path / "lib", 4)
    done = markindex("index", str(root), "--json")
    assert done.returncode == 0, done.stderr
    questions = tmp_path / "q.jsonl"
    record = {"id": "q1", "question": "doc", "lang": "en", "gold": [{"doc_path": "doc0.md"}]}
    questions.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return root, root / ".markindex" / "index.db", questions


@pytest.mark.parametrize(
    "target", ["index.db", "index.db-wal", "index.db.lock", "doc0.md", "other.db"]
)
def test_eval_out_never_overwrites_the_index_a_document_or_a_database(
    indexed: tuple[Path, Path, Path], target: str
) -> None:
    """`eval --out` wrote its JSON report over whatever it was given: over the index itself (every
    later command then said it is not an SQLite database), or over a document of the library.
    It now refuses, before running, any index file, SQLite database or Markdown file."""
    root, db, questions = indexed
    other = root.parent / "other.db"
    Store(other).close()  # an index of nobody in particular: a database all the same
    out = {
        "doc0.md": root / "doc0.md",
        "other.db": other,
    }.get(target, db.with_name(target))
    before = out.read_bytes() if out.exists() else None
    res = markindex("eval", str(root), "--questions", str(questions), "--out", str(out), "--json")
    assert res.returncode == 1 and res.stdout == "", res.stdout
    error = json.loads(res.stderr.strip().splitlines()[-1])
    assert error["code"] == "INVALID_INPUT" and "--out" in error["error"], error
    assert error["hint"]
    assert (out.read_bytes() if out.exists() else None) == before
    assert check_store_consistent(db) == 4
    assert markindex("search", str(root), "doc", "--json").returncode == 0


def test_eval_out_still_writes_a_new_report(indexed: tuple[Path, Path, Path]) -> None:
    root, _, questions = indexed
    out = root.parent / "report.json"
    res = markindex("eval", str(root), "--questions", str(questions), "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["metrics"]
    again = markindex("eval", str(root), "--questions", str(questions), "--out", str(out))
    assert again.returncode == 0, again.stderr  # its own earlier report is replaced


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["eval", "ROOT", "--questions", "Q", "--max-evidence-lines", "0"], "(1 or more)"),
        (["eval", "ROOT", "--questions", "Q", "--max-evidence-lines", "-5"], "(1 or more)"),
        (["retrieve", "ROOT", "q", "--model", "openai:m", "--max-input-tokens", "0"], "1 or"),
    ],
)
def test_limits_below_one_are_usage_errors(
    indexed: tuple[Path, Path, Path], argv: list[str], expected: str
) -> None:
    """`eval --max-evidence-lines 0` (or -5) ran and reported every question a miss, its table
    titled 'max evidence ∞ lines'; `retrieve --max-input-tokens 0` would stop before asking
    anything. Both are usage errors now, in JSON with --json."""
    root, _, questions = indexed
    args = [str(root) if a == "ROOT" else str(questions) if a == "Q" else a for a in argv]
    res = markindex(*args, "--json")
    assert res.returncode == 2 and res.stdout == "", res.stdout
    error = json.loads(res.stderr.strip().splitlines()[-1])
    assert error["code"] == "USAGE" and expected in error["error"], error


@pytest.mark.parametrize(("first_build", "rebuild"), [(True, False), (False, False), (False, True)])
def test_an_index_deleted_while_it_is_written_is_an_error_not_a_success(
    tmp_path: Path, first_build: bool, rebuild: bool
) -> None:
    """`rm -rf .markindex` while `markindex index` ran: the run wrote on into the unlinked file
    and reported 'added 92' with exit 0, leaving no index at all. It now fails with one error
    that says the work is lost and to run again; the next run builds the index whole. A
    `--rebuild` failed with 'No such file or directory (….rebuild) … check that file and the
    disk'."""
    from markindex_core import Library
    from markindex_core.errors import MarkindexError

    from .helpers import write

    root = make_library(tmp_path / "lib", 8)
    lib = Library(root)
    if not first_build:
        lib.index()
        for i in range(4):
            write(root, f"new{i}.md", f"# New {i}\n\nfresh text {i}\n")

    def delete_the_index(done: int, total: int, path: str) -> None:
        if done == 1:
            shutil.rmtree(root / ".markindex")

    with pytest.raises(MarkindexError) as caught:
        lib.index(progress=delete_the_index, rebuild=rebuild)
    assert caught.value.code == "INDEX_REPLACED"
    assert "deleted or replaced while" in caught.value.message, caught.value.message
    assert "markindex index" in caught.value.hint
    report = lib.index()
    assert len(report.added) == (8 if first_build else 12)
    assert check_store_consistent(root / ".markindex" / "index.db") == (8 if first_build else 12)


def test_a_stray_file_with_a_huge_pid_beside_a_new_index_is_no_traceback(tmp_path: Path) -> None:
    """A file `index.db.new-<digits>` beside a new index is taken for one a killed creator
    left: a number too big for a pid made the first `index` end in an OverflowError
    traceback. Such a file names no live process, so it is swept like the others."""
    root = make_library(tmp_path / "lib", 2)
    stray = tmp_path / "db" / f"index.db.new-{'9' * 20}"
    stray.parent.mkdir()
    stray.write_bytes(b"")
    res = markindex("index", str(root), "--db", str(stray.with_name("index.db")), "--json")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert len(json.loads(res.stdout)["added"]) == 2


def test_an_empty_db_name_is_refused_not_taken_for_the_default(
    indexed: tuple[Path, Path, Path],
) -> None:
    root, _, _ = indexed
    for cmd in ("index", "search", "status"):
        argv = [cmd, str(root), *(["doc"] if cmd == "search" else []), "--db", ""]
        done = markindex(*argv)
        assert done.returncode == 2, (cmd, done.stderr)
        assert "empty file name" in done.stderr and "Traceback" not in done.stderr


def test_a_folder_given_as_the_index_is_called_a_folder(indexed: tuple[Path, Path, Path]) -> None:
    root, _, _ = indexed
    done = markindex("check", str(root), "--db", str(root))
    assert done.returncode == 1
    assert "is a folder, not an index file" in done.stderr and "FIFO" not in done.stderr


def test_an_endless_questions_file_is_refused_in_bounded_memory(
    indexed: tuple[Path, Path, Path],
) -> None:
    root, _, _ = indexed
    done = markindex("eval", str(root), "--questions", "/dev/zero", "--json")
    assert done.returncode == 1
    assert "larger than" in json.loads(done.stderr)["error"]


def test_json_output_is_utf8_when_an_argument_is_not(indexed: tuple[Path, Path, Path]) -> None:
    """A query holding a byte that is not UTF-8 (a legacy-encoded shell history) was echoed in
    `--json` as that raw byte, under a UTF-8 locale: the JSON output was not UTF-8."""
    root, db, _ = indexed
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "markindex_core",
            "search",
            str(root),
            b"pass\xffword",
            "--db",
            str(db),
            "--json",
        ],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": ""},
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout.decode("utf-8"))  # strict: raises on a raw 0xFF
    assert out["query"] == "pass\udcffword"


def _with_stdout(stdout: int | None, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the command with `stdout` as its file descriptor 1 (None: fd 1 closed, as `>&-`)."""
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *argv],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        **({"pass_fds": ()} if stdout is not None else {"preexec_fn": lambda: os.close(1)}),
    )


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize(
    ("argv", "code"),
    [(["search", "ROOT", "doc"], 0), (["search", "ROOT", "zzqqxx"], 1), (["status", "ROOT"], 0)],
)
def test_a_reader_that_stops_early_keeps_the_exit_status(
    indexed: tuple[Path, Path, Path], argv: list[str], code: int, as_json: bool
) -> None:
    """`markindex search … | head -1`: human output ended in exit 1 when the reader had gone
    (rich's own broken-pipe exit: 'nothing matched', or 'not indexed' for status) while --json
    ended in 0 whatever the result. Both now keep the command's own exit status."""
    root = indexed[0]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: EPIPE every time
    try:
        args = [str(root) if a == "ROOT" else a for a in argv] + (["--json"] if as_json else [])
        done = _with_stdout(write, *args)
    finally:
        os.close(write)
    assert done.returncode == code, done.stderr
    assert done.stderr.strip() == "", done.stderr


@pytest.mark.parametrize("as_json", [False, True])
def test_a_closed_stdout_is_an_error_not_a_traceback_or_a_silent_success(
    indexed: tuple[Path, Path, Path], as_json: bool
) -> None:
    """`markindex search ROOT q --json >&-` ended in an AttributeError traceback (sys.stdout is
    None); without --json it printed nothing and exited 0. Both now fail in one line."""
    root = indexed[0]
    done = _with_stdout(None, "search", str(root), "doc", *(["--json"] if as_json else []))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    error = json.loads(line)["error"] if as_json else line
    assert "standard output is closed" in error, done.stderr


def test_ctrl_c_with_json_is_a_json_error_line(tmp_path: Path) -> None:
    """With --json every error is one JSON line on stderr, but Ctrl-C printed a bare
    `interrupted`: a caller parsing stderr met a line that is not JSON. It is now a JSON error
    with code INTERRUPTED (exit 130 as before)."""
    import signal
    import time

    root = make_library(tmp_path / "lib", 400)
    db = tmp_path / "index.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--json"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not db.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # the run has started: its index file is there
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal came")
    assert proc.returncode == 130 and out == "", (out, err)
    error = json.loads(err.strip().splitlines()[-1])
    assert error["code"] == "INTERRUPTED" and error["hint"], error


def test_ctrl_c_while_the_command_modules_load_shows_no_traceback(
    indexed: tuple[Path, Path, Path],
) -> None:
    """Ctrl-C in the first tenth of a second, while `markindex` still imports its command
    modules, ended in a 20-line KeyboardInterrupt traceback (they loaded before `main` could
    catch it). The signal is sent here once the child reports (-X importtime) that it has loaded
    `markindex_core.config`, which only the command modules import."""
    import signal

    root = indexed[0]
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "markindex_core", "status", str(root), "--json"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.rstrip().endswith("markindex_core.config"):
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=60)
    err = "".join(lines) + rest
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    if proc.returncode == 130:  # the signal came before the command ended
        ours = [x for x in rest.splitlines() if not x.startswith("import time:")]
        assert json.loads(ours[-1])["code"] == "INTERRUPTED", err
    else:
        assert proc.returncode == 0 and json.loads(out)["indexed"], err


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks here")
def test_ctrl_c_during_the_imports_is_delivered_after_them() -> None:
    """CI saw the test above fail: the Ctrl-C landed in an import lock's weakref callback, where
    CPython prints 'Exception ignored in … KeyboardInterrupt' (a traceback) and goes on as if no
    Ctrl-C had come. While the command modules load, SIGINT is now held back and delivered when
    they are loaded, where `main` catches it."""
    from markindex_core.cli.main import _interrupts_held

    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with _interrupts_held():
            # To this thread, as the CLI's only thread gets it: sent to the process, the kernel
            # hands it to any thread not holding it (one an earlier test left running here).
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            for _ in range(100_000):  # bytecodes, where an unheld interrupt would be raised
                pass
            reached_end = True
        pytest.fail("the held Ctrl-C was not delivered when the imports ended")
    assert reached_end


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_a_terminal_that_cannot_show_chinese_gets_escapes_not_a_wrong_error(
    tmp_path: Path, encoding: str
) -> None:
    """Under a locale whose encoding lacks the characters printed (latin-1, ASCII), every
    command printing a Chinese title, a `→` or a box line failed with 'a path or argument holds
    bytes that are not valid UTF-8 (a legacy file name?)', about nothing the user gave. Human
    output now shows such characters as escapes, and --json stays valid JSON (\\u escapes)."""
    from .helpers import write

    root = tmp_path / "lib"
    write(root, "laws/数据.md", "# 数据安全\n\n数据泄露 words 🙂 here\n")
    env = {**os.environ, "PYTHONIOENCODING": encoding}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "markindex_core", *argv, "--db", str(tmp_path / "i.db")],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            encoding=encoding,
            timeout=120,
        )

    assert run("index", str(root)).returncode == 0
    for argv in (["status", str(root)], ["search", str(root), "words"], ["links", str(root)]):
        done = run(*argv)
        assert done.returncode == 0 and "not valid UTF-8" not in done.stderr, (argv, done.stderr)
    shown = run("search", str(root), "words").stdout
    assert "\\u6570" in shown or "\\u5b89" in shown, shown
    data = json.loads(run("search", str(root), "words", "--json").stdout)
    assert data["hits"][0]["doc_path"] == "laws/数据.md" and "🙂" in data["hits"][0]["snippet"]


def test_an_empty_index_file_is_called_no_index(tmp_path: Path) -> None:
    """A zero-byte index file (a `touch`, a copy that never started) was 'index at … has
    schema 0, this markindex needs 3' for every reader: the jargon of a version mismatch for a
    file that holds nothing. It is now 'no index at … (an empty file)', with how to build one."""
    root = make_library(tmp_path / "lib", 2)
    db = tmp_path / "index.db"
    db.write_bytes(b"")
    for argv in (["search", str(root), "doc"], ["links", str(root)], ["check", str(root)]):
        done = markindex(*argv, "--db", str(db), "--json")
        error = json.loads(done.stderr.strip().splitlines()[-1])
        assert done.returncode == 1 and error["code"] == "INDEX_MISSING", error
        assert "(an empty file)" in error["error"] and "schema" not in error["error"], error
        assert "markindex index" in error["hint"], error
    assert markindex("index", str(root), "--db", str(db)).returncode == 0  # built in it


def test_an_error_with_stderr_closed_never_reaches_stdout(tmp_path: Path) -> None:
    """With fd 2 closed (`2>&-`), the one-line error was printed to stdout (print to a None
    sys.stderr writes to stdout), where a script reads results, --json ones too. It is now
    dropped with stderr; stdout stays empty and the exit status says it failed."""
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", "search", str(tmp_path), "q", "--json"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(2),
    )
    assert done.returncode == 1 and done.stdout == "", done.stdout

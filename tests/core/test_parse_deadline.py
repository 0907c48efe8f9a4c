"""A parse in the indexing process (a small run, a daemon's update) has the deadline a worker has."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path

import pytest

import markindex_core.index.document  # noqa: F401  imported before any deadline runs
from markindex_core.config import PARALLEL_MIN_BYTES
from markindex_core.index.deadline import ParseDeadline, ParseTimedOut
from markindex_core.index.indexer import Indexer, open_for_writing
from tests.core.helpers import write


def _slow_document() -> str:
    """~1.6 MB, under PARALLEL_MIN_BYTES (parsed in this process), of headings each with a
    link: about 2 s to parse, far past the deadline the test gives it."""
    return "# Slow\n\n" + "".join(
        f"## Heading {i} words\n\ntext {i} of the section, with a [link](#heading-{i % 50}).\n\n"
        for i in range(20_000)
    )


def test_a_parse_in_this_process_that_misses_its_deadline_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    for i in range(3):
        write(root, f"doc{i}.md", f"# Document {i}\n\nA short note, number {i}.\n")
    write(root, "slow.md", _slow_document())
    assert sum(p.stat().st_size for p in root.rglob("*.md")) < PARALLEL_MIN_BYTES
    store, lock = open_for_writing(tmp_path / "index.db")
    try:
        report = Indexer(root, store, parse_timeout=0.4).run()
        paths = set(store.document_paths())
    finally:
        store.close()
        lock.release()
    assert report.skipped == [("slow.md", "timed out: not parsed within 0.4 s")]
    assert sorted(report.added) == ["doc0.md", "doc1.md", "doc2.md"] and not report.errors
    assert paths == {"doc0.md", "doc1.md", "doc2.md"}


def test_the_same_document_is_indexed_when_its_parse_meets_the_deadline(tmp_path: Path) -> None:
    """The control: with the usual deadline the slow document is parsed whole."""
    root = tmp_path / "lib"
    write(root, "slow.md", _slow_document())
    store, lock = open_for_writing(tmp_path / "index.db")
    try:
        report = Indexer(root, store).run()
    finally:
        store.close()
        lock.release()
    assert report.added == ["slow.md"] and not report.skipped


def _busy(seconds: float) -> int:
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def test_a_deadline_never_lands_outside_the_parse_it_was_set_for() -> None:
    """Parses that end around their deadline: the timeout is raised inside `run` or not at all,
    never in the code that runs after it (which writes the index). Their lengths vary about the
    deadline: the watchdog gets the GIL only after the interpreter's switch interval (5 ms), so
    parses all as long as the deadline would rarely be reached (a flaky count of timeouts)."""
    timed_out = finished = 0
    lengths = [0.001, 0.002, 0.004, 0.008]
    with ParseDeadline(0.002) as deadline:
        for i in range(400):
            try:
                deadline.run("doc.md", functools.partial(_busy, lengths[i % 4]))
                finished += 1
            except ParseTimedOut:
                timed_out += 1
            _busy(0.003)  # a shot that had not landed yet would land here, outside `run`
    assert timed_out + finished == 400
    assert timed_out > 0


def test_a_parse_past_its_deadline_ends_in_its_own_thread() -> None:
    """The watchdog ends the parse of the thread that runs it (a daemon's writer thread, a
    terminal app's worker), not the main thread."""
    outcome: list[str] = []

    def index_run() -> None:
        with ParseDeadline(0.2) as deadline:
            try:
                deadline.run("doc.md", lambda: _busy(30))
                outcome.append("finished")
            except ParseTimedOut:
                outcome.append("timed out")

    thread = threading.Thread(target=index_run)
    started = time.monotonic()
    thread.start()
    thread.join(20)
    assert outcome == ["timed out"]
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("outcome", ["returns", "raises"])
def test_a_parse_that_ends_in_time_is_untouched(outcome: str) -> None:
    def parse() -> str:
        if outcome == "raises":
            raise ValueError("bad document")
        return "parsed"

    with ParseDeadline(5) as deadline:
        if outcome == "returns":
            assert deadline.run("doc.md", parse) == "parsed"
        else:
            with pytest.raises(ValueError, match="bad document"):
                deadline.run("doc.md", parse)
        _busy(0.05)


def test_a_parse_stuck_in_native_code_is_logged_and_ends_when_the_call_returns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`time.sleep` stands for a long native call: the timeout cannot land inside it. The
    watchdog says so while it lasts, and the timeout lands as soon as it returns."""
    monkeypatch.setattr("markindex_core.index.deadline.PARSE_STUCK_REPORT_S", 0.3)
    with (
        caplog.at_level("ERROR", logger="markindex.index"),
        ParseDeadline(0.1) as deadline,
        pytest.raises(ParseTimedOut),
    ):
        deadline.run("stuck.md", lambda: time.sleep(1.5))
    assert "the parse of stuck.md has not stopped" in caplog.text


class _Stopping(Exception):
    """What a daemon's interrupt raises when it stops."""


def test_a_stop_ends_a_parse_in_this_process_without_waiting_for_it() -> None:
    """A daemon that stops (its `interrupt` raises) does not wait for the parse under way: the
    watchdog raises the same exception in it, as the run would between two documents."""
    stop = threading.Event()

    def interrupt() -> None:
        if stop.is_set():
            raise _Stopping

    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with ParseDeadline(120, interrupt) as deadline, pytest.raises(_Stopping):
        deadline.run("long.md", lambda: _busy(60))
    assert time.monotonic() - started < 30


def test_a_timeout_lost_in_a_garbage_collector_callback_is_raised_again() -> None:
    """CI saw a slow document indexed whole under a 0.4 s deadline: the one timeout raised in its
    parse landed in a garbage-collector callback, which swallows what it raises ('Exception
    ignored in: gc_callback … ParseTimedOut'), and the parse went on to the end. The watchdog
    now raises it again until the parse ends. Here the deadline passes while such a callback
    runs, so the first shot is lost; the parse then runs on in its own code."""
    import gc

    def slow_callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _busy(0.3)

    def parse() -> int:
        gc.callbacks.append(slow_callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(slow_callback)
        return _busy(3.0)

    started = time.monotonic()
    with ParseDeadline(0.1) as deadline, pytest.raises(ParseTimedOut):
        deadline.run("doc.md", parse)
    assert time.monotonic() - started < 2.0


def test_a_stop_is_not_taken_for_a_failure_of_the_document() -> None:
    """A parse turns any Exception into a skip reason (`workers.load`: 'failed to parse: …'),
    and a daemon's stop is an Exception (`_Stopping`). Raised as such in the parse it was caught
    there: the document was recorded as skipped ('failed to parse: _Stopping') and its indexed
    version deleted, and the run went on. The parse now ends with a BaseException, and `run`
    raises the stop in its place."""
    stop = threading.Event()
    stop.set()

    def interrupt() -> None:
        if stop.is_set():
            raise _Stopping("the daemon stops")

    def parse() -> str:
        try:
            _busy(10)
        except Exception as exc:  # as workers.load does
            return f"failed to parse: {type(exc).__name__}"
        return "parsed"

    started = time.monotonic()
    with ParseDeadline(120, interrupt) as deadline, pytest.raises(_Stopping, match="daemon stops"):
        deadline.run("long.md", parse)
    assert time.monotonic() - started < 5


def test_a_stop_during_a_parse_in_this_process_keeps_the_indexed_version(tmp_path: Path) -> None:
    """The same through a run: the document being parsed when the daemon stops keeps the
    version the index holds, and is not recorded as skipped. The stop is asked for at the
    watchdog's second look (POOL_WAIT_SLICE_S into the parse, which takes about 2 s: the same
    margin as the deadline tests above), once the file has been read."""
    root = tmp_path / "lib"
    write(root, "slow.md", "# Slow\n\nThe version indexed before.\n")
    store, lock = open_for_writing(tmp_path / "index.db")
    looks = 0

    def interrupt() -> None:
        nonlocal looks
        looks += 1
        if looks > 1:
            raise _Stopping

    try:
        Indexer(root, store).run()
        write(root, "slow.md", _slow_document())
        with pytest.raises(_Stopping):
            Indexer(root, store, interrupt=interrupt).run()
        paths, skipped = set(store.document_paths()), store.skipped()
    finally:
        store.close()
        lock.release()
    assert paths == {"slow.md"} and skipped == [], skipped

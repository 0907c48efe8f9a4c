"""Watching a library: watchdog events become dirty library-relative paths, coalesced into batches.

Watching is level-triggered: an event only says "look at this path again". The daemon's reconcile
step decides what changed by stat and content hash, so lost, doubled or reordered events cost at
most some extra work, never a wrong index.
"""

from __future__ import annotations

import array
import asyncio
import ctypes
import errno
import fcntl
import logging
import os
import termios
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserverVFS

from markindex_core.config import DAEMON_POLL_INTERVAL_S, IGNORE_FILE_NAME
from markindex_core.index.scan import is_markdown

log = logging.getLogger("markindex.watch")

# Folder events this close together may have been read from one inotify buffer, after the
# folders changed again (see `LibraryEvents._misrecorded`).
RACE_WINDOW_S = 1.0

# An inotify event in the kernel's queue is a 16-byte header and its name padded to 16 bytes:
# 32 bytes for a short name. The queue's size in bytes, divided by this, is about its events.
INOTIFY_EVENT_BYTES = 32

# Opened and dir-modified events carry nothing reconcile needs. Attribute events do: a chmod
# that makes a file or folder readable changes neither size nor mtime, and nothing else says so.
EVENT_TYPES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    DirAttribEvent,
]


@dataclass
class Batch:
    """Work for one reconcile: dirty paths, and whether the ignore rules or everything need a look."""

    paths: set[str] = field(default_factory=set)
    rules_changed: bool = False
    full: bool = False
    sweep: bool = False  # the full look is the periodic one, not asked for by an event

    def __bool__(self) -> bool:
        return bool(self.paths or self.rules_changed or self.full)

    def merge(self, other: Batch) -> None:
        self.paths |= other.paths
        self.rules_changed |= other.rules_changed
        self.full |= other.full
        self.sweep |= other.sweep


def minimal_paths(paths: Iterable[str]) -> list[str]:
    """Drop paths whose ancestor folder is also dirty: reconciling the folder covers them."""
    given = set(paths)
    out = []
    for p in sorted(given):
        parts = p.split("/")
        if not any("/".join(parts[:i]) in given for i in range(1, len(parts))):
            out.append(p)
    return out


class Coalescer:
    """Collects dirty paths from any thread; hands them out after a quiet window, or a maximum wait.

    A quiet window alone could starve under a steady stream of events (a long `git checkout`),
    so a batch is also flushed `max_wait_s` after its first event.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        quiet_s: float,
        max_wait_s: float,
        settled_quiet_s: float | None = None,
    ) -> None:
        self._loop = loop
        self._quiet = quiet_s
        self._max_wait = max_wait_s
        self._settled_quiet = min(
            quiet_s, settled_quiet_s if settled_quiet_s is not None else quiet_s
        )
        self._settled = False  # the latest event finished a write (close, or rename into place)
        self._lock = threading.Lock()
        self._batch = Batch()
        self._signalled = False
        self._wake = asyncio.Event()
        self.last_event_at = 0.0  # wall clock of the last event seen on the loop

    # ----- any thread -------------------------------------------------------------------------
    def add(self, rel: str, *, settled: bool = False) -> None:
        """Mark `rel` dirty; `settled` when the event ends a write, so a shorter pause suffices."""
        with self._lock:
            self._batch.paths.add(rel)
            self._settled = settled
            self._signal_locked()

    def rules_changed(self) -> None:
        with self._lock:
            self._batch.rules_changed = True
            self._settled = False
            self._signal_locked()

    def request_full(self) -> None:
        with self._lock:
            self._batch.full = True
            self._signal_locked()

    def request_sweep(self) -> None:
        """A full look that no event asked for (see `Daemon._sweep_when_idle`)."""
        with self._lock:
            self._batch.full = self._batch.sweep = True
            self._signal_locked()

    def put_back(self, batch: Batch) -> None:
        """Return a batch whose reconcile failed, to be retried with whatever came since."""
        with self._lock:
            self._batch.merge(batch)
            self._signal_locked()

    def _signal_locked(self) -> None:
        # One pending wake-up at a time: a burst of 10,000 events costs the loop a few callbacks.
        if not self._signalled:
            self._signalled = True
            self._loop.call_soon_threadsafe(self._on_signal)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._batch.paths) + int(self._batch.rules_changed or self._batch.full)

    def unreconciled(self) -> tuple[int, bool, bool]:
        """What is waiting: the number of dirty paths, whether the ignore rules changed, and
        whether a full reconcile was asked for (not the periodic sweep, which looks without being
        asked)."""
        with self._lock:
            b = self._batch
            return len(b.paths), b.rules_changed, b.full and not b.sweep

    # ----- event loop -------------------------------------------------------------------------
    def _on_signal(self) -> None:
        with self._lock:
            self._signalled = False
            b = self._batch
            event = bool(b.paths or b.rules_changed or (b.full and not b.sweep))
        if event:  # the periodic sweep is not a file event
            self.last_event_at = time.time()
        self._wake.set()

    def _window(self) -> float:
        with self._lock:
            return self._settled_quiet if self._settled else self._quiet

    def _take(self) -> Batch:
        with self._lock:
            batch, self._batch = self._batch, Batch()
            return batch

    def discard(self) -> None:
        """Forget pending work (a full reconcile is about to cover it)."""
        self._take()

    async def next_batch(self) -> Batch:
        """Wait for work, then for a pause in events (at most `max_wait_s`), and take the batch."""
        while not self.pending:
            self._wake.clear()
            if self.pending:
                break
            await self._wake.wait()
        with self._lock:
            urgent = self._batch.full and not self._batch.paths
        if not urgent:
            deadline = self._loop.time() + self._max_wait
            while (left := min(self._window(), deadline - self._loop.time())) > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), left)
                except TimeoutError:
                    break
        return self._take()


class LibraryEvents(FileSystemEventHandler):
    """Runs on watchdog's thread: turns events into library-relative dirty paths for a Coalescer.

    Dot-directories, dot-files (editor temp files) and non-Markdown files never reach the
    coalescer; `.gitignore` and `.markindexignore` changes flag the rules instead. The folder
    holding the index (`index_dir`) is modified by every write of the index: those events are
    dropped, but Markdown files in that folder are watched like any other (the folder may be the
    library's root or a folder of documents, and holds nothing of the library when it is above).
    """

    def __init__(self, root: Path, sink: Coalescer, *, index_dir: Path | None = None) -> None:
        self.root = str(root)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self.sink = sink
        self._index_dir = None if index_dir is None else str(index_dir).rstrip(os.sep)
        # The library folder itself was deleted or moved: inotify's watch on it has ended.
        self.root_gone = False
        # Why the watcher must start again (said in the log), or "": a folder inotify could not
        # watch (unreadable) was made readable (see `_probe_watches`), or watchdog may have
        # recorded a folder move wrong (see `_misrecorded`).
        self.rewatch = ""
        # Just now, oldest first, each path -> (a path or "", monotonic time): folder moves
        # (src -> dest), folders that appeared (made, or moved there), and those of them moved
        # away again (src -> dest).
        self._moved: dict[str, tuple[str, float]] = {}
        self._made: dict[str, tuple[str, float]] = {}
        self._vacated: dict[str, tuple[str, float]] = {}

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            if (
                isinstance(event, DirModifiedEvent)
                and os.fsdecode(event.src_path).rstrip(os.sep) == self._index_dir
            ):
                return  # the index's own files came and went: nothing of the library changed
            if (
                isinstance(event, DirDeletedEvent | DirMovedEvent)
                and os.fsdecode(event.src_path).rstrip(os.sep) == self.root
            ):
                self.root_gone = True
            if isinstance(event, DirAttribEvent) and refused_watch(os.fsdecode(event.src_path)):
                folder = os.fsdecode(event.src_path)
                self.rewatch = f"{folder} was made readable: watching it from now on"
            if why := self._misrecorded(event):
                self.rewatch = why
            dest = getattr(event, "dest_path", "")
            # A closed file, or one renamed into place, is complete: no need to wait long.
            closed = isinstance(event, FileClosedEvent)
            self._mark(event.src_path, event.is_directory, settled=closed)
            if dest:
                self._mark(dest, event.is_directory, settled=not event.is_directory)
        except Exception:  # never let a surprise kill watchdog's thread
            log.exception("could not handle %r", event)

    def _misrecorded(self, event: FileSystemEvent) -> str:
        """Why the watcher must start again after this event, or "": watchdog keeps a record
        of which folder each watch is on, and two quick changes make it wrong for good.

        - A swap: `mv --exchange A B` (renameat2 RENAME_EXCHANGE) comes as two moves, A to B
          then B to A. watchdog moves its record of A's watches onto B's path, then everything
          under B's path (A's watches among them) back onto A's: each folder's later events
          carry the other's name, and deleting one kills watchdog's event thread (a KeyError
          in its records). A plain move there and back looks the same.
        - A folder that appeared (made, or moved there), moved away, and whose name was taken
          again (`mkdir A; mv A B; mkdir A`, then maybe `rmdir A` or `mv A C`) before watchdog
          read the first event: it watches whatever is at A then, the second A, for the first;
          the move carries that record to B, and the folder at B has no watch at all (and once
          the second A is gone, no record either). By the time this handler sees the move, A
          may be gone again: the event that took the name back is what tells.

        A look-alike costs a restart of the watcher, and a full reconcile."""
        now = time.monotonic()
        for seen in (self._moved, self._made, self._vacated):
            _forget_old(seen, now)
        why = self._name_taken_again(event)
        if isinstance(event, DirMovedEvent):
            why = self._folder_moved(event, now) or why
        if isinstance(event, DirCreatedEvent | DirMovedEvent):
            _note(self._made, _arrived(event), "", now)
        return why

    def _name_taken_again(self, event: FileSystemEvent) -> str:
        """Why the watcher must start again when this event puts something at the path of a
        folder that appeared and moved away just now (see `_misrecorded`), else ""."""
        if not isinstance(
            event, FileCreatedEvent | DirCreatedEvent | FileMovedEvent | DirMovedEvent
        ):
            return ""
        path = _arrived(event)
        left = self._vacated.pop(path, None)
        if left is None:
            return ""
        return (
            f"a folder moved from {path} to {left[0]} just after it appeared there, and {path}"
            " was taken again: watching the library again"
        )

    def _folder_moved(self, event: DirMovedEvent, now: float) -> str:
        """Note a folder move; why the watcher must start again when it undoes one just seen
        (a swap, see `_misrecorded`), else ""."""
        src, dest = os.fsdecode(event.src_path), os.fsdecode(event.dest_path)
        undone = self._moved.pop(dest, None)
        if undone is not None and undone[0] == src:
            return f"{dest} and {src} swapped places: watching the library again"
        _note(self._moved, src, dest, now)
        if self._made.pop(src, None) is not None:
            _note(self._vacated, src, dest, now)
        return ""

    def _mark(self, raw: str | bytes, is_dir: bool, *, settled: bool = False) -> None:
        path = os.fsdecode(raw)
        if not path.startswith(self._prefix):
            if path.rstrip(os.sep) == self.root and is_dir:
                self.sink.request_full()  # the library folder itself moved or vanished
            return
        rel = path[len(self._prefix) :].replace(os.sep, "/")
        parts = rel.split("/")
        name = parts[-1]
        if any(p.startswith(".") for p in parts[:-1]):
            return
        if name == ".gitignore" or (rel == IGNORE_FILE_NAME):
            self.sink.rules_changed()
            return
        if name.startswith("."):
            return
        if is_dir or is_markdown(name):
            self.sink.add(rel, settled=settled)


_probe_lock = threading.Lock()
_limit_hits = 0  # inotify_add_watch calls refused for the watch limit, in this process
_refused: set[str] = set()  # folders inotify may not read (EACCES), until one watch of it works
_probed = False


def watch_limit_hits() -> int:
    """How many folders inotify refused to watch for the user's watch limit (ENOSPC) so far."""
    with _probe_lock:
        return _limit_hits


def refused_watch(path: str) -> bool:
    """inotify could not watch the folder `path` (absolute), or one below it, when last asked:
    unreadable. A folder made inside an unreadable one cannot be watched either, and the chmod
    that lets it be watched names only the outer folder."""
    below = path.rstrip(os.sep) + os.sep
    with _probe_lock:
        return any(p == path or p.startswith(below) for p in _refused)


def _probe_watches() -> None:
    """Note the folders inotify refuses to watch: past the watch limit, or unreadable.

    watchdog 7 raises such an error only for the watched folder itself: a sub-folder it cannot
    watch, at start or created later, is skipped without a word (`InotifyWatchGroup.
    _add_callback`), and one made readable later is never watched, so changes in it would never
    reach the index. Its `inotify_add_watch` is wrapped to count refusals for the limit (the
    daemon then watches by polling and says why) and to remember unreadable folders (a chmod
    making one readable restarts the watcher, see `LibraryEvents.rewatch`).
    """
    global _probed
    with _probe_lock:
        if _probed:
            return
        _probed = True
    try:
        from watchdog.observers import inotify_c
    except Exception:  # no inotify on this platform (or no libc with it)
        return
    add = inotify_c.inotify_add_watch

    def add_watch(fd: int, path: bytes, mask: int) -> Any:  # watchdog's WatchDescriptor
        global _limit_hits
        wd = add(fd, path, mask)
        # The call's errno, kept by ctypes for watchdog's own check right after this one.
        err = ctypes.get_errno() if wd == -1 else 0
        with _probe_lock:
            if err == errno.ENOSPC:
                _limit_hits += 1
            elif err == errno.EACCES:
                _refused.add(os.fsdecode(path))
            elif wd != -1:
                _refused.discard(os.fsdecode(path))
        return wd

    inotify_c.inotify_add_watch = add_watch
    _survive_swaps()
    _note_polls()
    logging.getLogger("watchdog.observers.inotify").addFilter(_stop_race_at_debug)


# What watchdog logs at ERROR when an event arrives while its reader is being stopped (its own
# race, on purpose since its PR #963): nothing is lost that a stopping watcher needed. A stop of
# the daemon printed it in about one run of five, an error line where there was none.
_STOP_RACE = "InotifyEmitter.queue_events() called when the thread is inactive"


def _stop_race_at_debug(record: logging.LogRecord) -> bool:
    """watchdog's stop race (see `_STOP_RACE`) logged at debug level; every other line as is.

    Relabelled only, the record still reached the handlers: the stderr handler of every
    command takes all levels (its loggers choose), so the stop printed it all the same, as a
    DEBUG line. It goes on only where its logger shows debug lines, as `logger.debug` would."""
    if record.levelno > logging.DEBUG and record.getMessage() == _STOP_RACE:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
    return True


def _arrived(event: FileSystemEvent) -> str:
    """The path where this created or moved file or folder is now."""
    moved = isinstance(event, FileMovedEvent | DirMovedEvent)
    return os.fsdecode(event.dest_path if moved else event.src_path)


def _forget_old(seen: dict[str, tuple[str, float]], now: float) -> None:
    """Drop the entries older than RACE_WINDOW_S from `seen`, kept in time order."""
    while seen and now - next(iter(seen.values()))[1] >= RACE_WINDOW_S:
        del seen[next(iter(seen))]


def _note(seen: dict[str, tuple[str, float]], key: str, value: str, now: float) -> None:
    """Note `key` last in `seen` (so it stays in time order), old entries dropped."""
    _forget_old(seen, now)
    seen.pop(key, None)
    seen[key] = (value, now)


def _survive_swaps() -> None:
    """Keep watchdog's event thread alive when its records of watched paths went wrong.

    After two folders swap places (see `LibraryEvents._misrecorded`) watchdog holds two watches under
    one path and none under the other, and forgetting the watch of a deleted folder, or stopping
    the observer, raises KeyError: on its event thread that ends every event for good, without a
    word, and at stop it leaves the index open. A record already gone is nothing to forget.
    """
    try:
        from watchdog.observers.inotify import InotifyWatchGroup
    except Exception:  # no inotify on this platform
        return
    forget = getattr(InotifyWatchGroup, "_remove_watch_internally", None)
    if forget is None:
        return

    def forget_known(self: Any, wd: Any) -> None:
        try:
            forget(self, wd)
        except KeyError:
            pass

    InotifyWatchGroup._remove_watch_internally = forget_known  # type: ignore[method-assign]


def _note_polls() -> None:
    """Let `_unread_events` tell a reader waiting for events from one with some in hand.

    watchdog's inotify reader takes up to 2048 events from the kernel at a time and hands them
    on one by one (a burst of renames: about 0.3 ms each); until it asks the kernel for more,
    the events it holds are in no queue anyone can see. It asks in `_check_inotify_fd` (a poll)
    once it has handed on all it read: while in there, it holds none.
    """
    try:
        from watchdog.observers.inotify_c import InotifyFD
    except Exception:  # no inotify on this platform
        return
    poll = InotifyFD._check_inotify_fd

    def poll_noted(self: Any) -> bool:
        self.markindex_polling = True
        try:
            return poll(self)
        finally:
            self.markindex_polling = False

    InotifyFD._check_inotify_fd = poll_noted  # type: ignore[method-assign]


def _unread_events(reader: Any) -> int:
    """About how many events watchdog's inotify reader (`InotifyFD`) has still to hand on: those
    in the kernel's queue (counted by its size), and at least one while it holds some it read
    (see `_note_polls`). Read in this order, an event passing from one to the other meanwhile
    is counted twice rather than missed."""
    if reader is None or getattr(reader, "_closed", True):
        return 0  # stopped: its descriptor may be another file's by now
    size = array.array("i", [0])
    try:
        fcntl.ioctl(reader._inotify_fd, termios.FIONREAD, size)
    except OSError:  # closed meanwhile
        return 0
    queued = -(-size[0] // INOTIFY_EVENT_BYTES)  # a part of one is one
    return queued + (0 if getattr(reader, "markindex_polling", False) else 1)


def _grouped(emitter: Any) -> int:
    """The events an inotify emitter holds back, to pair the two halves of a move (watchdog's
    `InotifyMoveEventGrouper`), before it hands them on."""
    group = getattr(emitter, "_inotify", None)
    grouper = getattr(group, "_move_event_grouper", None)
    return len(getattr(getattr(grouper, "_queue", None), "_queue", ()))


def _reader_alive(observer: BaseObserver) -> bool:
    """watchdog's inotify observer reads the kernel's events on a thread of its own (its
    `InotifyFD`), apart from the observer's and its emitters': an exception there (a KeyError in
    its records of watched paths did it) ends every event, while those two run on unharmed."""
    reader = getattr(observer, "_inotify_fd", None)
    return not isinstance(reader, threading.Thread) or reader.is_alive()


@dataclass
class WatchHandle:
    """A running observer and how it watches (`inotify`, `polling`, … and why)."""

    observer: BaseObserver
    kind: str
    notice: str = ""
    limit_hits: int = 0  # `watch_limit_hits()` when it started

    def backlog(self) -> int:
        """About how many file events the watcher has seen and not yet handed to the daemon.

        A burst (a checkout, thousands of renames) is read far slower than it is made: 10 000
        renames made in 0.3 s took watchdog 5 s to read, and until an event reaches the
        handler nothing else shows that the folder changed. The stages are read in the order
        events pass them (the kernel's queue and the reader, the emitters' move pairing, the
        observer's queue and the handler at work), so an event moving on meanwhile is counted
        twice rather than missed; only the emitter's hand-over from its pairing to the
        observer's queue (microseconds) is in neither."""
        waiting = _unread_events(getattr(self.observer, "_inotify_fd", None))
        waiting += sum(_grouped(emitter) for emitter in list(self.observer.emitters))
        return waiting + self.observer.event_queue.unfinished_tasks

    def limit_reached(self) -> bool:
        """Some folder could not be watched since it started (see `_probe_watches`)."""
        return self.kind != "polling" and watch_limit_hits() > self.limit_hits

    def healthy(self) -> bool:
        """False when the observer or one of its emitter threads died (e.g. a watch limit hit
        later), or the thread reading inotify did (see `_reader_alive`)."""
        if not self.observer.is_alive() or not _reader_alive(self.observer):
            return False
        return all(e.is_alive() for e in self.observer.emitters)

    def stop(self) -> None:
        try:
            self.observer.stop()
            self.observer.join(timeout=5)
        except RuntimeError:
            pass


LIMIT_HINT = (
    "the inotify watch limit is reached; watching by polling every {s:.0f} s instead "
    "(raise it with `sysctl fs.inotify.max_user_watches=524288`, or pass --poll)"
)


def start_watching(
    root: Path,
    handler: FileSystemEventHandler,
    *,
    poll: bool = False,
    observer_factory: Callable[[], BaseObserver] = Observer,
) -> WatchHandle:
    """Start a recursive observer on `root`; fall back to polling when inotify limits are hit."""
    # watchdog warns (harmlessly, at length) when `mkdir -p` races its recursive watches.
    warnings.filterwarnings("ignore", "Callback with id", RuntimeWarning, r"watchdog\.")
    if not poll:
        _probe_watches()
        hits = watch_limit_hits()
        observer = observer_factory()
        try:
            observer.schedule(handler, str(root), recursive=True, event_filter=EVENT_TYPES)
            observer.start()
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EMFILE, errno.ENFILE):
                raise
            why = exc.strerror or str(exc)
        else:
            handle = WatchHandle(observer, _kind(observer), limit_hits=hits)
            if not handle.limit_reached():
                return handle
            why = "some folders could not be watched"
        try:
            observer.stop()
        except RuntimeError:
            pass
        notice = LIMIT_HINT.format(s=DAEMON_POLL_INTERVAL_S) + f" [{why}]"
        log.warning(notice)
        return _start_polling(root, handler, notice)
    return _start_polling(root, handler, "")


def _stat_changed(path: str) -> os.stat_result:
    """`os.stat` with the change time in place of the mtime, for the polling observer.

    Polling compares each file's size and mtime only, so an edit that keeps both (`cp -p`,
    `touch -r`, two same-size saves within one clock tick) was no change, for good: the periodic
    sweep compares the same. Every write, chmod and utime sets the change time: a change of it
    is an event, and the daemon's content hash decides (see `Daemon._rehash_named`).
    """
    st = os.stat(path)
    return os.stat_result(
        (*st[:8], st[9], st[9]),
        {"st_atime": st.st_atime, "st_mtime": st.st_ctime, "st_ctime": st.st_ctime},
    )


def _start_polling(root: Path, handler: FileSystemEventHandler, notice: str) -> WatchHandle:
    observer = PollingObserverVFS(
        _stat_changed, os.scandir, polling_interval=DAEMON_POLL_INTERVAL_S
    )
    observer.schedule(handler, str(root), recursive=True, event_filter=EVENT_TYPES)
    observer.start()
    return WatchHandle(observer, "polling", notice)


def _kind(observer: BaseObserver) -> str:
    name = type(observer).__name__.lower()
    for kind in ("inotify", "fsevents", "kqueue", "windows", "polling"):
        if kind in name:
            return kind
    return name.removesuffix("observer") or "native"


class OverflowAlarm(logging.Handler):
    """watchdog only *logs* an inotify queue overflow; turn that log line into a full reconcile."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.on_overflow()

    def install(self) -> None:
        logging.getLogger("watchdog").addHandler(self)

    def remove(self) -> None:
        logging.getLogger("watchdog").removeHandler(self)

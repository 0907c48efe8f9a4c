"""Read and parse documents, in parse worker processes that can hang or die without stopping a run.

Reading trusts nothing about the file: it may have been swapped for a FIFO, a device or a symlink
since the scan, so it is opened without following links and without blocking, checked to be a
regular file on the opened descriptor, and read up to the size limit only.

Each worker parses one document at a time, with the next one or two queued. The document being
parsed gets a deadline, counted from when the worker said it had started (a fresh interpreter
takes a moment to import); a worker that misses it is killed, the document is skipped as timed out
and the queued ones go to a fresh worker. A worker that dies (the OOM killer, a signal) is
replaced and the document it was parsing is tried once more, then skipped. When the run ends
or is abandoned (the consumer stops iterating), every worker is stopped and reaped.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import importlib
import io
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Protocol

from markindex_core.config import (
    POOL_WAIT_SLICE_S,
    WORKER_DEPTH,
    WORKER_NICE,
    WORKER_START_S,
    WORKER_STOP_GRACE_S,
    TreeParams,
)
from markindex_core.index.deadline import timed_out
from markindex_core.index.reading import Unreadable, read_regular
from markindex_core.model import DocumentRows, ParsedDocument, SkippedFile

_PR_SET_PDEATHSIG = 1
# Each message but a worker's first (see `_send_plain`): its length; the number of out-of-band
# buffers and their sizes; the buffers; a pickle (protocol 5). Large bytes (a single-line
# document's one line block and its terms) travel as such buffers: the sender never copies them
# into a pickle (it was ~2x a big file's size), and the receiver reads each into its value.
_HEADER = struct.Struct("!Q")
_COUNT = struct.Struct("!I")
_SIZE = struct.Struct("!Q")
OUT_OF_BAND_BYTES = 1 << 16  # bytes values at least this long are sent as buffers
_SEND_WHOLE_BYTES = 1 << 16  # a message shorter than this is sent in one piece (one syscall)
STREAM_PICKLE_BYTES = 4_000_000  # a document this large is pickled straight into the socket
_RECV_BYTES = 1 << 20  # what the indexing process reads from a worker at once, at most


def _code_token() -> str:
    """What the parsing code this process imported looks like on disk (each module's size and
    mtime): a worker started after markindex was upgraded in place runs other code than the
    process that reads its results, and must not be trusted to speak the same protocol."""
    package = Path(__file__).resolve().parents[1]
    modules = ("model.py", "config.py", "index/*.py", "text/*.py")
    files = sorted(f for pattern in modules for f in package.glob(pattern))
    stats = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        stats.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.blake2b(";".join(stats).encode(), digest_size=8).hexdigest()


CODE_TOKEN = _code_token()  # taken at import: the code this process runs


class WorkersUnavailable(Exception):
    """Parse workers cannot serve the rest of this run; the message says why. Every document
    not yet answered is still to do; a document that hung or killed a worker has been answered
    (skipped) before this is raised, so it is never parsed outside a worker."""


class CodeChanged(WorkersUnavailable):
    """A parse worker runs other markindex code than this process (upgraded while running)."""


@dataclass(frozen=True)
class _Ready:
    """A worker's first message: its imports are done, and which code it runs."""

    code_token: str


@dataclass(frozen=True)
class Job:
    root: str
    rel: str
    params: TreeParams


@dataclass(frozen=True)
class Vanished:
    rel: str
    reason: str


Result = ParsedDocument | DocumentRows | SkippedFile | Vanished


def load(job: Job) -> Result:
    """Read, hash, parse one file. Never raises: problems become skip reasons."""
    # Imported here, not at the top: the indexing process imports this module for the pool
    # and parses in-process only for small runs, so a full build never loads the parse stack
    # (markdown-it, the tree, description and passage code: ~60 ms) there.
    from markindex_core.index.document import build_taken

    try:
        data, st = read_regular(os.path.join(job.root, job.rel))
    except FileNotFoundError:
        return Vanished(job.rel, "vanished while indexing")
    except Unreadable as exc:
        return SkippedFile(job.rel, str(exc))
    except OSError as exc:
        return SkippedFile(job.rel, f"cannot read: {exc.strerror or exc}")
    box = [data]  # taken by the parse, which frees the bytes once decoded
    del data
    try:
        return build_taken(job.rel, box, st.st_mtime_ns, job.params)
    except RecursionError:
        return SkippedFile(job.rel, "structure nested too deeply to parse")
    except Exception as exc:  # one bad file must never stop a run
        return SkippedFile(job.rel, f"failed to parse: {type(exc).__name__}: {exc}")


def _worker_init() -> None:
    """Parse workers die with their parent and leave Ctrl-C to it (no orphans, no tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
    # The indexing process reads results, hands out documents and writes: when it waits for a
    # core, the workers' queues run dry. Workers yield to it (a full build is ~4% faster).
    if WORKER_NICE and hasattr(os, "nice"):
        try:
            os.nice(WORKER_NICE)
        except OSError:
            pass


def pack(result: Result) -> Result:
    """What a worker sends: a parsed document as the rows the store binds (`DocumentRows`:
    nothing for the indexing process to rebuild), anything else as is."""
    return result.rows() if isinstance(result, ParsedDocument) else result


def _send(sock: socket.socket, obj: object) -> None:
    """Send `obj` framed as `_HEADER` describes; large parts are sent as they are, not joined."""
    obj = _detach_large(obj)
    if isinstance(obj, DocumentRows) and obj.size >= STREAM_PICKLE_BYTES:
        _send_streamed(sock, obj)
        return
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, 5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    head = _head(views)
    total = len(head) + len(data) + sum(v.nbytes for v in views)
    if total < _SEND_WHOLE_BYTES:
        sock.sendall(b"".join([_HEADER.pack(total), head, *views, data]))
        return
    sock.sendall(_HEADER.pack(total) + head)
    parts: list[bytes | memoryview] = [*views, data]
    for part in parts:
        sock.sendall(part)


def _send_plain(sock: socket.socket, obj: object) -> None:
    """Send `obj` as every markindex has sent its first message, its length and a pickle: a
    worker started after an upgrade in place and the process reading it (or the reverse) read
    each other's `_Ready`, and learn that they run other code (see `CodeChanged`)."""
    data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _send_streamed(sock: socket.socket, obj: object) -> None:
    """`_send` without the pickle ever whole in memory (a big document's thousands of small
    values: ~2x its size): pickled once to measure it, then again into the socket, frame by
    frame (the pickler writes each 64 KB frame as it is done)."""
    buffers: list[pickle.PickleBuffer] = []
    counter = _Counter()
    pickle.dump(obj, counter, 5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    head = _head(views)
    sock.sendall(_HEADER.pack(len(head) + counter.size + sum(v.nbytes for v in views)) + head)
    for view in views:
        sock.sendall(view)
    pickle.dump(obj, _SocketWriter(sock), 5, buffer_callback=lambda _: None)


def _head(views: list[memoryview]) -> bytes:
    return _COUNT.pack(len(views)) + b"".join(_SIZE.pack(v.nbytes) for v in views)


class _Counter:
    """A file that counts what is written to it."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)


class _SocketWriter:
    """A file that sends what is written to it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def write(self, data: bytes) -> int:
        self.sock.sendall(data)
        return len(data)


def _detach_large(obj: object) -> object:
    """A document's rows with their large bytes values marked to travel out of band."""
    if not isinstance(obj, DocumentRows):
        return obj
    return obj._replace(
        line_blocks=_marked(obj.line_blocks), passage_terms=_marked(obj.passage_terms)
    )


def _marked(values: Sequence[bytes]) -> Any:
    """`values` with a PickleBuffer in place of each large one (they arrive as bytes again)."""
    if max(map(len, values), default=0) < OUT_OF_BAND_BYTES:
        return values
    marked = [pickle.PickleBuffer(v) if len(v) >= OUT_OF_BAND_BYTES else v for v in values]
    return tuple(marked) if isinstance(values, tuple) else marked  # arrives as it was


class _Reader(Protocol):
    def read(self, n: int, /) -> bytes: ...


def _decode(message: _Reader) -> Any:
    """The object of a message (after its length), read from `message` as it is decoded."""
    (count,) = _COUNT.unpack(message.read(_COUNT.size))
    sizes = [_SIZE.unpack(message.read(_SIZE.size))[0] for _ in range(count)]
    buffers = [message.read(size) for size in sizes]
    return pickle.load(message, buffers=buffers)  # type: ignore[arg-type]


class _Inbox:
    """What a worker has sent and was not yet decoded, in the chunks it arrived in. A message is
    decoded from them as they are consumed, each chunk freed once read: a big document's message
    is never held whole beside the objects made from it (~2x its size)."""

    def __init__(self, data: bytes = b"") -> None:
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # into the first chunk
        self.size = 0
        if data:
            self.add(data)

    def add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self.size += len(chunk)

    def head(self, n: int) -> bytes:
        """The first `n` bytes (fewer if there are not as many), left in place."""
        out = b""
        offset = self._offset
        for chunk in self._chunks:
            out += chunk[offset : offset + n - len(out)]
            offset = 0
            if len(out) >= n:
                break
        return out

    def read(self, n: int) -> bytes:
        """The first `n` bytes (fewer if there are not as many), consumed. A large read is
        copied out chunk by chunk, each chunk freed once copied: joined at the end, the chunks
        of a big document's line block or terms were held beside their copy (~2x its size)."""
        if n > _RECV_BYTES:  # it spans several chunks
            out = io.BytesIO()
            for part in self._take(n):
                out.write(part)
            return out.getvalue()  # the buffer itself, not a copy
        parts = list(self._take(n))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _take(self, n: int) -> Iterator[bytes]:
        """The first `n` bytes, in the parts of the chunks that hold them, consumed."""
        while n > 0 and self._chunks:
            chunk = self._chunks[0]
            part = chunk[self._offset : self._offset + n]
            n -= len(part)
            self.size -= len(part)
            self._offset += len(part)
            if self._offset >= len(chunk):
                self._chunks.popleft()
                self._offset = 0
            del chunk
            yield part


class _Message:
    """The next `size` bytes of an inbox as a file to unpickle from, never reading past them."""

    def __init__(self, inbox: _Inbox, size: int) -> None:
        self.inbox = inbox
        self.left = size

    def read(self, n: int = -1) -> bytes:
        data = self.inbox.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(data)
        return data

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readline(self) -> bytes:  # the pickle protocol's text opcodes only: never sent
        raise pickle.UnpicklingError("readline is not supported")


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def serve_fd(fd: int) -> None:
    """Worker main loop on the inherited socket `fd`: one job in, one result out, until the
    parent closes its end."""
    _worker_init()
    importlib.import_module("markindex_core.index.document")  # before Ready: the deadline
    # What the imports made lives as long as the worker: frozen, the cyclic collector no longer
    # walks it in every older-generation collection that parsing triggers.
    gc.freeze()
    sock = socket.socket(fileno=fd)
    try:
        _send_plain(sock, _Ready(CODE_TOKEN))
    except OSError:
        return
    while True:
        try:
            (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size))
            job = _decode(io.BytesIO(_recv_exactly(sock, size)))
        except (EOFError, OSError):
            break
        if job is None:
            break
        try:
            _send(sock, pack(load(job)))
        except OSError:  # the parent gave up on this worker
            break
    sock.close()


@dataclass
class _Worker:
    """One worker process and the documents handed to it, oldest first (the one it is parsing).

    The parent reads answers without ever blocking on a half message: a worker stopped or stuck
    in the middle of sending must not stall the run.
    """

    process: subprocess.Popen[bytes]
    sock: socket.socket
    jobs: deque[Job] = field(default_factory=deque)
    deadline: float = 0.0  # for the oldest job
    inbox: _Inbox = field(default_factory=_Inbox)
    ready: bool = False  # it has started: the oldest job's deadline counts from then

    def read_available(self) -> list[Result]:
        """The results that have arrived whole. EOFError when the worker is gone."""
        while True:
            try:
                chunk = self.sock.recv(_RECV_BYTES, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                raise EOFError from exc
            if not chunk:
                raise EOFError
            self.inbox.add(chunk)
        results: list[Result] = []
        while self.inbox.size >= _HEADER.size:
            (size,) = _HEADER.unpack(self.inbox.head(_HEADER.size))
            if self.inbox.size < _HEADER.size + size:
                break
            self.inbox.read(_HEADER.size)
            message = _Message(self.inbox, size)
            result = _decode(message) if self.ready else pickle.loads(message.read())
            message.read()  # nothing is left of it, unless it was sent wrong
            if isinstance(result, _Ready):
                if result.code_token != CODE_TOKEN:
                    raise CodeChanged(
                        "the installed markindex changed since this process started"
                        " (upgraded while running?): restart it"
                    )
                self.ready = True
            else:
                results.append(result)
        return results


class WorkerPool:
    """Up to `size` parse workers. Each holds `depth` documents, so it parses the next one while
    the indexer writes; the document it is parsing has a deadline."""

    def __init__(
        self,
        size: int,
        timeout_s: float,
        depth: int = WORKER_DEPTH,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self.size = size
        self.timeout_s = timeout_s
        self.depth = depth
        # Called at least every POOL_WAIT_SLICE_S while waiting for results; it may raise to
        # end the run (a daemon stopping must not wait for a long parse).
        self.interrupt = interrupt
        self.workers: list[_Worker] = []
        self.tries: dict[str, int] = {}

    def start(self) -> None:
        """Start the workers now, so a failure to start shows before any job is handed out."""
        while len(self.workers) < self.size:
            self.workers.append(_start_worker())

    def results(self, jobs: list[Job]) -> Iterator[Result]:
        """Every job's result, in completion order; stops all workers however the loop ends."""
        pending = deque(jobs)
        try:
            while pending or any(w.jobs for w in self.workers):
                self._assign(pending)
                yield from self._collect(pending)
        finally:
            self.stop()

    def _assign(self, pending: deque[Job]) -> None:
        for i in range(len(self.workers)):
            while pending and len(self.workers[i].jobs) < self.depth:
                worker = self.workers[i]
                job = pending.popleft()
                try:
                    _send(worker.sock, job)
                except OSError:  # it died: its jobs go back, a fresh worker takes them
                    pending.appendleft(job)
                    self._replace(i, pending)
                    continue
                if not worker.jobs:  # a worker still starting gets time to start first
                    start = 0.0 if worker.ready else WORKER_START_S
                    worker.deadline = time.monotonic() + start + self.timeout_s
                worker.jobs.append(job)

    def _collect(self, pending: deque[Job]) -> Iterator[Result]:
        busy = [w for w in self.workers if w.jobs]
        if not busy:
            return
        wait_s = max(0.0, min(w.deadline for w in busy) - time.monotonic())
        if self.interrupt is not None:
            wait_s = min(wait_s, POOL_WAIT_SLICE_S)
        ready = wait([w.sock for w in busy], timeout=wait_s)
        if self.interrupt is not None:
            self.interrupt()
        for i, worker in enumerate(self.workers):
            if worker.sock in ready:
                yield from self._receive(i, pending)
            worker = self.workers[i]
            if worker.jobs and time.monotonic() >= worker.deadline:
                job = worker.jobs.popleft()
                yield SkippedFile(job.rel, timed_out(self.timeout_s))
                self._replace(i, pending)

    def _receive(self, i: int, pending: deque[Job]) -> Iterator[Result]:
        worker = self.workers[i]
        starting = not worker.ready
        try:
            results = worker.read_available()
        except EOFError:  # the worker died: out of memory, or killed
            results, died = [], True
        else:
            died = False
        if starting and worker.ready:  # the time it took to start is not parsing time
            worker.deadline = time.monotonic() + self.timeout_s
        for result in results:
            worker.jobs.popleft()
            worker.deadline = time.monotonic() + self.timeout_s
            yield result
        if died and worker.jobs:
            job = worker.jobs.popleft()
            tries = self.tries[job.rel] = self.tries.get(job.rel, 0) + 1
            if tries >= 2:
                yield SkippedFile(job.rel, "the parse worker died twice on it (out of memory?)")
            self._replace(i, pending)
            if tries < 2:
                pending.appendleft(job)
        elif died:
            self._replace(i, pending)

    def _replace(self, i: int, pending: deque[Job]) -> None:
        """Kill worker i (its queued jobs go back to `pending`) and start a fresh one."""
        worker = self.workers[i]
        pending.extendleft(reversed(worker.jobs))
        self._kill(worker)
        self.workers[i] = _start_worker()

    def _kill(self, worker: _Worker) -> None:
        worker.jobs.clear()
        worker.sock.close()
        if worker.process.poll() is None:
            worker.process.kill()
        _reap(worker.process, WORKER_STOP_GRACE_S)

    def stop(self) -> None:
        """Ask idle workers to exit, kill busy ones, and reap them all: nothing is left behind."""
        for worker in self.workers:
            if not worker.jobs:
                try:
                    _send(worker.sock, None)
                except OSError:
                    pass
        deadline = time.monotonic() + WORKER_STOP_GRACE_S
        for worker in self.workers:
            if not worker.jobs:
                _reap(worker.process, max(0.0, deadline - time.monotonic()))
            self._kill(worker)
        self.workers = []


def _start_worker() -> _Worker:
    """`_spawn`, or WorkersUnavailable saying why not (no memory or process slot left, no
    interpreter to run: an embedded Python)."""
    try:
        return _spawn()
    except OSError as exc:
        raise WorkersUnavailable(f"cannot start a parse worker: {exc.strerror or exc}") from exc


def _spawn() -> _Worker:
    """A fresh interpreter running `serve_fd` on one end of a socket pair.

    A new process, not a fork: it inherits no threads' locks, no open database or lock files, and
    needs no fork server or resource tracker beside it (two processes and ~30 MB fewer). It has a
    process group of its own: a terminal's Ctrl-C goes to us, and we stop the workers.
    """
    parent, child = socket.socketpair()
    try:
        fd = child.fileno()
        process = subprocess.Popen(
            _command(fd),
            pass_fds=(fd,),
            process_group=0,  # a terminal's Ctrl-C reaches us, not workers still importing
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=_stderr(),
        )
    except BaseException:
        parent.close()
        raise
    finally:
        child.close()
    return _Worker(process, parent)


def _command(fd: int) -> list[str]:
    """This interpreter, importing from this process's search path (as multiprocessing's spawn
    does), so a worker loads the same markindex and dependencies whatever the working folder."""
    if not sys.executable:
        raise OSError("no Python executable to start parse workers with")
    code = (
        "import sys; sys.path[:0] = sys.argv[2:]; "
        "from markindex_core.index.workers import serve_fd; serve_fd(int(sys.argv[1]))"
    )
    return [sys.executable, "-P", "-c", code, str(fd), *sys.path]


def _stderr() -> int | None:
    """Workers share our stderr when it is the real one, else stay silent (a terminal UI's
    screen must not get a dying worker's traceback)."""
    try:
        return None if sys.stderr is not None and sys.stderr.fileno() == 2 else subprocess.DEVNULL
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


def _reap(process: subprocess.Popen[bytes], timeout: float) -> None:
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:  # still running after SIGKILL (stuck in the kernel)
        pass

"""The store writes of one indexing run, in order, on a thread of their own (or inline).

Why a thread: most of a full build's time in the indexing process is SQLite tokenizing and
committing, and APSW releases the GIL while SQLite works. Written on the thread that also reads
the parse workers' results, every commit stops the reading, the workers' sends back up and they
sit idle. On a thread of its own the writer overlaps with the reading and the parsing.

The connection is used by that thread alone while the run lasts (APSW raises when two threads use
one connection at once), so every store call of a run goes through `submit`, and calls run in the
order they were submitted: a document deleted and then written again stays written.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from functools import partial
from types import TracebackType
from typing import Any

from markindex_core.config import WRITER_QUEUE_DEPTH

_POLL_S = 0.5  # how often a blocked `submit` looks whether the writer has failed


class RunWriter:
    """Runs submitted store calls one after another: on a thread when `threaded`, else inline.

    The first error of a call is raised by the next `submit` and by leaving the `with` block;
    the calls after it are dropped (their documents are written by the next run). Leaving the
    block on an error (Ctrl-C) drops what is queued and waits for the call being made, which is
    one transaction: the index stays whole.
    """

    def __init__(self, *, threaded: bool, depth: int = WRITER_QUEUE_DEPTH) -> None:
        self.threaded = threaded
        self._tasks: queue.Queue[Callable[[], object] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._abandoned = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="markindex-writer", daemon=True)

    def __enter__(self) -> RunWriter:
        if self.threaded:
            self._thread.start()
        return self

    def submit(self, call: Callable[..., object], *args: Any) -> None:
        """Run `call(*args)` after every call submitted before it."""
        self.raise_error()
        task = partial(call, *args)
        if not self.threaded:
            task()
            return
        while True:
            try:
                self._tasks.put(task, timeout=_POLL_S)
                return
            except queue.Full:
                self.raise_error()

    def raise_error(self) -> None:
        """Raise the error a call failed with, if one did."""
        if self._error is not None:
            raise self._error

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            if self._error is not None or self._abandoned.is_set():
                continue  # drained, not run
            try:
                task()
            except BaseException as exc:
                self._error = exc

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.threaded:
            return
        if exc_type is not None:
            self._abandoned.set()
        self._tasks.put(None)  # the writer drains the queue, so this waits one call at most
        self._thread.join()
        if exc_type is None:
            self.raise_error()

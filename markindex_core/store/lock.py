"""The single-writer lock: an advisory lock file beside the index, released when the process dies."""

from __future__ import annotations

import fcntl
import os
import weakref
from pathlib import Path

from markindex_core.config import LOCK_FILE_SUFFIX
from markindex_core.errors import WriterBusy

_HELD: weakref.WeakSet[WriterLock] = weakref.WeakSet()


def _forget_in_child() -> None:
    """A forked child (a parse worker) drops its copy of every held lock.

    flock belongs to the open file, which fork shares: a worker that outlived a killed writer would
    otherwise keep the library locked. Closing the child's descriptor leaves the parent's lock be.
    """
    for lock in list(_HELD):
        if lock._fd is not None:
            os.close(lock._fd)
            lock._fd = None
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class WriterLock:
    """Exclusive, non-blocking lock; the kernel drops it if the holder is killed."""

    def __init__(self, db_path: Path) -> None:
        self.path = db_path.with_name(db_path.name + LOCK_FILE_SUFFIX)
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        _HELD.add(self)
        return True

    def acquire(self) -> None:
        if not self.try_acquire():
            raise WriterBusy(
                f"another markindex process{self._holder()} is writing {self.path.with_suffix('')}",
                "wait for it to finish, or stop the daemon that keeps this library live",
            )

    def _holder(self) -> str:
        try:
            pid = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""
        return f" (pid {pid})" if pid.isdigit() else ""

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            _HELD.discard(self)

    def is_locked_by_other(self) -> bool:
        """True when some other process holds the writer lock right now."""
        if self._fd is not None:
            return False
        if not self.try_acquire():
            return True
        self.release()
        return False

"""The single-writer lock: a lock file beside the index, released by the kernel when the holder dies.

The lock is an open-file-description lock (Linux `F_OFD_SETLK`): like `flock` it belongs to the open
file, so it is exclusive between processes and between two opens in one process, and fork shares it.
Unlike `flock` it can be *tested* without being taken (`F_OFD_GETLK`), so a status probe never holds
anything a writer could trip over. Where OFD locks don't exist, `flock` is the fallback and the probe
takes a momentary shared lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import weakref
from pathlib import Path

from markindex_core.config import LOCK_FILE_SUFFIX
from markindex_core.errors import WriterBusy

_HELD: weakref.WeakSet[WriterLock] = weakref.WeakSet()
_OFD = hasattr(fcntl, "F_OFD_SETLK") and hasattr(fcntl, "F_OFD_GETLK")
_FLOCK_STRUCT = "hhqqi4x"  # struct flock on Linux: type, whence, start, len (off_t), pid, padding


def _forget_in_child() -> None:
    """A forked child drops its copy of every held lock.

    The lock belongs to the open file, which fork shares: a worker that outlived a killed writer
    would otherwise keep the library locked. Closing the child's descriptor leaves the parent's lock be.
    """
    for lock in list(_HELD):
        if lock._fd is not None:
            os.close(lock._fd)
            lock._fd = None
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def lock_path_for(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + LOCK_FILE_SUFFIX)


def _whole_file(kind: int) -> bytes:
    return struct.pack(_FLOCK_STRUCT, kind, os.SEEK_SET, 0, 0, 0)


def _lock_exclusive(fd: int) -> bool:
    """Take the exclusive lock without waiting; False when another open file holds it."""
    try:
        if _OFD:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _whole_file(fcntl.F_WRLCK))
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):  # held by another open file
            return False
        raise
    return True


class WriterLock:
    """Exclusive, non-blocking lock; the kernel drops it if the holder is killed."""

    def __init__(self, db_path: Path) -> None:
        self.path = lock_path_for(db_path)
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock_exclusive(fd):
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:  # e.g. a full disk: don't keep the lock through a leaked descriptor
            os.close(fd)
            raise
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
        pid = _read_pid(self.path)
        return f" (pid {pid})" if pid else ""

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the open file drops the lock
            self._fd = None
            _HELD.discard(self)

    def is_locked_by_other(self) -> bool:
        """True when some other open file holds the writer lock right now (see `writer_active`)."""
        return self._fd is None and writer_active(self.path)

    def holder_pid(self) -> int | None:
        """The pid the current writer wrote into the lock file, if any."""
        return _read_pid(self.path)


def writer_active(lock_path: Path) -> bool:
    """True while a writer holds the lock at `lock_path`. Only reads: never creates or writes the
    lock file and never takes the lock, so it can't make a real writer fail with WriterBusy."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if _OFD:
            answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _whole_file(fcntl.F_WRLCK))
            kind: int = struct.unpack(_FLOCK_STRUCT, answer)[0]
            return kind != fcntl.F_UNLCK
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


def writer_lock_state(db_path: Path) -> tuple[bool, int | None]:
    """(someone holds the writer lock of index `db_path`, pid written in the lock file). Never
    takes the lock."""
    if not writer_active(lock_path_for(db_path)):
        return False, None
    return True, WriterLock(db_path).holder_pid()


def _read_pid(lock_path: Path) -> int | None:
    """The pid the writer wrote into the lock file (a FIFO there must not block the reader)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 64).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(text) if text.isdigit() else None

"""The index as files on a disk: which file a connection has open, the files SQLite keeps beside it,
and one clear error (with what to do next) for whatever the disk or the permissions refuse.

A reader compares `file_id` of the index path with the one it opened, so an index that was deleted or
replaced (`rm -rf .markindex && markindex index`, or a full rebuild swapped in) is noticed with one
`os.stat` instead of being served from the unlinked file forever.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
import resource
import stat
from pathlib import Path

import apsw

from markindex_core.config import DISK_FULL_MARGIN_BYTES, REBUILD_FILE_SUFFIX, SQLITE_SIDE_SUFFIXES
from markindex_core.errors import (
    DiskFull,
    IndexUnusable,
    MarkindexError,
    OutOfDescriptors,
    PermissionDenied,
    ReadOnlyLibrary,
    WriterBusy,
)

FileId = tuple[int, int]  # (device, inode): the identity of the file behind a path

_FULL_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_DENIED_ERRNOS = (errno.EACCES, errno.EPERM)
_DESCRIPTOR_ERRNOS = (errno.EMFILE, errno.ENFILE)

# What a damaged index file raises when read. Every text markindex stores is UTF-8 (paths and
# text are checked before they are written), so a stored value that does not decode is a damaged
# page too, one SQLite does not notice: it reads text as bytes and leaves the decoding to APSW.
DAMAGE_ERRORS: tuple[type[Exception], ...] = (
    apsw.CorruptError,
    apsw.NotADBError,
    UnicodeDecodeError,
)
_OTHER_USER = "ask its owner for access, or pass --db FILE to use an index of your own"


def file_id(path: Path) -> FileId | None:
    """The identity of the file at `path` now, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def has_moved(conn: apsw.Connection) -> bool:
    """Whether the file `conn` writes is no longer the one at its path: deleted, renamed or
    replaced since it was opened (`rm -rf .markindex` while a run writes). Such writes are lost."""
    moved = ctypes.c_int(0)
    try:
        conn.file_control("main", apsw.SQLITE_FCNTL_HAS_MOVED, ctypes.addressof(moved))
    except apsw.Error:
        return False
    return bool(moved.value)


def rebuild_path(db_path: Path) -> Path:
    """Where a full rebuild is written before it replaces `db_path`."""
    return db_path.with_name(db_path.name + REBUILD_FILE_SUFFIX)


def side_files(db_path: Path) -> list[Path]:
    """The -wal, -shm and -journal files SQLite may keep beside `db_path`."""
    return [db_path.with_name(db_path.name + suffix) for suffix in SQLITE_SIDE_SUFFIXES]


def remove_db_files(db_path: Path, *, main: bool = True) -> None:
    """Delete a database file (unless `main` is False) and the side files SQLite keeps beside it."""
    for path in ([db_path] if main else []) + side_files(db_path):
        path.unlink(missing_ok=True)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _owner(path: Path) -> str:
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "its owner"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _existing(path: Path) -> Path:
    """`path` or its nearest existing ancestor (for statvfs and permission checks)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_is_full(path: Path) -> bool:
    """True when the file system holding `path` has (almost) no room left for this user."""
    try:
        st = os.statvfs(_existing(path))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < DISK_FULL_MARGIN_BYTES


def disk_full(path: Path, errno_: int = 0) -> DiskFull:
    """No room to write the index: the disk, or (EFBIG) this process's file size limit, which
    freeing space does not lift."""
    if errno_ == errno.EFBIG:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        shown = "" if limit == resource.RLIM_INFINITY else f" of {limit:,} bytes"
        return DiskFull(
            f"the index {path} reached the file size limit{shown} of this process",
            "raise the limit (`ulimit -f unlimited` in the shell or service that starts "
            "markindex), then run the same `markindex index` command again",
        )
    return DiskFull(
        f"no space left to write the index {path}",
        "free some space on that disk (or pass --db FILE on another disk), then run the same "
        "`markindex index` command again",
    )


def no_room_to_read(path: Path) -> DiskFull:
    """A full disk met by a reader: it writes no index, but SQLite needs its small -shm file
    beside the index to read it. The writer's 'run `markindex index` again' would mislead."""
    return DiskFull(
        f"no space left on the disk of the index {path}: even reading it needs a small file"
        f" ({path.name}-shm) beside it",
        "free some space on that disk, then run the command again",
    )


def out_of_descriptors(errno_: int = 0) -> OutOfDescriptors | None:
    """Too many open files, said as such: SQLite says only "unable to open database file", which
    sends a user to the file, its folder and the disk. Without an errno, one probe tells."""
    if errno_ not in _DESCRIPTOR_ERRNOS:
        try:
            os.close(os.open(os.devnull, os.O_RDONLY))
            return None
        except OSError as exc:
            if exc.errno not in _DESCRIPTOR_ERRNOS:
                return None
            errno_ = exc.errno
    if errno_ == errno.ENFILE:
        return OutOfDescriptors(
            "the system's table of open files is full",
            "close programs that hold many files, or raise the system limit "
            "(`sysctl fs.file-max`), then run the command again",
        )
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return OutOfDescriptors(
        f"this process ran out of file descriptors (its limit is {limit} open files)",
        "raise the limit (`ulimit -n 4096` in the shell or service that starts markindex), "
        "then run the command again",
    )


def os_error(exc: OSError, path: Path) -> MarkindexError:
    """An OSError met while writing next to the index (lock file, side files) as one clear error."""
    if exc.errno in _FULL_ERRNOS:
        return disk_full(path, exc.errno)
    if exc.errno in _DESCRIPTOR_ERRNOS and (fds := out_of_descriptors(exc.errno)):
        return fds
    where = Path(exc.filename) if isinstance(exc.filename, str) else path
    if exc.errno in _DENIED_ERRNOS or exc.errno == errno.EROFS:
        return ReadOnlyLibrary(
            f"cannot write {where} ({exc.strerror or exc}): {where.parent} is read-only "
            "for this user",
            "make it writable, or pass --db FILE to keep the index elsewhere",
        )
    return MarkindexError(
        f"indexing stopped: {exc.strerror or exc} ({where})",
        "check that file and the disk, then run the same `markindex index` command again",
    )


def _unreadable(path: Path) -> PermissionDenied | None:
    """Why this user can't read the index, if it is a permission matter."""
    if os.path.exists(path) and not os.access(path, os.R_OK):
        return PermissionDenied(
            f"permission denied reading the index {path} (owned by {_owner(path)})", _OTHER_USER
        )
    folder = path.parent
    shm = path.with_name(path.name + "-shm")
    if not os.access(folder, os.W_OK) and not shm.exists():
        return PermissionDenied(
            f"permission denied: reading the index {path} needs {shm.name} beside it, and this user "
            f"may not create it in {folder} (owned by {_owner(folder)})",
            _OTHER_USER,
        )
    if shm.exists() and not os.access(shm, os.R_OK):
        return PermissionDenied(
            f"permission denied reading {shm} (owned by {_owner(shm)})", _OTHER_USER
        )
    return None


def read_only_file(path: Path) -> ReadOnlyLibrary:
    mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0
    return ReadOnlyLibrary(
        f"the index file {path} is read-only for this user (mode {mode:04o}, owner {_owner(path)})",
        "make it writable (chmod u+w), ask its owner, or pass --db FILE to write the index elsewhere",
    )


def open_error(exc: apsw.Error, path: Path, *, readonly: bool, errno_: int = 0) -> MarkindexError:
    """What an SQLite error while opening (or first using) the index really means, as one error."""
    full = isinstance(exc, apsw.FullError) or errno_ in _FULL_ERRNOS
    if full or (isinstance(exc, apsw.IOError) and disk_is_full(path)):
        return no_room_to_read(path) if readonly else disk_full(path, errno_)
    descriptors = errno_ in _DESCRIPTOR_ERRNOS or isinstance(exc, apsw.CantOpenError)
    if descriptors and (fds := out_of_descriptors(errno_)):
        return fds
    if isinstance(exc, (apsw.CantOpenError, apsw.ReadOnlyError, apsw.PermissionsError)):
        denied = _unreadable(path)
        if denied is not None:
            return denied
        if not readonly and isinstance(exc, apsw.ReadOnlyError):
            return read_only_file(path)
        if readonly and isinstance(exc, apsw.ReadOnlyError) and _hot_journal(path):
            return IndexUnusable(
                f"the index {path} was left half-written by a writer that stopped",
                "run `markindex index` on this library once: the next writer rolls it back and goes on",
            )
    if isinstance(exc, apsw.NotADBError) and not sqlite_header(path):
        return IndexUnusable(
            f"{path} is not an index (not an SQLite database at all)",
            "pass --db with the path of an index, or a new file name to create one there",
        )
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return damaged(path, exc)
    if isinstance(exc, apsw.ProtocolError):
        # SQLite's readers retry for seconds, then give up, while a writer stopped in the midst
        # of updating the WAL's shared index leaves it half-written: 'locking protocol'.
        return WriterBusy(
            f"the index {path} is in the middle of a write by a process that does not go on"
            " (stopped with Ctrl-Z or SIGSTOP, or stuck)",
            "`markindex status` names the process: resume it (`fg`, `kill -CONT PID`) or end it,"
            " then try again; on a network file system, put the index on a local disk (--db)",
        )
    return MarkindexError(
        f"cannot use the index {path}: {exc}", "check the file, its folder and the disk"
    )


def damage_detail(exc: Exception) -> str:
    """What one of DAMAGE_ERRORS says of the index (a codec's message would only puzzle)."""
    if isinstance(exc, UnicodeDecodeError):
        return "it holds text that is not UTF-8 (a damaged page)"
    return str(exc)


def damaged(path: Path, exc: Exception) -> IndexUnusable:
    """The index at `path` is damaged (`exc`, one of DAMAGE_ERRORS): the way out is a rebuild."""
    return IndexUnusable(
        f"the index {path} is damaged or not a markindex index: {damage_detail(exc)}",
        "rebuild it from the library: `markindex index ROOT --rebuild` (with the same --db)",
    )


def sqlite_header(path: Path) -> bool:
    """Whether the file starts like an SQLite database (then it is damaged, not some other file)."""
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _hot_journal(path: Path) -> bool:
    """A rollback journal beside the index: a writer died mid-transaction; only a writer undoes it."""
    journal = path.with_name(path.name + "-journal")
    try:
        return journal.stat().st_size > 0
    except OSError:
        return False


def write_error(exc: apsw.Error | OSError, path: Path, errno_: int = 0) -> MarkindexError:
    """An error met while writing the index, as one clear error."""
    exc = _first_failure(exc)
    if isinstance(exc, OSError):
        return os_error(exc, path)
    if isinstance(exc, apsw.ReadOnlyError) and not os.access(path.parent, os.W_OK):
        return os_error(PermissionError(errno.EACCES, os.strerror(errno.EACCES)), path)
    if isinstance(exc, apsw.ReadOnlyError):
        return read_only_file(path)
    return open_error(exc, path, readonly=False, errno_=errno_)


def _first_failure(exc: apsw.Error | OSError) -> apsw.Error | OSError:
    """The error that failed a write, not the rollback that failed after it: on a full disk
    SQLite may roll the transaction back itself, and leaving `with conn:` then raises
    'cannot rollback - no transaction is active' in place of the real cause."""
    cause = exc.__context__
    if isinstance(exc, apsw.SQLError) and isinstance(cause, (apsw.Error, OSError)):
        return cause
    return exc


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's too). A number no pid can be is no process
    (0 and negative numbers name process groups to `kill`)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def pid_stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, Ctrl-Z) or traced: it holds what it holds and
    does nothing. Linux only (/proc); False elsewhere or when it cannot be told."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read(4096)
    except (OSError, ValueError):
        return False
    state = stat.rpartition(b")")[2].split(maxsplit=1)[:1]  # the field after the command name
    return state in ([b"T"], [b"t"])

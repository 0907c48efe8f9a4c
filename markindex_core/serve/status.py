"""Index and daemon status: a small JSON file beside the index, and `read_status` for CLI and TUI.

The daemon keeps its live state (heartbeat, queue, errors) in a file rather than in the index:
a heartbeat written into SQLite every few seconds would look like a data change to every reader.

The file beside the index belongs to the writer (or to a daemon when nobody writes), so a daemon
that waits for the writer lock, or cannot write the index folder at all, would be invisible there.
Every daemon therefore also keeps a record of its own in a private folder of its user
(`runtime_dir`), named after the index and its pid; `read_status` reads both, so such a daemon is
shown alive with what it waits for, to its own user.

When the file beside the index can't be replaced (made immutable, a read-only mount over it, a
folder in its place), the daemon writes the same status to a fallback file beside it
(`fallback_path`), and readers take whichever of the two beats later (`read_status_beside`).
Other users can't see the daemon's record, and took it for hung while it ran. A second file is
the simplest channel they can all read: what blocks one name rarely blocks another in the same
folder, and the index itself would take every heartbeat for a data change (see above).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import apsw

from markindex_core.config import (
    DAEMON_HEARTBEAT_S,
    DAEMON_RECORD_KEEP_S,
    DAEMON_SLOW_RECONCILE_S,
    DAEMON_WARNING_TTL_S,
    RUN_STALL_SECONDS,
    STATUS_FALLBACK_SUFFIX,
    STATUS_FILE_BLOCK,
    STATUS_FILE_MAX_BYTES,
    STATUS_FILE_SUFFIX,
)
from markindex_core.errors import MarkindexError
from markindex_core.index.drift import folder_drift
from markindex_core.index.reading import Unreadable, open_regular, read_at_most
from markindex_core.index.scan import IGNORE_META, ignore_from_meta
from markindex_core.store import runs
from markindex_core.store.db import Store, held_by_other_library
from markindex_core.store.files import pid_alive
from markindex_core.store.lock import WriterLock, writer_lock_state

if TYPE_CHECKING:
    from markindex_core.library import Library

STALE_AFTER_S = 3 * DAEMON_HEARTBEAT_S


def status_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + STATUS_FILE_SUFFIX)


def fallback_path(db_path: Path) -> Path:
    """The status file written in place of `status_path` while that one can't be replaced."""
    return db_path.with_name(db_path.name + STATUS_FALLBACK_SUFFIX)


def write_status_file(db_path: Path, data: dict[str, Any]) -> None:
    """Replace the status file atomically (readers never see half a file).

    On a full disk a new file can't be written, but the old one's blocks can be: the status is
    then rewritten in place, so the daemon still shows as alive and says why it can't index. So
    it is in an index folder this user may no longer write (made read-only while the daemon
    runs, which keeps indexing): readers of other users, who cannot see the daemon's own record,
    would take it for hung.
    """
    _write_json(status_path(db_path), data)


_REWRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES)  # a new file can't be made there


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")
    # Padded (JSON allows trailing blanks) so an in-place rewrite on a full disk finds room.
    text += b" " * (-len(text) % STATUS_FILE_BLOCK - 1) + b"\n"
    try:
        tmp.write_bytes(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if exc.errno not in _REWRITE_ERRNOS or not _rewrite_in_place(path, text):
            raise


def _rewrite_in_place(path: Path, text: bytes) -> bool:
    """Overwrite an existing (padded) file at its own size, so no block has to be allocated."""
    try:  # never blocking on a FIFO or following a link planted in its place
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        size = st.st_size
        body = text.rstrip()
        if len(body) + 1 > size:
            return False
        os.write(fd, body + b" " * (size - len(body) - 1) + b"\n")  # same size: no new block
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def write_fallback_status(db_path: Path, data: dict[str, Any]) -> None:
    """Replace the fallback status file (raises OSError when it can't either)."""
    _write_json(fallback_path(db_path), data)


def remove_fallback_status(db_path: Path) -> None:
    """Remove the fallback once the status file is written again (a later heartbeat there wins
    over it anyway, so a fallback that can't be removed does no harm)."""
    with contextlib.suppress(OSError):
        fallback_path(db_path).unlink()


def read_status_file(db_path: Path) -> dict[str, Any] | None:
    return _read_json(status_path(db_path))


def read_status_beside(db_path: Path) -> dict[str, Any] | None:
    """The status file beside the index, or its fallback when that beats later: a daemon whose
    status file is stuck keeps the fallback current (see the module docstring)."""
    main, fallback = read_status_file(db_path), _read_json(fallback_path(db_path))
    if fallback is None or (main is not None and _beat(main) >= _beat(fallback)):
        return main
    return fallback


def _beat(data: dict[str, Any]) -> float:
    return _float(data.get("heartbeat_at")) or 0.0


def _read_json(path: Path) -> dict[str, Any] | None:
    """A status file or daemon record; None when it is missing, not a regular file (a FIFO in
    its place must not hang `status`, the terminal app or a tool call), too big or not JSON."""
    try:
        with open_regular(str(path)) as (fd, _):
            raw = read_at_most(fd, STATUS_FILE_MAX_BYTES + 1)
        data = json.loads(raw) if len(raw) <= STATUS_FILE_MAX_BYTES else None
    except (OSError, Unreadable, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ----- per-daemon records in the user's runtime folder ---------------------------------------
def _runtime_candidates() -> list[Path]:
    """Where this user's daemon records may live: `$XDG_RUNTIME_DIR/markindex`, then
    `TMPDIR/markindex-UID` (XDG_RUNTIME_DIR is often unset for services, root and containers)."""
    out = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        out.append(Path(xdg) / "markindex")
    out.append(Path(tempfile.gettempdir()) / f"markindex-{os.getuid()}")
    return out


def _private_dir(path: Path, *, create: bool) -> bool:
    """True when `path` is a real folder of this user that nobody else may write (a shared /tmp
    must not let another user plant or read records)."""
    if create:
        try:
            path.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def runtime_dir() -> Path | None:
    """The first usable private folder for this user's daemon records (created when missing),
    or None when none can be made."""
    for path in _runtime_candidates():
        if _private_dir(path, create=True):
            return path
    return None


def _record_stem(db_path: Path) -> str:
    return "daemon-" + hashlib.sha256(os.fsencode(str(db_path))).hexdigest()[:16]


def write_daemon_record(db_path: Path, data: dict[str, Any]) -> None:
    """Write this process's record for the index `db_path` (raises OSError when it can't)."""
    folder = runtime_dir()
    if folder is None:
        raise OSError(errno.EACCES, "no private runtime folder for daemon records")
    _write_json(
        folder / f"{_record_stem(db_path)}-{os.getpid()}.json", {**data, "db": str(db_path)}
    )


def remove_daemon_record(db_path: Path) -> None:
    """Remove this process's record, the records of daemons of this index that are gone, and
    those of any index whose daemon has been gone for DAEMON_RECORD_KEEP_S (killed daemons of
    indexes nobody serves again would otherwise pile up)."""
    stem = _record_stem(db_path)
    old = time.time() - DAEMON_RECORD_KEEP_S
    for path in _runtime_candidates():
        if not _private_dir(path, create=False):
            continue
        for record in path.glob("daemon-*-*.json"):
            pid = record.stem.rpartition("-")[2]
            if not pid.isdigit():
                continue
            ours = record.stem.startswith(stem + "-")
            if ours and int(pid) == os.getpid():
                gone = True
            else:
                gone = not pid_alive(int(pid)) and (ours or _mtime(record) < old)
            if gone:
                with contextlib.suppress(OSError):
                    record.unlink()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # gone already, or unreadable: leave it


def read_daemon_records(db_path: Path) -> list[dict[str, Any]]:
    """The records of this user's daemons of the index `db_path` (any state, alive or not)."""
    out = []
    for path in _runtime_candidates():
        if not _private_dir(path, create=False):
            continue
        for record in sorted(path.glob(f"{_record_stem(db_path)}-*.json")):
            data = _read_json(record)
            if data is not None and data.get("db") == str(db_path):
                out.append(data)
    return out


def read_status(lib: Library, *, compare_folder: bool = False) -> dict[str, Any]:
    """Everything a user or UI asks about a library's index, in one JSON-ready dict.

    Keys:
        root, db (str): the library folder and the index file.
        indexed (bool): an index file exists and opens.
        error (str | None): why the index could not be read, when it could not.
        documents, nodes, passages, links, tokens (int): index totals (0 when not indexed).
        skipped (list[{path, reason}]): files left out of the index, and why.
        last_index_at (float | None): Unix time the last index run (CLI or daemon) finished.
        last_index_seconds (float | None): how long that run took.
        rebuild_due (str | None): why the next index run rebuilds every document (the index was
            built by another version of markindex: "format 4 -> 5"), or None.
        indexed_root (str | None): the library folder the index was last built from (None for
            an index made before it was recorded); another folder than `root` means this index
            holds another library, which `index` refuses to overwrite.
        other_library (bool): that folder still exists, so the index is another library's, not
            `root`'s moved (`OTHER_LIBRARY` for every other command; `status` exits 1).
        writer_locked (bool): some process holds the writer lock right now.
        writer_pid (int | None): that process, when known.
        daemon (dict | None): the daemon's status: the file beside the index (or its fallback,
            or that daemon's own record, when newer: the file could not be replaced; then
            status_file_error and status_file_hint say why and what to do), or when that one's
            daemon is not alive, a live daemon's own record (one waiting for the writer lock or
            unable to write the index folder); None when no daemon ever wrote either:
            pid (int), state ("starting" | "reconciling" | "watching" |
            "read-only" (another process holds the writer lock: reason names it) |
            "retrying" (writes fail, see reason) | "recovering" (re-opening after the folder,
            index or lock vanished, or a failure) | "stopping" | "stopped" | "stopped: REASON"),
            reason, hint (str | None: why it is retrying, recovering or stopped, what to do),
            catching_up (bool: reconciling everything because file events were lost; warned
            about, not a stop), unreadable (list[str], at most STATUS_UNREADABLE_SHOWN) and
            unreadable_count (int): paths it cannot read, where the index keeps what it held
            (warned about, not a stop),
            recoveries (int), writing (bool, this pid holds the writer lock), alive (bool,
            computed: process exists and heartbeat fresh), unresponsive (bool, computed: holds
            the writer lock but no longer beats), ended (bool, computed: killed, crashed or
            stopped by a failure, and no writer took the lock since: the index is no longer
            kept live), progress ({done, total} files of the running reconcile, or
            None), progress_at (float: when it last got a file further; a reconcile quiet for
            RUN_STALL_SECONDS is not updating), heartbeat_at (float), heartbeat_age (float s, computed),
            started_at (float), observer ("inotify" | "polling" | …), notice (str, e.g. the
            polling fallback reason), queue (int, changes waiting: dirty paths, and
            events_waiting), events_waiting (int, about how many file events the watcher has
            seen and not yet handed on: a burst is read far slower than it is made),
            events_waiting_since (float | None: since when it has had some without a break;
            past DAEMON_SLOW_RECONCILE_S warned about as catching up, not a stop), busy (bool,
            reconciling now), last_event_at (float), last_reconcile_at (float, end of the last
            reconcile), last_reconcile_started_at (float), last_reconcile_seconds (float),
            reconciles (int), last_batch ({paths, added, updated, removed, skipped, full}), error_count (int),
            errors (list[{at, path, error}], most recent last),
            status_file_error, status_file_hint (str | None): why the daemon cannot update the
            status file beside the index, and what to do (readers that see only that file, such
            as other users', take the daemon for hung or gone meanwhile).
        other_daemons (list[dict]): further live daemons of this index (e.g. a second daemon
            waiting for the writer lock), same keys as `daemon`. Records in the runtime folder
            are per user: daemons of other users show only through the file beside the index.
        daemon_writing (bool): a live daemon holds the writer lock.
        changed_on_disk ({changed, added, removed, examples} | None): when no daemon keeps the
            index live, how many files differ from it (size, or content when only the mtime
            does), are new or are gone, and a few of their paths: what `markindex index` would
            do now. Only with `compare_folder` (a scan of the folder); None without it, with a
            writing daemon, no index, or a folder that cannot be listed.
        not_updating (bool): the daemon keeping the index live has stopped doing so (ended,
            frozen, or failing to write; see `not_updating`): `markindex status` exits 2.
        unfinished_run ({at, files} | None): the last index run stopped before its end (killed,
            Ctrl-C) while no writer runs now: it started at `at` (Unix time) with `files` to
            write, and the index may lack or hold old versions of some (see `store.runs`);
            `markindex status` exits 2 until a run of the whole library ends.
    """
    db = lib.db_path
    out: dict[str, Any] = {
        "root": str(lib.root),
        "db": str(db),
        "indexed": False,
        "error": None,
        "documents": 0,
        "nodes": 0,
        "passages": 0,
        "links": 0,
        "tokens": 0,
        "skipped": [],
        "last_index_at": None,
        "last_index_seconds": None,
        "rebuild_due": None,
        "indexed_root": None,
        "other_library": False,
        "ignore": [],
        "unfinished_run": None,
    }
    mark = None
    if db.exists():
        try:
            store = Store(db, readonly=True)
        except MarkindexError as exc:
            out["error"] = exc.message
        else:
            try:
                out.update(store.stats())
                out.pop("skipped", None)
                out["skipped"] = [{"path": p, "reason": r} for p, r in store.skipped()]
                meta = store.all_meta()
                out["last_index_at"] = _float(meta.get("last_index_at"))
                out["last_index_seconds"] = _float(meta.get("last_index_seconds"))
                from markindex_core.index.indexer import pending_rebuild  # only status needs it

                out["rebuild_due"] = pending_rebuild(meta)
                out["indexed_root"] = meta.get("root")
                out["ignore"] = ignore_from_meta(meta.get(IGNORE_META))
                out["other_library"] = held_by_other_library(
                    meta.get("root"), lib.root, lib.db_path
                )
                mark = meta.get(runs.UNFINISHED_RUN)
                out["indexed"] = True
            finally:
                store.close()
    locked, pid = writer_lock_state(db)
    out["writer_locked"] = locked
    out["writer_pid"] = pid
    out["unfinished_run"] = runs.unfinished_run(mark, db, (locked, pid))
    daemon, others = daemon_states(db, locked, pid)
    out["daemon"] = daemon
    out["other_daemons"] = others
    out["daemon_writing"] = bool(daemon and daemon["writing"])
    out["not_updating"] = not_updating(daemon)
    # A scan of the whole folder: asked for by `markindex status`, not by a status line that
    # polls every few seconds.
    out["changed_on_disk"] = _folder_drift(lib, out) if compare_folder else None
    return out


def _folder_drift(lib: Library, out: dict[str, Any]) -> dict[str, Any] | None:
    """How the folder differs from an index no daemon keeps live (`index.drift.folder_drift`)."""
    if not out["indexed"] or out["other_library"] or out["daemon_writing"]:
        return None
    try:
        store = Store(lib.db_path, readonly=True)
    except MarkindexError:
        return None
    try:
        drift = folder_drift(lib.root, store)
    except (apsw.Error, OSError):
        return None
    finally:
        store.close()
    return drift.to_json() if drift is not None else None


def daemon_states(
    db: Path, locked: bool | None = None, holder: int | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The daemon of index `db` (see `read_status`: `daemon`) and further live ones
    (`other_daemons`), without opening the index: cheap enough for every tool call.
    `locked` and `holder` are `writer_lock_state(db)`, read here when not given."""
    if locked is None:
        locked, holder = writer_lock_state(db)
    now = time.time()
    records = read_daemon_records(db)
    daemon, last_writer = read_status_beside(db), None
    if daemon is not None or records:
        last_writer = holder if locked else WriterLock(db).holder_pid()
        daemon = _newer_record(daemon, records, last_writer)
    if daemon is not None:
        _judge(daemon, now, locked, holder, last_writer)
    seen = {daemon.get("pid")} if daemon is not None else set()
    others: list[dict[str, Any]] = []
    for record in records:
        _judge(record, now, locked, holder)
        if record["alive"] and record.get("pid") not in seen:
            seen.add(record.get("pid"))
            others.append(record)
    # The writer first, then the longest running.
    others.sort(key=lambda d: (not d["writing"], _float(d.get("started_at")) or 0.0))
    if others and (daemon is None or not (daemon["alive"] or daemon["unresponsive"])):
        daemon = others.pop(0)  # the file beside the index is stale or missing: this one lives
    return daemon, others


def _newer_record(
    daemon: dict[str, Any] | None, records: list[dict[str, Any]], last_writer: int | None
) -> dict[str, Any] | None:
    """The status file's daemon, or the record of that daemon or of the last writer (the lock
    file names it) when newer: what the file would say had it been written. A daemon whose file
    can't be replaced (immutable, a read-only mount, a folder in its place) beats in its record
    (and in the fallback file, when that can be written); read from the stuck file alone, it was
    taken for hung while it ran, for killed once it stopped cleanly, and for not running once
    killed (see `publish`)."""
    beat, pids = -1.0, {last_writer}
    if daemon is not None:
        beat, pids = _beat(daemon), {daemon.get("pid"), last_writer}
    pids.discard(None)
    for record in sorted(records, key=_beat):
        if record.get("pid") in pids and _beat(record) > beat:
            daemon = dict(record)  # judged as the file's daemon, not as one of the records
            beat = _beat(record)
    return daemon


def stale_warning(daemon: dict[str, Any]) -> str | None:
    """Why a daemon's index may not show its folder as it is now (a daemon's status as
    `read_status` gives it), or None while it keeps up: a reconcile after file events is keeping
    up, and so is waiting while another process writes."""
    return _staleness(daemon)[1]


def _staleness(daemon: dict[str, Any]) -> tuple[bool, str | None]:
    """(whether the daemon has stopped updating the index, `stale_warning`): catching up after a
    start or a big burst is a warning, but not a stop."""
    state = str(daemon.get("state") or "")
    reason, hint = daemon.get("reason"), daemon.get("hint")
    done_at = _float(daemon.get("last_reconcile_at"))
    since = (
        f"; answers may miss changes made since {iso_time(done_at)}"
        if done_at
        else "; answers may miss changes made before or since it started"
    )
    if daemon.get("unresponsive"):
        return True, f"the live index is not updating: {unresponsive_reason(daemon)}{since}"
    if state.startswith("stop"):
        return True, f"the live index has stopped updating{since}"
    if daemon.get("catching_up") and state == "reconciling":
        # Events were lost (an inotify overflow): the full reconcile under way finds them.
        why = f"{reason}" + (f"; {hint}" if hint else "")
        return False, f"the live index is catching up: {why}{since}"
    if reason and state in ("retrying", "recovering", "reconciling", "starting"):
        # A retry's reconcile keeps the reason of the failure until it succeeds.
        why = f"{reason}" + (f" ({hint})" if hint else "")
        return True, f"the live index is not updating: {why}{since}"
    quiet = _quiet_for(daemon)
    if quiet is not None:
        progress = daemon.get("progress") or {}
        where = f" (at {progress.get('done')} of {progress.get('total')} files)" if progress else ""
        return True, (
            f"the live index is not updating: its reconcile has made no progress for"
            f" {quiet / 60:.0f} min{where}, and may hang (a file system that stopped answering?):"
            f" restart the daemon" + since
        )
    behind = _behind_for(daemon)
    if behind is not None and state in ("watching", "reconciling"):
        waiting = int(daemon.get("events_waiting") or 0)
        events = f"about {waiting} file event{'s' if waiting > 1 else ''}"
        return False, (
            f"the live index is catching up: {events} still to be read, after {behind:.0f} s"
            f" of a burst of changes{since}"
        )
    unreadable = daemon.get("unreadable") or []
    if unreadable and state == "watching":
        count = int(daemon.get("unreadable_count") or len(unreadable))
        more = f" and {count - 1} more" if count > 1 else ""
        return False, (
            f"part of the library cannot be read ({unreadable[0]}{more}): the index keeps what"
            " it held there, and changes there are missed until it can be read"
        )
    if not daemon.get("reconciles") and state in ("starting", "reconciling"):
        return False, "the live index is catching up with the folder after its start" + since
    started = _float(daemon.get("last_reconcile_started_at"))
    if state == "reconciling" and started and time.time() - started > DAEMON_SLOW_RECONCILE_S:
        # A big burst (a checkout), or one file that takes long to parse: still working on it.
        progress = daemon.get("progress") or {}
        done = f", {progress.get('done')} of {progress.get('total')} files" if progress else ""
        return False, (
            f"the live index is catching up: its reconcile has run for "
            f"{time.time() - started:.0f} s{done}" + since
        )
    return False, None


def _behind_for(daemon: dict[str, Any]) -> float | None:
    """How long the watcher has had file events it has not handed on (`events_waiting`), when
    that is over DAEMON_SLOW_RECONCILE_S; else None. A burst (a checkout, thousands of renames)
    is read far slower than it is made; a backlog of a moment is keeping up, as a quick
    reconcile is."""
    since = _float(daemon.get("events_waiting_since"))
    if not daemon.get("events_waiting") or since is None:
        return None
    behind = time.time() - since
    return behind if behind > DAEMON_SLOW_RECONCILE_S else None


def _quiet_for(daemon: dict[str, Any]) -> float | None:
    """How long a reconcile under way has gone without getting a file further, when that is
    over RUN_STALL_SECONDS (a parse is ended after PARSE_TIMEOUT_S, so a working reconcile moves
    far more often); else None."""
    if daemon.get("state") != "reconciling" or not daemon.get("busy"):
        return None
    moved = _float(daemon.get("progress_at")) or _float(daemon.get("last_reconcile_started_at"))
    quiet = time.time() - moved if moved else 0.0
    return quiet if quiet > RUN_STALL_SECONDS else None


def not_updating(daemon: dict[str, Any] | None) -> bool:
    """Whether the daemon that keeps the index live (as `daemon_states` gives it) has stopped
    doing so: ended, frozen, or failing to write. `markindex status` exits 2 then."""
    if daemon is None:
        return False
    if daemon.get("ended"):
        return True
    return bool(daemon["alive"] or daemon["unresponsive"]) and _staleness(daemon)[0]


def unresponsive_reason(daemon: dict[str, Any]) -> str:
    """What `markindex status` and tool envelopes say of a daemon that holds the writer lock but
    no longer beats (see `_judge`)."""
    age = _float(daemon.get("heartbeat_age"))
    quiet = f" for {age:.0f} s" if age is not None else ""
    return (
        f"its daemon pid {daemon.get('pid')} holds the writer lock but has not responded{quiet}"
        " (stopped with SIGSTOP or Ctrl-Z, or hung)"
    )


def daemon_warning(daemon: dict[str, Any] | None) -> str | None:
    """`stale_warning` of a daemon (as `daemon_states` gives it) that is alive or frozen, or why
    an ended one no longer keeps the index live, naming it; None when no daemon keeps the index
    live, or one stopped cleanly (a static index is never called stale)."""
    if daemon is None:
        return None
    if daemon.get("ended"):
        return (
            f"the live index has stopped updating: {ended_reason(daemon)}; answers miss changes"
            f" made to the folder since ({ENDED_HINT})"
        )
    if not (daemon["alive"] or daemon["unresponsive"]):
        return None
    warning = stale_warning(daemon)
    return f"daemon pid {daemon.get('pid')}: {warning}" if warning else None


class DaemonWatch:
    """The index's daemon in another process (`daemon_states`), its `daemon_warning` and the
    writer lock's holder, for a plain `markindex mcp` serving the same index or a daemon waiting
    for the writer lock: read at most once per `DAEMON_WARNING_TTL_S` (a few small files)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._read_at = -DAEMON_WARNING_TTL_S
        self._seen: WatchedWriter = WatchedWriter(None, None, None)

    def read(self) -> WatchedWriter:
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= DAEMON_WARNING_TTL_S:
                self._read_at = now
                locked, holder = writer_lock_state(self.db)
                daemon = daemon_states(self.db, locked, holder)[0]
                self._seen = WatchedWriter(daemon, daemon_warning(daemon), holder)
            return self._seen

    def __call__(self) -> str | None:
        return self.read().warning


class WatchedWriter(NamedTuple):
    """What `DaemonWatch` last read: the daemon, its warning, the writer lock's holder pid."""

    daemon: dict[str, Any] | None
    warning: str | None
    holder: int | None


def iso_time(seconds: float) -> str:
    """A Unix time as warnings print it (UTC, to the second)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _judge(
    daemon: dict[str, Any],
    now: float,
    locked: bool,
    holder: int | None = None,
    last_writer: int | None = None,
) -> None:
    """Add the computed keys: alive (process exists here or holds the writer lock, heartbeat
    fresh), unresponsive (holds the
    writer lock, heartbeat stale: stopped with SIGSTOP or hung), ended (gone without a clean
    stop, and nothing wrote the index since: see `ended_reason`), heartbeat_age, writing.
    `last_writer` is the pid the lock file names (the last process that took it)."""
    beat = _float(daemon.get("heartbeat_at")) or 0.0
    dpid = daemon.get("pid")
    state = str(daemon.get("state"))
    visible = isinstance(dpid, int) and pid_alive(dpid)
    # A daemon in another pid namespace (a container sharing the folder) is no process here,
    # but the writer lock it holds names it: the lock holder wrote its pid and holds the lock.
    holds_lock = isinstance(dpid, int) and locked and holder == dpid
    running = (visible or holds_lock) and not state.startswith("stopped")
    alive = running and now - beat < STALE_AFTER_S
    daemon["alive"] = alive
    # The lock's holder wrote its pid, and holds the lock: no reused pid can pass for it.
    daemon["unresponsive"] = bool(running and not alive and holds_lock)
    # Killed, crashed or stopped by a failure while the index was its to write, and no writer
    # took the lock since (its pid is still the lock file's): the index stopped being live. Known
    # at once when its process is gone; otherwise its heartbeat must be stale too (a daemon in
    # another pid namespace, a container sharing the folder, may be a live process here that
    # is not it). A live daemon elsewhere holds the lock, or beats.
    daemon["ended"] = bool(
        isinstance(dpid, int)
        and not alive
        and not daemon["unresponsive"]
        and (state.startswith("stopped: ") or now - beat >= STALE_AFTER_S or not visible)
        and state != "stopped"
        and not locked
        and last_writer == dpid
    )
    daemon["heartbeat_age"] = round(now - beat, 3) if beat else None
    daemon["writing"] = bool(alive and daemon.get("writing") and locked)


def ended_reason(daemon: dict[str, Any]) -> str:
    """How an `ended` daemon (see `_judge`) ended, and when it was last heard from."""
    beat = _float(daemon.get("heartbeat_at"))
    when = f"last heard from at {iso_time(beat)}" if beat else ""
    reason = daemon.get("reason")
    if reason:
        return f"daemon pid {daemon.get('pid')} stopped because {reason}" + (
            f" ({when})" if when else ""
        )
    return f"daemon pid {daemon.get('pid')} ended without stopping (killed or crashed" + (
        f"; {when})" if when else ")"
    )


ENDED_HINT = "start `markindex daemon` again, or run `markindex index`"


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None

"""An index run that never got to its end: killed, stopped (Ctrl-C, a terminal app that quit) or
crashed while it had files to write.

Each write is one transaction, so such an index opens and what it holds is whole. But it may lack
documents the run had still to add, and hold old versions of those it had still to update or
remove, and nothing else says so: its document count looks like a finished index's. A run of the
whole library that has files to write marks the index when it starts, and clears the mark when it
ends (see `index.indexer`). A mark left while no writer holds the lock is said by `status`,
`search` and every tool answer, until a run of the whole library ends.

A daemon is a run that never ends by itself: it marks the index when it starts writing (its
mark names it, see `live_mark`), keeps the mark through its own runs, and clears it when it stops
with nothing left to index. Killed, it leaves the mark, so its index is said to be behind until a
whole-library run ends: not only until another writer takes the lock, which a run that is itself
stopped (an `index --rebuild` or an `index` killed during its scan) does too. Its runs of a few
changed paths neither mark nor clear: a failed one is retried, and its own status says what it
left undone when it stops.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from markindex_core.config import RUN_STALL_SECONDS
from markindex_core.store.files import pid_alive, pid_stopped
from markindex_core.store.lock import lock_path_for, writer_lock_state

UNFINISHED_RUN = "unfinished_run"  # meta key: {"at": start time, "files": files to write}


def mark(files: int) -> dict[str, str]:
    """The meta value a run with `files` to write sets when it starts."""
    return {UNFINISHED_RUN: json.dumps({"at": round(time.time(), 3), "files": files})}


def live_mark(pid: int) -> dict[str, str]:
    """The meta value a daemon (process `pid`) keeps while it writes the index."""
    return {UNFINISHED_RUN: json.dumps({"at": round(time.time(), 3), "files": None, "daemon": pid})}


def stamp(db_path: Path) -> None:
    """Record that the run writing `db_path` made progress: the lock file's mtime (see
    `unfinished_run`). Best effort: a lock file that can't be touched only loses the check."""
    try:
        os.utime(lock_path_for(db_path))
    except OSError:
        pass


def _quiet_for(db_path: Path) -> float:
    """Seconds since the writer holding the lock of `db_path` last made progress."""
    try:
        return max(0.0, time.time() - os.stat(lock_path_for(db_path)).st_mtime)
    except OSError:
        return 0.0


def unfinished_run(
    meta_value: str | None, db_path: Path, lock: tuple[bool, int | None] | None = None
) -> dict[str, Any] | None:
    """The run that left its mark ({"at", "files"}, and "daemon": its pid when it was a daemon's),
    when no writer holds the lock now (a run under way holds it: its mark is no news), or when
    the one that holds it is a stopped process ("stopped": its pid; Ctrl-Z, SIGSTOP) or a run
    that has made no progress for `RUN_STALL_SECONDS` ("stalled": its pid, "quiet": seconds): a
    CLI run has no heartbeat, and frozen or hung it would keep the index behind without a word.
    `lock` is `writer_lock_state(db_path)` when the caller has read it already."""
    if meta_value is None:
        return None
    locked, holder = lock if lock is not None else writer_lock_state(db_path)
    stopped = stalled = None
    quiet = 0.0
    if locked:
        if holder is None:
            return None
        if pid_stopped(holder):
            stopped = holder
        elif (quiet := _quiet_for(db_path)) >= RUN_STALL_SECONDS:
            stalled = holder
        else:
            return None
    try:
        run = json.loads(meta_value)
        if run.get("daemon") is not None and (stalled or stopped) and run["daemon"] == holder:
            return None  # its own mark: a daemon says itself whether it keeps up (`serve.status`)
        if stalled is not None:
            files = run.get("files")
            return {"at": run.get("at"), "files": files, "stalled": stalled, "quiet": quiet}
        if run.get("daemon") is not None:
            if pid_alive(int(run["daemon"])):
                return None  # a daemon alive, between two sessions (restarting its watcher) or
                # frozen: it says itself how current the index is (see `serve.status`)
            return {"at": float(run["at"]), "files": None, "daemon": int(run["daemon"])}
        return {"at": float(run["at"]), "files": int(run["files"]), "stopped": stopped}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {"at": None, "files": None, "stopped": stopped, "stalled": stalled, "quiet": quiet}


def unfinished_warning(run: dict[str, Any]) -> str:
    """What `status`, `search` and the tool envelopes say of an unfinished run."""
    when = ""
    if run.get("at"):
        when = time.strftime(" at %Y-%m-%d %H:%M:%S", time.localtime(run["at"]))
    files = f" with {run['files']} files to write" if run.get("files") else ""
    if run.get("daemon"):
        return (
            f"the live index (daemon pid {run['daemon']}{when.replace(' at', ', writing since')})"
            " stopped before it was up to date (killed, or stopped with changes not yet indexed):"
            " documents may be missing or out of date; run `markindex index` (or start the"
            " daemon) to bring it up to date"
        )
    if run.get("stalled"):
        pid, minutes = run["stalled"], int(run.get("quiet", 0) // 60)
        return (
            f"the index run writing it (pid {pid}, started{when}{files}) has made no progress for"
            f" {minutes} min: it may hang; documents may be missing or out of date until it ends;"
            f" if it does not go on, stop it (kill {pid}) and run `markindex index`"
        )
    if run.get("stopped"):
        return (
            f"the index run writing it (pid {run['stopped']}, started{when}{files}) is stopped"
            " (Ctrl-Z or SIGSTOP): documents may be missing or out of date until it goes on;"
            f" resume it (kill -CONT {run['stopped']}, or fg in its terminal)"
        )
    return (
        f"the last index run (started{when}{files}) stopped before its end: documents may be"
        " missing or out of date; run `markindex index` (or start the daemon) to complete it"
    )

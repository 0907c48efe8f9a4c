"""Full rebuilds beside the live index: readers keep the old index until the new one is whole.

A format change, a `--setext` toggle or `index --rebuild` rebuilds every document. Clearing the
live index first would show readers an empty or half-built library for as long as the build runs;
instead the writer builds into `index.db.rebuild` in the same folder and swaps it in with one
`os.replace`. Readers notice the new file by its inode (see `files.file_id`) and reopen.

The WAL side files belong to a database *file*, not to its name: a stale `index.db-wal` beside the
new file would be replayed into it. So the new file is checkpointed and closed by its only
connection (SQLite then deletes its -wal and -shm), the old file is checkpointed, and the old side
files are removed before the rename. A crash at any point leaves the old index (the rename is
atomic) and a stale `.rebuild` file, which the next writer deletes once it holds the lock
(`discard_leftover`). The caller holds the writer lock throughout. The new file starts with the old file's summary cache.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from markindex_core.config import SQLITE_SIDE_SUFFIXES
from markindex_core.errors import DiskFull, MarkindexError, OutOfDescriptors
from markindex_core.store.db import Store, check_replaceable, connect
from markindex_core.store.files import (
    fsync_dir,
    out_of_descriptors,
    pid_alive,
    rebuild_path,
    remove_db_files,
    write_error,
)
from markindex_core.store.summaries import copy_cache

_OLD_CHECKPOINT_WAIT_MS = 1_000  # readers of the old index may delay its last checkpoint this long


def discard_leftover(live: Path) -> None:
    """Delete the `.rebuild` file a killed rebuild left beside `live` (as large as the index),
    and the `.rebuild.new-PID` files of one killed while it created that file.

    Only the writer-lock holder rebuilds, so a holder that finds one knows it is nobody's (the
    pid is checked all the same, as the creator of a new index does)."""
    fresh = rebuild_path(live)
    remove_db_files(fresh)
    for path in live.parent.glob(f"{glob.escape(fresh.name)}.new-*"):
        name = path.name
        for suffix in SQLITE_SIDE_SUFFIXES:
            name = name.removesuffix(suffix)
        pid = name.rpartition("-")[2]
        if pid.isdigit() and not pid_alive(int(pid)):
            remove_db_files(path.with_name(name))


@contextmanager
def rebuild_beside(store: Store) -> Iterator[None]:
    """Point the writer `store` at a fresh file for the body, then swap that file in whole.

    On an error the store goes back to the live index and the partial file is deleted."""
    live = store.path
    fresh = rebuild_path(live)
    remove_db_files(fresh)  # left by a crashed rebuild
    old_conn = store.conn
    store.conn = connect(fresh)
    try:
        copy_cache(old_conn, store.conn)  # summaries are paid for: the new file keeps them
        yield
    except BaseException as exc:
        errno_ = store.conn.system_errno  # of the fresh file's writes, gone with its connection
        store.conn.close()
        store.conn = old_conn
        remove_db_files(fresh)
        if isinstance(exc, apsw.Error):
            raise write_error(exc, live, errno_) from exc  # the daemon reads the cause
        raise
    _swap(store, old_conn)


def _swap(store: Store, old_conn: apsw.Connection) -> None:
    live = store.path
    fresh = rebuild_path(live)
    store.conn.pragma("wal_checkpoint(TRUNCATE)")
    store.conn.close()  # the only connection: SQLite folds and deletes fresh's -wal and -shm
    remove_db_files(fresh, main=False)  # empty after the checkpoint; never let them outlive it
    old_conn.set_busy_timeout(_OLD_CHECKPOINT_WAIT_MS)
    try:
        old_conn.pragma("wal_checkpoint(TRUNCATE)")  # so the old file is whole on its own
    except apsw.BusyError:
        pass  # a reader holds an old snapshot; the old file is replaced anyway
    old_conn.close()
    remove_db_files(live, main=False)  # readers that have them open keep their copies
    os.replace(fresh, live)
    fsync_dir(live.parent)
    store.conn = connect(live)


@contextmanager
def build_afresh(live: Path) -> Iterator[tuple[Store, str | None]]:
    """A new, empty index beside `live` to build into, swapped in whole when the block ends, and
    why cached summaries were not kept (None when they were, or there were none).

    For `index --rebuild`: the old file may be damaged, so it is never written and never needed;
    it is only read, if it can be, for its summary cache. Readers keep it until the swap.
    """
    check_replaceable(live)
    fresh = rebuild_path(live)
    remove_db_files(fresh)  # left by a crashed rebuild
    store = Store(fresh)
    try:
        yield store, _salvage_cache(live, store.conn)
    except BaseException as exc:
        errno_ = store.conn.system_errno  # what SQLite calls 'disk I/O error' (EFBIG?): ask now
        store.close()
        remove_db_files(fresh)
        if isinstance(exc, apsw.Error):
            raise write_error(exc, live, errno_) from exc  # the daemon reads the cause
        raise
    store.conn.pragma("wal_checkpoint(TRUNCATE)")
    store.close()  # the only connection: SQLite folds and deletes fresh's -wal and -shm
    remove_db_files(fresh, main=False)
    remove_db_files(live, main=False)  # the old file's side files must not meet the new file
    os.replace(fresh, live)
    fsync_dir(live.parent)


def _salvage_cache(live: Path, target: apsw.Connection) -> str | None:
    """Copy the old file's summary cache; why it could not be (a damaged file), or None."""
    if not live.exists():
        return None
    try:
        old = connect(live, readonly=True)
    except MarkindexError as exc:
        _raise_if_passing(exc)
        return f"cached summaries not kept: the old index cannot be read ({exc.message})"
    try:
        copy_cache(old, target)
    except (apsw.Error, UnicodeDecodeError) as exc:
        _raise_if_passing(out_of_descriptors() or exc)
        return f"cached summaries not kept: the old index cannot be read ({exc})"
    finally:
        old.close()
    return None


def _raise_if_passing(exc: Exception) -> None:
    """Raise `exc` when it says nothing of the old file (no descriptor or disk space left): only
    a damaged file is worth losing paid-for summaries for; the run is to be tried again."""
    if isinstance(exc, (DiskFull, OutOfDescriptors)):
        raise exc

"""Documents of an answer that no longer match their file: the index is behind the folder there.

A citation names lines as the index holds them. When the file has been edited since it was
indexed (no daemon runs, or one has not caught up yet), those lines may have moved, and a reader
who opens the file finds other text there. Answers say so. Only the few documents an answer
cites are looked at (one stat each, and a read when only the mtime differs, as the indexer
compares them), never the library.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markindex_core.config import (
    DRIFT_GRACE_S,
    DRIFT_HASH_BYTES,
    DRIFT_HASH_CACHE,
    DRIFT_PATHS_SHOWN,
)
from markindex_core.index.reading import Unreadable, content_hash, read_regular
from markindex_core.index.scan import IgnoreRules, below_any, remembered_ignore, scan
from markindex_core.store.db import Store
from markindex_core.store.lock import lock_path_for, writer_active


def changed_on_disk(root: Path, store: Store, doc_paths: Iterable[str]) -> list[str]:
    """Those of `doc_paths` (indexed documents) whose file is gone or differs from the index, in
    the order given. A file written within DRIFT_GRACE_S of now is left out: a live index takes
    it in within a second or two, and answers during a burst of saves must not all cry wolf."""
    paths = list(dict.fromkeys(doc_paths))
    if not paths:
        return []
    states = store.doc_states(paths)
    now = time.time_ns()
    changed = []
    for path in paths:
        state = states.get(path)
        if state is None:  # removed from the index meanwhile: the answer did not cite it
            continue
        try:
            st = os.stat(root / path, follow_symlinks=False)
        except PermissionError:  # a folder this user may not enter now: no telling, and no run
            continue  # could change it (a run keeps what the index holds there)
        except OSError:  # gone: deleted, its folder replaced by a file or a broken link
            if not _under_way(_gone_at(root, path), now):
                changed.append(path)
            continue
        if _under_way(st.st_mtime_ns, now):
            continue  # a daemon indexes it in a moment: no alarm for a change under way
        if st.st_size != state.size or (
            st.st_mtime_ns != state.mtime_ns
            and _hash(str(root / path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            != state.hash
        ):
            changed.append(path)
    return changed


def _under_way(mtime_ns: int, now_ns: int) -> bool:
    """Whether a change stamped `mtime_ns` may still be under way: within DRIFT_GRACE_S of now,
    before or after (a file server's clock a little ahead). An mtime further ahead (synced from
    a machine whose clock is, `touch -d tomorrow`) is no save happening now: the answer says it."""
    return abs(now_ns - mtime_ns) < int(DRIFT_GRACE_S * 1e9)


def _gone_at(root: Path, path: str) -> int:
    """About when a file that is gone went: the mtime of its nearest folder still there (an
    unlink or a rename sets it, a folder's removal or rename sets its parent's); 0 when even the
    library folder is gone."""
    folder = (root / path).parent
    while True:
        try:
            return os.stat(folder).st_mtime_ns
        except OSError:
            if folder == root or folder == folder.parent:
                return 0
            folder = folder.parent


@functools.lru_cache(maxsize=DRIFT_HASH_CACHE)
def _hash(path: str, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str | None:
    """`_read_hash`, kept for the file as its stat finds it (inode, size, mtime, ctime): a
    re-stamped file cited by answer after answer is read once."""
    return _read_hash(path)


def _read_hash(path: str) -> str | None:
    """The file's content hash, as the index stores it (None when it cannot be read): a new
    mtime alone (a checkout, a copy, `touch`) is no change when the content is the same."""
    try:
        return content_hash(read_regular(path)[0])
    except (OSError, Unreadable):
        return None


def cited_drift_warning(
    root: Path, store: Store, db_path: Path, doc_paths: Iterable[str]
) -> str | None:
    """What an answer citing `doc_paths` says of those changed on disk since indexed, or None:
    `changed_on_disk`, and whether a writer holds the index `db_path` now (it takes them in)."""
    changed = changed_on_disk(root, store, doc_paths)
    return drift_warning(changed, writing=bool(changed) and writer_active(lock_path_for(db_path)))


def drift_warning(changed: list[str], *, writing: bool = False) -> str | None:
    """What an answer citing `changed` (see `changed_on_disk`) says of them, or None. `writing`:
    a writer (a daemon catching up, an index run) holds the index now, and will take them in."""
    if not changed:
        return None
    shown = ", ".join(changed[:DRIFT_PATHS_SHOWN])
    more = (
        f" and {len(changed) - DRIFT_PATHS_SHOWN} more" if len(changed) > DRIFT_PATHS_SHOWN else ""
    )
    them = "it was" if len(changed) == 1 else "they were"
    todo = (
        "the index is being updated now: search again in a moment"
        if writing
        else "run `markindex index`, or keep a daemon running"
    )
    return (
        f"{shown}{more} changed on disk since {them} indexed: the cited lines are the indexed"
        f" version and may have moved in the file ({todo})"
    )


@dataclass
class FolderDrift:
    """How the library folder differs from its index (`folder_drift`): what a run of
    `markindex index` would do now."""

    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.changed) + len(self.added) + len(self.removed)

    def to_json(self) -> dict[str, Any]:
        return {
            "changed": len(self.changed),
            "added": len(self.added),
            "removed": len(self.removed),
            "examples": self.examples(),
        }

    def examples(self) -> list[str]:
        """A few paths, the changed ones first."""
        return [*self.changed, *self.added, *self.removed][:DRIFT_PATHS_SHOWN]


def folder_drift(root: Path, store: Store) -> FolderDrift | None:
    """Compare every file of the library with the index, as a run would (the ignore files'
    rules and the --ignore patterns the index remembers): a stat each, and a read and hash for
    a file whose mtime alone differs, within DRIFT_HASH_BYTES in all (beyond it, a new mtime
    counts as a change). For
    `markindex status` of an index no daemon keeps live: 30-60 ms on the evaluation corpus.
    None when the library folder cannot be listed (gone, no permission): nothing to compare."""
    disk = scan(root, IgnoreRules(root, remembered_ignore(store)))
    if "" in disk.unreadable:
        return None
    states = store.doc_states()
    skipped = store.skipped_states()
    drift = FolderDrift()
    budget = DRIFT_HASH_BYTES
    for rel, st in sorted(disk.files.items()):
        old = states.get(rel)
        if old is None:
            seen = skipped.get(rel)
            if seen is None or seen[:2] != (st.size, st.mtime_ns):
                drift.added.append(rel)  # new, or skipped before and changed since
            continue
        if st.size != old.size:
            drift.changed.append(rel)
        elif st.mtime_ns != old.mtime_ns:
            budget -= st.size
            if budget < 0 or _read_hash(str(root / rel)) != old.hash:
                drift.changed.append(rel)
    drift.removed = sorted(
        p
        for p in states
        if p not in disk.files and p not in disk.skipped and not below_any(p, disk.unreadable)
    )
    return drift

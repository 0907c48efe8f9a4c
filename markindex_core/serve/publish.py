"""The daemon's status file beside the index, and what it says when that file can't be written.

Every reader (`markindex status`, tool envelopes, the terminal app) judges a daemon by the
heartbeat in that file. One that can no longer be replaced (made immutable, a read-only bind
mount, a folder in its place) froze it: a healthy daemon looked hung, or killed once it stopped,
and the daemon said so only at debug level. Now the failure is logged once, with what to do, and
kept in the daemon's status (`status_file_error`, `status_file_hint`), which its record in the
runtime folder carries to the readers of its user (see `status.daemon_states`). Readers of other
users can't see that record: the status, with the failure, goes to a fallback file beside the
index as well (`status.fallback_path`), which every reader of the index reads.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

from markindex_core.serve.status import (
    remove_fallback_status,
    status_path,
    write_fallback_status,
    write_status_file,
)

log = logging.getLogger("markindex.daemon")

NO_PROBLEM: dict[str, str | None] = {"status_file_error": None, "status_file_hint": None}

_HINTS = {
    errno.EPERM: "is it immutable or append-only? see `lsattr` on it; `chattr -i -a` clears that",
    errno.EACCES: "the index folder or the file is not writable by this user: fix the permissions",
    errno.EROFS: "the file system (or a mount over the file) is read-only",
    errno.EBUSY: "something is mounted over the file: unmount it",
    errno.EISDIR: "a folder is in its place: remove it",
    errno.ENOSPC: "the disk is full: free some space",
    errno.EDQUOT: "the disk quota is used up: free some space",
}


class StatusFile:
    """Writes the status file for a daemon; remembers why it last failed (None when it did not).
    Used on the daemon's event loop only."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.problem: dict[str, str | None] = dict(NO_PROBLEM)
        self._fallback_left = True  # a daemon before this one may have left a fallback file

    def write(self, data: dict[str, Any]) -> dict[str, str | None]:
        """Write `data` (saying no problem: the file is up to date when read), or else the
        fallback file; return the problem keys for the daemon's status and record."""
        try:
            write_status_file(self.db_path, {**data, **NO_PROBLEM})
        except OSError as exc:
            return self._failed(exc, data)
        if self.problem["status_file_error"]:
            log.info("the status file is updated again: %s", status_path(self.db_path))
        if self._fallback_left:
            remove_fallback_status(self.db_path)
            self._fallback_left = False
        self.problem = dict(NO_PROBLEM)
        return self.problem

    def not_ours(self) -> dict[str, str | None]:
        """Another process owns the file now: nothing of this daemon's to say about it."""
        self.problem = dict(NO_PROBLEM)
        return self.problem

    def _failed(self, exc: OSError, data: dict[str, Any]) -> dict[str, str | None]:
        """Say why the status file can't be written, in the fallback file too; when that fails
        as well, only this user's readers (through the record) see the daemon as it is."""
        path = status_path(self.db_path)
        error = f"cannot update the status file {path}: {exc.strerror or exc}"
        hint = _HINTS.get(exc.errno or 0, "make it writable again")
        try:
            write_fallback_status(
                self.db_path, {**data, "status_file_error": error, "status_file_hint": hint}
            )
            self._fallback_left = True
        except OSError:
            hint += "; meanwhile other users see this daemon as hung, and as killed once it stops"
        if error != self.problem["status_file_error"]:  # once, not every heartbeat
            log.warning("%s (%s)", error, hint)
        self.problem = {"status_file_error": error, "status_file_hint": hint}
        return self.problem

"""The mount table (Linux `/proc/self/mountinfo`): what the daemon cannot learn from file events.

A file system mounted into a folder of the library sends no file event, and inotify does not
watch what a mount brings; the daemon compares the mount points below the library to notice.
On a network or FUSE file system inotify sees only the writes made through this machine's
mount, never those of the server, another client or the host of a VM: the daemon polls there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_MOUNTINFO = Path("/proc/self/mountinfo")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


# File systems whose files other machines (a server, other clients, a VM's host) can change
# without an inotify event here. FUSE file systems are mostly remote (sshfs, rclone, s3fs); the
# local-disk one, fuseblk (ntfs-3g), is not among them.
_REMOTE_TYPES = frozenset(
    "nfs nfs4 cifs smb3 smbfs 9p virtiofs afs ceph glusterfs lustre gpfs beegfs vboxsf vmhgfs"
    " prl_fs drvfs davfs fuse".split()
)


def _unescape(field: str) -> str:
    """A mountinfo path field, with spaces and the like written as \\040 and so on."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mounts_in(root: Path) -> frozenset[str] | None:
    """The mount points at or below `root`, or None where the mount table cannot be read."""
    table = _table()
    if table is None:
        return None
    top = str(root).rstrip(os.sep)
    return frozenset(p for p, _ in table if p == top or p.startswith(top + os.sep))


def _table() -> list[tuple[str, str]] | None:
    """(mount point, file system type) of every mount, or None where there is no table."""
    try:
        text = _MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    return parse_table(text)


def parse_table(text: str) -> list[tuple[str, str]]:
    """(mount point, file system type) of each mountinfo line: the 5th field, and the first
    after the ` - ` that ends the optional fields."""
    out = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4 and "-" in fields[5:]:
            fstype = fields[fields.index("-", 5) + 1 :][:1]
            if fstype:
                out.append((_unescape(fields[4]), fstype[0]))
    return out


def remote_file_system(root: Path, table: list[tuple[str, str]] | None = None) -> str | None:
    """Where the library lies on a file system that others can change unseen by inotify (see
    `_REMOTE_TYPES`), as `TYPE at MOUNT POINT`: the one holding `root`, or one mounted below
    it. None when all is local, or when there is no mount table (not Linux)."""
    if table is None:
        table = _table()
        if table is None:
            return None
    top = os.path.realpath(root).rstrip(os.sep) or os.sep
    holding: tuple[str, str] | None = None
    for point, fstype in table:
        if top == point or top.startswith(point.rstrip(os.sep) + os.sep):
            if holding is None or len(point) >= len(holding[0]):
                holding = (point, fstype)  # the last of equal mounts is the visible one
        elif point.startswith(top + os.sep) and _remote(fstype):
            return f"{fstype} at {point}"
    if holding is not None and _remote(holding[1]):
        return f"{holding[1]} at {holding[0]}"
    return None


def _remote(fstype: str) -> bool:
    return fstype in _REMOTE_TYPES or fstype.startswith("fuse.")

"""The mount table (Linux `/proc/self/mountinfo`): what the daemon cannot learn from file events.

A file system mounted into a folder of the library sends no file event, and inotify does not
watch what a mount brings; the daemon compares the mount points below the library to notice.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_MOUNTINFO = Path("/proc/self/mountinfo")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """A mountinfo path field, with spaces and the like written as \\040 and so on."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mounts_in(root: Path) -> frozenset[str] | None:
    """The mount points at or below `root`, or None where the mount table cannot be read."""
    try:
        text = _MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    top = str(root).rstrip(os.sep)
    points = set()
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:  # the 5th field is the mount point
            point = _unescape(fields[4])
            if point == top or point.startswith(top + os.sep):
                points.add(point)
    return frozenset(points)

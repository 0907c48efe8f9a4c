"""Running a real command as the unprivileged user `nobody`, for the permission cases.

The tests run as root, and root reads and writes everything, so a permission test runs the command
through `setpriv` as `nobody`, in a temporary folder everyone may enter (pytest's own is private
to root). When that is impossible the fixture skips and says exactly why.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import REPO

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
CHILD_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@functools.cache
def nobody_unavailable() -> str | None:
    """Why the permission cases can't run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root, to create files as root and run the command as `nobody`"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux) to drop to `nobody`"
    try:
        pwd.getpwnam("nobody")
        grp.getgrnam("nogroup")
    except KeyError:
        return "needs the user `nobody` and the group `nogroup`"
    probe = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", "import apsw, markindex_core.library"],
        cwd=REPO,
        env=CHILD_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        return f"`nobody` cannot run {sys.executable} on this checkout: {probe.stderr[-300:]}"
    return None


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder `nobody` may enter; skips when commands can't run as `nobody`."""
    reason = nobody_unavailable()
    if reason:
        pytest.skip(reason)
    path = Path(tempfile.mkdtemp(prefix="markindex-perm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)

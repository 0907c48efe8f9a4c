"""An index run that never got to its end: killed, stopped (Ctrl-C, a terminal app that quit) or
crashed while it had files to write.

Each write is one transaction, so such an index opens and what it holds is whole. But it may lack
documents the run had still to add, and hold old versions of those it had still to update or
remove, and nothing else says so: its document count looks like a finished index's. A run of the
whole library that has files to write marks the index when it starts, and clears the mark when it
ends (see `index.indexer`). A mark left while no writer holds the lock is said by `status`,
`search` and every tool answer, until a run of the whole library ends. The daemon's runs of a few
changed paths leave no mark: a failed one is retried, and the daemon's own status says what it
left undone when it stops or dies.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from markindex_core.store.lock import lock_path_for, writer_active

UNFINISHED_RUN = "unfinished_run"  # meta key: {"at": start time, "files": files to write}


def mark(files: int) -> dict[str, str]:
    """The meta value a run with `files` to write sets when it starts."""
    return {UNFINISHED_RUN: json.dumps({"at": round(time.time(), 3), "files": files})}


def unfinished_run(meta_value: str | None, db_path: Path) -> dict[str, Any] | None:
    """The run that left its mark ({"at", "files"}), when no writer holds the lock now (a run
    under way holds it: its mark is no news)."""
    if meta_value is None or writer_active(lock_path_for(db_path)):
        return None
    try:
        run = json.loads(meta_value)
        return {"at": float(run["at"]), "files": int(run["files"])}
    except (ValueError, TypeError, KeyError):
        return {"at": None, "files": None}


def unfinished_warning(run: dict[str, Any]) -> str:
    """What `status`, `search` and the tool envelopes say of an unfinished run."""
    when = ""
    if run.get("at"):
        when = time.strftime(" at %Y-%m-%d %H:%M:%S", time.localtime(run["at"]))
    files = f" with {run['files']} files to write" if run.get("files") else ""
    return (
        f"the last index run (started{when}{files}) stopped before its end: documents may be"
        " missing or out of date; run `markindex index` (or start the daemon) to complete it"
    )

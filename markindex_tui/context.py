"""What screens need from the app: the library, a clock, the cursor setting and the watcher.

`MarkindexApp` provides it. Screens depend on this protocol instead of importing the app module,
which imports them (no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from markindex_core.library import Library
from markindex_core.serve.daemon import Daemon


class AppContext(Protocol):
    lib: Library
    clock: Callable[[], float]
    cursor_blink: bool
    watcher: Daemon | None

    def watch_label(self) -> str: ...

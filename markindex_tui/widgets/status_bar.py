"""One line under the panes: documents, index freshness, and who is writing the index."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static

from markindex_core.text.safe import printable
from markindex_tui.data import Status, age


def render_status(
    name: str, s: Status, now: float, watching: str, changes: str | None = None
) -> Text:
    text = Text.assemble((f"{name} ", "bold"))
    if s.error is not None:
        text.append("· index unusable", style="bold red")
    elif not s.indexed:
        text.append("· no index file (i builds it)", style="bold red")
    else:
        text.append(f"· {s.documents:,} document{'' if s.documents == 1 else 's'}")
    if s.skipped:
        text.append(f" · {s.skipped} skipped")
    if s.last_index_at is not None:
        text.append(f" · indexed {age(max(0.0, now - s.last_index_at))}")
    text.append(*_writer(s, watching))
    if s.error is not None:  # last: the parts before stay in view when it is long
        text.append(f" · {printable(s.error)}", style="red")
    elif s.stale is not None and not watching:
        text.append(f" · {printable(s.stale)}", style="yellow")
    elif s.status_file is not None:  # also the app's own watcher's: it writes that file
        text.append(f" · {printable(s.status_file)}", style="yellow")
    elif s.unfinished is not None and not watching:
        text.append(f" · {printable(s.unfinished)}", style="yellow")
    elif changes is not None and not watching and s.writer == "none":
        text.append(f" · {changes}", style="yellow")
    return text


def _writer(s: Status, watching: str) -> tuple[str, str]:
    """Who keeps the index current, as (text, style)."""
    if watching:
        return f" · {watching}", "bold"
    if s.stale is not None:  # a live daemon that cannot keep up: never "writing"
        return " · daemon not updating", "bold yellow"
    if s.writer == "daemon":
        return " · daemon writing", "bold"
    if s.writer == "writer" and s.unfinished is not None:  # a writer stopped with Ctrl-Z
        return " · index run stopped", "bold yellow"
    if s.writer == "writer":
        return " · being indexed", "bold"
    if s.unfinished is not None:  # a run that was killed or stopped: i completes it
        return " · last index run unfinished (i completes it)", "bold yellow"
    return " · no daemon", "dim"


class StatusBar(Static):
    """Updated by the app whenever the index or the writer changes; one row when it fits, up
    to three in a narrow terminal (what it warns of, and the key that fixes it, come last)."""

    DEFAULT_CSS = """
    StatusBar {
        height: auto;
        max-height: 3;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, library_name: str, clock: Callable[[], float], **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.lib_name = library_name
        self.clock = clock
        self.status: Status | None = None
        self.watching = ""
        self.changes: str | None = None  # how the folder differs from a static index

    def set_status(self, status: Status | None = None, *, watching: str | None = None) -> None:
        if status is not None:
            self.status = status
        if watching is not None:
            self.watching = watching
        if self.status is not None:
            self.update(
                render_status(self.lib_name, self.status, self.clock(), self.watching, self.changes)
            )

    def set_changes(self, changes: str | None) -> None:
        self.changes = changes
        self.set_status()

"""Shown when the library has no index yet: offers to build it, with a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Button, Footer, ProgressBar, Static
from textual.worker import Worker, get_current_worker

from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_core.text.safe import printable
from markindex_tui.data import documents
from markindex_tui.failures import describe, failure

Progress = Callable[[int, int, str], None]  # (files done, files in all, path): `Library.index`'s


class BuildStopped(Exception):
    """Raised in the indexing thread, at its next file, once the app is quitting."""


def stop_when_cancelled(on_progress: Progress | None = None) -> Progress:
    """A progress callback for `Library.index` in a thread worker that ends the run once the
    worker is cancelled (the app quits): the event loop waits for its threads, so a build left
    running kept the terminal hanging until every file was read. What was written stays
    consistent; the next run completes it."""
    worker = get_current_worker()

    def progress(done: int, total: int, path: str) -> None:
        if worker.is_cancelled:
            raise BuildStopped
        if on_progress is not None:
            on_progress(done, total, path)

    return progress


def shown_path(lib: Library) -> str:
    """The index path as the user thinks of it (relative to the library when inside it)."""
    try:
        return str(lib.db_path.relative_to(lib.root))
    except ValueError:
        return str(lib.db_path)


class BuildScreen(Screen[bool]):
    """Dismissed with True once the index exists, False when the user declines."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,b", "build", "Build the index"),
        Binding("escape,q", "decline", "Quit"),
    ]
    DEFAULT_CSS = """
    BuildScreen { align: center middle; }
    BuildScreen > Vertical {
        width: 72; height: auto; padding: 1 2;
        border: round $primary; background: $surface;
    }
    BuildScreen #build-text { margin-bottom: 1; }
    BuildScreen #build-progress { display: none; margin-bottom: 1; }
    BuildScreen.-building #build-progress { display: block; }
    BuildScreen.-building Horizontal { display: none; }
    BuildScreen #build-file { height: auto; color: $text-muted; }
    BuildScreen Horizontal { height: auto; align-horizontal: center; }
    BuildScreen Button { margin: 0 1; }
    """

    def __init__(self, lib: Library, reason: str = "") -> None:
        super().__init__()
        self.lib = lib
        self.reason = reason
        self._progress: tuple[int, int, str] = (0, 0, "")
        self._progress_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            head = (
                Text.assemble(
                    "The index cannot be used: ", printable(self.reason), "\nRebuilding it"
                )
                if self.reason
                else Text.assemble(
                    "No index yet for ", (printable(self.lib.root.name), "bold"), ".\nBuilding it"
                )
            )
            head.append(" reads every Markdown file once and writes ")
            head.append(printable(shown_path(self.lib)), style="bold")
            head.append(". Later runs only re-read changed files.")
            yield Static(head, id="build-text")
            yield ProgressBar(id="build-progress", show_eta=False)
            yield Static("", id="build-file")
            with Horizontal():
                yield Button("Build index", id="build", variant="primary")
                yield Button("Quit", id="quit")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "markindex"

    @on(Button.Pressed, "#build")
    def action_build(self) -> None:
        if self.has_class("-building"):
            return
        self.add_class("-building")
        self._progress = (0, 0, "")
        self.query_one("#build-file", Static).update("")
        self._progress_timer = self.set_interval(0.1, self._show_progress, name="build-progress")
        self.build()

    @on(Button.Pressed, "#quit")
    def action_decline(self) -> None:
        if not self.has_class("-building"):
            self.dismiss(False)

    def _on_progress(self, done: int, total: int, path: str) -> None:
        # Runs in the indexing thread: only store; a timer on the UI thread draws it.
        self._progress = (done, total, path)

    def _show_progress(self) -> None:
        done, total, path = self._progress
        if total:
            self.query_one(ProgressBar).update(total=total, progress=done)
        self.query_one("#build-file", Static).update(Text(printable(path)[-66:], no_wrap=True))

    @work(thread=True, exclusive=True, group="build", exit_on_error=False)
    def build(self) -> None:
        try:
            report = self.lib.index(progress=stop_when_cancelled(self._on_progress))
        except BuildStopped:
            return  # the app is quitting
        except MarkindexError as exc:
            self.app.call_from_thread(self._failed, exc)
            return
        self.app.call_from_thread(self._done, len(report.added), len(report.skipped))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        error = failure(event)  # not a MarkindexError (those end the worker normally)
        if error is not None:
            self._failed(error)

    def _failed(self, exc: BaseException) -> None:
        # Stop the progress timer first: it would overwrite the message with the last file name.
        if self._progress_timer is not None:
            self._progress_timer.stop()
            self._progress_timer = None
        self.remove_class("-building")
        message = printable(describe(exc))
        self.query_one("#build-file", Static).update(Text("not built: " + message, style="bold"))
        self.app.notify(message, title="index not built", severity="error", markup=False)

    def _done(self, added: int, skipped: int) -> None:
        msg = f"indexed {documents(added)}" + (f", skipped {skipped}" if skipped else "")
        self.app.notify(msg, title="index built")
        self.dismiss(True)

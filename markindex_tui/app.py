"""`markindex tui ROOT`: the terminal app (factory, global bindings, optional in-app watcher)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import TextArea, Tree
from textual.worker import Worker

from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_core.serve.daemon import Daemon
from markindex_core.serve.status import read_status
from markindex_core.text import segment
from markindex_core.text.safe import printable
from markindex_tui.data import now
from markindex_tui.failures import report_failure
from markindex_tui.screens.browse import BrowseScreen
from markindex_tui.screens.build import BuildScreen
from markindex_tui.screens.help import HelpScreen, HelpSection
from markindex_tui.screens.search import SearchScreen
from markindex_tui.widgets.library_tree import LibraryTree

DARK, LIGHT = "textual-dark", "textual-light"
INTRO = (
    "markindex shows a library of long Markdown documents as folders → documents → sections "
    "(the optimized section tree: merged headings follow a title after '+', long sections "
    "are split into chunks). The preview holds the selected entry's original lines with their "
    "real line numbers; a folder lists its documents with title, description, size and tokens, "
    "as an agent browsing it sees them (tab to the list, enter opens one). The status line says how many documents are indexed, how fresh the "
    "index is and whether a daemon keeps it live; commits by other processes show up at once."
)
_PREVIEW_KEYS = ("cursor", "select", "copy", "scroll")


def _preview_binding(b: Binding) -> bool:
    return b.action.split("(")[0].startswith(_PREVIEW_KEYS)


class MarkindexApp(App[None]):
    """Browse, search and cite one library; follows its index live."""

    CSS_PATH = "app.tcss"
    TITLE = "markindex"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("t", "toggle_theme", "Light/dark theme", show=False),
        Binding("ctrl+p", "command_palette", "Commands (themes…)", show=False),
    ]

    def __init__(
        self,
        lib: Library,
        *,
        watch: bool = False,
        clock: Callable[[], float] = now,
        cursor_blink: bool = True,
    ) -> None:
        super().__init__()
        self.lib = lib
        self.watch_requested = watch
        self.clock = clock
        self.cursor_blink = cursor_blink
        self.watcher: Daemon | None = None
        self._watch_worker: Worker[None] | None = None
        self.theme = DARK

    def on_mount(self) -> None:
        self.title = f"markindex · {printable(self.lib.root.name)}"
        reason = ""
        if self.lib.has_index():
            try:
                self.lib.store.data_version()
            except MarkindexError as exc:  # e.g. made by an older markindex: rebuild it
                reason = exc.message
            else:
                self._open_library()
                return
        self.push_screen(BuildScreen(self.lib, reason), self._built)

    def _built(self, ok: bool | None) -> None:
        if ok:
            self._open_library()
        else:
            self.exit()

    def _open_library(self) -> None:
        self.push_screen(BrowseScreen())
        if self.watch_requested:
            self.start_watching()
        # rjieba builds its dictionary on first use (~0.2 s): do it before the first search,
        # but after the first frame (the import holds the GIL).
        self.set_timer(0.5, self._warm_up)

    def _warm_up(self) -> None:
        self.run_worker(segment.warm, thread=True, group="warmup", exit_on_error=False)

    # ----- watching -----------------------------------------------------------------------------
    def start_watching(self) -> None:
        """Run the core's daemon (watch + reconcile) inside the app, unless a live daemon already
        writes. Any other writer (an index run) ends: the app's daemon waits for the lock, read-only,
        and takes over."""
        try:
            status = read_status(self.lib)
        except (OSError, MarkindexError) as exc:
            self.notify(printable(str(exc)), title="watch", severity="error", markup=False)
            return
        if status["daemon_writing"]:
            self.notify("a daemon keeps this index live; not watching", title="watch")
            return
        self.watcher = Daemon(self.lib)
        self._watch_worker = self.run_worker(
            self.watcher.run(), group="watch", name="watcher", exit_on_error=False
        )

    def watch_label(self) -> str:
        if self.watcher is None:
            return ""
        state = str(self.watcher.status.get("state", ""))
        if self._watch_worker is not None and self._watch_worker.is_finished:
            return "watcher stopped"
        waiting = self.watcher.status.get("events_waiting") or 0
        if waiting:  # a burst watchdog is still reading: the tree is behind the folder until then
            return f"watching (reading ~{waiting} file events)"
        return "watching" if state in ("watching", "starting") else f"watching ({state})"

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed worker (index unreadable, watcher stopped) becomes a notification."""
        report_failure(self, event)

    # ----- actions ------------------------------------------------------------------------------
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(help_sections(), INTRO))

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.current_theme.dark else DARK


def help_sections() -> list[HelpSection]:
    def all_(_: Binding) -> bool:
        return True

    return [
        ("Anywhere", [MarkindexApp], all_),
        ("Library", [BrowseScreen], all_),
        ("Library tree", [Tree, LibraryTree], all_),
        ("Preview (tab to focus)", [TextArea], _preview_binding),
        ("Search box", [SearchScreen], all_),
        ("Index missing", [BuildScreen], all_),
    ]


def make_app(
    root: str | Path,
    db: str | Path | None = None,
    *,
    watch: bool = False,
    **kwargs: Any,
) -> MarkindexApp:
    """The app for one library (raises LibraryNotFound for a missing folder)."""
    return MarkindexApp(Library(root, db), watch=watch, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Entry point of `markindex tui` (see markindex_core/cli_tui.py)."""
    app = make_app(args.root, args.db, watch=args.watch)
    app.run()
    if app.watcher is not None:  # its stop ends after the app's: the last write, the final status
        app.watcher.wait_stopped()
        failed = app.watcher.stop_error()
        if failed is not None:
            raise failed  # printed with its hint; exit 1
    return app.return_code or 0

"""The search box: live results after a typing pause, scoped to the library, a folder or a document."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static
from textual.worker import Worker

from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_core.search.searcher import Hit, SearchResult
from markindex_core.text.safe import printable
from markindex_tui.failures import report_failure
from markindex_tui.settings import TUI_SEARCH_LIMIT, TUI_SEARCH_PAUSE_SECONDS
from markindex_tui.widgets.hit_list import HitList


@dataclass(frozen=True)
class Scope:
    kind: str  # "library" | "folder" | "document"
    folder: str | None = None
    doc_path: str | None = None

    def label(self) -> str:
        if self.kind == "folder":
            return f"folder {printable(self.folder or '')}/"
        if self.kind == "document":
            return f"document {printable(self.doc_path or '')}"
        return "whole library"


class QueryInput(Input):
    """The search box: a control or bidi character pasted into it (text copied from a terminal
    or a hostile file) becomes a space. Drawn raw, an ESC in the box reached the terminal (an
    OSC 52 wrote the clipboard); nothing is searched by it anyway."""

    def replace(self, text: str, start: int, end: int) -> None:
        super().replace("".join(ch if printable(ch) == ch else " " for ch in text), start, end)


def scopes_for(folder: str, doc_path: str | None) -> list[Scope]:
    """The scopes the one scope key cycles through, from where the cursor is."""
    out = [Scope("library")]
    if folder:
        out.append(Scope("folder", folder=folder))
    if doc_path:
        out.append(Scope("document", doc_path=doc_path))
    return out


class SearchScreen(ModalScreen[Hit | None]):
    """Type to search; enter opens the highlighted result in the tree and the preview."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("enter", "choose", "Open result", show=True),
        Binding("ctrl+s", "cycle_scope", "Scope"),
        Binding("down", "move(1)", "Next result", show=False),
        Binding("up", "move(-1)", "Previous result", show=False),
        Binding("pagedown", "move(5)", "Results page down", show=False),
        Binding("pageup", "move(-5)", "Results page up", show=False),
    ]
    DEFAULT_CSS = """
    SearchScreen { align: center top; }
    SearchScreen > Vertical {
        width: 100%;
        max-width: 140;
        height: 1fr;
        margin: 1 2 0 2;
        border: round $primary;
        background: $surface;
    }
    SearchScreen #query { margin: 0 0; }
    /* wraps in a narrow terminal: the count and "nothing matched; try …" come last */
    SearchScreen #search-info { height: auto; max-height: 3; padding: 0 1; color: $text-muted; }
    /* min-width: see FolderView (an OptionList with no room for its options raises): 2 cells
       of text beside the list's padding, the scrollbar's room and the options' padding. That
       room is kept (scrollbar-gutter) because HitList fits each hit to its width, and a
       scrollbar that appears takes 2 columns without a resize: fitted rows wrapped again. */
    SearchScreen #results { height: 1fr; border: none; min-width: 8; scrollbar-gutter: stable; }
    SearchScreen #results > .option-list--option { padding: 0 1; }
    """

    def __init__(self, lib: Library, scopes: list[Scope], scope: int = 0, query: str = "") -> None:
        super().__init__()
        self.lib = lib
        self.scopes = scopes
        self.scope_index = min(scope, len(scopes) - 1)
        self.initial_query = query
        self.query_text = query
        self.result: SearchResult | None = None
        self.result_scope: Scope | None = None  # the scope `result` was searched in
        self.last_latency_ms = 0.0  # after the pause: search + showing the results

    @property
    def scope(self) -> Scope:
        return self.scopes[self.scope_index]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield QueryInput(
                self.initial_query,
                placeholder="search: words, a question, an identifier, 中文…",
                id="query",
            )
            yield Static(id="search-info")
            yield HitList(id="results")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "Search"
        self.query_one(Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        self._show_info()
        if self.initial_query.strip():
            self.run_search(self.initial_query, pause=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)  # (the message does not bubble to the app)

    # ----- searching ----------------------------------------------------------------------------
    @on(Input.Changed, "#query")
    def _changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.run_search(event.value)

    @work(exclusive=True, group="search", exit_on_error=False)
    async def run_search(self, query: str, pause: bool = True, choose: bool = False) -> None:
        """Runs after a typing pause; a newer keystroke cancels this worker (and its stale query)."""
        if not query.strip():
            self._show(None)
            return
        if pause:
            await asyncio.sleep(TUI_SEARCH_PAUSE_SECONDS)
        t0 = time.perf_counter()
        scope = self.scope
        try:
            result = await asyncio.to_thread(
                self.lib.search,
                query,
                folder=scope.folder,
                doc_path=scope.doc_path,
                limit=TUI_SEARCH_LIMIT,
            )
        except MarkindexError as exc:
            self.notify(printable(exc.message), title="search", severity="error", markup=False)
            return
        self.result_scope = scope
        self._show(result)
        self.app.call_after_refresh(self._painted, t0)
        if choose:
            self.action_choose()

    def _painted(self, t0: float) -> None:
        self.last_latency_ms = (time.perf_counter() - t0) * 1000

    def _show(self, result: SearchResult | None) -> None:
        self.result = result
        hits = result.hits if result is not None else []
        self.query_one("#results", HitList).show(hits, result.terms if result is not None else [])
        self._show_info()

    def _show_info(self) -> None:
        text = Text.assemble(("in ", "dim"), (self.scope.label(), "bold"))
        if len(self.scopes) > 1:
            text.append("  (ctrl+s: change)", style="dim")
        r = self.result
        if r is not None:
            n = len(r.hits)
            text.append(f" · {n} result{'' if n == 1 else 's'}", style="")
            if r.mode == "relaxed":
                text.append(" · not all words found", style="italic")
            elif r.mode == "substring":
                text.append(" · substring matches", style="italic")
            elif r.notice and not r.hits:
                text.append(f" · {printable(r.notice)}", style="italic")
        self.query_one("#search-info", Static).update(text)

    # ----- actions ------------------------------------------------------------------------------
    def action_cycle_scope(self) -> None:
        self.scope_index = (self.scope_index + 1) % len(self.scopes)
        self._show_info()
        self.run_search(self.query_one("#query", Input).value, pause=False)

    def action_move(self, step: int) -> None:
        results = self.query_one("#results", HitList)
        if results.option_count == 0:
            return
        current = results.highlighted if results.highlighted is not None else -1
        results.highlighted = max(0, min(results.option_count - 1, current + step))

    def action_choose(self) -> None:
        results = self.query_one("#results", HitList)
        if self.result is None or not self.result.hits:
            return
        index = results.highlighted if results.highlighted is not None else 0
        self.dismiss(self.result.hits[index])

    @on(Input.Submitted, "#query")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        # Enter before the typing pause ended, or right after a scope change, while the list
        # still holds other results: search now, then open the first result.
        r = self.result
        if r is not None and r.query == event.value and self.result_scope == self.scope:
            self.action_choose()
        else:
            self.run_search(event.value, pause=False, choose=True)

    @on(HitList.OptionSelected, "#results")
    def _selected(self, event: HitList.OptionSelected) -> None:
        event.stop()
        if self.result is not None and event.option_index < len(self.result.hits):
            self.dismiss(self.result.hits[event.option_index])

    def action_close(self) -> None:
        self.dismiss(None)

"""The main screen: library tree on the left, metadata and original lines on the right."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import ClassVar, cast

import apsw
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Tree
from textual.worker import Worker

from markindex_core.errors import MarkindexError
from markindex_core.search.searcher import Hit
from markindex_core.store.files import FileId, file_id
from markindex_core.text.safe import printable
from markindex_tui import data
from markindex_tui.context import AppContext
from markindex_tui.data import DocMeta, Ref
from markindex_tui.failures import report_failure
from markindex_tui.screens.build import BuildStopped, stop_when_cancelled
from markindex_tui.screens.search import SearchScreen, scopes_for
from markindex_tui.settings import (
    TUI_DRIFT_POLL_SECONDS,
    TUI_POLL_SECONDS,
    TUI_WRITER_POLL_SECONDS,
)
from markindex_tui.widgets.doc_info import DocInfoPanel
from markindex_tui.widgets.folder_view import FolderView
from markindex_tui.widgets.library_tree import Entry, LibraryTree
from markindex_tui.widgets.lines_view import LinesView, Place
from markindex_tui.widgets.status_bar import StatusBar

IndexVersion = tuple[FileId | None, int]


@dataclass(frozen=True)
class FoundPassage:
    """The search hit last jumped to: its tree entry, passage lines and citation, and the
    section's own lines when it was found (the passage holds only while they do)."""

    key: tuple[str, str, str]
    lines: tuple[int, int]
    citation: str
    section: tuple[int, int]
    checked: bool = False  # its preview found the section where the search did: it holds


class BrowseScreen(Screen[None]):
    """Follows the index live: a commit by another process refreshes tree, preview and status."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("c", "copy_citation", "Copy citation"),
        Binding("r", "reload", "Reload"),
        Binding("i", "update_index", "Update index", show=False),
        Binding("ctrl+l", "focus_lines", "Focus preview", show=False),
        Binding("ctrl+t", "focus_tree", "Focus tree", show=False),
    ]

    NARROW_BELOW = 60  # columns: under this the tree sits above the preview (app.tcss)

    def __init__(self) -> None:
        super().__init__()
        self._info_cache: dict[str, DocMeta] = {}
        self._hit: FoundPassage | None = None
        self._index_version: IndexVersion | None = None
        self.last_query = ""
        self.last_scope = "library"
        self.last_preview_ms = 0.0  # highlight → lines shown (the benchmark reads it)

    @property
    def mapp(self) -> AppContext:
        return cast(AppContext, self.app)

    def compose(self) -> ComposeResult:
        lib = self.mapp.lib
        with Horizontal(id="panes"):
            yield LibraryTree(lib, id="tree")
            with Vertical(id="right"):
                yield DocInfoPanel(id="info")
                yield LinesView(id="lines")
                yield FolderView(id="folder-docs")
        yield StatusBar(printable(lib.root.name), self.mapp.clock, id="status")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one(LinesView).cursor_blink = self.mapp.cursor_blink
        self.query_one(FolderView).display = False
        self.query_one(LibraryTree).focus()
        self._index_version = self._read_index_version()
        self.refresh_status()
        self.set_interval(TUI_POLL_SECONDS, self._poll_index, name="poll-index")
        self.set_interval(TUI_WRITER_POLL_SECONDS, self.refresh_status, name="poll-writer")
        self.refresh_changes()
        self.set_interval(TUI_DRIFT_POLL_SECONDS, self.refresh_changes, name="poll-folder")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)  # (the message does not bubble to the app)

    # ----- layout -------------------------------------------------------------------------------
    def on_resize(self) -> None:
        # (also sent when a screen on top closes after the terminal was resized under it)
        self.set_class(self.app.size.width < self.NARROW_BELOW, "-narrow")

    # ----- preview ------------------------------------------------------------------------------
    @on(Tree.NodeHighlighted, "#tree")
    def _highlighted(self, event: Tree.NodeHighlighted[Entry]) -> None:
        if event.node.data is not None:
            self.load_preview(event.node.data.ref)

    @work(exclusive=True, group="preview", exit_on_error=False)
    async def load_preview(self, ref: Ref, keep_scroll: bool = False) -> None:
        """Read only this entry's lines in a thread; a newer highlight cancels this one.

        `keep_scroll` (a refresh): the reader stays where they were in the entry on screen (the
        lines around their place are read again, or as many of a folder's documents); another
        entry (the one on screen is gone) starts at its top.
        """
        t0 = time.perf_counter()
        hit = self._hit if self._hit is not None and self._hit.key == ref.key else None
        focus = hit.lines if hit is not None else None
        cached = self._info_cache.get(ref.doc_path or "")
        # (A found passage is shown as after the jump: a window around the place may miss it.)
        place = self.query_one(LinesView).place(ref) if keep_scroll and not focus else None
        listed = self.query_one(FolderView).held(ref) if keep_scroll else None
        window = place.window() if place is not None else None
        p = await asyncio.to_thread(
            data.preview, self.mapp.lib, ref, cached, focus, keep=window, listed=listed or 0
        )
        if hit is not None and p.own != hit.section:
            # The document changed since the search: its passage and citation no longer hold.
            self._hit, focus = None, None
            self._passage_gone(ref.path, "the section moved")
            p = await asyncio.to_thread(data.preview, self.mapp.lib, ref, p.info)
        elif hit is not None and self._hit is hit:
            self._hit = replace(hit, checked=True)
        if p.info is not None:
            self._info_cache[p.info.doc["path"]] = p.info
        self.query_one(DocInfoPanel).show(p)
        self._show_lines_or_folder(p, focus, place, listed is not None)
        self.last_preview_ms = (time.perf_counter() - t0) * 1000

    def _show_lines_or_folder(
        self, p: data.Preview, focus: tuple[int, int] | None, place: Place | None, keep: bool
    ) -> None:
        """A folder lists its documents (`keep`: where the list was); anything else shows its
        original lines (back at `place`)."""
        lines, folder = self.query_one(LinesView), self.query_one(FolderView)
        is_folder = p.folder is not None
        if p.folder is not None:
            folder.show(p.folder, p.documents, keep=keep)
        else:
            lines.show(p, focus, place)
        if folder.has_focus and not is_folder:
            lines.focus()
        elif lines.has_focus and is_folder:
            folder.focus()
        lines.display, folder.display = not is_folder, is_folder

    @on(FolderView.NeedMore)
    def _folder_more(self, event: FolderView.NeedMore) -> None:
        self.load_folder_page(event.folder, event.offset)

    @work(exclusive=True, group="folder-more", exit_on_error=False)
    async def load_folder_page(self, folder: str, offset: int) -> None:
        page = await asyncio.to_thread(data.folder_page, self.mapp.lib, folder, offset)
        self.query_one(FolderView).append(page)

    @on(FolderView.Open)
    def _folder_open(self, event: FolderView.Open) -> None:
        self.open_document(event.doc_path)

    @work(exclusive=True, group="jump", exit_on_error=False)
    async def open_document(self, doc_path: str) -> None:
        """Put the tree's cursor on a document chosen in the folder view."""
        tree = self.query_one(LibraryTree)
        await tree.reveal(doc_path)
        tree.focus()

    @on(LinesView.NeedMore)
    def _need_more(self, event: LinesView.NeedMore) -> None:
        self.load_more(event.start)

    @work(exclusive=True, group="preview-more", exit_on_error=False)
    async def load_more(self, start: int) -> None:
        view = self.query_one(LinesView)
        p = view.shown
        if p is None:
            return
        lines = await asyncio.to_thread(data.more_lines, self.mapp.lib, p, start)
        if view.shown is p and (grown := view.append(start, lines)) is not None:
            self.query_one(DocInfoPanel).show(grown, keep_scroll=True)

    # ----- search -------------------------------------------------------------------------------
    def action_search(self) -> None:
        ref = self.query_one(LibraryTree).selected_ref()
        scopes = scopes_for(ref.folder if ref else "", ref.doc_path if ref else None)
        index = next((i for i, s in enumerate(scopes) if s.kind == self.last_scope), 0)
        screen = SearchScreen(self.mapp.lib, scopes, index, self.last_query)

        def chosen(hit: Hit | None) -> None:
            self.last_query, self.last_scope = screen.query_text, screen.scope.kind
            if hit is not None:
                self.jump_to(hit)

        self.app.push_screen(screen, chosen)

    @work(exclusive=True, group="jump", exit_on_error=False)
    async def jump_to(self, hit: Hit) -> None:
        """Open the tree down to the hit's node and select its passage in the preview."""
        key = ("node", hit.doc_path, hit.node_id)
        self._hit = FoundPassage(
            key,
            (hit.passage_start, hit.passage_end),
            hit.citation,
            (hit.start_line, hit.end_line),
        )
        tree = self.query_one(LibraryTree)
        node = await tree.reveal(hit.doc_path, hit.node_id)
        tree.focus()
        if node is None or node.data is None or node.data.ref.key != key:
            self._hit = None  # the document or the section is gone: the closest entry is shown
            self._passage_gone(hit.doc_path, "that section is no longer in the index")
        if node is not None and node.data is not None:
            self.load_preview(node.data.ref)

    def _passage_gone(self, doc_path: str, what: str) -> None:
        self.notify(
            f"{printable(doc_path)} changed since the search ({what}): showing it as it is"
            " now; search again for the passage",
            title="search result out of date",
            severity="warning",
            markup=False,
        )

    # ----- citation -----------------------------------------------------------------------------
    def citation(self) -> str | None:
        """`[doc_path, Lx-y]` of the entry under the cursor (the found passage after a search)."""
        ref = self.query_one(LibraryTree).selected_ref()
        if ref is None or ref.doc_path is None:
            return None
        if self._hit is not None and self._hit.key == ref.key:
            # Until its preview has checked the section, the found passage may be out of date.
            return self._hit.citation if self._hit.checked else None
        if ref.kind == "node":
            return f"[{ref.path}, L{ref.start}-{ref.end}]"
        info = self._info_cache.get(ref.path)
        if info is None:  # its preview has not loaded (or failed): the line count is unknown
            return None
        return f"[{ref.path}, L1-{int(info.doc['line_count'])}]"

    def action_copy_citation(self) -> None:
        cite = self.citation()
        if cite is None:
            ref = self.query_one(LibraryTree).selected_ref()
            if ref is not None and ref.doc_path is not None:
                message = "this document's lines are not loaded (see the status line); try again"
            else:
                message = "select a document or a section first"
            self.notify(message, severity="warning")
            return
        self.app.copy_to_clipboard(cite)
        self.notify(printable(cite), title="citation copied", markup=False)

    # ----- live index ---------------------------------------------------------------------------
    def _read_index_version(self) -> IndexVersion | None:
        """Which index file is at the path and how far its commits went; None when there is
        none (or it cannot be read). `data_version` alone misses a full rebuild: the new file
        gets a new connection, whose count may well equal the old one's."""
        lib = self.mapp.lib
        try:
            return file_id(lib.db_path), lib.store.data_version()
        except (MarkindexError, apsw.Error):  # e.g. CorruptError: a file copied over it
            return None

    def _poll_index(self) -> None:
        version = self._read_index_version()
        if version == self._index_version:
            return
        self._index_version = version
        if version is None:  # removed or unusable: the status line says so, the tree stays
            self.refresh_status()
        else:
            self.refresh_index()

    @work(exclusive=True, group="refresh", exit_on_error=False)
    async def refresh_index(self) -> None:
        """Another connection committed: re-read what is on screen, keeping the cursor."""
        self._info_cache.clear()
        tree = self.query_one(LibraryTree)
        await tree.reload()
        self.refresh_status()
        self.refresh_changes()
        ref = tree.selected_ref()
        if ref is not None:
            self.load_preview(ref, keep_scroll=True)

    def action_reload(self) -> None:
        self.refresh_index()

    @work(exclusive=True, group="folder-changes", exit_on_error=False)
    async def refresh_changes(self) -> None:
        """With no daemon and no watcher, compare the folder with the index (a stat of every
        file, in a thread) for the status line: a static index behind its folder says so."""
        bar = self.query_one(StatusBar)
        live = self.mapp.watcher is not None or (bar.status and bar.status.writer != "none")
        changes = None if live else await asyncio.to_thread(data.folder_changes, self.mapp.lib)
        bar.set_changes(changes)

    @work(exclusive=True, group="status", exit_on_error=False)
    async def refresh_status(self) -> None:
        status = await asyncio.to_thread(data.status, self.mapp.lib)
        self.query_one(StatusBar).set_status(status, watching=self.mapp.watch_label())

    @work(thread=True, exclusive=True, group="update-index", exit_on_error=False)
    def action_update_index(self) -> None:
        """Bring the index up to date now (fails fast when a daemon is the writer)."""
        if self.mapp.watcher is not None:
            self.app.call_from_thread(self.notify, "the watcher keeps the index current")
            return
        try:
            report = self.mapp.lib.index(progress=stop_when_cancelled())
        except BuildStopped:
            return  # the app is quitting
        except MarkindexError as exc:
            self.app.call_from_thread(
                self.notify, printable(exc.message), severity="error", markup=False
            )
            return
        changes = len(report.added) + len(report.updated) + len(report.removed)
        self.app.call_from_thread(
            self.notify, f"{data.documents(changes)} changed", title="index updated"
        )

    def action_focus_lines(self) -> None:
        lines = self.query_one(LinesView)
        (lines if lines.display else self.query_one(FolderView)).focus()

    def action_focus_tree(self) -> None:
        self.query_one(LibraryTree).focus()

"""The selected entry's original lines, numbered as in the file; a cited passage is selected."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from textual.geometry import Offset
from textual.message import Message
from textual.widgets import TextArea
from textual.widgets.text_area import Selection

from markindex_core.text.safe import printable
from markindex_tui.data import Preview, Ref
from markindex_tui.settings import TUI_PREVIEW_LINE_CHARS, TUI_PREVIEW_MAX_LINES

# `printable` escapes every other character `str.splitlines` breaks at; the text area splits its
# rows with it, so one of these would show one line of the file as two numbered rows.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})


def shown_line(line: str, limit: int = TUI_PREVIEW_LINE_CHARS) -> str:
    """A document line as the terminal may show it: tabs stay, other control characters are
    escaped (an ESC in a file must not clear the screen or write the clipboard), and a line
    longer than `limit` is cut with a note of what was left out (laying out a 1 MB line
    blocked the app for seconds on every highlight). The Unicode line and paragraph separators
    are escaped too: each line of the file is one row, under its own number."""
    cut = ""
    if len(line) > limit:
        line, cut = line[:limit], f" … [{len(line) - limit:,} more characters on this line]"
    shown = "\t".join(printable(part) for part in line.split("\t"))
    return shown.translate(_LINE_BREAKS) + cut


@dataclass(frozen=True)
class Place:
    """Where a reader is in an entry, in the file's lines (and columns)."""

    top: int  # the line at the top of the view
    selection_start: tuple[int, int]
    cursor: tuple[int, int]

    def window(self) -> tuple[int, int]:
        """The lines (first, last) a refresh reads again: a window around the top line, not
        all the reader loaded (laying out thousands of lines anew on every commit froze the
        app), so there is room to scroll both ways."""
        return max(1, self.top - TUI_PREVIEW_MAX_LINES), self.top + TUI_PREVIEW_MAX_LINES


class LinesView(TextArea):
    """Read-only, holding a window of the entry's range that grows as the reader scrolls down.

    Only the window is read from the index and laid out, so a 5 MB document costs no more than
    a short section; `NeedMore` asks for the next window when the bottom comes near.
    """

    class NeedMore(Message):
        def __init__(self, start: int) -> None:
            super().__init__()
            self.start = start

    DEFAULT_CSS = """
    LinesView { border: none; padding: 0; height: 1fr; }
    LinesView:focus { border: none; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            "",
            read_only=True,
            show_line_numbers=True,
            soft_wrap=True,
            highlight_cursor_line=False,
            **kwargs,
        )
        self.shown: Preview | None = None
        self._shows = 0  # previews shown so far: a scroll scheduled for an earlier one is dropped
        self._asked = False
        self._width = 0  # the width the lines were last wrapped at (see on_resize)
        self._placing = False  # a scroll to a passage or back to a place is pending
        self._placement = (0, 0, 0)  # its (preview, row, rows above): see `_place`

    def on_mount(self) -> None:
        self.watch(self, "scroll_y", self._scrolled, init=False)

    def on_resize(self) -> None:
        """A new width wraps the lines anew: keep the line that was at the top there."""
        width, self._width = self._width, self.size.width
        if width == 0 or self._placing:
            # Shown again after lines were loaded hidden, or a new preview is about to scroll
            # to its place: that scroll may run, or have run, on lines not yet wrapped for this
            # width (loaded hidden, not wrapped at all: a passage at row 122 put row 34 at the
            # top). Scroll again once they are.
            if self._placement[0] == self._shows:
                self.call_after_refresh(self._scroll_to_row, *self._placement)
            return
        if width == self.size.width:
            return  # same wrap
        # Runs before TextArea rewraps for the new width: this is the old wrap's top row.
        top = self.wrapped_document.offset_to_location(Offset(0, round(self.scroll_y)))
        self.call_after_refresh(self._top_back, self._shows, top[0])

    def _top_back(self, shows: int, row: int) -> None:
        if shows == self._shows and row < self.document.line_count:
            self.scroll_to(y=self.wrapped_document.location_to_offset((row, 0)).y, animate=False)

    def _scrolled(self, y: float) -> None:
        p = self.shown
        if p is None or self._asked or not p.cut:
            return
        if self.max_scroll_y - y <= self.size.height * 2:
            self._asked = True
            self.post_message(self.NeedMore(p.start + len(p.lines)))

    def append(self, start: int, lines: list[str]) -> Preview | None:
        """Add the next window (ignored when the view moved on meanwhile)."""
        p = self.shown
        if p is None or start != p.start + len(p.lines) or not lines:
            return None
        text = "\n".join(shown_line(line) for line in lines)
        self.insert("\n" + text, self.document.end, maintain_selection_offset=True)
        self.shown = replace(p, lines=p.lines + lines)
        self._asked = False
        self._scrolled(self.scroll_y)
        return self.shown

    def place(self, ref: Ref) -> Place | None:
        """Where the reader is in `ref`'s entry; None when another entry is shown."""
        p = self.shown
        if p is None or p.ref.key != ref.key or not p.lines:
            return None
        row, _ = self.wrapped_document.offset_to_location(Offset(0, round(self.scroll_y)))
        (r0, c0), (r1, c1) = self.selection
        return Place(p.start + row, (p.start + r0, c0), (p.start + r1, c1))

    def show(
        self, p: Preview, focus: tuple[int, int] | None = None, place: Place | None = None
    ) -> None:
        """Load `p`'s lines; select `focus` (first, last line) and bring it into view.

        `place` (the same entry read again after a commit) puts the reader back on it: the
        same line at the top, the cursor and selection on the same lines."""
        self.shown = p
        self._shows += 1
        self._asked = False
        self._placing = False
        rows = [shown_line(line) for line in p.lines]
        self.load_text("\n".join(rows))
        self._width = self.size.width  # what it wrapped them at: 0 while hidden (a folder shown)
        self.show_line_numbers = bool(p.lines)
        self.line_number_start = p.start
        if focus is not None and p.lines:
            last_row = len(p.lines) - 1
            r0 = min(max(focus[0] - p.start, 0), last_row)
            r1 = min(max(focus[1] - p.start, r0), last_row)
            self.selection = Selection((r1, len(rows[r1])), (r0, 0))
            self._place(r0, 2)
        elif place is not None and p.lines:
            (l0, c0), (l1, c1) = place.selection_start, place.cursor
            self.selection = Selection((max(0, l0 - p.start), c0), (max(0, l1 - p.start), c1))
            self._place(place.top - p.start, 0)
        else:
            self.scroll_home(animate=False)

    def _place(self, row: int, above: int) -> None:
        """Scroll `row` to the top once the new lines are laid out (and again if a resize
        wraps them anew before that, see `on_resize`)."""
        self._placing = True
        self._placement = (self._shows, row, above)
        self.call_after_refresh(self._scroll_to_row, *self._placement)

    def _scroll_to_row(self, shows: int, row: int, above: int) -> None:
        """Scroll `row` to the top, `above` rows below it (a passage shows what leads to it)."""
        if shows == self._shows:
            self._placing = False
        if shows != self._shows or row >= self.document.line_count:
            return  # another preview replaced it before this refresh: keep that one's place
        y = self.wrapped_document.location_to_offset((max(0, row), 0)).y
        self.scroll_to(y=max(0, y - above), animate=False)

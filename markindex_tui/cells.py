"""Fitting text into terminal cells: a CJK character takes two cells, so `len()` is no width.

Every cut made here ends (or starts) with "…", so a reader always sees that text is missing.
"""

from __future__ import annotations

from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip

ELLIPSIS = "…"


def chars_fitting(text: str, cells: int) -> int:
    """How many leading characters of `text` fit in `cells` cells (a wide one is never split)."""
    used = 0
    for i, ch in enumerate(text):
        used += get_character_cell_size(ch)
        if used > cells:
            return i
    return len(text)


def ellipsize(text: Text, cells: int) -> Text:
    """`text` in at most `cells` cells: cut, it ends with "…" (styles and highlights kept).

    A cut inside a word moves back to the space before it when that keeps half the room,
    so the last word does not read as a typo ("gamma…", not "gamma delt…").
    """
    if text.cell_len <= cells:
        return text
    plain = text.plain
    keep = chars_fitting(plain, max(0, cells - 1))
    if keep < len(plain) and plain[keep] != " ":
        space = plain.rfind(" ", 0, keep)
        if space > 0 and cell_len(plain[:space]) >= cells // 2:
            keep = space
    out = text[:keep]
    out.rstrip()
    out.append(ELLIPSIS)
    return out


def from_first_highlight(text: Text, lead: int) -> Text:
    """`text` starting at most about `lead` cells before its first highlighted span.

    A cut before it starts with "…" (and at a space when one is near), so a capped snippet
    still shows the words that matched.
    """
    if not text.spans:
        return text
    first = min(span.start for span in text.spans)
    if cell_len(text.plain[:first]) <= lead:
        return text
    start, used = first, 0
    while start > 0 and used + get_character_cell_size(text.plain[start - 1]) < lead:
        start -= 1
        used += get_character_cell_size(text.plain[start])
    space = text.plain.find(" ", start, first)
    if space != -1:
        start = space + 1
    return Text(ELLIPSIS) + text[start:]


def _breakable(plain: str, at: int) -> bool:
    """A row may end before `plain[at]`: at a space, or beside a wide (CJK) character, which
    is written without spaces and breaks between any two characters."""
    before, after = plain[at - 1], plain[at]
    return " " in (before, after) or max(cell_len(before), cell_len(after)) > 1


def cap_lines(text: Text, width: int, lines: int) -> Text:
    """`text` in at most `lines` rows of at most `width` cells; when some is left over, the last
    row ends with "…".

    Rows break at spaces when that keeps half a row, and anywhere in a CJK run, whose rows are
    then full (Rich's wrap moved a whole CJK run to the next row, leaving one short word).
    """
    width = max(1, width)
    plain, start = text.plain, 0
    rows: list[Text] = []
    while len(rows) < lines:
        while start < len(plain) and plain[start] == " ":
            start += 1
        if start >= len(plain):
            break
        end = start + max(1, chars_fitting(plain[start:], width))
        if end < len(plain) and not _breakable(plain, end):
            space = plain.rfind(" ", start, end)
            if space > start and cell_len(plain[start:space]) >= width // 2:
                end = space
        if len(rows) == lines - 1 and end < len(plain):
            row = text[start:]  # the rest: cut to the row with "…"
            rows.append(ellipsize(row, width))
            break
        row = text[start:end]
        row.rstrip()
        rows.append(row)
        start = end
    return Text("\n").join(rows)


def mark_cut_label(strip: Strip, label: str, start: int) -> Strip:
    """`strip` (one tree line as shown) with "…" where its label is cut: at the right edge on
    the label's last whole character, and in the first cell when the tree is scrolled sideways
    past the label's start (a label wholly right of the pane leaves "…" in the last cell).
    `start` is the label's column in the strip (negative: left of it)."""
    width, end = strip.cell_length, start + cell_len(label)
    if width < 1:
        return strip
    if end > width:
        room = max(0, width - 1 - start)  # label cells before the "…"
        col = min(width - 1, max(0, start + cell_len(label[: chars_fitting(label, room)])))
        strip = Strip.join([strip.crop(0, col), _ellipsis(strip, col, width - col)])
    if start < 0 < end:
        strip = Strip.join([_ellipsis(strip, 0, 1), strip.crop(1, width)])
    return strip


def _ellipsis(strip: Strip, col: int, cells: int) -> Strip:
    """ "…" and blanks over `cells` cells, in the style of the strip's cell at `col`."""
    cut = list(strip.crop(col, col + 1))
    style = cut[0].style if cut else None
    return Strip([Segment(ELLIPSIS, style), Segment(" " * (cells - 1), style)], cells)

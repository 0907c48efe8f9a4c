"""A lean top-level block scanner that reproduces markdown-it-py's block structure.

markdown-it-py's block parse was the largest cost of indexing, yet most of a library is
paragraphs, headings, code, tables, simple lists and quotes. This scanner follows markdown-it-py's
rules (CommonMark + tables + front matter) for top-level paragraphs, ATX/setext headings, fenced
and indented code, thematic breaks, HTML blocks, front matter, GFM tables, one-line link
reference definitions, block quotes made only of ">" lines and lists whose items it can bound
(lazy lines only right after open paragraph text). Links inside lists and quotes are read from
their paragraph or heading text when all the text around them is plain (paragraphs and
headings, nested items). Anything it is not
sure about (other quotes, lists and reference definitions, links whose block text it cannot
place) starts a *region*: the lines from the start of the open block up to a blank line after
which no top-level construct can continue, which the sink hands to markdown-it itself. The sink
rejects a region when a fence or HTML block in it runs past the cut, and the scanner then
extends it to the next cut. `scan_blocks` returns False for documents it leaves to markdown-it
whole (carriage returns, NUL characters, an unclosed front matter opener).
"""

from __future__ import annotations

import re
from typing import Protocol

from markdown_it.common.normalize_url import normalizeLink, validateLink
from markdown_it.common.utils import MD_TRIM_CHARS, mdTrim, normalizeReference
from markdown_it.helpers import parseLinkDestination
from markdown_it.rules_block.html_block import HTML_SEQUENCES
from markdown_it.rules_block.table import MAX_AUTOCOMPLETED_CELLS, escapedSplit, headerLineRe

_SPACE = " \t"
# First characters of a line after a blank line that could continue a top-level list (items,
# their indented content) or that would only start another region right away.
_REGION_CONTINUES = frozenset(" \t-*+0123456789>|<[")
# What a table's delimiter row may look like (a superset of what markdown-it accepts).
_DELIMITER_ROW = re.compile(r"[ \t]*[-:|][-:| \t]*")
# A list marker as markdown-it accepts it (after the indent): its last character is its kind.
_MARKER = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?=[ \t]|$)")
# A list item the scanner follows itself: up to 3 spaces, a marker, 1-4 spaces, then text.
_SIMPLE_ITEM = re.compile(r"( {0,3})([-*+]|[0-9]{1,9}[.)])( {1,4})(?=[^ \t])")
_NESTED_ITEM = re.compile(r" *(?:[-*+]|[0-9]{1,9}[.)]) {1,4}(?=[^ \t])")
# A link whose target would start on the next line depends on how lines join into blocks.
_LINK_AT_END = re.compile(r"\]\(\s*<?$")
# A link reference definition with its destination on its own line (the label has no
# brackets or escapes); the scanner reads it only when no title follows.
_SIMPLE_REFERENCE = re.compile(r" {0,3}\[([^\[\]\\]+)\]:[ \t]*(?=[^ \t])")
# `_outdented`: the line continues the item's paragraph if that paragraph is still open.
_LAZY = -2


class BlockSink(Protocol):
    """Receives the top-level blocks in document order."""

    def front_matter(self, end: int, raw: str) -> None: ...

    def leaf(self, start: int) -> None:
        """A fence, indented code block or thematic break starting at `start`."""

    def paragraph(self, start: int, end: int) -> None: ...

    def heading(self, level: int, start: int, end: int, content: str, markup: str) -> None: ...

    def inline_text(self, line: int, content: str) -> None:
        """Inline text starting on `line` that may hold a link: a table cell, or a paragraph or
        heading inside a list or quote, as markdown-it would hand it on (give or take the
        indentation of its lines, which tells nothing about links)."""

    def reference(self, line: int, label: str, href: str) -> None:
        """A link reference definition on one line (label and href as markdown-it keeps them)."""

    def region(self, start: int, end: int) -> bool:
        """Parse lines [start, end) with markdown-it-py; False if the cut is not safe."""


def split_source_lines(text: str) -> list[str]:
    """The lines markdown-it-py sees: a last line of only spaces/tabs (or empty) is not a line."""
    lines = text.split("\n")
    if not lines[-1].strip(_SPACE):
        lines.pop()
    return lines


def source_lines(text: str, lines: list[str]) -> list[str]:
    """`split_source_lines(text)` made from the text's `decode.split_lines`: the same strings
    rather than a second copy of every line (a big document's lines cost ~2x its size)."""
    if lines and not text.endswith("\n") and not lines[-1].strip(_SPACE):
        return lines[:-1]
    return lines


def scan_blocks(text: str, lines: list[str], sink: BlockSink, *, setext: bool) -> bool:
    """Report the top-level blocks of `text` (split by `split_source_lines`) to `sink`."""
    if "\r" in text or "\0" in text or not lines:
        return False  # markdown-it normalizes these first; leave such documents to it
    return _Scanner(lines, sink, setext).run()


def _indent(line: str) -> tuple[int, int]:
    """(characters of leading space/tab, columns with tabs expanded to multiples of 4)."""
    if not line.startswith((" ", "\t")):  # most lines: no loop
        return 0, 0
    pos = len(line) - len(line.lstrip(" \t"))
    if "\t" not in line[:pos]:  # spaces only: counted in C
        return pos, pos
    col = 0
    for pos, ch in enumerate(line):
        if ch == " ":
            col += 1
        elif ch == "\t":
            col += 4 - col % 4
        else:
            return pos, col
    return len(line), col


def _is_blank(line: str) -> bool:
    return not line.strip(_SPACE)


def fence_opener(line: str, pos: int) -> tuple[str, int] | None:
    """(marker, length) when the line opens a fence at `pos` (indent already checked)."""
    if pos + 3 > len(line):
        return None
    marker = line[pos]
    if marker not in "`~":
        return None
    run = len(line) - pos - len(line[pos:].lstrip(marker))
    if run < 3:
        return None
    if marker == "`" and "`" in line[pos + run :]:
        return None
    return marker, run


def _closes_fence(line: str, marker: str, length: int) -> bool:
    pos, col = _indent(line)
    if col >= 4 or line[pos : pos + 1] != marker:
        return False
    rest = line[pos:].lstrip(marker)
    return len(line) - pos - len(rest) >= length and not rest.strip(_SPACE)


def atx_heading(line: str, pos: int) -> tuple[int, str] | None:
    """(level, inline content) when the line is an ATX heading starting at `pos`."""
    if line[pos : pos + 1] != "#":
        return None
    stripped = line[pos:].lstrip("#")
    level = len(line) - pos - len(stripped)
    if level > 6 or (stripped and stripped[0] not in _SPACE):
        return None
    start = pos + level
    end = start + len(line[start:].rstrip(_SPACE))
    hashes = start + len(line[start:end].rstrip("#"))
    if hashes > start and line[hashes - 1] in _SPACE:
        end = hashes
    return level, mdTrim(line[start:end])


def is_thematic_break(line: str, pos: int) -> bool:
    marker = line[pos]
    if marker not in "*-_":
        return False
    rest = line[pos:]
    if rest.strip(marker + _SPACE):
        return False
    return rest.count(marker) >= 3


def _setext_marker(line: str, pos: int) -> str:
    """'=' or '-' when the line is a setext underline, else ''."""
    marker = line[pos]
    if marker not in "=-" or line[pos:].lstrip(marker).strip(_SPACE):
        return ""
    return marker


def _html_end(line: str, pos: int) -> tuple[re.Pattern[str], bool] | None:
    """(end pattern, may interrupt a paragraph) when the line opens an HTML block."""
    text = line[pos:]
    for start, end, interrupts in HTML_SEQUENCES:
        if start.search(text):
            return end, interrupts
    return None


def _list_interrupts(line: str, pos: int, marker: str) -> bool:
    """Whether a list item line ends a paragraph: only a non-empty item, numbered 1 if ordered."""
    if marker[-1] in ".)" and int(marker[:-1]) != 1:
        return False
    return bool(line[pos + len(marker) :].strip(_SPACE))


def _delimiter_columns(line: str) -> int:
    """Columns of a table delimiter row as markdown-it's table rule reads it, 0 if it is none."""
    pos, col = _indent(line)
    rest = line[pos:]
    if col >= 4 or len(rest) < 2 or rest[0] not in "|-:" or rest[1] not in "|-: \t":
        return 0
    if (rest[0] == "-" and rest[1] in _SPACE) or rest.strip("|-: \t"):
        return 0
    columns = rest.split("|")
    count = 0
    for k, column in enumerate(columns):
        cell = mdTrim(column)
        if not cell:
            if k == 0 or k == len(columns) - 1:
                continue
            return 0
        if not headerLineRe.search(cell):
            return 0
        count += 1
    return count


def _row_cells(text: str) -> list[str]:
    """A trimmed table row split into cells at unescaped pipes, without the outer empty ones."""
    # Only a backslash can escape a pipe: without one, markdown-it's character loop is a split.
    cells = text.split("|") if "\\" not in text else escapedSplit(text)
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    return cells


def _interrupts(line: str, pos: int, *, any_list: bool = False) -> bool:
    """Whether the line ends a paragraph (markdown-it's paragraph terminators but tables);
    with `any_list` every list item ends it (as for a table or an outdented line)."""
    ch = line[pos]
    if ch == ">" or fence_opener(line, pos) or is_thematic_break(line, pos):
        return True
    marker = _MARKER.match(line, pos)
    if marker:
        return any_list or _list_interrupts(line, pos, marker.group())
    if ch == "<":
        html = _html_end(line, pos)
        return bool(html and html[1])
    return atx_heading(line, pos) is not None


def _quote_content(line: str) -> str | None:
    """A ">" line's text inside its block quote (the marker and one space taken off); None
    when a tab makes the columns hard to follow."""
    pos = len(line) - len(line.lstrip(" "))
    if "\t" in line[: pos + 2]:
        return None
    rest = line[pos + 1 :]
    return rest[1:] if rest.startswith(" ") else rest


class _ItemText:
    """Follows the lines of one list item the scanner bounded, telling whether each is plain
    paragraph or heading text, and gathering that text (a link's text or a code span may run
    over lines). Nested item markers open deeper content columns, a blank line or a heading
    closes the paragraph, and anything else (code, quotes, fences, HTML, tables, underlines,
    tabs) is not plain text."""

    def __init__(self, first: str | None, content: int, tables: bool) -> None:
        """`first`: the item's first line after its marker (None: no line yet, as for the
        inside of a block quote); `tables`: a table may be in it."""
        self.columns = [content]
        self.open = False  # a paragraph is open after the last line
        self.tables = tables
        self.line = -1 if first is None else 0  # the line being read, counted from the first
        # Each paragraph's or heading's inline text: (its first line, its lines).
        self.texts: list[tuple[int, list[str]]] = []
        self.ok = first is None or self._start(first, content)

    def feed(self, line: str) -> bool:
        """Whether the next line of the item is plain text (a blank line is)."""
        self.line += 1
        rest = line.lstrip(" ")
        if not rest:
            self.open = False
            return True
        if rest[0] == "\t":
            return False
        indent = len(line) - len(rest)
        marker = _MARKER.match(rest)
        if self.open and not marker and not _interrupts(rest, 0):
            return self._leaf(rest, continues=True)  # lazily when left of its item
        if (
            self.open
            and marker
            and indent >= self.columns[-1]
            and not _list_interrupts(rest, 0, marker.group())
        ):
            return False  # paragraph text that looks like an item
        return self._block(rest, indent)

    def _block(self, rest: str, indent: int) -> bool:
        """A line that starts a block: in the innermost item whose content it reaches."""
        while len(self.columns) > 1 and indent < self.columns[-1]:
            self.columns.pop()
        top = self.columns[-1]
        if not top <= indent < top + 4:
            return False  # indented code, or a place only markdown-it can tell
        return self._start(rest, indent)

    def _start(self, rest: str, col: int) -> bool:
        """Text at column `col` that starts a block: nested item markers, then a leaf."""
        item = _NESTED_ITEM.match(rest)
        while item:
            col += item.end()
            self.columns.append(col)
            rest = rest[item.end() :]
            item = _NESTED_ITEM.match(rest)
        if _MARKER.match(rest) or rest[0] in "<>" or fence_opener(rest, 0):
            return False
        return self._leaf(rest)

    def _leaf(self, rest: str, continues: bool = False) -> bool:
        """Paragraph or heading text (`continues`: the open paragraph's next line); not a
        thematic break or setext underline, not text markdown-it trims away, no table cells,
        no link target on the next line."""
        if not rest.strip(MD_TRIM_CHARS) or not rest.strip("-=*_" + _SPACE):
            return False
        if _LINK_AT_END.search(rest) or (self.tables and "|" in rest):
            return False
        if continues:
            self.texts[-1][1].append(rest)
            return True
        heading = atx_heading(rest, 0)
        self.texts.append((self.line, [heading[1] if heading else rest]))
        self.open = heading is None
        return True

    def report(self, sink: BlockSink, first: int) -> None:
        """Hand the text that may hold a link to `sink` (`first`: the item's first line)."""
        for line, texts in self.texts:
            text = "\n".join(texts)
            if "](" in text:
                sink.inline_text(first + line, text)


class _Scanner:
    """Walks the lines once; each method handles one construct and returns the next line."""

    def __init__(self, lines: list[str], sink: BlockSink, setext: bool) -> None:
        self.lines = lines
        self.n = len(lines)
        self.sink = sink
        self.setext = setext
        self._item: _ItemText | None = None  # the list item followed across lazy lines
        self._item_start = self._item_next = 0

    def run(self) -> bool:
        i = self._front_matter()
        if i < 0:
            return False
        while i < self.n:
            i = self._block(i)
        return True

    def _front_matter(self) -> int:
        """Line after the front matter (0 when there is none), -1 when it is left to markdown-it."""
        first = self.lines[0]
        run = len(first) - len(first.lstrip("-"))
        if run < 3:
            return 0
        for j in range(1, self.n):
            line = self.lines[j]
            if line.startswith("...") and not line[3:].strip(_SPACE):
                break
            if _closes_fence(line, "-", run):
                break
        else:
            return -1  # unclosed: markdown-it then reads the opener as something else
        self.sink.front_matter(j + 1, "\n".join(self.lines[1:j]))
        return j + 1

    def _block(self, i: int) -> int:
        """Start the block at line i, in markdown-it's rule order (table, code, fence, ...)."""
        line = self.lines[i]
        pos, col = _indent(line)
        if pos == len(line):
            return i + 1
        if col >= 4:
            return self._code(i)
        columns = self._table_columns(i)
        if columns:
            return self._table(i, columns)
        if line[pos] == ">":
            return self._blockquote(i)
        fence = fence_opener(line, pos)
        if fence:
            return self._fence(i, *fence)
        if is_thematic_break(line, pos):
            self.sink.leaf(i)
            return i + 1
        marker = _MARKER.match(line, pos)
        if marker:
            return self._list(i, marker.group()[-1])
        return self._text_block(i, line, pos)

    def _text_block(self, i: int, line: str, pos: int) -> int:
        """An HTML block, ATX heading, link reference definition or paragraph, in that order."""
        if line[pos] == "<":
            html = _html_end(line, pos)
            if html:
                return self._html(i, html[0])
        heading = atx_heading(line, pos)
        if heading:
            self.sink.heading(heading[0], i, i + 1, heading[1], "#" * heading[0])
            return i + 1
        if line[pos] == "[":
            end = self._reference(i)
            if end:
                return end
        return self._paragraph(i)

    def _table_at(self, i: int) -> bool:
        """Whether a table might start at line i (a "|" there and a delimiter row below)."""
        return (
            "|" in self.lines[i]
            and i + 1 < self.n
            and _DELIMITER_ROW.fullmatch(self.lines[i + 1]) is not None
        )

    def _table_columns(self, i: int) -> int:
        """Column count when a table starts at line i (markdown-it's table rule), else 0."""
        if i + 1 >= self.n or "|" not in self.lines[i]:
            return 0
        count = _delimiter_columns(self.lines[i + 1])
        if not count:
            return 0
        line = self.lines[i]
        pos, col = _indent(line)
        if col >= 4 or "|" not in mdTrim(line[pos:]):
            return 0
        return count if len(_row_cells(mdTrim(line[pos:]))) == count else 0

    def _table(self, i: int, columns: int) -> int:
        """A table: its header row, delimiter row and body rows up to what ends it."""
        self.sink.leaf(i)
        self._cells(i, columns)
        filled = 0  # markdown-it stops a table that would autocomplete too many cells
        j = i + 2
        while j < self.n:
            line = self.lines[j]
            pos, col = _indent(line)
            if col >= 4 or pos == len(line) or _interrupts(line, pos, any_list=True):
                break
            text = mdTrim(line[pos:])
            if not text:
                break
            cells = _row_cells(text)
            filled += columns - len(cells)
            if filled > MAX_AUTOCOMPLETED_CELLS:
                break
            self._cells(j, columns, cells)
            j += 1
        return j

    def _cells(self, line: int, columns: int, cells: list[str] | None = None) -> None:
        """Hand on the inline text of a row's first `columns` cells when it may hold a link."""
        text = self.lines[line]
        if "](" not in text:
            return
        if cells is None:
            cells = _row_cells(mdTrim(text[_indent(text)[0] :]))
        for cell in cells[:columns]:
            if "](" in cell:
                self.sink.inline_text(line, mdTrim(cell))

    def _blockquote(self, i: int) -> int:
        """A block quote whose every line starts with ">" up to a blank line (no lazy lines)."""
        end = self.n
        for j in range(i + 1, self.n):
            rest = self.lines[j].lstrip(_SPACE)
            if not rest:
                end = j
                break
            if rest[0] != ">":
                return self._region(i)
        if not self._quote_links(i, end):
            return self._region(i)
        self.sink.leaf(i)
        return end

    def _quote_links(self, start: int, end: int) -> bool:
        """Report the links of a block quote made of ">" lines when its inside is plain text
        (see `_ItemText`); False when markdown-it has to read it."""
        lines = self.lines[start:end]
        if any("]:" in line for line in lines):
            return False
        link_lines = [start + k for k, line in enumerate(lines) if "](" in line]
        if not link_lines:
            return True
        inside = [text for text in map(_quote_content, lines) if text is not None]
        tables = any(_DELIMITER_ROW.fullmatch(line) for line in inside)
        text = _ItemText(None, 0, tables)
        if len(inside) < len(lines) or not all(text.feed(line) for line in inside):
            return False
        text.report(self.sink, start)
        return True

    def _reference(self, i: int) -> int:
        """Line after a link reference definition at line i (0 when none can start there): a
        definition that is line i alone is read here, any other goes to markdown-it."""
        if self._one_line_reference(i):
            return i + 1
        return self._region(i) if self._maybe_reference(i) else 0

    def _one_line_reference(self, i: int) -> bool:
        """A link reference definition that is line i alone, read with markdown-it's own
        helpers: label, destination, nothing after it, and no title on the next line."""
        line = self.lines[i]
        match = _SIMPLE_REFERENCE.match(line)
        if not match:
            return False
        label = normalizeReference(match.group(1))
        dest = parseLinkDestination(line, match.end(), len(line))
        if not label or not dest.ok or line[dest.pos :].strip(_SPACE):
            return False
        href = normalizeLink(dest.str)
        following = self.lines[i + 1].lstrip(_SPACE) if i + 1 < self.n else ""
        if not validateLink(href) or (following and following[0] in "\"'("):
            return False
        self.sink.reference(i, label, href)
        return True

    def _maybe_reference(self, i: int) -> bool:
        """A link reference definition needs "]:" before its paragraph ends: at a blank line or
        a line that interrupts it (markdown-it's reference terminators include all of those).
        Looking on to the next blank line made a heading, link, heading, link... quadratic."""
        for j in range(i, self.n):
            line = self.lines[j]
            if "]:" in line:
                return True
            pos, col = _indent(line)
            if pos == len(line) or (j > i and col < 4 and _interrupts(line, pos)):
                return False
        return False

    def _html(self, i: int, end: re.Pattern[str]) -> int:
        """An HTML block: to its end marker, or (for block tags) to the next blank line."""
        self.sink.leaf(i)
        if end.search(self.lines[i].lstrip(_SPACE)):
            return i + 1
        for j in range(i + 1, self.n):
            text = self.lines[j].lstrip(_SPACE)
            if end.search(text):
                return j + 1 if text else j
        return self.n

    def _list(self, i: int, kind: str) -> int:
        """A list whose items the scanner can follow; anything else goes to markdown-it."""
        item = _SIMPLE_ITEM.match(self.lines[i])
        if not item:
            return self._region(i)
        items = [(i, item.end())]
        end = self._list_end(i + 1, kind, items)
        if end < 0 or self._has_links(i, end, items):
            return self._region(i)
        self.sink.leaf(i)  # the list itself, then each item
        for start, _ in items:
            self.sink.leaf(start)
        return end

    def _has_links(self, start: int, end: int, items: list[tuple[int, int]]) -> bool:
        """True when the list holds links the scanner cannot place (or reference definitions);
        links that are surely in paragraph or heading text are reported. Only the items that
        hold a link need to be plain text: each item is parsed on its own."""
        lines = self.lines[start:end]
        if any("]:" in line for line in lines):
            return True
        if not any("](" in line for line in lines):
            return False
        bounds = [*items[1:], (end, 0)]
        texts: list[tuple[int, _ItemText]] = []
        for (s, col), (e, _) in zip(items, bounds, strict=True):
            if any("](" in line for line in self.lines[s:e]):
                text = self._item_text(s, e, col)
                if text is None:
                    return True
                texts.append((s, text))
        for s, text in texts:
            text.report(self.sink, s)
        return False

    def _item_text(self, start: int, end: int, content: int) -> _ItemText | None:
        """The item's text when every line of it is paragraph or heading text (or a blank
        line), else None."""
        lines = self.lines[start:end]
        tables = any(_DELIMITER_ROW.fullmatch(line) for line in lines)
        item = _ItemText(lines[0][content:], content, tables)
        return item if item.ok and all(item.feed(line) for line in lines[1:]) else None

    def _list_end(self, j: int, kind: str, items: list[tuple[int, int]]) -> int:
        """Line where the list ends (appending items with their content column), -1 when only
        markdown-it can tell."""
        content = items[0][1]
        after_blank = False
        while j < self.n:
            line = self.lines[j]
            pos, col = _indent(line)
            if pos < len(line) and col < content:
                if self._table_at(j):
                    return -1
                step = self._outdented(line, pos, col, kind, after_blank)
                if step == _LAZY:
                    if not self._lazy(j, items[-1]):
                        return -1
                elif step <= 0:
                    return j if step == 0 else -1
                else:
                    items.append((j, step))
                    content = step
            after_blank = pos == len(line)
            j += 1
        return self.n

    def _outdented(self, line: str, pos: int, col: int, kind: str, after_blank: bool) -> int:
        """For a line left of the item's content: the next item's content column, 0 when the
        list ends here, -1 when only markdown-it can tell, _LAZY when it is a lazy
        continuation line if the item's last line is open paragraph text."""
        if col <= 3 and is_thematic_break(line, pos):
            return 0
        marker = _MARKER.match(line, pos) if col <= 3 else None
        if marker and marker.group()[-1] == kind:
            item = _SIMPLE_ITEM.match(line)
            return item.end() if item else -1
        if marker or after_blank:
            return 0
        if col > 3 and _MARKER.match(line, pos):
            return -1  # a nested item or lazy text, depending on the lists around it
        if _interrupts(line, pos, any_list=True):
            return 0  # ends what is open in the item, the item and (not an item) the list
        return _LAZY

    def _lazy(self, j: int, item: tuple[int, int]) -> bool:
        """Whether line j (left of the item's content, after a non-blank line) surely continues
        the paragraph open in the item: the item is plain text up to it (followed once per item
        across its lazy lines)."""
        start, content = item
        if self._item is None or self._item_start != start:
            self._item = _ItemText(self.lines[start][content:], content, tables=True)
            self._item_start, self._item_next = start, start + 1
        text = self._item
        lines = self.lines
        if not (text.ok and all(text.feed(lines[k]) for k in range(self._item_next, j))):
            text.ok = False
            return False
        self._item_next = j + 1
        return text.open and text.feed(lines[j])

    def _code(self, i: int) -> int:
        """An indented code block: runs over blank lines, ends before a less indented line."""
        last = j = i + 1
        while j < self.n:
            line = self.lines[j]
            pos, col = _indent(line)
            j += 1
            if pos == len(line):
                continue
            if col < 4:
                break
            last = j
        self.sink.leaf(i)
        return last

    def _fence(self, i: int, marker: str, length: int) -> int:
        self.sink.leaf(i)
        for j in range(i + 1, self.n):
            if _closes_fence(self.lines[j], marker, length):
                return j + 1
        return self.n

    def _paragraph(self, start: int) -> int:
        j = start + 1
        while j < self.n:
            line = self.lines[j]
            pos, col = _indent(line)
            if pos == len(line):
                break
            if col < 4:
                if self._table_columns(j):
                    break
                if self.setext and _setext_marker(line, pos):
                    return self._setext(start, j)
                if _interrupts(line, pos):
                    break
            j += 1
        self.sink.paragraph(start, j)
        return j

    def _setext(self, start: int, underline: int) -> int:
        marker = _setext_marker(self.lines[underline], _indent(self.lines[underline])[0])
        content = mdTrim("\n".join(self.lines[start:underline]))
        self.sink.heading(1 if marker == "=" else 2, start, underline + 1, content, marker)
        return underline + 1

    def _region(self, start: int) -> int:
        """Hand lines from `start` to markdown-it, up to a place where what it parsed ends. When
        it runs on past a cut, the next try is at least twice as long: tried at every cut, a
        comment left open after a list was parsed again once per paragraph (quadratic)."""
        end = self._next_cut(start + 1)
        while not self.sink.region(start, end):
            end = self._next_cut(start + 2 * (end - start))
        return end

    def _next_cut(self, j: int) -> int:
        """First line at or after `j` after which nothing of a region can continue."""
        lines = self.lines
        while j < self.n:
            line = lines[j]
            if line and line[0] not in _REGION_CONTINUES and _is_blank(lines[j - 1]):
                return j
            j += 1
        return self.n

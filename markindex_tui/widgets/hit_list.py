"""Search results as a list: each hit is a citation, its heading path and a capped snippet."""

from __future__ import annotations

import re

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from markindex_core.search.searcher import Hit
from markindex_core.text.safe import printable
from markindex_tui.cells import cap_lines, ellipsize, from_first_highlight
from markindex_tui.settings import TUI_SNIPPET_COLUMNS, TUI_SNIPPET_ROWS

# A letter, digit or underscore of a spaced script: CJK text has no spaces to end a word at.
_WORD = r"[^\W\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]"


def whole_words(terms: list[str]) -> re.Pattern[str] | None:
    """Matches each term with the rest of the word it is in: a stem ("interpol") is
    highlighted as the word it matched ("interpolated"); CJK terms match as they are."""
    parts = [re.escape(t) for t in sorted(terms, key=len, reverse=True) if len(t) > 1]
    if not parts:
        return None
    return re.compile(f"{_WORD}*(?:{'|'.join(parts)}){_WORD}*", re.IGNORECASE)


def hit_option(hit: Hit, terms: list[str], width: int = TUI_SNIPPET_COLUMNS) -> Option:
    """One result in `width` cells: the heading path takes one row and the snippet at most
    TUI_SNIPPET_ROWS rows of at most TUI_SNIPPET_COLUMNS cells, starting shortly before the
    first match; each ends with "…" when cut. The citation is kept whole (it is what is cited)."""
    width = max(1, width)
    row = min(width, TUI_SNIPPET_COLUMNS)
    snippet = Text(printable(" ".join(hit.snippet.split())), style="")
    pattern = whole_words(terms)
    if pattern is not None:
        snippet.highlight_regex(pattern, "bold underline")
    snippet = from_first_highlight(snippet, row * TUI_SNIPPET_ROWS // 4)
    heading = Text(" › ".join(printable(t) for t in hit.title_path), style="italic")
    prompt = Text.assemble(
        (printable(hit.citation), "bold"),
        "\n",
        ellipsize(heading, width),
        "\n",
        cap_lines(snippet, row, TUI_SNIPPET_ROWS),
    )
    return Option(prompt)


class HitList(OptionList):
    """The hits of one search, fitted to the list's width again whenever it changes."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hits: list[Hit] = []
        self.terms: list[str] = []
        self._fitted_to = 0

    def text_width(self) -> int:
        """Cells an option's text has: the list's width less the options' padding."""
        padding = self.get_component_styles("option-list--option").padding.width
        return self.scrollable_content_region.width - padding

    def show(self, hits: list[Hit], terms: list[str]) -> None:
        """Replace the options with `hits`, the first highlighted."""
        self.hits, self.terms = hits, terms
        self._fit(0 if hits else None)

    def _fit(self, highlighted: int | None) -> None:
        width = self.text_width()
        self._fitted_to = width
        fit_to = width if width > 0 else TUI_SNIPPET_COLUMNS  # not laid out yet: see on_resize
        self.set_options([hit_option(h, self.terms, fit_to) for h in self.hits])
        self.highlighted = highlighted

    def on_resize(self) -> None:
        if self.hits and self.text_width() != self._fitted_to:
            self._fit(self.highlighted)

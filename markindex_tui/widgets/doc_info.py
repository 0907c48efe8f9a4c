"""The metadata panel above the preview: path, title, tokens, front matter, links, warnings."""

from __future__ import annotations

import json
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from markindex_core.text.safe import printable
from markindex_tui.data import Preview

MAX_LINKS = 5
MAX_VALUE_CHARS = 120


def _value(v: Any) -> str:
    # JSON escapes C0 controls but leaves DEL, C1 (a CSI) and bidi controls raw: escape it too.
    s = printable(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
    return s if len(s) <= MAX_VALUE_CHARS else s[: MAX_VALUE_CHARS - 1] + "…"


def render_info(p: Preview) -> RenderableType:
    """Everything we know about the entry's document, compact enough for an 80×24 terminal."""
    ref = p.ref
    if ref.kind == "folder":
        return Text.assemble(
            ("folder ", "dim"),
            (printable(ref.path) + "/" if ref.path else "(library)", "bold"),
            (f" · {p.documents:,} document" + ("" if p.documents == 1 else "s"), "dim"),
        )
    if ref.kind == "skipped":
        return Text.assemble(
            ("skipped ", "dim"),
            (printable(ref.path), "bold"),
            "\n",
            ("not indexed: ", "dim"),
            printable(ref.reason),
        )
    if ref.kind == "more":
        return Text("more entries: press enter", style="dim")
    if p.info is None:
        return Text.assemble(("gone from the index: ", "dim"), printable(ref.path))
    doc = p.info.doc
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    if ref.kind == "node":
        _node_rows(grid, p)
    grid.add_row("path", Text(printable(str(doc["path"])), style="bold"))
    grid.add_row("title", Text(printable(str(doc["title"]))))
    size = (
        f"{doc['tokens']:,} tokens · {doc['line_count']:,} lines · "
        f"{doc['size'] / 1024:,.1f} KB · {printable(str(doc['encoding']))}"
    )
    if ref.kind == "document" and p.cut:
        size += f" · showing L{p.start}-{p.start + len(p.lines) - 1}"
    grid.add_row("size", Text(size))
    for k, v in (doc["front_matter"] or {}).items():
        grid.add_row(Text(printable(str(k)), style="italic"), _line(_value(v)))
    out = p.info.links_out
    if out:
        broken = sum(1 for link in out if link["broken"])
        head_text = f"{len(out)} out" + (f" ({broken} broken)" if broken else "")
        targets = list(dict.fromkeys(_rel(str(link["target"]), ref.folder) for link in out))
        grid.add_row("links", _line(head_text + ": " + ", ".join(targets[:MAX_LINKS])))
    into = p.info.links_in
    if into:
        sources = list(dict.fromkeys(_rel(str(link["source"]), ref.folder) for link in into))
        grid.add_row("linked", _line(f"{len(into)} in: " + ", ".join(sources[:MAX_LINKS])))
    for w in doc["warnings"]:
        grid.add_row(Text("warning", style="bold"), Text(printable(str(w))))
    return grid


def _node_rows(grid: Table, p: Preview) -> None:
    """The section's title and range, and its summary when a model wrote one."""
    ref = p.ref
    head = Text.assemble(
        (printable(p.title) or "(untitled)", "bold"), (f"  L{ref.start}-{ref.end}", "dim")
    )
    if p.cut:
        head.append(f"  showing L{p.start}-{p.start + len(p.lines) - 1}", style="italic")
    grid.add_row("§", head)
    if p.summary:  # written by a model from untrusted text: escaped like the text itself
        grid.add_row("summary", Text(printable(p.summary), style="italic"))


def _line(text: str) -> Text:
    """One terminal line, cut with an ellipsis: lists of links must not push the lines away."""
    return Text(text, no_wrap=True, overflow="ellipsis")


def _rel(path: str, folder: str) -> str:
    """Paths in the same folder as the document are shown by name (escaped for the terminal)."""
    prefix = folder + "/" if folder else ""
    return printable(path[len(prefix) :] if prefix and path.startswith(prefix) else path)


class DocInfoPanel(VerticalScroll, can_focus=False):
    """Scrolls when the front matter is long; never taller than a third of the screen."""

    DEFAULT_CSS = """
    DocInfoPanel {
        height: auto;
        max-height: 35%;
        padding: 0 1;
        border-bottom: solid $primary-background;
        background: $surface;
    }
    DocInfoPanel > Static { width: 1fr; }
    """

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(Text("select a document or section", style="dim"), id="info-body")

    def show(self, p: Preview, keep_scroll: bool = False) -> None:
        self.query_one("#info-body", Static).update(render_info(p))
        if not keep_scroll:
            self.scroll_home(animate=False)

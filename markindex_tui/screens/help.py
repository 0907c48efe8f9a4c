"""The help screen: every key binding of the app, read from the classes that define them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

HelpSection = tuple[str, list[type], Callable[[Binding], bool]]
ABOUT = "About markindex"


def _everything(_: Binding) -> bool:
    return True


def class_bindings(
    classes: Iterable[type], keep: Callable[[Binding], bool] = _everything
) -> list[Binding]:
    """Bindings with a description, from each class and its bases, each with the keys it still
    holds: as in Textual, a subclass's "home,ctrl+a" takes "home" from a base's "home" (whose
    "Scroll Home" was listed beside it, though home never scrolled there)."""
    by_key: dict[str, Binding] = {}
    for cls in classes:
        for base in reversed(cls.__mro__):
            raw: list[BindingType] = base.__dict__.get("BINDINGS", [])
            for b in raw:
                binding = b if isinstance(b, Binding) else Binding(*b)
                for key in binding.key.split(","):
                    by_key[key.strip()] = binding
    held: dict[int, tuple[Binding, list[str]]] = {}
    for key, binding in by_key.items():
        held.setdefault(id(binding), (binding, []))[1].append(key)
    return [
        replace(binding, key=",".join(keys))
        for binding, keys in held.values()
        if binding.description and keep(binding)
    ]


def bindings_table(app: App[object], title: str, bindings: list[Binding]) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True, min_width=14)
    table.add_column()
    for b in bindings:
        keys = " / ".join(
            app.get_key_display(Binding(k.strip(), b.action)) for k in b.key.split(",")
        )
        table.add_row(keys, b.description)
    return Group(Text(title, style="bold underline"), table, Text(""))


class HelpScreen(ModalScreen[None]):
    """Lists the bindings section by section, then what the app shows; any of escape, q or ?
    closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "Close help"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%;
        max-width: 100;
        height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    """

    def __init__(self, sections: list[HelpSection], intro: str) -> None:
        super().__init__()
        self.sections = sections
        self.intro = intro

    def compose(self) -> ComposeResult:
        # The keys first, the introduction after them: it came first and, at 40×12, filled the
        # box, so the keys someone opened help for were out of sight.
        parts: list[RenderableType] = []
        for title, classes, keep in self.sections:
            bindings = class_bindings(classes, keep)
            if bindings:
                parts.append(bindings_table(self.app, title, bindings))
        parts += [Text(ABOUT, style="bold underline"), Text(self.intro)]
        with VerticalScroll() as scroll:
            scroll.border_title = "Keys"
            yield Static(Group(*parts), id="help-body")
        yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)

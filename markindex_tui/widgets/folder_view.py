"""A folder's documents as an agent browsing it sees them: title, description, size, tokens.

Shown in place of the preview lines when a folder is highlighted. Pages are read in a worker
(`NeedMore` asks for the next one), so a folder of thousands of documents costs one page.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from markindex_core.text.safe import printable
from markindex_tui.data import FolderDoc, FolderPage, Ref


def _size(n: int) -> str:
    return f"{n / 1024:,.1f} KB" if n >= 1024 else f"{n} B"


def doc_prompt(doc: FolderDoc, folder: str) -> Text:
    """Title, then name and size, then the description (all escaped for the terminal)."""
    name = doc.path[len(folder) + 1 :] if folder else doc.path
    text = Text.assemble(
        (printable(doc.title) or "(untitled)", "bold"),
        "\n",
        (printable(name), "italic"),
        (f"  {doc.tokens:,} tokens · {doc.lines:,} lines · {_size(doc.size)}", "dim"),
    )
    if doc.description:
        text.append("\n" + printable(" ".join(doc.description.split())))
    return text


class FolderView(OptionList):
    """The documents directly in one folder; enter opens one in the tree."""

    class NeedMore(Message):
        def __init__(self, folder: str, offset: int) -> None:
            super().__init__()
            self.folder = folder
            self.offset = offset

    class Open(Message):
        def __init__(self, doc_path: str) -> None:
            super().__init__()
            self.doc_path = doc_path

    # min-width: Textual's OptionList raises (divides by zero) when its options have no width
    # left inside their padding and the scrollbar; too narrow, the list overflows, clipped.
    DEFAULT_CSS = """
    FolderView { height: 1fr; border: none; padding: 0; min-width: 6; }
    FolderView:focus { border: none; }
    FolderView > .option-list--option { padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.folder = ""
        self.docs: list[FolderDoc] = []
        self.left = 0  # documents not yet listed
        self._asked = False

    def held(self, ref: Ref) -> int | None:
        """How many documents are listed for `ref`'s folder; None when it is not on show."""
        if not self.display or ref.kind != "folder" or ref.path != self.folder:
            return None
        return len(self.docs)

    def show(self, page: FolderPage, below: int, keep: bool = False) -> None:
        """List the first page; say so when the documents are all in sub-folders.

        `keep` (the same folder listed again after a commit) keeps the highlighted line and the
        scroll offset, which clearing the options lost."""
        highlighted, scroll = self.highlighted, self.scroll_y
        self.folder, self.docs, self.left, self._asked = page.folder, [], 0, False
        self.clear_options()
        if not page.docs:
            note = f"no documents directly in this folder ({below:,} in sub-folders)"
            self.add_option(Option(Text(note, style="dim italic"), disabled=True))
        self.append(page)
        if keep and highlighted is not None and self.option_count:
            self.highlighted = min(highlighted, self.option_count - 1)
            self.call_after_refresh(self.scroll_to, y=scroll, animate=False)
        else:
            self.scroll_home(animate=False)

    def append(self, page: FolderPage) -> None:
        """Add a further page (ignored when the view moved to another folder meanwhile)."""
        if page.folder != self.folder or page.offset != len(self.docs):
            return
        first = len(self.docs)
        on_more = self.left > 0 and self.highlighted == self.option_count - 1
        if self.left:
            self.remove_option_at_index(self.option_count - 1)  # the "… more" line
        self.docs += page.docs
        self.left = page.left
        self.add_options([Option(doc_prompt(d, self.folder)) for d in page.docs])
        if self.left:
            more = Text(f"… {self.left:,} more (enter)", style="dim italic")
            self.add_option(Option(more, id="more"))
        if on_more and page.docs:
            self.highlighted = first  # go on where the "… more" line was
        self._asked = False

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id == "more":
            if not self._asked:
                self._asked = True
                self.post_message(self.NeedMore(self.folder, len(self.docs)))
            return
        if event.option_index < len(self.docs):  # (a folder with no documents has only a note)
            self.post_message(self.Open(self.docs[event.option_index].path))

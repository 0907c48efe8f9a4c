"""Document text never reaches the terminal raw: control characters are shown as escapes."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from textual import events
from textual.widgets import Input, OptionList, Static

from markindex_core.library import Library
from markindex_tui.app import MarkindexApp
from markindex_tui.screens.search import SearchScreen
from markindex_tui.testing import make_app, settle
from markindex_tui.widgets.doc_info import DocInfoPanel
from markindex_tui.widgets.folder_view import FolderView
from markindex_tui.widgets.library_tree import LibraryTree
from markindex_tui.widgets.lines_view import LinesView
from markindex_tui.widgets.status_bar import StatusBar

pytestmark = pytest.mark.timeout(60)

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # write the clipboard
TITLE = "\x1b]0;pwned\x07"  # set the window title
CLEAR = "\x1b[2J"  # clear the screen
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but newline
FOLDER = "dir"
DOC = "esc.md"
SKIPPED = f"skip{TITLE}.md"  # a name with control characters is skipped: its tree line is escaped
BODY = (
    "---\n"
    'title: "fm \\e]52;c;ZWNobyBwd25lZA==\\a end"\n'
    '"key\\e[2J": "value \\e]0;pwned\\a"\n'
    "---\n"
    f"# Head {TITLE} line\n\n"
    f"zqosc {OSC52} end \x07 bell {CLEAR} clear \x9b31m c1\n\n"
    f"## Second {CLEAR}\n\nlink [x](other{CLEAR}.md) text\n"
)


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    (root / FOLDER).mkdir(parents=True)
    (root / FOLDER / DOC).write_text(BODY, encoding="utf-8")
    (root / "plain.md").write_text(f"# Plain {OSC52}\n\nzqosc text\n", encoding="utf-8")
    (root / SKIPPED).write_text("# Skipped\n", encoding="utf-8")
    Library(root).index()
    return root


def plain(renderable: object) -> str:
    """What a terminal would get for a widget's content (rendered by Rich, no colours)."""
    console = Console(width=120, file=io.StringIO(), color_system=None)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


def raw_controls(texts: list[str]) -> list[str]:
    return [t for t in texts if CONTROL.search(t)]


def shown(app: MarkindexApp) -> list[str]:
    """The text of every widget that shows document text, as the app renders it."""
    screen = app.screen
    out = [app.export_screenshot()]
    for tree in screen.query(LibraryTree):
        out += [str(n.label) for n in tree.walk()]
    for panel in screen.query(DocInfoPanel):
        out.append(plain(panel.query_one(Static).content))
    for lines in screen.query(LinesView):
        out.append(lines.text)
    for docs in screen.query(FolderView):
        out += [plain(docs.get_option_at_index(i).prompt) for i in range(docs.option_count)]
    for status in screen.query(StatusBar):
        out.append(str(status.render()))
    for results in screen.query(OptionList):
        out += [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
    return out


async def test_control_characters_are_escaped_everywhere(hostile: Path) -> None:
    app = make_app(hostile)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        doc_node = await tree.reveal(f"{FOLDER}/{DOC}")
        await settle(pilot)
        assert doc_node is not None
        seen = shown(app)  # the document: tree, metadata with front matter, all its lines
        assert doc_node.parent is not None
        tree.focus_node(doc_node.parent)  # the folder: its documents' titles and descriptions
        await settle(pilot)
        assert app.screen.query_one(FolderView).docs
        seen += shown(app)
        tree.focus_node(doc_node)
        await settle(pilot)
        assert "zqosc" in app.screen.query_one(LinesView).text
        for node in list(doc_node.children):
            tree.focus_node(node)
            await settle(pilot)
            seen += shown(app)
        await pilot.press("slash", *"zqosc")
        await settle(pilot)
        assert isinstance(app.screen, SearchScreen)
        assert app.screen.result is not None and len(app.screen.result.hits) == 2
        seen += shown(app)
        await pilot.press("enter")
        await settle(pilot)
        seen += shown(app)
    assert raw_controls(seen) == []
    everything = "\n".join(seen)
    for visible in ("\\x1b]52;c;ZWNobyBwd25lZA==\\x07", "\\x1b]0;pwned\\x07", "\\x1b[2J"):
        assert visible in everything
    assert "\\x9b31m" in everything  # a C1 CSI
    assert "key\\x1b[2J value \\x1b]0;pwned\\x07" in everything  # front matter key and value
    assert "other\\x1b[2J.md" in everything  # a link target
    svg = seen[0]
    assert "skip\\x1b]0;pwned\\x07.md" in svg  # the skipped file's name, in the tree


def test_preview_lines_keep_tabs_and_escape_the_rest() -> None:
    from markindex_tui.widgets.lines_view import shown_line

    assert shown_line("\tcode\x1b[2J\x07 中文") == "\tcode\\x1b[2J\\x07 中文"


BIDI_OR_C1 = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


async def test_front_matter_lists_and_maps_are_escaped_too(tmp_path: Path) -> None:
    """Non-string front matter values were shown as JSON, which leaves DEL, C1 controls (a CSI)
    and bidi overrides raw: `tags: ["\\u202e..."]` reordered the panel's text."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "fm.md").write_text(
        "---\n"
        'tags: ["rtl \\u202egpj.exe", "c1 \\x9b31m red", "del \\x7f"]\n'
        'meta: {"k": "iso \\u2066x\\u2069"}\n'
        "---\n# Front\n\nbody\n",
        encoding="utf-8",
    )
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.press("down")  # fm.md: its metadata with the front matter
        await settle(pilot)
        info = plain(app.screen.query_one(DocInfoPanel).query_one(Static).content)
        screen = app.export_screenshot()
    assert "tags" in info and "meta" in info
    assert BIDI_OR_C1.findall(info) == [] and BIDI_OR_C1.findall(screen) == []
    assert "\\u202egpj.exe" in info and "\\x9b31m" in info and "\\x7f" in info
    assert "\\u2066x\\u2069" in info


async def test_unicode_line_separators_do_not_shift_the_line_numbers(tmp_path: Path) -> None:
    """The preview's text area splits rows with `str.splitlines`, which also breaks at U+2028 and
    U+2029: a line holding one took two rows, and every later line was shown under the number
    of the line before it. They are shown as escapes, one row per line of the file."""
    root = tmp_path / "lib"
    root.mkdir()
    body = "# Seps\n\nbefore\u2028after\n\npara\u2029graph\n\nzqlast line\n"
    (root / "seps.md").write_text(body, encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.press("down")  # seps.md: all its lines
        await settle(pilot)
        lines = app.screen.query_one(LinesView)
        file_lines = body.split("\n")[:-1]
        assert lines.line_number_start == 1
        assert lines.document.line_count == len(file_lines) == 7
        assert lines.document.get_line(6) == "zqlast line"  # row 6 is line 7, as in the file
        assert lines.document.get_line(2) == "before\\u2028after"
        assert lines.document.get_line(4) == "para\\u2029graph"


async def test_control_characters_pasted_into_the_search_box_are_not_sent_raw(
    hostile: Path,
) -> None:
    """Text copied from a terminal or a hostile file and pasted into the search box kept its
    ESC and bidi characters: the box drew them raw, so the terminal ran the OSC 52 (the
    clipboard was written) and cleared the screen. They become spaces: nothing is searched by
    them, and the words around them are still found."""
    app = make_app(hostile)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await settle(pilot)
        app.screen.query_one("#query", Input).focus()
        pilot.app.post_message(events.Paste(f"{OSC52}zqosc{CLEAR}\u202e\nsecond line"))
        await settle(pilot)
        await pilot.pause(0.3)  # the typing pause before the search
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        assert screen.query_one("#query", Input).value == " ]52;c;ZWNobyBwd25lZA== zqosc [2J "
        assert raw_controls([app.export_screenshot()]) == []
        assert "\u202e" not in app.export_screenshot()
        assert screen.result is not None and len(screen.result.hits) == 2

"""Small and odd terminal sizes: nothing crashes, nothing important is cut away unseen."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.containers import VerticalScroll
from textual.geometry import Offset

from markindex_core.library import Library
from markindex_tui.app import INTRO, MarkindexApp
from markindex_tui.screens.browse import BrowseScreen
from markindex_tui.screens.help import HelpScreen
from markindex_tui.testing import make_app, settle, wait_until
from markindex_tui.widgets.folder_view import FolderView
from markindex_tui.widgets.library_tree import LibraryTree
from markindex_tui.widgets.lines_view import LinesView
from markindex_tui.widgets.status_bar import StatusBar

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("size", [(30, 8), (29, 10), (2, 6)])
async def test_a_folder_in_a_very_narrow_terminal_does_not_crash(
    sample_app: MarkindexApp, size: tuple[int, int]
) -> None:
    """At 30 columns the tree kept its 28-column minimum and left the folder's document list
    2 columns, less its padding: Textual's OptionList divided by a width of 0 and the app died
    with a ValueError traceback as soon as a folder was highlighted."""
    app = sample_app
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("down")  # guides/: its documents in the folder view
        await settle(pilot)
        assert app.screen.query_one(FolderView).display
    assert app.return_code in (None, 0)


@pytest.mark.parametrize("width", [8, 9, 10])
async def test_search_results_in_a_very_narrow_terminal_do_not_crash(
    sample_app: MarkindexApp, width: int
) -> None:
    """The search box's margins, border and the results' padding take 8 columns: at 8 columns
    the results had none left and the app died like the folder list did."""
    app = sample_app
    async with app.run_test(size=(width, 12)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"upgrade")
        await settle(pilot)
        await wait_until(pilot, lambda: getattr(app.screen, "result", None) is not None)
        await pilot.pause()
    assert app.return_code in (None, 0)


def stacked(app: MarkindexApp) -> bool:
    """The tree spans the screen above the preview (not beside it)."""
    tree, lines = app.screen.query_one(LibraryTree).region, app.screen.query_one(LinesView).region
    return tree.width == app.size.width and lines.y >= tree.bottom and lines.x == 0


async def test_a_narrow_terminal_stacks_the_tree_above_the_preview(
    sample_app: MarkindexApp,
) -> None:
    """At 40 columns the tree kept its 28-column minimum beside the preview, which had 11
    columns: a wrapped word or two per line. Under 60 columns the tree now sits above the
    preview, both full width; wider again, they are side by side. A resize while the search
    is on top reaches the library screen when the search closes."""
    app = sample_app
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot)
        await pilot.press("end")  # README.md: its lines in the preview
        await settle(pilot)
        assert stacked(app)
        assert app.screen.query_one(LinesView).region.width == 40
        await pilot.resize_terminal(100, 30)
        await settle(pilot)
        assert not stacked(app)
        assert app.screen.query_one(LinesView).region.x > 28
        await pilot.press("slash", *"upgrade")
        await settle(pilot)
        await pilot.resize_terminal(50, 20)
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, BrowseScreen)
        assert stacked(app)


def screen_lines(app: MarkindexApp) -> list[str]:
    """The terminal's rows as text (double-width characters take one character each)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False).splitlines()


def status_text(app: MarkindexApp) -> str:
    """What the status bar's rows show, joined into one line."""
    region = app.screen.query_one(StatusBar).region
    rows = screen_lines(app)[region.y : region.bottom]
    return " ".join(" ".join(rows).split())


async def test_a_long_status_line_wraps_instead_of_losing_its_end(tmp_path: Path) -> None:
    """The status bar was one row: at 80 columns '1 changed, 1 new on disk since indexed (2
    files: i updates)' lost its end, the key that fixes it, and at 40 columns even whether a
    daemon writes was cut. It now wraps onto up to three rows when it must."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    Library(root).index()
    (root / "a.md").write_text("# A\n\nalpha, edited since\n", encoding="utf-8")
    (root / "c.md").write_text("# C\n\ncharlie\n", encoding="utf-8")
    app = make_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(StatusBar)
        await wait_until(pilot, lambda: bar.changes is not None)
        await pilot.pause()
        said = "1 changed, 1 new on disk since indexed (2 files: i updates)"
        assert said in status_text(app)
        await pilot.resize_terminal(40, 12)
        await settle(pilot)
        assert "1 document · indexed just now · no daemon · " + said in status_text(app)
        await pilot.resize_terminal(160, 30)
        await settle(pilot)
        assert bar.region.height == 1  # when it fits, one row as before


def top_line(view: LinesView) -> int:
    """The file's line number at the top of the preview (soft-wrapped rows vary with width)."""
    row, _ = view.wrapped_document.offset_to_location(Offset(0, round(view.scroll_y)))
    return view.line_number_start + row


def cursor_in_view(tree: LibraryTree) -> bool:
    return tree.scroll_y <= tree.cursor_line < tree.scroll_y + tree.scrollable_content_region.height


async def test_a_resize_keeps_the_tree_cursor_and_the_preview_place(tmp_path: Path) -> None:
    """After a search jump, shrinking the terminal (or growing it back) left the tree scrolled
    to its top with the cursor out of sight, and the preview scrolled by the same number of
    rows while its lines wrapped anew: it showed other lines than the cited passage. Now the
    tree scrolls to its cursor and the preview keeps the line it had at its top."""
    root = tmp_path / "lib"
    (root / "deep" / "er").mkdir(parents=True)
    prose = " ".join(["words that wrap differently at every terminal width"] * 3)
    body = "\n".join(f"{prose} {i}" for i in range(1, 120))
    for n in range(30):
        (root / "deep" / "er" / f"d{n:02}.md").write_text(f"# D{n}\n\nbody\n", encoding="utf-8")
    (root / "deep" / "er" / "zz.md").write_text(
        f"# Long\n\n{body}\n\nthe zebrafish passage\n\n{body}\n", encoding="utf-8"
    )
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zebrafish", "enter")
        await settle(pilot)
        tree, view = app.screen.query_one(LibraryTree), app.screen.query_one(LinesView)
        await wait_until(pilot, lambda: top_line(view) > 100)  # scrolled to the passage (L123)
        before = top_line(view)
        assert cursor_in_view(tree)
        for size in ((40, 12), (100, 30), (59, 20)):
            await pilot.resize_terminal(*size)
            await settle(pilot)
            assert cursor_in_view(tree), size
            assert top_line(view) == before, size


async def test_help_in_a_small_terminal_shows_keys_first(sample_app: MarkindexApp) -> None:
    """At 40×12 the help box showed seven rows of its introduction and no key: what help was
    opened for was below, out of sight. The keys now come first, the introduction after them."""
    app = sample_app
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = screen_lines(app)
        body = app.screen.query_one("#help-body").region
        shown = [" ".join(r.split()) for r in rows[body.y : body.bottom]]
        assert any("Anywhere" in r for r in shown), shown
        assert any("│ ? Help │" in r for r in shown), shown
        assert not any("markindex shows a library" in r for r in shown), shown
        scroll = app.screen.query_one(VerticalScroll)
        scroll.scroll_end(animate=False)
        await settle(pilot)
        last_words = " ".join(INTRO.split()[-2:])
        assert any(last_words in r for r in screen_lines(app))  # the introduction ends it

"""A highlighted folder lists its documents as an agent browsing it sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from markindex_core.library import Library
from markindex_tui.app import MarkindexApp
from markindex_tui.settings import TUI_FOLDER_VIEW_PAGE
from markindex_tui.testing import SIZE, make_app, settle, wait_until
from markindex_tui.widgets.folder_view import FolderView
from markindex_tui.widgets.library_tree import LibraryTree
from markindex_tui.widgets.lines_view import LinesView

pytestmark = pytest.mark.timeout(60)


def prompts(view: FolderView) -> list[str]:
    return [str(view.get_option_at_index(i).prompt) for i in range(view.option_count)]


async def test_highlighted_folder_lists_titles_descriptions_and_sizes(
    sample_app: MarkindexApp,
) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")  # guides/
        await settle(pilot)
        view = app.screen.query_one(FolderView)
        assert view.display and not app.screen.query_one(LinesView).display
        browse = json.loads(app.lib.call_tool("browse_documents", {"folder": "guides"}))
        agent = browse["data"]["documents"] if "data" in browse else browse["documents"]
        assert [d.path for d in view.docs] == [d["path"] for d in agent] == ["guides/install.md"]
        text = prompts(view)[0]
        doc = app.lib.store.document("guides/install.md")
        assert doc is not None
        assert text.startswith(agent[0]["title"] + "\ninstall.md  ")
        assert agent[0]["description"] and " ".join(agent[0]["description"].split()) in text
        assert f"{doc['tokens']:,} tokens · {doc['line_count']:,} lines" in text
        await pilot.press("enter", "down")  # install.md: back to the lines
        await settle(pilot)
        assert app.screen.query_one(LinesView).display and not view.display


@pytest.fixture
def big_folder(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    (root / "many").mkdir(parents=True)
    for i in range(TUI_FOLDER_VIEW_PAGE + 20):
        body = f"# Report {i:03d}\n\nThis report covers topic number {i}.\n"
        (root / "many" / f"r{i:03d}.md").write_text(body, encoding="utf-8")
    Library(root).index()
    return root


async def test_big_folder_pages_and_enter_opens_a_document(big_folder: Path) -> None:
    app = make_app(big_folder)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")  # many/
        await settle(pilot)
        view = app.screen.query_one(FolderView)
        assert len(view.docs) == TUI_FOLDER_VIEW_PAGE and view.left == 20
        assert prompts(view)[-1] == "… 20 more (enter)"
        await pilot.press("up")  # the library root: no documents of its own
        await settle(pilot)
        assert view.folder == "" and view.docs == [] and view.left == 0
        assert prompts(view) == ["no documents directly in this folder (120 in sub-folders)"]
        await pilot.press("down")
        await settle(pilot)
        assert view.folder == "many" and len(view.docs) == TUI_FOLDER_VIEW_PAGE
        await pilot.press("tab")
        assert view.has_focus
        await pilot.press("end", "enter")  # the "… more" line
        await settle(pilot)
        assert len(view.docs) == TUI_FOLDER_VIEW_PAGE + 20 and view.left == 0
        assert prompts(view)[-1].startswith("Report 119\nr119.md")
        assert "This report covers topic number 119." in prompts(view)[-1]
        assert view.highlighted == TUI_FOLDER_VIEW_PAGE  # the first document of the new page
        await pilot.press("end", "enter")  # open the highlighted document in the tree
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        ref = tree.selected_ref()
        assert ref is not None and ref.key == ("document", "many/r119.md", "")
        assert tree.has_focus and app.screen.query_one(LinesView).display


async def test_a_commit_elsewhere_keeps_the_place_in_a_folders_documents(
    big_folder: Path,
) -> None:
    """Down at document 110 of a folder's list (its second page loaded), any commit by another
    process, even of another file, listed the folder again from its first page with nothing
    highlighted: the place was lost, and enter did nothing until an arrow key was pressed."""
    app = make_app(big_folder)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "tab", "end", "enter")  # many/, its second page
        await settle(pilot)
        view = app.screen.query_one(FolderView)
        await pilot.press(*["down"] * 10)
        await settle(pilot)
        place = (view.highlighted, len(view.docs), view.scroll_y)
        assert place[0] == TUI_FOLDER_VIEW_PAGE + 10 and place[1] == TUI_FOLDER_VIEW_PAGE + 20
        (big_folder / "new.md").write_text("# New\n\nbody\n", encoding="utf-8")
        other = Library(big_folder)
        other.index()
        other.close()
        tree = app.screen.query_one(LibraryTree)
        await wait_until(pilot, lambda: tree.node_for(("document", "new.md", "")) is not None)
        await settle(pilot)
        assert (view.highlighted, len(view.docs), view.scroll_y) == place
        await pilot.press("enter")  # opens the document that was highlighted
        await settle(pilot)
        ref = tree.selected_ref()
        assert ref is not None and ref.key == ("document", "many/r110.md", "")

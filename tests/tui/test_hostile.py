"""Hostile libraries: markup in names, an index that changes or vanishes, huge documents."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets._toast import Toast

from markindex_core.library import Library
from markindex_tui.testing import make_app, settle, wait_until
from markindex_tui.widgets.library_tree import LibraryTree

pytestmark = pytest.mark.timeout(60)

LINK_NAME = "[link=https:evil]x.md"  # Textual's markup parser raises MarkupError on it


def toasts(app: object) -> list[str]:
    return [t.render().plain for t in app.screen.query(Toast)]  # type: ignore[attr-defined]


async def test_a_citation_with_markup_in_the_file_name_is_shown_as_text(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "d").mkdir(parents=True)
    (root / LINK_NAME).write_text("# Evil\n\nbody\n", encoding="utf-8")
    (root / "d" / "[bold red]y.md").write_text("# Red\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        for path in (LINK_NAME, "d/[bold red]y.md"):
            await tree.reveal(path)
            await settle(pilot)
            await pilot.press("c")
            await wait_until(pilot, lambda p=path: any(p in t for t in toasts(app)))  # type: ignore[misc]
            assert app.clipboard == f"[{path}, L1-3]"
    assert app.return_code in (None, 0)

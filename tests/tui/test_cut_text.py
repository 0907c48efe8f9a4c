"""Long text is cut to what the screen has, in terminal cells (CJK: two), always marked "…"."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.text import Text

from markindex_core.library import Library
from markindex_tui.screens.search import SearchScreen
from markindex_tui.settings import TUI_SNIPPET_COLUMNS, TUI_SNIPPET_ROWS
from markindex_tui.testing import make_app, settle, wait_until
from markindex_tui.widgets.hit_list import HitList
from markindex_tui.widgets.library_tree import LibraryTree
from tests.tui.test_small_terminals import screen_lines

pytestmark = pytest.mark.timeout(60)

RUN = (
    "个人信息处理者应当采取必要措施保障所处理的个人信息的安全防止未经授权的访问以及泄露篡改丢失" * 3
)


def snippet_rows(prompt: object) -> list[str]:
    """A hit's snippet rows (below its citation and heading path)."""
    assert isinstance(prompt, Text)
    return prompt.plain.split("\n")[2:]


@pytest.fixture
def long_hits(tmp_path: Path) -> Path:
    """Four documents of one unbroken Chinese run each, and one very long line of words."""
    root = tmp_path / "lib"
    root.mkdir()
    for i in range(4):
        (root / f"c{i}.md").write_text(f"# 第{i}章\n\n{RUN}数据安全{RUN}\n", encoding="utf-8")
    line = "intro " * 40 + "数据安全 " + "words " * 80
    (root / "long.md").write_text(f"# Long\n\n{line}\n", encoding="utf-8")
    Library(root).index()
    return root


async def test_a_long_hit_does_not_push_the_others_out_of_the_list(long_hits: Path) -> None:
    """A 200-character snippet of Chinese is 400 cells: it took five rows of a 100-column
    search box, and the fourth and fifth hits were below the list. Each snippet now takes at
    most 2 rows of at most 60 cells, ends with "…" when cut and still shows what matched; all
    five hits are in view. Narrower, the rows fit the list's own width."""
    app = make_app(long_hits)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"数据安全")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        await wait_until(pilot, lambda: screen.result is not None)
        await settle(pilot)
        results = screen.query_one(HitList)
        assert results.option_count == 5
        on_screen = "\n".join(screen_lines(app))
        for hit in screen.result.hits if screen.result else []:
            assert hit.citation in on_screen
        for size in ((100, 30), (40, 16)):
            await pilot.resize_terminal(*size)
            await settle(pilot)
            width = min(TUI_SNIPPET_COLUMNS, results.text_width())
            for i in range(results.option_count):
                rows = snippet_rows(results.get_option_at_index(i).prompt)
                assert 1 <= len(rows) <= TUI_SNIPPET_ROWS, (size, rows)
                assert all(cell_len(r) <= width for r in rows), (size, rows)
                assert rows[-1].endswith("…"), (size, rows)
                assert "数据安全" in "".join(rows), (size, rows)


def cells(row: str, width: int) -> str:
    """The first `width` cells of a screen row (a CJK character is one character, two cells)."""
    out, used = [], 0
    for ch in row:
        used += cell_len(ch)
        if used > width:
            break
        out.append(ch)
    return "".join(out)


CJK_NAME = "1中华人民共和国个人信息保护法实施条例及其配套规定汇编.md"  # "1": a CJK char at the edge
CJK_HEADING = "第一章 总则" + "个人信息处理者应当采取必要措施保障所处理的个人信息的安全" * 2
LATIN_HEADING = "Installing and configuring the whole thing properly on every platform"


async def test_labels_cut_at_the_tree_edge_end_with_an_ellipsis(tmp_path: Path) -> None:
    """The tree's edge cut long labels with no mark, and split a CJK character at the edge into
    a blank: "…实施条 " read as a whole name. A cut label now ends with "…" right after its
    last whole character, Chinese or Latin, a document, a section or the cursor's line, also
    beside the tree's scrollbar; a label that fits has none."""
    root = tmp_path / "lib"
    root.mkdir()
    body = f"# {CJK_HEADING}\n\n正文\n\n# {LATIN_HEADING}\n\nbody\n\n# Short\n\nbody\n"
    (root / CJK_NAME).write_text(body, encoding="utf-8")
    for i in range(40):  # enough lines for the tree's scrollbar
        (root / f"doc{i:02}.md").write_text(f"# D{i}\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        doc = await tree.reveal(CJK_NAME)
        await settle(pilot)
        assert doc is not None and doc.children
        tree.focus_node(doc.children[0])  # the cursor on the long CJK heading
        await settle(pilot)
        assert tree.show_vertical_scrollbar
        pane = tree.scrollable_content_region
        rows = screen_lines(app)
        checked = []
        for node in (doc, *doc.children):
            row = cells(rows[pane.y + node.line - round(tree.scroll_y)], pane.width)
            label = tree.get_label_width(node)
            if tree.label_x(node) + label > pane.width:
                shown = row.rstrip()
                assert shown.endswith("…") and shown[-2] != " ", row
                checked.append(str(node.label))
            else:
                assert "…" not in row, row
        assert len(checked) == 2, checked  # the document and its (merged) long headings

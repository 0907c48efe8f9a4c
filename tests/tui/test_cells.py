"""Cutting text to terminal cells: widths counted in cells (CJK: two), and "…" on every cut."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip

from markindex_tui.cells import (
    cap_lines,
    chars_fitting,
    ellipsize,
    from_first_highlight,
    mark_cut_label,
)


def test_a_wide_character_is_never_split() -> None:
    assert chars_fitting("数据安全", 5) == 2  # the third would need cells 5 and 6
    assert chars_fitting("ab数据", 3) == 2
    assert chars_fitting("abc", 9) == 3


def test_ellipsize_counts_cells_and_always_marks_the_cut() -> None:
    assert ellipsize(Text("短"), 2).plain == "短"  # fits: unchanged
    for width in range(1, 12):
        cut = ellipsize(Text("中华人民共和国个人信息保护法"), width)
        assert cell_len(cut.plain) <= width and cut.plain.endswith("…"), width
    assert ellipsize(Text("install guide"), 9).plain == "install…"  # no space before "…"


def test_cap_lines_keeps_at_most_the_rows_asked_for() -> None:
    run = Text("个人信息处理者应当采取必要措施保障所处理的个人信息的安全" * 4)
    capped = cap_lines(run, 21, 2)
    rows = capped.plain.split("\n")
    assert len(rows) == 2
    assert all(cell_len(r) <= 21 for r in rows)
    assert rows[-1].endswith("…")
    words = cap_lines(Text("alpha beta gamma delta epsilon"), 11, 2).plain.split("\n")
    assert words == ["alpha beta", "gamma…"]  # words whole; "…" says the rest is cut
    assert cap_lines(Text("alpha beta"), 11, 2).plain == "alpha beta"  # fits: no "…"


def test_a_snippet_is_cut_before_its_first_match_when_that_is_far_in() -> None:
    text = Text("前" * 80 + "数据安全" + "后" * 10)
    text.stylize("underline", 80, 84)
    cut = from_first_highlight(text, 10)
    assert cut.plain.startswith("…") and cell_len(cut.plain.split("数据安全")[0]) <= 10
    assert [cut.plain[s.start : s.end] for s in cut.spans] == ["数据安全"]  # still highlighted
    near = Text("word 数据安全")
    near.stylize("underline", 5, 9)
    assert from_first_highlight(near, 10) is near


def test_a_chinese_run_after_a_short_word_fills_its_rows() -> None:
    """Rich's wrap moved the whole run below "第六条", which then had a row to itself."""
    text = Text("第六条 重要数据的处理者应当明确数据安全负责人和管理机构落实数据安全保护责任")
    rows = cap_lines(text, 20, 2).plain.split("\n")
    assert rows[0].startswith("第六条 重要") and cell_len(rows[0]) >= 19
    assert cell_len(rows[1]) <= 20 and rows[1].endswith("…")


def shown(text: str, start: int, width: int) -> Strip:
    """A tree line as Textual shows it in the pane: padded, then cells `start` to `start + width`."""
    padded = text + " " * 40
    return Strip([Segment(padded)], cell_len(padded)).crop(start, start + width)


def test_a_tree_label_cut_at_the_edge_ends_with_an_ellipsis() -> None:
    label = "中华人民共和国"
    assert mark_cut_label(shown("├ " + label, 0, 9), label, 2).text == "├ 中华人…"
    # Textual turns the half of "民" left of the edge into a blank: "…" follows "人" instead
    assert mark_cut_label(shown("├ " + label, 0, 10), label, 2).text == "├ 中华人… "
    assert mark_cut_label(shown("├ " + label, 0, 16), label, 2).text == "├ 中华人民共和国"
    assert mark_cut_label(shown("├ install.md 12", 0, 10), "install.md 12", 2).text == (
        "├ install…"
    )


def test_a_tree_label_scrolled_past_its_start_begins_with_an_ellipsis() -> None:
    line = "│ │ └ abcdefgh"  # the label starts at column 6; the tree scrolled 9 columns
    assert mark_cut_label(shown(line, 9, 8), "abcdefgh", 6 - 9).text == "…efgh   "
    assert mark_cut_label(shown(line, 9, 4), "abcdefgh", 6 - 9).text == "…ef…"
    assert mark_cut_label(shown(line, 0, 6), "abcdefgh", 6).text == "│ │ └…"  # all beyond

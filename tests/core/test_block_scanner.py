"""The line scanner in parse_markdown gives exactly what markdown-it-py gives (the oracle).

Checked on every corpus file and on seeded random documents full of edge cases: headings with
closing hashes, setext underlines, fences of both kinds and lengths (some unclosed), indented
code, lists and quotes holding heading-like lines, HTML blocks, tables, front matter (valid and
not), link reference definitions, tabs, CJK text and odd whitespace.
"""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it.rules_block.table import escapedSplit

from markindex_core.index.blocks import _row_cells, scan_blocks, split_source_lines
from markindex_core.index.decode import decode
from markindex_core.index.markdown import _Collector, parse_markdown, parse_markdown_oracle
from tests.paths import CORPUS, needs_corpus

WORDS = ["alpha", "beta", "第一条", "中华人民共和国", "规定", "x", "Ω", "foo_bar", "*em*", "`code`"]
LINKS = ["[a](b.md)", "[c](../d.md#sec)", "[e](http://x.org/f.md)", "[g]( <h i.md> )", "](j.md)"]
SPACES = ["", " ", "  ", "   ", "    ", "\t", " \t", "\u3000", "\xa0"]
LINE_MAKERS: list[str] = [
    "# {w}",
    "## {w} ##",
    "###### {w} #",
    "####### {w}",
    "#{w}",
    "#",
    "### {w} \\#",
    "{w} {w}",
    "{w} {l}",
    "===",
    "---",
    "- - -",
    "***",
    "___",
    "--",
    "=",
    "```",
    "```python",
    "````",
    "~~~",
    "~~~~ info ~~~",
    "``` a`b",
    "    {w}",
    "- {w}",
    "* {w}",
    "+ {w}",
    "-",
    "- # {w}",
    "- {l}",
    "  - {l}",
    "    - {w} {l}",
    "* {w}{l}",
    "1. {l}",
    "   2. {l} {w}",
    "- - {l}",
    "- > {l}",
    "-   ```",
    "  ~~~",
    "  <div>{l}",
    "      {l}",
    "  # {l} #",
    "  ===",
    "- [{w}](",
    "  x.md)",
    "- \u3000",
    "\u3000\u3000",
    "-\t{l}",
    "- \t{w}",
    "-     {w}",
    "1. {w}",
    "2) {w}",
    "1.",
    "> {w}",
    "> # {w}",
    "> {w} {l}",
    ">{l}",
    ">     {l}",
    "> - {l}",
    "> > {l}",
    ">\t{l}",
    "> ```",
    "> a | {l}",
    "> --|--",
    "    > {l}",
    ">",
    "<div>",
    "</div>",
    "<!-- {w}",
    "-->",
    "<pre>",
    "</pre>",
    "<span>{w}</span>",
    "<?php",
    "?>",
    "| a | b |",
    "|---|---|",
    "a | b",
    "--- | ---",
    "[ref]: ref.md",
    "[{w}]: <x y.md> 'title'",
    "[ref]: other.md",
    "[{w}]: {w}.md",
    "[Ref]:r.md",
    "[ ref  ]: ../up.md#a",
    "'title'",
    '"title"',
    "(title)",
    "[x]: javascript:a.md",
    "[x]: <y.md>",
    "[x]: y.md z",
    "[x]: y(z.md",
    "[x]: y.md 'title'",
    "[x]: y%20z.md",
    "[\u3000]: blank.md",
    "[a\\]b]: esc.md",
    "[x]:",
    "[label",
    "]: z.md",
    "...",
    "title: {w}",
    "{l} {l}",
    "",
    "",
    "",
]


LIST_MAKERS = [
    "- {w}",
    "- {l}",
    "* {l}",
    "+ {w}",
    "1. {l}",
    "2) {w}",
    "{w} {l}",
    "{l}",
    "# {l}",
    "---",
    "***",
    "```",
    "",
    "",
    "-",
    "10. {w}",
    # lazy lines, nested items with links and what may sit between them
    "{w}",
    "{w} {l} {w}",
    "- - {l}",
    "1) - {l}",
    "- # {l}",
    "# {w}",
    "> {l}",
    "- > {l}",
    "```",
    "- ```",
    "<div>{l}",
    "<span>{l}",
    "{w} | {l}",
    "--|--",
    "===",
    "\t{l}",
    "- {w}\t{l}",
    "*{w}* [{w}](",
    "x.md) {w}",
    "\u3000",
    "[r]: r.md",
    "`{w}` {l}",
    "``{w}`` {w}",
    "~~~",
    "[{w}|{w}](x.md) {w}",
    "{w} | {w}",
    "--- | ---",
    "| a | {l} |",
    "2. {l}",
    "- 2. {l}",
    "#{w} {l}",
    # inline text running over lines: link text, code spans
    "[{w}",
    "{w}](x.md)",
    "`{w} {l}",
    "{w}` {l}",
]


TABLE_CELLS = ["", " ", "a", " {w} ", "{l}", "x\\|y", "[a](b\\|c.md)", "\\", "`|`", "\u3000"]
DELIMITER_ROWS = [
    "|---|---|",
    "--|--",
    "| :-- | --: |",
    ":-:|:-",
    "---",
    "|-|",
    "| --- |",
    "- | -",
    "-|-|-",
    "--||--",
    "|:-:|:-:|:-:|",
    "|--- |---|\t",
    "  |--|--|",
    "    |--|--|",
    "|-x-|--|",
    "|",
    "-:",
    "--|--\u3000",
]
TABLE_LINES = [
    "{row}",
    "{row}",
    "{row}",
    "  {row}",
    "    {row}",
    "\t{row}",
    "{w} {l}",
    "> {row}",
    "- {row}",
    "2. {row}",
    "-",
    "# {row}",
    "```",
    "<div>",
    "<span>{w}",
    "***",
    "---",
    "===",
    "[ref]: r.md",
    "",
    "\u3000",
]


def random_document(rng: random.Random) -> str:
    """A short document mixing block constructs in ways that stress where blocks end."""
    if rng.random() < 0.3:
        return _random_list(rng)
    if rng.random() < 0.2:
        return _random_tables(rng)
    lines: list[str] = []
    if rng.random() < 0.3:
        lines += ["---" + rng.choice(["", "-", " ", "x"]), "title: " + rng.choice(WORDS)]
        if rng.random() < 0.8:
            lines.append(rng.choice(["---", "...", "----", " ---", "--"]))
    for _ in range(rng.randint(0, 30)):
        template = rng.choice(LINE_MAKERS)
        line = template.format(w=rng.choice(WORDS), l=rng.choice(LINKS))
        if rng.random() < 0.25:
            line = rng.choice(SPACES) + line
        if rng.random() < 0.1:
            line += rng.choice(SPACES)
        lines.append(line)
    text = "\n".join(lines)
    if rng.random() < 0.7:
        text += "\n"
    if rng.random() < 0.05:
        text = text.replace("\n", "\r\n")
    return text


def _random_list(rng: random.Random) -> str:
    """Mostly list lines at varied indents: where items, lists and lazy lines end."""
    lines = []
    for _ in range(rng.randint(1, 25)):
        line = rng.choice(LIST_MAKERS).format(w=rng.choice(WORDS), l=rng.choice(LINKS))
        indent = rng.choice([0, 0, 0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 7, 8, 10])
        lines.append(" " * indent + line)
    return "\n".join(lines) + "\n"


def _table_row(rng: random.Random) -> str:
    cells = [
        rng.choice(TABLE_CELLS).format(w=rng.choice(WORDS), l=rng.choice(LINKS))
        for _ in range(rng.choice([1, 1, 2, 2, 2, 3, 4]))
    ]
    row = "|".join(cells)
    if rng.random() < 0.6:
        row = "| " + row + " |"
    elif rng.random() < 0.3:
        row += "|"
    return row


def _random_tables(rng: random.Random) -> str:
    """Header rows, delimiter rows of many shapes, body rows and what ends a table."""
    lines: list[str] = []
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.4:
            lines.append(rng.choice(WORDS) + " " + rng.choice(LINKS))
        lines += [_table_row(rng), rng.choice(DELIMITER_ROWS)]
        for _ in range(rng.randint(0, 5)):
            template = rng.choice(TABLE_LINES)
            lines.append(
                template.format(row=_table_row(rng), w=rng.choice(WORDS), l=rng.choice(LINKS))
            )
    return "\n".join(lines) + rng.choice(["", "\n"])


def assert_same(text: str, path: str = "dir/doc.md") -> None:
    for setext in (True, False):
        fast = parse_markdown(text, path, setext=setext)
        assert fast == parse_markdown_oracle(text, path, setext=setext), (setext, text)


def test_generated_documents_match_markdown_it() -> None:
    rng = random.Random(20261130)
    for _ in range(2000):
        assert_same(random_document(rng))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "   ",
        "# a\n  ",
        "---\na: 1\n",
        "---\na: [\n---\n# h\n",
        "para\n- item\n\nnext",
        "para\n2. item\n",
        "- item\nlazy\n\n# h\n",
        "```\nopen fence\n\n# not a heading\n",
        "- x\n\n```\nunclosed fence in a later block\n\n# h\n",
        "<!--\n\n# in comment\n\n-->\n# after\n",
        "a | b\n--|--\n# h\n",
        "[r]: a.md\n[r]: b.md\n\n[r]\n",
        "Title\n===\n\nLong\nsetext\nspan\n---\n",
        "#\tTab heading\t#\n",
        "\t# indented by tab\n",
    ],
)
def test_edge_cases_match_markdown_it(text: str) -> None:
    assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        # one column, no inner pipe: a table, not a setext heading or a paragraph
        "| a |\n---\nafter\n",
        "para\n| a |\n---\n",
        # a table interrupts a paragraph; a broken delimiter row does not
        "para\na | b\n--|--\nc | d\n",
        "para\na | b\n--||--\nc | d\n",
        "a | b\n- | -\n",
        "a | b\n-|-|-\n",
        "    a | b\n--|--\n",
        "a | b\n    --|--\n",
        # what ends a table: every list item (even "2." or an empty one), code indent, blank
        "a | b\n--|--\n2. [x](two.md)\n",
        "a | b\n--|--\n-\n[x](after.md) | y\n",
        "a | b\n--|--\n    [x](code.md)\n",
        "a | b\n--|--\n<span>[x](html.md)\n",
        "a | b\n--|--\n<div>[x](html.md)\n",
        "a | b\n--|--\n> [x](quote.md)\n",
        "a | b\n--|--\n===\n",
        "a | b\n--|--\n\u3000\n[x](y.md)\n",
        # cells: extra cells are dropped, escaped pipes are kept in the cell
        "| a | b |\n|---|---|\n| [x](1.md) | [y](2.md) | [z](3.md) |\n",
        "a | b\n--|--\n[x](p\\|q.md) | [y](r|s.md)\n",
        "[h](h.md) | b\n:-:|--:\nx\n",
        # too many empty cells to fill: markdown-it stops the table
        pytest.param(
            "|a" * 300 + "|\n" + "|-" * 300 + "|\n" + "x\n" * 230 + "[x](late.md)\n",
            id="autocompleted-cells-limit",
        ),
    ],
)
def test_tables_match_markdown_it(text: str) -> None:
    assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        # lazy continuation lines: only after a line that leaves a paragraph open
        "- a [x](1.md)\nlazy [y](2.md)\n- b\n",
        "- a\n  - b\nlazy [x](y.md)\n  c\n- d\n",
        "1.   a\n    b [x](y.md)\n",
        "- a\n<span>lazy</span> [x](y.md)\n",
        "- a\n\tlazy [x](y.md)\n",
        "- a\n  ===\nafter\n",
        "- a\n  ---\nafter\n",
        "- a\n  ***\nafter\n",
        "- a\n  # h\nafter [x](y.md)\n",
        "- a\n  ```\nafter\n",
        "- a\n  > q\nlazy\n",
        "- a\n\n  b\nlazy\n",
        "- a\n\n      code\nafter\n",
        # a line that ends the item's paragraph also ends the list
        "- a\n# h\n",
        "- a\n<div>\n",
        "- a\n> q\n",
        "- a\n```\n- b\n",
        "1.   a\n    > q\n",
        "1.   a\n    # h\n",
        "1.   a\n    - b\n",
        "- a\n  - b\n    - c\n     - d\n",
        # links in one item; other items may hold anything
        "- [a](a.md)\n- ```\n  code [b](b.md\n  ```\n- [c](c.md)\n",
        "- [a](a.md)\n-\n  x\n- <div>\n- [c](c.md)\n",
        "- a\n  - [b](b.md)\n    - [c](c.md)\n",
        "- a\n\n      [b](code.md)\n- [c](c.md)\n",
        # nested items: a line indented 4 past its own item may be code
        "- a\n  - b\n    - [c](c.md)\n\n        [d](code.md)\n      [e](e.md)\n",
        "- a\n  - b\n\n   [c](para.md)\n\n      [d](code.md)\n",
        "- a\n  2. b\n\n      [x](code.md)\n",
        "- a\n\n  2. b\n\n      [x](para.md)\n",
        "- a\n  - b\n      [x](still-b.md)\n",
        "- `a` [x](x.md)\n  ``` [y](y.md)\n",
        "- [a|b](x.md)\n  c | [d](d.md)\n",
        # a table in an item: cells past the header's count are dropped
        "- x\n  a | b\n  --|--\n  c | d | [x](dropped.md)\n",
        "- a | b\n  --|--\n  c | d | [x](dropped.md)\n",
        "- a\n  ---\n  b\nlazy [x](x.md)\n",
    ],
)
def test_lists_match_markdown_it(text: str) -> None:
    assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        "[a]: a.md\n[A]: second.md\n\n[b]:  b.md#x\n",
        "[a]: a.md\n'title on the next line'\n",
        "[a]: a.md\n  (title)\n[b]: b.md\n",
        '[a]: a.md\n"unclosed title\n\n# h\n',
        "[a]: javascript:x.md\n",
        "[ \u3000 ]: blank-label.md\n",
        "[a]: b.md c\n",
        "[a]: b(c.md\n",
        "[a]: b%20c.md\n[ä]: ö.md\n",
        "para\n[a]: not-a-definition.md\n",
        "[a]: a.md\n# h\n[a]: later.md\n",
        "[a\n# h\n]: across-a-heading.md\n",
        "[a\n> q\n]: across-a-quote.md\n",
        "[a\n- b\n]: across-an-item.md\n",
        "[a\n    # code indent\n]: continued.md\n",
        "[a\n```\n]: across-a-fence.md\n",
    ],
)
def test_references_match_markdown_it(text: str) -> None:
    assert_same(text)


@pytest.mark.parametrize("closed_after", [None, 3, 40, 700])
def test_a_region_that_runs_on_is_parsed_a_bounded_number_of_times(
    closed_after: int | None,
) -> None:
    """A block handed to markdown-it that runs past each place it could end (a comment left
    open after a list) was parsed again from its start at every such place: 4 000 short
    paragraphs after it (24 KB) took 26 s of CPU, in the indexing process with no deadline."""
    paragraphs = ["\nline [x](x.md)\n"] * 4000
    if closed_after is not None:
        paragraphs[closed_after] = "\n-->\n"
    text = "- a\n  [r]: r.md\n<!--\n" + "".join(paragraphs) + "\n# After\n"
    started = time.process_time()
    parsed = parse_markdown(text, "doc.md", setext=True)
    assert time.process_time() - started < 5
    assert [h.title for h in parsed.headings] == ([] if closed_after is None else ["After"])
    assert_same(text)


def test_headings_each_followed_by_a_link_line_scan_in_linear_time() -> None:
    """A "[" line looked for "]:" down to the next blank line, past every heading, on a copy of
    the rest of the document: 20 000 headings each followed by "[x](#…)" took a minute."""
    n = 20_000
    text = "".join(f"## t{i}\n[x](#t{n - i})\n" for i in range(n))
    started = time.process_time()
    parsed = parse_markdown(text, "doc.md", setext=True)
    assert time.process_time() - started < 10
    assert len(parsed.headings) == n
    assert_same(text[: len(text) // 100])


@pytest.mark.parametrize(
    "text",
    [
        "> **Note:**\n>\n> see [a](a.md) and\n> [b](b.md)\n\n# h\n",
        ">     [a](code.md)\n",
        "> text\n>     [a](continued.md)\n",
        "> - [a](a.md)\n>   - [b](b.md)\n>\n>       [c](code.md)\n",
        "> ```\n> [a](code.md)\n> ```\n",
        "> > [a](a.md)\n",
        ">\t[a](tab.md)\n>\t\t[b](tab.md)\n",
        "> a | b\n> --|--\n> c | d | [x](dropped.md)\n",
        "> <div>\n> [a](html.md)\n",
        "> a\n    > [b](b.md)\n",
    ],
)
def test_quotes_match_markdown_it(text: str) -> None:
    assert_same(text)


class _RegionRecorder(_Collector):
    """The real collector, remembering which stretches went to markdown-it."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("dir/doc.md", lines, True, True)
        self.regions: list[tuple[int, int]] = []

    def region(self, start: int, end: int) -> bool:
        self.regions.append((start, end))
        return super().region(start, end)


@pytest.mark.parametrize(
    "text",
    [
        "para\n| a | [b](b.md) |\n|:--|--:|\n| c \\| d | [e](e.md) |\n> quote\n",
        "- [a](a.md)\n- ```\n  code\n  ```\n- [c](c.md)\n",
        "- a [x](1.md)\nlazy [y](2.md)\n  - b\nlazy\n- c\n# h\n",
        "1.   a\n    # h\n",
        "- [a](a.md)\n  - [b](b.md)\n    - [c](c.md)\n      - [d](d.md)\n- `e` [f|g](f.md)\n",
        "[a]: a.md\n[b]: <b c.md>\n\n[d]: #d\n",
        "> **Note:**\n>\n> see [a](a.md) and\n> - [b](b.md)\n",
        "- see [the\n  docs](a.md) `not\n  [b](code.md)`\nlazy [c](c.md)\n> [d\n> d](d.md)\n",
    ],
)
def test_scanner_needs_no_markdown_it(text: str) -> None:
    """Tables, links in plain items and lazy lines are scanned, not handed to markdown-it."""
    lines = split_source_lines(text)
    sink = _RegionRecorder(lines)
    assert scan_blocks(text, lines, sink, setext=True)
    assert sink.regions == []
    assert_same(text)


@needs_corpus
def test_corpus_matches_markdown_it() -> None:
    for path in sorted(CORPUS.rglob("*.md")):
        rel = str(path.relative_to(CORPUS))
        assert_same(decode(path.read_bytes()).text, rel)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab|\\` ", max_size=30))
def test_row_cells_split_like_markdown_it(text: str) -> None:
    cells = escapedSplit(text)
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    assert _row_cells(text) == cells

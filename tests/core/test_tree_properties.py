"""Property tests: for any generated Markdown, node ranges partition the lines and subtrees nest."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markindex_core.config import TreeParams
from markindex_core.index.document import build_document
from markindex_core.model import SkippedFile

from .helpers import check_tree, doc_lines, tree_shape

LINE_KINDS = st.sampled_from(
    [
        "# Title",
        "## Sub",
        "### Deep",
        "###### Six",
        "#### Skipped",
        "#",
        "# ",
        "#no-space",
        "    # indented code",
        "   ## three spaces",
        "Setext text",
        "another paragraph line with some words in it",
        "中文段落，包含一些汉字。",
        "===",
        "---",
        "- - -",
        "***",
        "- list item",
        "  # in list?",
        "1. numbered",
        "> # quoted heading",
        "```",
        "```python",
        "~~~",
        "~~~~",
        "# inside fence?",
        "<!--",
        "-->",
        "<!-- # comment -->",
        "<div>",
        "</div>",
        "| a | b |",
        "|---|---|",
        "title: front",
        "[ref]: other.md",
        "see [x](other.md#a)",
        "",
        "",
        "",
        "\t",
        "x" * 130,
    ]
)

NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(LINE_KINDS, max_size=40))
    if draw(st.booleans()):
        fm = [
            "---",
            *draw(st.lists(st.sampled_from(["title: T", "tags: [a, b]", "x", ": :"]), max_size=3)),
        ]
        if draw(st.integers(0, 5)):  # usually closed
            fm.append(draw(st.sampled_from(["---", "..."])))
        lines = fm + lines
    nl = draw(NEWLINES)
    text = nl.join(lines)
    if draw(st.booleans()):
        text += nl
    data = text.encode("utf-8")
    if draw(st.integers(0, 7)) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


PARAMS = st.builds(
    TreeParams,
    routing_cost=st.sampled_from([0, 150, 10]),
    max_node_tokens=st.sampled_from([8000, 30, 5]),
    setext=st.booleans(),
)


def _front_matter_lines(lines: list[str]) -> int:
    if lines and lines[0] == "---":
        for i, line in enumerate(lines[1:], start=2):
            if line in ("---", "..."):
                return i
    return 0


def expected_line_count(data: bytes) -> int:
    text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    return len(text.splitlines())


@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), PARAMS)
def test_generated_documents_partition_lines(data: bytes, params: TreeParams) -> None:
    doc = build_document("gen/doc.md", data, 0, params)
    assert not isinstance(doc, SkippedFile), doc.reason
    assert doc.line_count == expected_line_count(data)
    check_tree(doc.sections, doc.line_count)
    fm_lines = _front_matter_lines(doc_lines(doc))
    for s in doc.sections:
        # Nodes above the limit are only those that cannot be cut: one line, or just a heading.
        # (Block token counts are rounded separately: allow one token per line of slack.)
        assert (
            s.tokens <= params.max_node_tokens + (s.end_line - s.start_line + 1)
            or s.end_line == s.start_line
            or s.end_line < s.body_start
            or s.end_line <= fm_lines
        ), s
    for p in doc.passages:
        sec = doc.sections[p.node_index]
        assert sec.start_line <= p.start_line <= p.end_line <= sec.end_line
    # Same bytes, same tree and ids.
    again = build_document("gen/doc.md", data, 0, params)
    assert not isinstance(again, SkippedFile)
    assert tree_shape(again) == tree_shape(doc)


@settings(max_examples=4000, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 6), st.text(max_size=12), st.integers(0, 3)),
        max_size=25,
    ),
    st.sampled_from([0, 150]),
    st.sampled_from([8000, 20]),
)
def test_generated_outlines_partition_and_nest(
    heads: list[tuple[int, str, int]], routing_cost: int, max_tokens: int
) -> None:
    """Arbitrary heading levels (skipped levels, odd titles) with bodies of varying length."""
    parts: list[str] = []
    for level, title, body in heads:
        parts.append("#" * level + " " + title.replace("\n", " ").replace("\r", " "))
        parts.extend(["body text " * 4] * body)
    data = "\n".join(parts).encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return
    doc = build_document(
        "o.md", data, 0, TreeParams(routing_cost=routing_cost, max_node_tokens=max_tokens)
    )
    if isinstance(doc, SkippedFile):
        assert "binary" in doc.reason  # control characters in generated titles
        return
    check_tree(doc.sections, doc.line_count)


CHARS = [
    *"#=-`~ \n\n\n\t>*_[]()!<>|:0123abc中\r\x0b\x0c\u2028\x85\ufeff+.\\",
    *["---\n", "```\n", "# ", "\n\n", "- ", "1. ", "<!--", "-->", "    "],
]


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.sampled_from(CHARS), max_size=80).map("".join),
    st.sampled_from([0, 150]),
    st.sampled_from([3, 8000]),
    st.booleans(),
)
def test_character_soup_partitions_lines(
    text: str, routing_cost: int, limit: int, setext: bool
) -> None:
    """Odd characters (vertical tab, U+2028, NEL, stray BOMs) never break the line partition."""
    params = TreeParams(routing_cost=routing_cost, max_node_tokens=limit, setext=setext)
    doc = build_document("soup.md", text.encode("utf-8"), 0, params)
    if isinstance(doc, SkippedFile):
        assert "binary" in doc.reason
        return
    check_tree(doc.sections, doc.line_count)
    for p in doc.passages:
        sec = doc.sections[p.node_index]
        assert sec.start_line <= p.start_line <= p.end_line <= sec.end_line

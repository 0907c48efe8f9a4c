"""What is a link: exactly what markdown-it-py's own inline parser makes a `link_open` of.

The oracle here is a full markdown-it parse (inline rules on), its link rule wrapped only to
note on which line of its block each link starts. `parse_markdown` (line scanner) and
`parse_markdown_oracle` (markdown-it blocks) must both find those links, on those lines, and no
others: nothing in code spans, behind escapes, in image text or HTML; angle-bracket destinations
with spaces and destinations with balanced parentheses whole.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.rules_inline import link
from markdown_it.rules_inline.state_inline import StateInline

from markindex_core.index.markdown import (
    _plain_links,
    _resolve,
    parse_markdown,
    parse_markdown_oracle,
)

DOC = "dir/doc.md"


def _noting_link(state: StateInline, silent: bool) -> bool:
    """markdown-it's link rule, noting on each link it makes the line of its block it starts
    on and whether it is an inline link (`[text](href)`, which ends with ")") or a use of a
    reference definition (`[text][label]`, `[label]`: those definitions are links already)."""
    start, first = state.pos, len(state.tokens)
    if not link(state, silent):
        return False
    if not silent:
        opener = next(t for t in state.tokens[first:] if t.type == "link_open")
        opener.meta["line"] = state.src.count("\n", 0, start)
        opener.meta["inline"] = state.src[state.pos - 1] == ")"
    return True


def _markdown_it() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    md.inline.ruler.at("link", _noting_link)
    return md


MD = _markdown_it()


def markdown_it_links(text: str) -> list[tuple[int, str, str]]:
    """(1-based line, target, anchor) of every internal link markdown-it finds in `text`."""
    env: dict[str, Any] = {}
    found = []
    for tok in MD.parse(text, env):
        if tok.type != "inline" or tok.map is None:
            continue
        for child in tok.children or []:  # an image's text is in its own children: not here
            if child.type == "link_open" and child.meta.get("inline"):  # not autolinks
                line = tok.map[0] + child.meta["line"] + 1
                found.append((line, str(child.attrs["href"])))
    for ref in env.get("references", {}).values():
        found.append((ref["map"][0] + 1, ref["href"]))
    links = [_resolve(href, "dir", line) for line, href in found]
    return sorted((ln.line, ln.target, ln.anchor) for ln in links if ln)


def ours(text: str, *, oracle: bool = False) -> list[tuple[int, str, str]]:
    parse = parse_markdown_oracle if oracle else parse_markdown
    return sorted((ln.line, ln.target, ln.anchor) for ln in parse(text, DOC).links)


def assert_links_as_markdown_it(text: str) -> None:
    want = markdown_it_links(text)
    assert ours(text) == want, text
    assert ours(text, oracle=True) == want, text


# Inline text in pieces: links of every shape, and everything that may make a link none
# (or take one apart): code spans, escapes, images, autolinks, HTML, stray brackets, breaks.
PIECES = [
    "[a](b.md)",
    "[c](../d.md#sec)",
    "[x](<my file.md>)",
    "[x](a(1).md)",
    "[x](a(b(c)).md)",
    '[t](t.md "title")',
    "[t](t.md 'ti\ntle')",
    "[e](e&amp;f.md)",
    "[u](%C3%A9t%C3%A9.md)",
    "[m](a.m%64)",
    "[m](a&#46;MD)",
    "[k](a.mar\u212adown)",
    "[h](http://x.org/h.md)",
    "[i](#local)",
    "[j](j.png)",
    "[k](\nk.md)",
    "[[n]](n.md)",
    "[a [b](nested.md)](outer.md)",
    "![img](img.md)",
    "![a [b](in-image.md)](pic.png)",
    "[![img](pic.png)](wrapped.md)",
    "[r]",
    "[a][r]",
    "[a][]",
    "](",
    "](f.md)",
    "(g.md)",
    "[",
    "]",
    "(",
    ")",
    "`",
    "``",
    "\\",
    "\\[",
    "\\]",
    "<",
    ">",
    "<span title='",
    "'>",
    "<http://x.org/",
    "<!-- ",
    " -->",
    "!",
    "*",
    "_",
    "&#91;",
    "word",
    "中文",
    "[z](z\x01.md)",
    "\x7f",
    "\u00a0",
]
SEPARATORS = ["", "", " ", "\n"]


@st.composite
def inline_text(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(pieces), max_size=len(pieces)))
    return "".join(p + s for p, s in zip(pieces, seps, strict=True)).strip()


def _in_block(kind: str, text: str) -> str:
    """`text` as the inline text of a paragraph, list item, quote or heading."""
    lines = text.split("\n")
    if kind == "list":
        return "- " + "\n  ".join(lines)
    if kind == "nested":
        return "- x\n  1. " + "\n     ".join(lines)
    if kind == "quote":
        return "> " + "\n> ".join(lines)
    if kind == "heading":
        return "## " + " ".join(lines)
    return text


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["para", "list", "nested", "quote", "heading"]), inline_text()),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
@example([("para", "`[x](missing.md)` \\[x\\](y.md) [x\\](y.md)")], False)
@example([("list", "`a\n[x](code.md)`\n[a\nb](c.md)")], False)
@example([("para", "[a][r](not-a-link.md)")], True)
def test_links_are_markdown_it_links(blocks: list[tuple[str, str]], definition: bool) -> None:
    text = "\n\n".join(_in_block(kind, inline) for kind, inline in blocks) + "\n"
    if definition:
        text += "\n[r]: ref.md\n"
    assert_links_as_markdown_it(text)


def test_plain_links_are_found_by_pattern_and_anything_else_by_markdown_its_rules() -> None:
    """Text holding only plain `[text](href)` links is answered without markdown-it's rules;
    any bracket or construct the pattern cannot judge sends the text to them. Both answer as a
    full markdown-it parse does."""
    plain = "See [a](a.md), [b](../b.md#sec) and [c]() then (d.md) *[e](e.md)* 中文 [f](f.md)."
    assert _plain_links(plain) is not None
    assert_links_as_markdown_it(plain + "\n")
    for other in (
        "[a](a.md) `[x](code.md)`",  # a code span
        "[a](a.md) \\[x](escaped.md)",  # an escape
        "[a](a.md) ![img](img.md)",  # an image
        "[a](a.md) <span>[x](html.md)</span>",  # HTML
        "[a](a.md) [x](a&#46;md)",  # an entity
        "[a](a.md) [r] [x][r]",  # reference uses
        "[a [b](nested.md)](outer.md)",  # a bracket in a link's text
        '[t](t.md "title")',  # a title
        "[x](<my file.md>)",  # an angle-bracket destination
        "[a](a\x01b.md) [c](c\x7f.md)",  # control characters end a destination
        "[a](a\u00a0b.md)",  # a no-break space does not
    ):
        assert _plain_links(other) is None, other
        assert_links_as_markdown_it(other + "\n\n[r]: ref.md\n")


def test_a_huge_one_line_heading_finds_the_links_markdown_it_finds() -> None:
    """A single line of ~500 000 characters of Chinese (a dump, a converted book) that is a
    heading holding links, HTML, an entity, a code span and a stray bracket: the same links and
    the same parse as markdown-it's, and its title cut as any title is."""
    prose = "当事人应当全面履行义务，为了保护人民。依照本法规定；" * 2000
    pieces = [
        "# [开头](a.md) ",
        prose,
        " a &amp; b <br> `[不是](code.md)` ",
        prose,
        " [链接](b.md#x) 【注】 [ ",
        prose,
        " [c](<my file.md>) <span title='[x](no.md)'> ",
        prose,
    ]
    text = "".join(pieces * 4)
    assert "\n" not in text and len(text) > 500_000
    assert_links_as_markdown_it(text)
    assert parse_markdown(text, DOC) == parse_markdown_oracle(text, DOC)
    links = parse_markdown(text, DOC).links
    assert sorted({(ln.line, ln.target) for ln in links}) == [
        (1, "dir/a.md"),
        (1, "dir/b.md"),
        (1, "dir/my file.md"),
    ]
    assert len(links) == 12

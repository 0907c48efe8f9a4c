"""Parsing: headings with 0-based line spans, block starts, front matter, links."""

from __future__ import annotations

from markindex_core.index.markdown import parse_markdown, parse_markdown_oracle


def heads(text: str, setext: bool = True) -> list[tuple[int, str, int, int]]:
    return [
        (h.level, h.title, h.line, h.end)
        for h in parse_markdown(text, "d.md", setext=setext).headings
    ]


def test_atx_and_setext_heading_spans() -> None:
    text = "# One #\n\nTwo\n===\n\nThree\nwraps\n---\n\n###### Six\n####### seven\n#nospace\n"
    assert heads(text) == [
        (1, "One", 0, 1),
        (1, "Two", 2, 4),
        (2, "Three wraps", 5, 8),
        (6, "Six", 9, 10),
    ]
    assert heads(text, setext=False) == [(1, "One", 0, 1), (6, "Six", 9, 10)]


def test_headings_in_containers_fences_html_are_not_outline_headings() -> None:
    text = "> # quoted\n\n- # in list\n\n```\n# code\n```\n\n<div>\n\n# in html block\n</div>\n"
    # Only a heading at the top level of the document counts (the html block ends at the blank line).
    assert heads(text) == [(1, "in html block", 10, 11)]


def test_title_whitespace_collapsed() -> None:
    assert heads("#   spaced \t  out   \n")[0][1] == "spaced out"


def test_heading_attribute_blocks_are_not_part_of_the_title() -> None:
    text = (
        "# Federation {#federation}\n\n## Trust {: #trust .wide}\n\n## Notes {.unnumbered}\n\n"
        "## Set {a, b}\n\n## {#only-an-id}\n\n## Setext {#s}\n---\n"
    )
    titles = [t for _, t, _, _ in heads(text)]
    assert titles == ["Federation", "Trust", "Notes", "Set {a, b}", "{#only-an-id}", "Setext"]
    # The block scanner and markdown-it (the oracle) give the same titles.
    oracle = parse_markdown_oracle(text, "d.md").headings
    assert [h.title for h in oracle] == titles


def test_links_in_a_heading_leave_their_text_in_the_title() -> None:
    text = (
        "# [KEP-4381](https://github.com/kubernetes/enhancements/issues/4381): DRA\n\n"
        '## With [Cluster Autoscaler](ca.md "CA")\n\n'
        "## ![logo](logo.png) and \\[escaped](not-a-link) and [ref][r]\n\n[r]: https://example.com\n"
    )
    titles = [t for _, t, _, _ in heads(text)]
    assert titles == [
        "KEP-4381: DRA",
        "With Cluster Autoscaler",
        "![logo](logo.png) and \\[escaped](not-a-link) and [ref][r]",
    ]
    assert [h.title for h in parse_markdown_oracle(text, "d.md").headings] == titles
    # The link itself is still one of the document's links.
    assert [(ln.line, ln.target) for ln in parse_markdown(text, "d.md").links] == [(3, "ca.md")]


def test_front_matter() -> None:
    p = parse_markdown("---\ntitle: T\nn: 3\nwhen: 2024-01-02\n---\n# H\n", "d.md")
    assert p.front_matter == {"title": "T", "n": 3, "when": "2024-01-02"}
    assert p.front_matter_end == 5
    assert heads("---\ntitle: T\n---\n# H\n") == [(1, "H", 3, 4)]


def test_front_matter_that_is_not_a_mapping() -> None:
    p = parse_markdown("---\n- a\n- b\n---\n", "d.md")
    assert p.front_matter == {"value": ["a", "b"]}
    empty = parse_markdown("---\n---\nbody\n", "d.md")
    assert empty.front_matter == {} and empty.front_matter_end == 2


def test_front_matter_values_yaml_cannot_convert_drop_only_the_front_matter() -> None:
    for value in (
        "date: 2023-02-29",
        "time: 2023-01-01 25:61:00",
        "n: !!int abc",
        "x: !!float abc",
        "b: !!bool maybe",
        "t: !!timestamp foo",
    ):
        p = parse_markdown(f"---\ntitle: Notes\n{value}\n---\n# Notes\n\nbody\n", "d.md")
        assert p.front_matter is None, value
        assert [h.title for h in p.headings] == ["Notes"], value
        assert any("invalid YAML value" in w for w in p.warnings), (value, p.warnings)


def test_thematic_break_at_top_is_not_front_matter_when_unclosed() -> None:
    p = parse_markdown("---\nplain text\n", "d.md")
    assert p.front_matter is None and p.front_matter_end == 0


def test_block_starts_include_top_level_blocks_and_list_items() -> None:
    text = "para\n\n- a\n- b\n\n```\nx\n```\n\n| a |\n|---|\n| 1 |\n"
    p = parse_markdown(text, "d.md")
    assert {0, 2, 3, 5, 9} <= set(p.block_starts)
    assert 6 not in p.block_starts  # never inside a fence


def test_internal_links_resolved_relative_to_the_document() -> None:
    text = (
        "See [a](other.md), [b](../up.md#sec), [c](/root.md), [d](https://x.org/a.md),\n"
        "[e](#local), [f](pic.png), [g](<sp ace.md>), [h](q.markdown?x=1).\n\n"
        "[ref]: sub/ref.md#r\n"
    )
    links = parse_markdown(text, "dir/doc.md").links
    assert {(ln.target, ln.anchor) for ln in links} == {
        ("dir/other.md", ""),
        ("up.md", "sec"),
        ("root.md", ""),
        ("dir/q.markdown", ""),
        ("dir/sub/ref.md", "r"),
        ("dir/sp ace.md", ""),
    }
    assert all(ln.line in (1, 2, 4) for ln in links)


def links(text: str, path: str = "d.md") -> list[tuple[int, str, str]]:
    """(line, target, anchor) of the links the scanner finds, checked against markdown-it."""
    found = [(ln.line, ln.target, ln.anchor) for ln in parse_markdown(text, path).links]
    oracle = [(ln.line, ln.target, ln.anchor) for ln in parse_markdown_oracle(text, path).links]
    assert found == oracle
    return found


def test_no_links_in_code_spans_or_behind_escapes() -> None:
    text = (
        "Write `[x](missing.md)` or ``[y](`missing.md`)`` to link.\n\n"
        "\\[x\\](escaped.md) and [x\\](half-escaped.md)\n\n\\[x](escaped-open.md)\n\n"
        "| `[c](cell.md)` | [ok](ok.md) |\n|---|---|\n\n"
        "- `[i](item.md)` and ![image](image.md)\n"
    )
    assert links(text) == [(7, "ok.md", "")]


def test_destinations_in_angle_brackets_or_with_parentheses_are_whole() -> None:
    text = (
        "[x](<my file.md>) [y](<dir/a b.md#Sec 1>)\n\n"
        "[z](a(1).md) [w](b(c(d)).md#e(f)) [v](g(h.md)\n"
    )
    assert links(text) == [
        (1, "dir/a b.md", "Sec 1"),
        (1, "my file.md", ""),
        (3, "a(1).md", ""),
        (3, "b(c(d)).md", "e(f)"),
    ]


def test_a_link_is_on_the_line_where_it_starts() -> None:
    """Link text and code spans run over lines, in lists and quotes as in paragraphs."""
    text = (
        "See [the\ndocs](a.md), `not\n[a](code.md)` [b](b.md)\n\n"
        "- See [the\n  docs](c.md), `not\n  [a](code.md)`\n  [d](d.md)\n\n"
        "> [e\n> e](e.md) `\n> [x](code.md)`\n"
    )
    assert links(text) == [
        (1, "a.md", ""),
        (3, "b.md", ""),
        (5, "c.md", ""),
        (8, "d.md", ""),
        (10, "e.md", ""),
    ]


def test_a_reference_use_is_not_an_inline_link() -> None:
    """`[a][r](x.md)` links to r's definition (a link itself), not to x.md."""
    assert links("[a][r](x.md)\n\n[r]: r.md\n") == [(3, "r.md", "")]
    assert links("[a][r](x.md)\n") == [(1, "x.md", "")]


def test_link_lines_in_one_long_paragraph() -> None:
    """Each link's line, counted from the previous link (a paragraph of thousands of links)."""
    rows = [
        f"See [a{i}](a{i}.md) and [b{i}](b{i}.md)" if i % 3 == 0 else "plain" for i in range(3000)
    ]
    links = parse_markdown("# T\n\n" + "\n".join(rows) + "\n", "d.md").links
    want = [(i + 3, f"{k}{i}.md") for i in range(0, 3000, 3) for k in "ab"]
    assert [(ln.line, ln.target) for ln in links] == want


def test_links_that_leave_the_library_are_kept_as_broken() -> None:
    links = parse_markdown("[x](../../out.md)\n", "a/doc.md").links
    assert [ln.target for ln in links] == ["../out.md"]


def test_a_link_that_leaves_the_library_keeps_the_path_it_names() -> None:
    """`../../../etc/x.md` from a document at the root was reported as `../etc/x.md`, and
    `../.hidden/x.md` as `../hidden/x.md`: the leading dots and slashes were stripped, so `links`
    named a file the link does not name, and one a user could not find in the source."""
    text = "[a](../../../etc/x.md) [b](../.hidden/x.md) [c](sub/../../up.md)\n"
    links = parse_markdown(text, "doc.md").links
    assert [ln.target for ln in links] == ["../../../etc/x.md", "../.hidden/x.md", "../up.md"]

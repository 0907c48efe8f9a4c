"""Section-tree rules of SPEC §2: preface, root node, front matter, fences, levels, merge, split, ids."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from markindex_core.config import MAX_NODE_TOKENS, MAX_TITLE_CHARS, TreeParams
from markindex_core.index.decode import split_lines
from markindex_core.index.markdown import parse_markdown
from markindex_core.index.tree import build_sections
from markindex_core.model import Section
from markindex_core.text.tokens import estimate_tokens

from .helpers import build, check_tree, doc_lines, tree_shape

NO_MERGE: dict[str, Any] = {
    "routing_cost": -(10**9)
}  # a cost no subtree can beat: the raw heading tree
BODY = "Some body text that is long enough to matter for the routing cost of a node. " * 12


def big(title: str, level: int = 1) -> str:
    return "#" * level + f" {title}\n\n{BODY}\n"


def titles(secs: list[Section]) -> list[tuple[str, str, int]]:
    return [(s.kind, s.title, s.depth) for s in secs]


def by_title(secs: list[Section]) -> dict[str, Section]:
    return {s.title: s for s in secs}


def test_text_before_first_heading_is_a_preface_node() -> None:
    doc = build("Intro line.\n\n" + big("A") + big("B"))
    check_tree(doc.sections, doc.line_count)
    assert titles(doc.sections) == [("preface", "", 0), ("section", "A", 0), ("section", "B", 0)]
    assert (doc.sections[0].start_line, doc.sections[0].end_line) == (1, 2)


def test_no_preface_when_the_first_line_is_a_heading() -> None:
    doc = build(big("A") + big("B"))
    assert [s.kind for s in doc.sections] == ["section", "section"]


def test_headingless_document_is_one_root_node() -> None:
    doc = build("just text\n\nmore text\n" * 200)
    assert len(doc.sections) == 1
    root = doc.sections[0]
    assert (root.kind, root.parent_id, root.start_line, root.end_line) == ("document", None, 1, 600)
    assert doc.title == "doc"  # named after the file


def test_huge_headingless_document_is_root_with_chunks() -> None:
    para = "word " * 60 + "\n\n"
    doc = build(para * 1000)
    check_tree(doc.sections, doc.line_count)
    assert doc.sections[0].kind == "document"
    chunks = doc.sections[1:]
    assert chunks and all(
        c.kind == "chunk" and c.parent_id == doc.sections[0].node_id for c in chunks
    )
    assert all(c.tokens <= MAX_NODE_TOKENS for c in doc.sections)


def test_front_matter_is_metadata_not_body() -> None:
    src = (
        "---\ntitle: Front Title\ndescription: About it\ntags: [x, y]\n---\nIntro.\n\n"
        + big("A")
        + big("B")
    )
    doc = build(src)
    check_tree(doc.sections, doc.line_count)
    assert doc.front_matter == {
        "title": "Front Title",
        "description": "About it",
        "tags": ["x", "y"],
    }
    assert doc.title == "Front Title"
    assert doc.description == "About it"
    preface = doc.sections[0]
    assert preface.kind == "preface" and preface.start_line == 1  # front matter lines are owned
    assert preface.tokens == estimate_tokens("Intro.\n")  # ... but not counted as body
    assert all(p.start_line > 5 for p in doc.passages)
    assert b"front" not in b" ".join(p.terms for p in doc.passages).lower()


def test_front_matter_only_and_front_matter_then_heading() -> None:
    only = build("---\ntitle: X\n---\n")
    check_tree(only.sections, 3)
    assert only.sections[0].kind == "document" and only.tokens == 0
    doc = build("---\ntitle: X\n---\n" + big("A") + big("B"))
    check_tree(doc.sections, doc.line_count)
    assert doc.sections[0].kind == "preface" and doc.sections[0].end_line == 3


def test_invalid_front_matter_warns_and_still_indexes() -> None:
    doc = build("---\nkey: [unclosed\n---\n# A\n")
    assert doc.front_matter is None
    assert any("front matter" in w for w in doc.warnings)
    check_tree(doc.sections, doc.line_count)


def test_hash_lines_in_code_fences_and_comments_are_not_headings() -> None:
    src = (
        big("Real")
        + "```bash\n# not a heading\n## nor this\n```\n"
        + "~~~\n# tilde fence\n~~~\n"
        + "<!--\n# commented out\n-->\n"
        + "    # indented code\n\n"
        + big("Second")
    )
    doc = build(src, **NO_MERGE)
    assert [s.title for s in doc.sections] == ["Real", "Second"]
    check_tree(doc.sections, doc.line_count)


def test_unclosed_fence_swallows_the_rest() -> None:
    doc = build(big("A") + "```\n# inside\n" + big("B"), **NO_MERGE)
    assert [s.title for s in doc.sections] == ["A"]
    check_tree(doc.sections, doc.line_count)


def test_skipped_levels_nest_under_nearest_shallower_heading() -> None:
    src = big("A") + big("D", 4) + big("B", 2) + big("C", 3) + big("E", 2) + big("F") + big("G", 6)
    doc = build(src, **NO_MERGE)
    check_tree(doc.sections, doc.line_count)
    secs = by_title(doc.sections)
    parent = {t: (by_title_id(doc.sections, s.parent_id)) for t, s in secs.items()}
    assert parent == {"A": None, "D": "A", "B": "A", "C": "B", "E": "A", "F": None, "G": "F"}
    assert secs["D"].level == 4 and secs["D"].depth == 1


def by_title_id(secs: list[Section], node_id: str | None) -> str | None:
    return next((s.title for s in secs if s.node_id == node_id), None)


def test_document_starting_with_deep_heading() -> None:
    doc = build(big("Deep", 3) + big("Top", 1) + big("Mid", 2), **NO_MERGE)
    check_tree(doc.sections, doc.line_count)
    assert [(s.title, s.depth) for s in doc.sections] == [("Deep", 0), ("Top", 0), ("Mid", 1)]


def test_newline_styles_and_bom_give_the_same_tree() -> None:
    src = "Intro\n" + big("A") + "Setext\n------\n" + BODY + "\n" + big("B", 2)
    shapes = []
    for nl in ("\n", "\r\n", "\r"):
        for bom in (b"", b"\xef\xbb\xbf"):
            doc = build(bom + src.replace("\n", nl).encode())
            check_tree(doc.sections, doc.line_count)
            assert doc_lines(doc) == src.splitlines()
            shapes.append(tree_shape(doc))
    assert all(s == shapes[0] for s in shapes)


def test_titles_are_capped_at_300_code_points() -> None:
    doc = build("# " + "标" * 400 + "\n" + BODY + "\n# " + "x" * 299 + "\n", **NO_MERGE)
    assert len(doc.sections[0].title) == MAX_TITLE_CHARS == 300
    assert doc.sections[0].title == "标" * 300
    assert len(doc.sections[1].title) == 299
    fm = build("---\ntitle: " + "t" * 500 + "\n---\nx\n")
    assert len(fm.title) == 300


def test_setext_headings_and_switch() -> None:
    src = "Title One\n=========\n\n" + BODY + "\n\nSecond\n------\n\n" + BODY + "\n"
    on = build(src, **NO_MERGE)
    check_tree(on.sections, on.line_count)
    assert [(s.title, s.level) for s in on.sections] == [("Title One", 1), ("Second", 2)]
    assert on.sections[0].body_start == 3  # the underline belongs to the heading
    off = build(src, setext=False, **NO_MERGE)
    check_tree(off.sections, off.line_count)
    assert [s.kind for s in off.sections] == ["document"]  # `===` is text, `---` a thematic break
    assert off.warnings == []


def test_setext_underline_on_the_last_line() -> None:
    for src in ("Title\n=====", "Title\n-----\n", "a\n\nTitle\n---", "# A\nbody\nTitle\n---"):
        for setext in (True, False):
            for params in ({}, NO_MERGE):
                doc = build(src, setext=setext, **params)
                check_tree(doc.sections, doc.line_count)


def test_setext_h2_warning_for_multiline_or_long_text() -> None:
    multi = build("# A\n\nline one\nline two\n---\n\nbody\n")
    assert (
        len(multi.warnings) == 1 and "line 3" in multi.warnings[0] and "setext" in multi.warnings[0]
    )
    long = build("# A\n\n" + "w" * 121 + "\n---\n")
    assert len(long.warnings) == 1
    short = build("# A\n\n" + "w" * 120 + "\n---\n")
    assert short.warnings == []
    h1 = build("line one\nline two\n===\n")
    assert h1.warnings == []  # only h2 underlines are the converter page-break signature
    assert build("line one\nline two\n---\n", setext=False).warnings == []


# ----- merge cost model ---------------------------------------------------------------------


def words(n: int, tag: str) -> str:
    return " ".join([tag] * n)


def build_words(src: str, routing_cost: int = 150) -> list[Section]:
    """Build with an injected tokenizer (one token per word) so costs are exact."""
    lines = split_lines(src)
    parsed = parse_markdown(src, "w.md")
    return build_sections(
        lines, parsed, "W", TreeParams(routing_cost=routing_cost), lambda t: len(t.split())
    )


def merge_case(a: int, b: int, c: int) -> list[Section]:
    # "# A" is 2 words, "## B" 2 words: bodies fill up to the wanted own sizes.
    src = (
        f"# A\n{words(a - 2, 'a')}\n## B\n{words(b - 2, 'b')}\n## C\n{words(c - 2, 'c')}\n"
        f"# Y\n{words(1000, 'y')}\n# Z\n{words(1000, 'z')}\n"
    )
    secs = build_words(src)
    check_tree(secs, len(split_lines(src)))
    return secs


def test_merge_when_subtree_is_cheaper_than_routing() -> None:
    secs = merge_case(10, 100, 50)  # S=160 <= 150 + max(10, 100, 50)
    a = by_title(secs)["A"]
    assert "B" not in by_title(secs) and a.key_items == ["B", "C"] and a.tokens == 160


def test_merge_ties_merge_and_one_more_token_does_not() -> None:
    tie = merge_case(50, 100, 100)  # S=250 == 150 + 100
    assert by_title(tie)["A"].key_items == ["B", "C"]
    over = merge_case(51, 100, 100)  # S=251 > 250
    names = by_title(over)
    assert names["A"].key_items == [] and {"B", "C"} <= set(names)
    assert names["A"].tokens == 51


def test_merged_nested_titles_are_kept_in_order() -> None:
    src = (
        "# A\nx\n## B\ny\n### C\nz\n## D\nw\n# Y\n" + words(999, "y") + "\n# Z\n" + words(999, "z")
    )
    secs = build_words(src)
    assert by_title(secs)["A"].key_items == ["B", "C", "D"]


def test_whole_small_document_merges_into_root() -> None:
    doc = build("# Only\n\nshort\n\n## Sub\n\ntext\n")
    assert [(s.kind, s.key_items) for s in doc.sections] == [("document", ["Only", "Sub"])]
    assert doc.sections[0].end_line == doc.line_count


@st.composite
def outlines(draw: st.DrawFn) -> str:
    parts = []
    for i in range(draw(st.integers(1, 12))):
        level = draw(st.integers(1, 4))
        parts.append(
            f"{'#' * level} H{i}\n{words(draw(st.sampled_from([0, 5, 40, 120, 400])), 'w')}"
        )
    return "\n".join(parts) + "\n"


def _expected_merge(raw: list[Section], routing_cost: int) -> dict[str, list[str]] | None:
    """Survivors -> key items, from the raw tree and SPEC §2's formula; None = all in the root."""
    kids: dict[str | None, list[Section]] = {}
    for s in raw:
        kids.setdefault(s.parent_id, []).append(s)
    out: dict[str, list[str]] = {}

    def preorder(v_id: str | None) -> list[str]:
        res = []
        for c in kids.get(v_id, []):
            res.append(c.title)
            res.extend(preorder(c.node_id))
        return res

    def visit(v_id: str | None, own: int, title: str) -> tuple[int, int]:  # (S, tree_cost)
        costs = [visit(c.node_id, c.tokens, c.title) for c in kids.get(v_id, [])]
        total = own + sum(s for s, _ in costs)
        out[title] = []
        if not costs:
            return total, total
        cost = routing_cost + max(own, max(c for _, c in costs))
        if total <= cost:
            absorbed = preorder(v_id)
            for d in absorbed:
                out.pop(d, None)
            out[title] = absorbed
            return total, total
        return total, cost

    visit(None, 0, "")  # the document root: no preface in these outlines
    root = out.pop("")
    return None if root else out


@settings(max_examples=300, deadline=None)
@given(outlines(), st.sampled_from([20, 150, 400]))
def test_merge_matches_cost_model(src: str, routing_cost: int) -> None:
    raw = build_words(src, -(10**9))
    secs = build_words(src, routing_cost)
    check_tree(secs, len(split_lines(src)))
    expected = _expected_merge(raw, routing_cost)
    if expected is None:
        assert [(s.kind, s.key_items) for s in secs] == [("document", [s.title for s in raw])]
    else:
        assert {s.title: s.key_items for s in secs} == expected


# ----- splitting large nodes ----------------------------------------------------------------


def test_large_node_splits_at_block_boundaries_not_inside_fences() -> None:
    para = "alpha beta gamma delta " * 40  # ~230 tokens per paragraph
    fence = "```\n" + "\n".join(f"code line {i} " * 8 for i in range(120)) + "\n```"  # ~3000 tokens
    blocks = [para] * 30 + [fence] + [para] * 30 + [fence] + [para] * 20
    src = "# Big\n\n" + "\n\n".join(blocks) + "\n# Next\n\n" + BODY + "\n"
    doc = build(src)
    check_tree(doc.sections, doc.line_count)
    big_node = by_title(doc.sections)["Big"]
    chunks = [s for s in doc.sections if s.parent_id == big_node.node_id]
    assert chunks and all(c.kind == "chunk" for c in chunks)
    assert [c.title for c in chunks] == [
        f"part {k}/{len(chunks)}" for k in range(1, len(chunks) + 1)
    ]
    assert big_node.tokens <= MAX_NODE_TOKENS
    assert all(c.tokens <= MAX_NODE_TOKENS for c in chunks)
    fence_lines = [i + 1 for i, line in enumerate(doc_lines(doc)) if line == "```"]
    fences = list(zip(fence_lines[::2], fence_lines[1::2], strict=True))
    for c in chunks:
        assert not any(a < c.start_line <= b for a, b in fences), (c, fences)
        assert doc_lines(doc)[c.start_line - 1].strip(), "chunks start at a block, not a blank line"


def test_single_block_larger_than_a_node_is_split_by_lines() -> None:
    fence = "```\n" + "\n".join("x" * 200 for _ in range(400)) + "\n```\n"  # ~20 000 tokens
    doc = build("# Code\n\n" + fence + "# Next\n\n" + BODY + "\n")
    check_tree(doc.sections, doc.line_count)
    node = by_title(doc.sections)["Code"]
    chunks = [s for s in doc.sections if s.parent_id == node.node_id]
    assert len(chunks) >= 2
    assert all(s.tokens <= MAX_NODE_TOKENS for s in [node, *chunks])


def test_split_keeps_children_after_chunks() -> None:
    para = "word " * 200 + "\n\n"
    src = "# Big\n\n" + para * 60 + "## Child\n\n" + para * 5 + "# Z\n\n" + para * 5
    doc = build(src)
    check_tree(doc.sections, doc.line_count)
    big_node = by_title(doc.sections)["Big"]
    kids = [s for s in doc.sections if s.parent_id == big_node.node_id]
    assert [k.kind for k in kids][-1] == "section" and kids[-1].title == "Child"
    assert all(k.kind == "chunk" for k in kids[:-1]) and len(kids) >= 2


# ----- determinism and stable ids -----------------------------------------------------------


def test_same_bytes_same_tree() -> None:
    src = "Intro\n" + big("A") + big("B", 2) + big("A") + big("A", 2)
    assert tree_shape(build(src)) == tree_shape(build(src))


def test_ids_survive_body_edits() -> None:
    src = "Intro\n" + big("A") + big("B", 2) + big("C", 2) + big("D")
    before = build(src, **NO_MERGE)
    edited = build(src.replace("long enough", "long enuff"), **NO_MERGE)
    assert [s.node_id for s in before.sections] == [s.node_id for s in edited.sections]
    # ... and with the default parameters too (the outline does not change)
    assert [s.node_id for s in build(src).sections] == [
        s.node_id for s in build(src.replace("long enough", "long enuff")).sections
    ]


def test_ids_of_unrelated_sections_survive_inserting_a_section() -> None:
    src = big("A") + big("B", 2) + big("D")
    before = {s.title: s.node_id for s in build(src, **NO_MERGE).sections}
    after = {s.title: s.node_id for s in build(big("New") + src, **NO_MERGE).sections}
    assert all(after[t] == i for t, i in before.items())


def test_duplicate_titles_get_distinct_ids() -> None:
    doc = build(big("Same") + big("Same") + big("Same", 2), **NO_MERGE)
    check_tree(doc.sections, doc.line_count)
    assert len({s.node_id for s in doc.sections}) == 3


def test_empty_file_has_no_nodes() -> None:
    for data in (b"", b"\xef\xbb\xbf"):
        doc = build(data)
        assert (
            doc.line_count == 0
            and doc.line_blocks == []
            and doc.sections == []
            and doc.passages == []
        )
    one = build(b"\n")
    check_tree(one.sections, 1)

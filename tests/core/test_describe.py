"""Titles and descriptions that tell documents apart: metadata, generic headings, noise, budget."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from markindex_core.config import (
    DESCRIPTION_MAX_CHARS,
    DESCRIPTION_PREVIEW_CHARS,
    DESCRIPTION_TOKENS,
    RESPONSE_CHAR_BUDGET,
)
from markindex_core.index.describe import (
    fit_budget,
    is_generic_heading,
    readable_file_name,
    section_outline,
)
from markindex_core.index.markdown import Heading
from markindex_core.library import Library
from markindex_core.text.tokens import estimate_tokens

from .helpers import build, write

RFC = """- Feature Name: `lifetime_capture_rules_2024`
- Start Date: 2023-07-26
- RFC PR: [rust-lang/rfcs#3498](https://github.com/rust-lang/rfcs/pull/3498)

## Summary

In Rust 2024, return position `impl Trait` types capture all in-scope lifetime parameters.

## Motivation

Because the old rules are inconsistent.
"""

KEP = """# KEP-5598: Opportunistic batching

<!--
**Note:** When your KEP is complete, all of these comment blocks should be removed.

To get started with this template: fill it in.
-->

<!-- toc -->
- [Summary](#summary)
- [Motivation](#motivation)
<!-- /toc -->

## Release Signoff Checklist

- [ ] Enhancement issue in release milestone

## Summary

<!--
This section is incredibly important for producing high-quality, user-focused documentation.
-->

This KEP proposes batching compatible pods in the scheduler to speed up scheduling.

## Motivation

Scheduling many pods one by one is slow.
"""

LAW = """# 中华人民共和国土地管理法

1986年6月25日 第六届全国人民代表大会常务委员会第十六次会议通过

2019年8月26日 第十三届全国人民代表大会常务委员会第十二次会议修正

<!-- INFO END -->

## 第一章  总 则

第一条 为了加强土地管理，维护土地的社会主义公有制，制定本法。

第二条 中华人民共和国实行土地的社会主义公有制。

## 第二章 土地的所有权和使用权

第九条 城市市区的土地属于国家所有。

## 第三章 耕地保护

第三十条 国家保护耕地。

## 第八章 附则

第八十七条 本法自公布之日起施行。
"""


# ----- titles ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "title",
    [
        "Summary",
        "1. Introduction",
        "## Overview",
        "第一章  总 则",
        "概述",
        "Abstract {#abs}",
        "TOC",
    ],
)
def test_generic_headings_are_recognized(title: str) -> None:
    assert is_generic_heading(title.lstrip("# "))


@pytest.mark.parametrize("title", ["Lifetime capture rules", "中华人民共和国刑法", "Summary of X"])
def test_real_titles_are_not_generic(title: str) -> None:
    assert not is_generic_heading(title)


def test_rfc_title_comes_from_its_feature_name_and_skips_the_metadata() -> None:
    doc = build(RFC, "text/3498-lifetime-capture-rules-2024.md")
    assert doc.title == "Lifetime capture rules 2024"
    assert doc.description.startswith("In Rust 2024, return position impl Trait types capture")
    assert "Start Date" not in doc.description and "rfcs#3498" not in doc.description


def test_generic_first_heading_without_metadata_falls_back_to_a_readable_file_name() -> None:
    doc = build("## Summary\n\nAdds a thing.\n", "text/3498-lifetime-capture-rules-2024.md")
    assert doc.title == "Lifetime capture rules 2024"
    assert doc.description == "Adds a thing."


def test_placeholder_metadata_values_are_not_titles() -> None:
    src = "- Feature Name: N/A\n- Start Date: 2020-01-01\n\n# Summary\n\nText.\n"
    assert build(src, "text/0001-private-fields.md").title == "Private fields"


def test_file_names_are_made_readable() -> None:
    assert readable_file_name("text/3498-lifetime-capture-rules-2024.md") == (
        "Lifetime capture rules 2024"
    )
    assert readable_file_name("keps/sig-node/753-sidecar-containers/README.md") == (
        "Sidecar containers"
    )
    assert readable_file_name("cheatsheets/Docker_Security_Cheat_Sheet.md") == (
        "Docker Security Cheat Sheet"
    )
    assert readable_file_name("words/182.md") == "182"  # a bare number stays a number
    assert readable_file_name("notes/doc.md") == "doc"  # nothing to make readable


def test_a_real_h1_and_front_matter_titles_win() -> None:
    assert build(KEP).title == "KEP-5598: Opportunistic batching"
    assert build("---\ntitle: Front\n---\n# Heading\n\nText.\n").title == "Front"
    assert build("# Authentication Levels {#AAL_SEC4}\n\nText.\n").title == "Authentication Levels"


def test_titles_keep_brackets_and_front_matter_titles_are_taken_as_written() -> None:
    # Front matter is YAML: nothing in its title is Markdown syntax.
    fm = build('---\ntitle: "[WIP] __init__ and [bold]x[/]"\n---\n# Heading\n\nText.\n')
    assert fm.title == "[WIP] __init__ and [bold]x[/]"
    # In a heading, `[WIP]` is text (no reference defines it), as the node title shows it.
    doc = build("# [WIP] Release *plan*\n\nText.\n")
    assert doc.title == "[WIP] Release plan"
    assert doc.sections[0].title.startswith("[WIP] Release")


def test_sibling_rfcs_get_distinct_titles(tmp_path: Path) -> None:
    """A folder of documents that all open with "## Summary" no longer lists them all as "Summary"."""
    root = tmp_path / "lib"
    names = ["0195-associated-items", "1210-impl-specialization", "2094-nll", "3498-lifetimes"]
    for i, name in enumerate(names * 2):
        write(
            root, f"text/{i}{name}.md", f"- Start Date: 2014-08-0{i}\n\n## Summary\n\nText {i}.\n"
        )
    with_feature = "- Feature Name: `async_closures`\n\n## Summary\n\nAsync closures.\n"
    write(root, "text/3668-async-closures.md", with_feature)
    lib = Library(root, tmp_path / "i.db")
    lib.index()
    data = json.loads(lib.call_tool("browse_documents", {"folder": "text"}))["data"]
    lib.close()
    titles = Counter(d["title"] for d in data["documents"])
    assert "Summary" not in titles
    assert max(titles.values()) <= 3, titles
    assert "Async closures" in titles


# ----- descriptions ------------------------------------------------------------------------------
def test_kep_description_skips_template_comments_toc_and_checklists() -> None:
    desc = build(KEP).description
    assert desc.startswith("This KEP proposes batching compatible pods in the scheduler")
    assert "Note" not in desc and "template" not in desc and "incredibly" not in desc


def test_normative_markers_and_rfc2119_boilerplate_are_skipped() -> None:
    src = (
        "---\ntitle: Authentication Assurance Levels\n---\n\n# Authentication Assurance Levels\n\n"
        "_This section is normative._\n\n"
        'The key words "MUST", "SHALL" and "MAY" are to be interpreted as in RFC 2119.\n\n'
        "A claimant SHALL be authenticated with a process of sufficient strength.\n"
    )
    assert build(src).description.startswith("A claimant SHALL be authenticated")


def test_law_description_is_its_purpose_clause_not_the_enactment_dates() -> None:
    doc = build(LAW, "行政法/土地管理法(2019-08-26).md")
    assert doc.title == "中华人民共和国土地管理法"
    assert doc.description.startswith("为了加强土地管理")
    assert "1986年" not in doc.description and "第一条" not in doc.description
    assert "土地的所有权和使用权" in doc.description and "耕地保护" in doc.description
    assert "总则" not in doc.description and "附则" not in doc.description


def test_an_article_that_states_no_purpose_is_not_taken_for_one() -> None:
    src = "# 某解释\n\n## 第一章 管辖\n\n第一条 人民法院直接受理的自诉案件包括：\n"
    assert build(src).description.startswith("人民法院直接受理的自诉案件")


def test_wiki_lead_sentence_beats_a_late_summary() -> None:
    src = (
        "# 化学\n\n化学是一门研究物质的性质、组成、结构以及变化规律的学科。\n\n"
        + "".join(f"## 历史{i}\n\n正文{i}。\n\n" for i in range(8))
        + "## 概述\n\n总结性的文字。\n"
    )
    assert build(src).description.startswith("化学是一门研究物质的性质")


def test_late_summary_section_is_a_conclusion_not_an_abstract() -> None:
    src = (
        "# Cheat Sheet\n\n## Introduction\n\nThis sheet helps developers prevent XSS.\n\n"
        + "".join(f"## Rule {i}\n\n" + "Details here. " * 20 + "\n\n" for i in range(10))
        + "## Summary\n\nOne final note on filters.\n"
    )
    desc = build(src).description
    assert desc.startswith("This sheet helps developers prevent XSS.")
    assert "final note" not in desc


def test_badges_images_and_html_are_not_descriptions() -> None:
    src = (
        "# Tool\n\n[![Build](https://ci/badge.svg)](https://ci)\n![logo](logo.png)\n"
        '<p align="center"><img src="x.png"></p>\n\nTool turns [Markdown](https://md) into **indexes**.\n'
    )
    assert build(src).description == "Tool turns Markdown into indexes."


def test_front_matter_description_is_used_as_written() -> None:
    src = "---\ndescription: Written by the author.\n---\n# T\n\nOther text.\n\n## Part\n\nx\n"
    assert build(src).description == "Written by the author."


def test_description_keeps_whole_sentences_within_the_budget() -> None:
    sentence = "This sentence describes one more aspect of the document in some detail. "
    doc = build("# Long\n\n" + sentence * 40 + "\n")
    assert estimate_tokens(doc.description) <= DESCRIPTION_TOKENS
    assert len(doc.description) <= DESCRIPTION_MAX_CHARS
    assert doc.description.endswith("detail.")
    assert doc.description.startswith(sentence.strip())


def test_one_overlong_sentence_is_cut_on_a_word_and_marked() -> None:
    text = fit_budget(["word " * 500], 50)
    assert text.endswith("…") and estimate_tokens(text) <= 51
    assert fit_budget(["中" * 500], 50).endswith("…")


def test_section_outline_takes_the_level_under_the_title_and_skips_template_sections() -> None:
    heads = [
        Heading(1, "Tool", 0, 1),
        Heading(2, "Summary", 2, 3),
        Heading(2, "Installing", 4, 5),
        Heading(3, "On Linux", 6, 7),
        Heading(2, "2. Configuring", 8, 9),
        Heading(2, "References", 10, 11),
    ]
    assert section_outline(heads) == ["Installing", "Configuring"]


# ----- size of what browsing returns -------------------------------------------------------------
def test_a_folder_of_500_documents_pages_well_under_the_response_budget(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    para = "This document explains one particular feature of the system in plain words. " * 30
    for i in range(500):
        sections = "".join(f"## Section {j} of doc {i}\n\n{para}\n\n" for j in range(4))
        write(root, f"many/{i:03d}-feature-number-{i}.md", f"## Summary\n\n{para}\n\n{sections}")
    lib = Library(root, tmp_path / "i.db")
    lib.index()
    try:
        first = json.loads(lib.call_tool("browse_documents", {"folder": "many"}))
        assert first["success"], first
        parts = first["data"]["parts"]
        sizes, seen = [], 0
        for part in range(1, parts + 1):
            text = lib.call_tool("browse_documents", {"folder": "many", "part": part})
            data = json.loads(text)["data"]
            sizes.append(len(text))
            seen += len(data["documents"])
            for d in data["documents"]:
                assert len(d["description"]) <= DESCRIPTION_MAX_CHARS
                assert estimate_tokens(d["description"]) <= DESCRIPTION_TOKENS
        assert seen == 500
        assert max(sizes) < RESPONSE_CHAR_BUDGET * 0.9, sizes
        assert sum(sizes) < 500 * 900, sizes  # about 120 tokens of metadata per document
    finally:
        lib.close()


def test_a_summary_that_opens_with_labelled_bullets_keeps_them() -> None:
    long_value = "A signature that captures the properties of a pod that impact scoring " * 2
    src = f"# KEP-1: Batching\n\n## Summary\n\n- **Pod signature:** {long_value}\n"
    assert build(src).description.startswith("Pod signature: A signature that captures")


def test_notes_and_bare_reference_brackets_are_not_description_text() -> None:
    src = "# Usability\n\n> Note: In this section, users means subscribers.\n\n[RFC 243] left it open.\n"
    assert build(src).description == "RFC 243 left it open."


def test_section_names_fill_the_budget_but_never_pass_it() -> None:
    sections = "".join(
        f"## Topic number {i} about something specific\n\nText {i}.\n\n" for i in range(60)
    )
    desc = build("# Guide\n\nThe guide covers many topics.\n\n" + sections).description
    assert desc.startswith("The guide covers many topics.")
    assert "Sections: Topic number 0 about something specific; Topic number 1" in desc
    assert desc.endswith(".") and len(desc) <= DESCRIPTION_MAX_CHARS
    assert estimate_tokens(desc) <= DESCRIPTION_TOKENS


def test_a_listing_shows_whole_descriptions() -> None:
    assert DESCRIPTION_MAX_CHARS <= DESCRIPTION_PREVIEW_CHARS


def test_the_outline_of_a_hundred_thousand_sections_takes_linear_time() -> None:
    """Each name was looked up in the list of names kept so far: 100 000 distinct headings cost
    minutes of CPU, past the parse timeout, so such a document was skipped as timed out."""
    headings = [Heading(2, f"Topic {i}", i, i + 1) for i in range(100_000)]
    started = time.process_time()
    names = section_outline(headings + headings[:10])
    assert time.process_time() - started < 15
    assert names[:2] == ["Topic 0", "Topic 1"] and len(names) == 100_000

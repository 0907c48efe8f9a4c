"""Missing anchors: links to an indexed document whose `#anchor` names none of its headings or ids.

Read only when the link report asks, from the stored lines of the documents linked to with an
anchor: the index keeps no anchors, so indexing and search pay nothing for them. Headings get
GitHub's anchors (what most renderers and libraries use); ids written out (`{#id}`,
`{: #id}`, `{:name="id"}`, `<a name="id">`, `id="id"`) count too, and anchors are compared
leniently (case, runs of "-"), so a report means the anchor is surely nowhere.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

if TYPE_CHECKING:
    from markdown_it.token import Token

    from markindex_core.store.db import Store

# An id given in HTML (`<a name="x">`, `<span id=x>`) or in a kramdown IAL (`{:name="x"}`).
_NAMED_ID = re.compile(r"""\b(?:id|name)\s*=\s*["']?([^"'\s>}]+)""", re.IGNORECASE)
# An id in an attribute block: `{#x}`, `{: #x .class}` (Pandoc, kramdown, MkDocs attr_list).
_BLOCK_ID = re.compile(r"\{:?[^{}\n]*?#([^\s{}]+)")
_TRAILING_BLOCK = re.compile(r"\s*\{:?[ \t]*[#.][^{}]*\}$")
_DASHES = re.compile(r"-+")


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def slug(text: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): lower case, every character but
    letters, marks, digits, "-", "_" and spaces dropped, spaces made "-"."""
    kept = (
        c
        for c in text.lower()
        if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"
    )
    return "".join(kept).replace(" ", "-")


def anchor_key(anchor: str) -> str:
    """An anchor as it is compared: lower case, runs of "-" as one (MkDocs folds them)."""
    return _DASHES.sub("-", anchor.lower())


def _heading_text(children: list[Token]) -> str:
    """A heading's text as a browser reads it: no markup, no image text."""
    parts = []
    for tok in children:
        if tok.type in ("text", "text_special", "code_inline"):
            parts.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts)


def document_anchors(text: str) -> set[str]:
    """Every anchor of a document (as `anchor_key`s): its headings', numbered as GitHub numbers
    repeated ones, and the ids written out in it."""
    tokens = _parser().parse(text)
    seen: dict[str, int] = {}
    keys: set[str] = set()
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open":
            continue
        heading = _heading_text(tokens[i + 1].children or [])
        for variant in {heading, _TRAILING_BLOCK.sub("", heading)}:
            base = slug(variant.strip())
            count = seen.get(base, 0)
            seen[base] = count + 1
            keys.add(anchor_key(base if count == 0 else f"{base}-{count}"))
    keys.update(anchor_key(m) for m in _NAMED_ID.findall(text))
    keys.update(anchor_key(m) for m in _BLOCK_ID.findall(text))
    return keys


def missing_anchors(store: Store, links: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (target, anchor) pairs of `links` whose target is indexed but has no such anchor
    (a missing target is a broken link, another matter)."""
    wanted: dict[str, set[str]] = {}
    for target, anchor in links:
        if anchor:
            wanted.setdefault(target, set()).add(anchor)
    missing: set[tuple[str, str]] = set()
    for target, anchors in wanted.items():
        doc = store.document_row(target)
        if doc is None:
            continue
        keys = document_anchors("\n".join(store.read_lines(doc.id, 1, doc.line_count)))
        missing.update((target, a) for a in anchors if anchor_key(a) not in keys)
    return missing

"""A document's title and description, derived without a model, so a folder listing tells documents apart.

Browsing shows each document's path, title and description and nothing else, so these three must
say what the document is about. Many documents open with a generic heading ("Summary",
"概述"), a metadata block ("- Start Date: …"), template notes in HTML comments, or a law's
enactment-date lines; none of these tell one document from its neighbours. This module looks past
them:

- title: front matter `title`; else a real (non-generic) H1; else a title field of the front
  matter or of the leading metadata block (an RFC's `Feature Name`); else the file name made
  readable (`3498-lifetime-capture-rules-2024.md` -> "Lifetime capture rules 2024"; a README
  takes its folder's name).
- description: front matter `description`/`summary`/`abstract`; else clean text starting at a
  law's purpose clause (第一条), else at a Summary/Abstract/概述 section, else at the lead text;
  noise lines are skipped and the text is cut to a token budget on a sentence boundary.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterator, Mapping

from markindex_core.config import (
    DESCRIPTION_EARLY_HEADINGS,
    DESCRIPTION_EARLY_SHARE,
    DESCRIPTION_LEAD_MAX_LINES,
    DESCRIPTION_MAX_CHARS,
    DESCRIPTION_META_VALUE_CHARS,
    DESCRIPTION_PURPOSE_LINES,
    DESCRIPTION_SCAN_LINES,
    DESCRIPTION_TEXT_SHARE,
    DESCRIPTION_TOKENS,
    MAX_TITLE_CHARS,
)
from markindex_core.index.markdown import Heading, ParsedMarkdown
from markindex_core.text.tokens import estimate_tokens

# Section names that say nothing about what a document is about (compared after normalizing).
GENERIC_HEADINGS = frozenset(
    (
        "summary abstract introduction intro overview preface foreword background motivation "
        "contents toc scope purpose preamble general readme index untitled notes description "
        "synopsis tldr about outline proposal status "
        "概述 总则 简介 介绍 引言 前言 摘要 概要 目录 序言 说明 背景 概览 总览 导言 绪论 序 附则"
    ).split()
) | {"table of contents", "general provisions", "tl dr", "detailed design", "executive summary"}
# Sections every document of a template has (RFCs, KEPs, specs, wiki articles): listing them in a
# description would not tell one document from another.
TEMPLATE_HEADINGS = frozenset(
    (
        "goals|non goals|user stories|risks and mitigations|design details|test plan|"
        "graduation criteria|release signoff checklist|production readiness review questionnaire|"
        "implementation history|drawbacks|alternatives|alternatives considered|"
        "guide level explanation|reference level explanation|rationale and alternatives|prior art|"
        "unresolved questions|future possibilities|future work|open questions|references|"
        "see also|external links|further reading|related work|acknowledgements|"
        "acknowledgments|appendix|glossary|terminology|definitions|examples|example|faq|"
        "main sections|changelog|change log|conclusion|conclusions|requirements|"
        "注释|参考文献|参考资料|外部链接|参见|另请参阅|相关链接|示例|延伸阅读|脚注|附录|名称|"
        "法律责任|监督管理|监督检查"
    ).split("|")
)
# Sections whose first paragraph states what the whole document is about.
SUMMARY_HEADINGS = frozenset(
    "summary abstract synopsis tldr overview 概述 摘要 概要 简介 内容提要 提要".split()
) | {"tl dr", "executive summary"}
# … and, when there is none, sections that usually open with what the document covers.
SCOPE_HEADINGS = frozenset("scope purpose 范围 适用范围 目的".split())
INTRO_HEADINGS = frozenset("introduction intro 引言 前言 导言 绪论 介绍".split())
# Front matter / metadata-block keys that name the document.
TITLE_KEYS = ("title", "name", "feature name", "feature_name", "feature", "kep title")
DESCRIPTION_KEYS = ("description", "summary", "abstract")
INDEX_FILE_STEMS = frozenset({"readme", "index", "_index"})
NO_VALUE = frozenset({"", "n/a", "na", "none", "tbd", "todo", "-", "(none)", "null"})

_NUMBERING = re.compile(
    r"^(?:[\d.]+\s*|[ivx]+\.\s+|第[一二三四五六七八九十百零〇\d]+[章节编部分篇]\s*|[一二三四五六七八九十]+[、.]\s*)",
    re.IGNORECASE,
)
_ATTR = re.compile(r"\s*\{[:#][^}]*\}")  # kramdown attributes: {#id}, {:latex-href="…"}
_META_ITEM = re.compile(r"^\s*[-*+]?\s*\**([A-Za-z][\w #.'/-]{0,30}?)\**\s*:\**\s*(.*)$")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_LINK_ONLY_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[[^\]]*\]\([^)]*\)\s*$")
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[[ xX]\]")
_REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s+\S")
_ENACTED = re.compile(
    r"^\s*[（(]?\d{4}年\d{1,2}月\d{1,2}日.*(?:通过|修订|修正|公布|施行|发布|决定|批准)"
)
_NOISE_LINE = re.compile(
    r"^\s*(?:[_*]*this (?:section|appendix|document|annex) is (?:normative|informative)"
    r"|[_*]*\(?(?:non-?normative|normative|informative)\)?[_*]*\s*$"
    r"|(?:>\s*)?[*_]*note[*_]*:[*_]*\s"
    r"|<<\[/?unresolved"
    r"|\**status\**:"
    r"|the key words .{0,80}\bmust\b)",
    re.IGNORECASE,
)
_PURPOSE = re.compile(r"^\s*\**第一条\**[\s\u3000]*(.+)$")
_PURPOSE_WORDS = re.compile(r"为|目的|宗旨|制定")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|<img\b[^>]*>")
_LINK = re.compile(
    r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)|\[([^\]]+)\]\[[^\]]*\]"
)
_BRACKETS = re.compile(r"\[([^\[\]]+)\](?!\()")
_TAG = re.compile(r"<[^>]{1,200}>")
_EMPHASIS = re.compile(r"(\*\*|__|`+|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w))")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*")
_IDENTIFIER = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
_SEPARATORS = re.compile(r"[-_\s]+")


# ----- titles ------------------------------------------------------------------------------------
def normalize_heading(title: str) -> str:
    """Lowercase, numbering and punctuation dropped, spaces squeezed: "1. Summary" -> "summary"."""
    text = unicodedata.normalize("NFKC", _ATTR.sub("", title)).strip().lower()
    text = _NUMBERING.sub("", text)
    text = re.sub(r"[^\w\s]", " ", text)
    words = text.split()
    if all(_is_cjk_word(w) for w in words):
        return "".join(words)  # "总 则" -> "总则"
    return " ".join(words)


def _is_cjk_word(word: str) -> bool:
    return all("\u3400" <= ch <= "\u9fff" for ch in word)


def is_generic_heading(title: str) -> bool:
    """True for section names that any document could have ("Summary", "第一章 总则")."""
    return normalize_heading(title) in GENERIC_HEADINGS


def derive_title(
    front_matter: Mapping[str, object] | None,
    headings: list[Heading],
    lines: list[str],
    start: int,
    rel_path: str,
) -> str:
    """The document's own name: front matter, a real H1, a metadata title, or the file name."""
    if front_matter and (value := _meta_value(front_matter, ("title",))):
        return _clean_title(value, markdown=False)
    h1 = next((h for h in headings if h.level == 1 and h.title.strip()), None)
    first = next((h for h in headings if h.title.strip()), None)
    if h1 is not None and first is h1 and not is_generic_heading(h1.title):
        return _clean_title(h1.title)
    meta = dict(front_matter or {})
    meta.update(metadata_block(lines, start, headings))
    if value := _meta_value(meta, TITLE_KEYS):
        return _clean_title(value)
    if h1 is not None and not is_generic_heading(h1.title):
        return _clean_title(h1.title)
    return readable_file_name(rel_path)


def _meta_value(meta: Mapping[str, object], keys: tuple[str, ...]) -> str:
    lowered = {str(k).strip().lower(): v for k, v in meta.items()}
    for key in keys:
        value = lowered.get(key)
        if isinstance(value, str):
            text = value.strip().strip("`'\"").strip()
            if text.lower() not in NO_VALUE:
                return value.strip()
    return ""


def _clean_title(text: str, *, markdown: bool = True) -> str:
    """A title as a reader sees it. Front matter is YAML, not Markdown: its title is taken as
    written (`[WIP] __init__ notes` keeps its brackets and underscores). A Markdown title loses
    its inline syntax but keeps brackets, as a heading does (`[WIP]` is text unless defined)."""
    if markdown:
        text = _inline_text(_ATTR.sub("", text), shortcut_links=False)
    else:
        text = " ".join(text.split())
    if _IDENTIFIER.match(text):  # an RFC's `feature_name`: read as words
        text = text.replace("_", " ")
        text = text[:1].upper() + text[1:]
    return text[:MAX_TITLE_CHARS] or "untitled"


def metadata_block(lines: list[str], start: int, headings: list[Heading]) -> dict[str, str]:
    """`Key: value` lines that open a document before its first heading or paragraph."""
    end = min((h.line for h in headings), default=len(lines))
    found: dict[str, str] = {}
    for line in lines[start:end]:
        if not line.strip():
            if found:
                break
            continue
        m = _META_ITEM.match(line)
        if not m:
            break
        found.setdefault(m.group(1).strip().lower(), m.group(2).strip())
    return found


def readable_file_name(rel_path: str) -> str:
    """`text/3498-lifetime-capture-rules-2024.md` -> "Lifetime capture rules 2024"."""
    stem = posixpath.splitext(posixpath.basename(rel_path))[0]
    parent = posixpath.basename(posixpath.dirname(rel_path))
    if stem.lower() in INDEX_FILE_STEMS and parent:
        stem = parent
    words = _SEPARATORS.sub(" ", stem).strip()
    text = re.sub(r"^\d+\s+(?=\D)", "", words)  # a leading number only when words follow
    if not text or text == stem:
        return stem[:MAX_TITLE_CHARS]  # nothing to make readable: the name as it is
    return (text[:1].upper() + text[1:])[:MAX_TITLE_CHARS]


# ----- descriptions ------------------------------------------------------------------------------
def derive_description(
    front_matter: Mapping[str, object] | None,
    lines: list[str],
    parsed: ParsedMarkdown,
    budget: int = DESCRIPTION_TOKENS,
) -> str:
    """One to three sentences of the document's own text that say what it is about."""
    given = _meta_value(front_matter, DESCRIPTION_KEYS) if front_matter else ""
    if given:  # the author's own description is used as written
        return fit_budget([_inline_text(given)], budget)
    heading_lines = {h.line: h.end for h in parsed.headings}
    paragraphs = clean_paragraphs(lines, _anchor(lines, parsed), heading_lines)
    outline = section_outline(parsed.headings)
    if not outline:
        return fit_budget(paragraphs, budget)
    text = fit_budget(paragraphs, int(budget * DESCRIPTION_TEXT_SHARE))
    return _with_outline(text, outline, budget)


def section_outline(headings: list[Heading]) -> list[str]:
    """Names of the document's main sections (the level under its title), generic ones left out."""
    levels = [h.level for h in headings]
    if not levels:
        return []
    top = min(levels)
    if levels.count(top) == 1:  # one title heading: its sections are the level below
        below = [lv for lv in levels if lv > top]
        if not below:
            return []
        top = min(below)
    names: dict[str, None] = {}  # kept in order; a list's `in` made 100 000 sections quadratic
    for h in headings:
        if h.level != top or _is_template_heading(h.title):
            continue
        name = _NUMBERING.sub("", _inline_text(h.title)).strip()
        if name:
            names.setdefault(name)
    return list(names)


def _is_template_heading(title: str) -> bool:
    name = normalize_heading(title)
    return name in GENERIC_HEADINGS or name in TEMPLATE_HEADINGS


def _with_outline(text: str, outline: list[str], budget: int) -> str:
    """`text` followed by as many section names as fit the budget."""
    cjk = _is_cjk_char(outline[0][:1])
    label, sep = ("章节：", "、") if cjk else ("Sections: ", "; ")
    parts: list[str] = []
    for name in outline:
        candidate = (
            _join([text, label + sep.join([*parts, name])])
            if text
            else label + sep.join([*parts, name])
        )
        if estimate_tokens(candidate) >= budget or len(candidate) >= DESCRIPTION_MAX_CHARS:
            break
        parts.append(name)
    if not parts:
        return text
    tail = label + sep.join(parts) + ("。" if cjk else ".")
    return _join([text, tail]) if text else tail


def _anchor(lines: list[str], parsed: ParsedMarkdown) -> int:
    """Where the describing text starts.

    In order: a law's purpose clause; an early Summary/Abstract/概述 section; the lead text under
    the title; an early Scope section, else Introduction; else the top (noise skipped from there).
    A "Summary" near the end of a document is a conclusion, not an abstract, so only sections
    that start early count.
    """
    purpose = _purpose_clause(lines, parsed.front_matter_end)
    if purpose is not None:
        return purpose
    early = _early_section(parsed.headings, SUMMARY_HEADINGS, len(lines))
    if early is None:
        early = _lead(lines, parsed)
    if early is None:
        early = _early_section(parsed.headings, SCOPE_HEADINGS, len(lines))
    if early is None:
        early = _early_section(parsed.headings, INTRO_HEADINGS, len(lines))
    return parsed.front_matter_end if early is None else early


def _purpose_clause(lines: list[str], start: int) -> int | None:
    """The line of 第一条 when it states a purpose ("为了……，制定本法。")."""
    for i in range(start, min(len(lines), start + DESCRIPTION_PURPOSE_LINES)):
        m = _PURPOSE.match(lines[i])
        if m:
            return i if _PURPOSE_WORDS.search(m.group(1)) else None
    return None


def _early_section(headings: list[Heading], names: frozenset[str], n_lines: int) -> int | None:
    """Body start of the first section named in `names` among the document's opening sections."""
    for n, h in enumerate(headings):
        if n >= DESCRIPTION_EARLY_HEADINGS and h.line > n_lines * DESCRIPTION_EARLY_SHARE:
            return None
        if normalize_heading(h.title) in names:
            return h.end
    return None


def _lead(lines: list[str], parsed: ParsedMarkdown) -> int | None:
    """Start of the prose under the title heading (or before any heading), if there is some."""
    heads = parsed.headings
    start = parsed.front_matter_end
    if heads and heads[0].level == 1 and not is_generic_heading(heads[0].title):
        start, heads = heads[0].end, heads[1:]
    elif (
        heads
        and heads[0].line <= start + DESCRIPTION_LEAD_MAX_LINES
        and is_generic_heading(heads[0].title)
    ):
        return None  # the text opens with "# Foreword" or "## Summary": no lead of its own
    end = min(heads[0].line if heads else len(lines), start + DESCRIPTION_SCAN_LINES)
    scan = _Scan()
    has_prose = any(scan.keep(line) for line in lines[start:end])
    return start if has_prose else None


def clean_paragraphs(
    lines: list[str], start: int, heading_lines: Mapping[int, int], limit: int = 12
) -> list[str]:
    """Up to `limit` paragraphs of prose from `start` on, with every kind of noise skipped.

    Reading stops once a few descriptions' worth of text is collected, or after
    DESCRIPTION_SCAN_LINES lines, so a huge paragraph or a huge table costs no more than a small one.
    """
    out: list[str] = []
    para: list[str] = []
    room = DESCRIPTION_MAX_CHARS * 3
    for line in _prose_lines(lines, start, heading_lines):
        if line is not None and room > 0:
            para.append(line[:room])
            room -= len(para[-1]) + 1
            continue
        if para:
            out.append(" ".join(para))
            para = []
        if len(out) >= limit or room <= 0:
            break
    if para and len(out) < limit:
        out.append(" ".join(para))
    return [p for p in (_inline_text(p) for p in out) if p]


def _prose_lines(
    lines: list[str], start: int, heading_lines: Mapping[int, int]
) -> Iterator[str | None]:
    """Prose lines from `start`, with None at every paragraph break (blank, heading, skipped)."""
    i = start
    end = min(len(lines), start + DESCRIPTION_SCAN_LINES)
    state = _Scan()
    while i < end:
        if i in heading_lines:
            yield None
            i = max(heading_lines[i], i + 1)
            continue
        yield state.keep(lines[i])
        i += 1


class _Scan:
    """Line-by-line filter that remembers whether it is inside a comment, a fence or a preamble."""

    def __init__(self) -> None:
        self.comment = False
        self.fence = ""
        self.meta = True  # a metadata block may open the text

    def keep(self, raw: str) -> str | None:
        """The line's prose, or None when it is blank or noise."""
        line = raw.strip()
        if self.comment or line.startswith("<!--"):
            self._comment(line)
            return None
        if self.fence or line.startswith(("```", "~~~")):
            self._fence(line)
            return None
        if not line:
            return None
        if self.meta and _is_metadata_item(line):
            return None
        self.meta = False
        return None if _is_noise(line) else _LIST_MARK.sub("", line)

    def _comment(self, line: str) -> None:
        opened = line.startswith("<!--") and not self.comment
        body = line[4:] if opened else line
        self.comment = "-->" not in body

    def _fence(self, line: str) -> None:
        if not self.fence:
            self.fence = line[:3]
        elif line.startswith(self.fence):
            self.fence = ""


def _is_metadata_item(line: str) -> bool:
    """`- Start Date: 2014-08-04`, not `- **Batching:** a mechanism that reuses …`."""
    m = _META_ITEM.match(line)
    return bool(m and _LIST_MARK.match(line) and len(m.group(2)) <= DESCRIPTION_META_VALUE_CHARS)


def _is_noise(line: str) -> bool:
    """Lines that never describe a document: tables, badges, TOC links, dates, template notes."""
    if line.startswith(("|", "<", "![", "[![", "{:", "{%", "---", "===", "***")):
        return True
    if _LINK_ONLY_ITEM.match(line) or _CHECKBOX.match(line) or _REF_DEF.match(line):
        return True
    if _ENACTED.match(line) or _NOISE_LINE.match(line):
        return True
    return not any(ch.isalnum() for ch in _IMAGE.sub("", line))


def _inline_text(text: str, *, shortcut_links: bool = True) -> str:
    """Markdown inline syntax dropped: links keep their text, images and tags go, emphasis too."""
    text = _IMAGE.sub("", text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2) or "", text)
    if shortcut_links:
        text = _BRACKETS.sub(r"\1", text)  # a shortcut reference link: [RFC 243]
    text = _TAG.sub("", _ATTR.sub("", text))
    text = _EMPHASIS.sub("", text)
    text = _PURPOSE.sub(r"\1", text)
    return " ".join(text.split())


def fit_budget(paragraphs: list[str], budget: int = DESCRIPTION_TOKENS) -> str:
    """Whole sentences, in order, while they fit `budget` tokens (and the character cap).

    A first sentence longer than the budget is cut at a word boundary and marked with "…".
    """
    out: list[str] = []
    used = 0
    for sentence in _sentences(paragraphs):
        cost = estimate_tokens(sentence) + 1
        if used + cost > budget or _joined_len(out, sentence) > DESCRIPTION_MAX_CHARS:
            if not out:
                out.append(_cut(sentence, budget))
            break
        out.append(sentence)
        used += cost
    return _join(out)


def _sentences(paragraphs: list[str]) -> Iterator[str]:
    for para in paragraphs:
        for s in _SENTENCE_END.split(para):
            if s.strip():
                yield s.strip()


def _joined_len(out: list[str], sentence: str) -> int:
    return len(_join([*out, sentence]))


def _join(parts: list[str]) -> str:
    text = ""
    for part in parts:
        if text and not (_is_cjk_char(text[-1]) and _is_cjk_char(part[0])):
            text += " "
        text += part
    return text


def _is_cjk_char(ch: str) -> bool:
    return "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef"


def _cut(sentence: str, budget: int) -> str:
    """The longest prefix within `budget` tokens and the character cap, ending on a word."""
    limit = DESCRIPTION_MAX_CHARS - 1
    while limit > 0 and estimate_tokens(sentence[:limit]) > budget:
        limit = limit * 9 // 10
    head = sentence[:limit]
    if len(head) < len(sentence) and " " in head[limit // 2 :]:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:") + ("…" if len(head) < len(sentence) else "")

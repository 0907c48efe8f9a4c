"""Parse Markdown into headings, block boundaries, front matter and links (markdown-it-py rules)."""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.common.utils import mdTrim
from markdown_it.parser_inline import ParserInline
from markdown_it.rules_inline import link as link_rule
from markdown_it.rules_inline.state_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from markindex_core.config import MARKDOWN_SUFFIXES, MAX_TITLE_CHARS, SETEXT_WARN_CHARS
from markindex_core.index.blocks import scan_blocks, source_lines, split_source_lines

# Where an inline construct that can hold a bracket may start: an escape, a code span, an
# autolink or HTML tag, an image, a link. markdown-it's other rules (text, line breaks, entities,
# emphasis) only ever consume characters that are none of these.
_CONSTRUCT_START = re.compile(r"[\\`<!\[]")
# A plain inline link (see `_plain_links`), and what may hide or take apart a bracket elsewhere.
_PLAIN_LINK = re.compile(r"\[[^\[\]\n]*\]\(([^\s\x00-\x1f\x7f()<>\\]*)\)")
_HIDES_BRACKETS = re.compile(r"[\\`<&]|!\[")
# Text in which a link to a Markdown document may be: where the suffix is, written out or
# behind an entity or a percent escape (backslashes escape only punctuation). Most inline text
# with links links only to the web, and is then left alone.
_MAY_LINK_A_DOCUMENT = re.compile(
    "|".join(map(re.escape, MARKDOWN_SUFFIXES)) + "|[%&]", re.IGNORECASE
)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# A heading attribute block at the end of a heading (Pandoc, kramdown, MkDocs attr_list, PHP
# Markdown Extra): `## Overview {#s-4-1}`, `{: #id .class}`, `{.unnumbered}`. It names an anchor
# or a style, not the topic.
_HEADING_ATTRIBUTES = re.compile(r"\s*\{:?[ \t]*[#.][^{}]*\}$")
# An inline link in a heading, `[KEP-4381](https://github.com/…/4381): …`: its text is the title's,
# its address is not (a document's title stands in every one of its passages' title paths).
_TITLE_LINK = re.compile(r"(?<![!\\])\[([^\[\]]+)\]\([^()\s]*(?:[ \t]+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    line: int  # 0-based first line of the heading
    end: int  # 0-based line after the heading (setext headings span two or more lines)


@dataclass(frozen=True)
class Link:
    line: int  # 1-based line of the link (0 when unknown)
    target: str  # library-relative posix path of the linked document
    anchor: str


@dataclass
class ParsedMarkdown:
    headings: list[Heading]
    block_starts: list[int]  # 0-based first lines of top-level blocks and top-level list items
    front_matter: dict[str, Any] | None
    front_matter_end: int  # 0-based line after the front matter (0 when there is none)
    links: list[Link]
    warnings: list[str] = field(default_factory=list)


class _LinkTextUnparsed(ParserInline):
    """markdown-it's inline rules, except that a link's text is not parsed: the link rule
    tokenizes it into the link's children, which say nothing about the link (what is a link was
    settled before) and were ~30% of the time spent on links."""

    def tokenize(self, state: StateInline) -> None:
        """Leave the link's text (state.pos to state.posMax) unparsed."""


class _LinkParser(MarkdownIt):
    """markdown-it's inline rules (CommonMark), which say what is a link. Its destinations are
    kept as written: markdown-it's normalization (percent-encoding, punycode) never changes
    whether something is a link, `_resolve` undoes the encoding anyway, and it was most of the
    time spent on links."""

    def __init__(self) -> None:
        super().__init__("commonmark")
        self.inline = _LinkTextUnparsed()
        self.configure("commonmark")  # the preset's inline rules, on the new inline parser

    def normalizeLink(self, url: str) -> str:
        return url

    def validateLink(self, url: str) -> bool:
        return True  # an unsafe scheme (javascript:) empties a link's href, never unmakes it


@lru_cache(maxsize=1)
def _inline_parser() -> MarkdownIt:
    return _LinkParser()


@lru_cache(maxsize=4)
def _parser(setext: bool, front_matter: bool = True) -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    if front_matter:
        md.use(front_matter_plugin)
    # Block structure is all we need: inline parsing would cost ~45% of the time for nothing.
    md.disable(["inline", "text_join"])
    if not setext:
        md.disable("lheading")
    return md


def parse_markdown(
    text: str, doc_path: str, *, setext: bool = True, lines: list[str] | None = None
) -> ParsedMarkdown:
    """Parse normalized text (LF newlines) of the document at library-relative `doc_path`;
    `lines`, when given, are its `decode.split_lines`, shared instead of split again.

    A line scanner handles most blocks itself (see `blocks`) and hands every stretch it is not
    sure about (some lists, quotes and reference definitions) to markdown-it-py, which also
    takes whole documents the scanner leaves alone; the result is the same.
    """
    lines = split_source_lines(text) if lines is None else source_lines(text, lines)
    collector = _Collector(doc_path, lines, setext, "](" in text)
    if scan_blocks(text, lines, collector, setext=setext):
        return collector.finish()
    return parse_markdown_oracle(text, doc_path, setext=setext)


def parse_markdown_oracle(text: str, doc_path: str, *, setext: bool = True) -> ParsedMarkdown:
    """Parse the whole document with markdown-it-py (the reference for `parse_markdown`)."""
    env: dict[str, Any] = {}
    tokens = _parser(setext).parse(text, env)
    collector = _Collector(doc_path, [], setext, True)
    collector.add_tokens(tokens, 0)
    collector.add_references(env, 0)
    return collector.finish()


class _Collector:
    """Gathers headings, block starts, links and warnings from scanned blocks and token streams."""

    def __init__(self, doc_path: str, lines: list[str], setext: bool, has_links: bool) -> None:
        self.doc_dir = posixpath.dirname(doc_path)
        self.lines = lines
        self.setext = setext
        self.has_links = has_links
        self.headings: list[Heading] = []
        self.block_starts: list[int] = []
        self.links: list[Link] = []
        self.warnings: list[str] = []
        self.front_matter_data: dict[str, Any] | None = None
        self.front_matter_end = 0
        self.references: dict[str, tuple[str, int]] = {}
        # Inline text that may hold links, with its 0-based first line: read in `finish`, when
        # every reference definition is known (`[a][b](c.md)` is no link to c.md if b is one).
        self.inline: list[tuple[str, int]] = []

    def finish(self) -> ParsedMarkdown:
        references = {
            label: {"href": href, "title": ""} for label, (href, _) in self.references.items()
        }
        for content, start in self.inline:
            self._links_of(content, start, references)
        for href, line in self.references.values():
            link = _resolve(href, self.doc_dir, line)
            if link:
                self.links.append(link)
        self.links.sort(key=lambda ln: (ln.line, ln.target))
        return ParsedMarkdown(
            self.headings,
            self.block_starts,
            self.front_matter_data,
            self.front_matter_end,
            self.links,
            self.warnings,
        )

    # ----- blocks from the line scanner (BlockSink) -----

    def front_matter(self, end: int, raw: str) -> None:
        self.block_starts.append(0)
        self._set_front_matter(end, raw)

    def _set_front_matter(self, end: int, raw: str) -> None:
        self.front_matter_end = end
        self.front_matter_data, problem = _load_front_matter(raw)
        if problem:
            self.warnings.append(f"front matter: {problem}")

    def leaf(self, start: int) -> None:
        self.block_starts.append(start)

    def paragraph(self, start: int, end: int) -> None:
        self.block_starts.append(start)
        if self.has_links:
            self._inline(mdTrim("\n".join(self.lines[start:end])), start)

    def heading(self, level: int, start: int, end: int, content: str, markup: str) -> None:
        self.block_starts.append(start)
        self.headings.append(_heading(level, markup, start, end, content, self.warnings))
        if self.has_links:
            self._inline(content, start)

    def inline_text(self, line: int, content: str) -> None:
        if self.has_links:
            self._inline(content, line)

    def reference(self, line: int, label: str, href: str) -> None:
        if label not in self.references:  # the first definition of a label wins
            self.references[label] = (href, line + 1)

    def region(self, start: int, end: int) -> bool:
        env: dict[str, Any] = {}
        text = "\n".join(self.lines[start:end]) + "\n"
        tokens = _parser(self.setext, front_matter=False).parse(text, env)
        if end < len(self.lines) and _runs_to_end(tokens, end - start):
            return False
        self.add_tokens(tokens, start)
        self.add_references(env, start)
        return True

    # ----- markdown-it-py token streams -----

    def add_tokens(self, tokens: list[Token], offset: int) -> None:
        for i, tok in enumerate(tokens):
            if tok.map is None:
                continue
            start = tok.map[0] + offset
            if (tok.level == 0 and tok.nesting >= 0) or (
                tok.type == "list_item_open" and tok.level == 1
            ):
                self.block_starts.append(start)
            if tok.type == "front_matter":
                self._set_front_matter(tok.map[1] + offset, tok.content)
            elif tok.type == "heading_open" and tok.level == 0:
                end = tok.map[1] + offset
                content = tokens[i + 1].content
                self.headings.append(
                    _heading(int(tok.tag[1]), tok.markup, start, end, content, self.warnings)
                )
            elif tok.type == "inline":
                self._inline(tok.content, start)

    def add_references(self, env: dict[str, Any], offset: int) -> None:
        """Link reference definitions; the first definition of a label wins, as in markdown-it."""
        for label, ref in env.get("references", {}).items():
            if label not in self.references:
                ref_map = ref.get("map")
                line = ref_map[0] + offset + 1 if ref_map else 0
                self.references[label] = (str(ref.get("href", "")), line)

    def _inline(self, content: str, start: int) -> None:
        """Keep a block's inline text for `finish` when it may hold a link to a document (most
        text has no "](" and costs nothing more); `start` is its 0-based first line."""
        if "](" in content and _MAY_LINK_A_DOCUMENT.search(content):
            self.inline.append((content, start))

    def _links_of(self, content: str, start: int, references: dict[str, Any]) -> None:
        """Internal links in a block's inline text; `start` is its 0-based first line."""
        line, counted = start + 1, 0
        for offset, href in _inline_links(content, references):
            # Newlines counted from the previous link only: from the block's start each time was
            # quadratic (a 2.7 MB paragraph of 60 000 links took a minute).
            line += content.count("\n", counted, offset)
            counted = offset
            link = _resolve(href, self.doc_dir, line)
            if link:
                self.links.append(link)


def _inline_links(content: str, references: dict[str, Any]) -> list[tuple[int, str]]:
    """(offset, href) of every inline link `[text](href)` of a block's inline text, exactly as
    markdown-it's inline parser finds them (`references`: the document's definitions, as
    markdown-it keeps them in env["references"]); not images, nor `[text][label]` uses.

    A full inline parse makes tokens for all the text; this runs markdown-it's own rules in
    validation mode instead (as its `skipToken` does), only where a construct that may hold a
    bracket can start, and the link rule for real to learn its href. Most text with links holds
    nothing but plain ones (see `_plain_links`), found by a pattern instead.
    """
    plain = _plain_links(content)
    if plain is not None:
        return plain
    md = _inline_parser()
    state = StateInline(content, md, {"references": references}, [])
    rules = md.inline.ruler.getRules("")
    found: list[tuple[int, str]] = []
    while match := _CONSTRUCT_START.search(content, state.pos):
        pos = state.pos = match.start()
        for rule in rules:
            if rule is link_rule:
                if link_rule(state, False):
                    # A link's tokens (the only ones made): `[text](href)` ends with ")",
                    # a reference's `[text][label]` with "]".
                    if content[state.pos - 1] == ")":
                        found.append((pos, str(state.tokens[0].attrs["href"])))
                    del state.tokens[:], state.tokens_meta[:]
                    break
            elif rule(state, True):
                break
        else:
            state.pos = pos + 1
    return found


def _plain_links(content: str) -> list[tuple[int, str]] | None:
    """`_inline_links` of text whose every bracket belongs to a plain link, `[text](href)` with
    no bracket or line break in its text and no space, parenthesis, `<`, `>` or backslash in its
    href, and that holds no other construct which could hide a bracket or take one apart (an
    escape, a code span, HTML or an autolink, an entity, an image); None for any other text.
    (A control character ends a destination for markdown-it, as a space does.)

    There the link rule, tried at each `[`, takes exactly these links with their href as written
    (nothing to unescape): the same answer at a tenth of the cost (links were ~10% of parsing).
    """
    if _HIDES_BRACKETS.search(content):
        return None
    found = [(m.start(), m.group(1)) for m in _PLAIN_LINK.finditer(content)]
    if content.count("[") != len(found) or content.count("]") != len(found):
        return None  # a bracket of something else: a reference, a stray or nested one
    return found


def _runs_to_end(tokens: list[Token], length: int) -> bool:
    """True when a top-level fence or HTML block is still open at the end of a region."""
    return any(
        tok.level == 0 and tok.type in ("fence", "html_block") and tok.map and tok.map[1] >= length
        for tok in tokens
    )


def _heading(
    level: int, markup: str, start: int, end: int, raw_title: str, warnings: list[str]
) -> Heading:
    """A heading; warns about a setext heading that looks accidental."""
    title = _clean_title(raw_title)
    if markup == "-" and (end - start > 2 or len(title) > SETEXT_WARN_CHARS):
        warnings.append(
            f"line {start + 1}: setext h2 spans {end - start - 1} lines / {len(title)} chars"
            " (a converter page break?); consider --no-setext"
        )
    return Heading(level, title, start, end)


def _clean_title(raw: str) -> str:
    """Whitespace folded, links reduced to their text, a trailing attribute block dropped
    (unless it is the whole title)."""
    title = " ".join(raw.split())
    if "](" in title:
        title = _TITLE_LINK.sub(r"\1", title)
    if title.endswith("}"):
        title = _HEADING_ATTRIBUTES.sub("", title) or title
    return title[:MAX_TITLE_CHARS]


def _load_front_matter(raw: str) -> tuple[dict[str, Any] | None, str]:
    import yaml  # imported lazily: most queries never parse YAML

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        # An alias shares one node many times over; a few hundred bytes of nested aliases
        # expand into billions of values (a "billion laughs" bomb), so none are accepted.
        if "*" in raw and any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(raw, loader)):
            return None, "YAML aliases (*name) are not supported: front matter ignored"
        data = yaml.load(raw, Loader=loader)
    except yaml.YAMLError as exc:
        return None, f"invalid YAML ({str(exc).splitlines()[0]})"
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        # A well-formed value YAML cannot convert (`date: 2023-02-29`, `!!bool maybe`): PyYAML
        # raises these from its constructors. The front matter goes; the document stays.
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"invalid YAML value ({type(exc).__name__}: {detail}): front matter ignored"
    if data is None:
        return {}, ""
    if not isinstance(data, dict):
        return {"value": _jsonable(data)}, ""
    return {str(k): _jsonable(v) for k, v in data.items()}, ""


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # YAML's .nan and .inf: JSON has no such numbers
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _resolve(href: str, doc_dir: str, line: int) -> Link | None:
    """Resolve an internal link to a library-relative path; external links return None."""
    if not href or href.startswith("#") or _SCHEME.match(href) or href.startswith("//"):
        return None
    path, _, anchor = href.partition("#")
    path, anchor = unquote(path.split("?", 1)[0]), unquote(anchor)
    if not path.lower().endswith(MARKDOWN_SUFFIXES):
        return None
    # Outside the library (`../…`) the path is kept as it leads there, and shows as broken.
    target = posixpath.normpath(
        path.lstrip("/") if path.startswith("/") else posixpath.join(doc_dir, path)
    )
    return Link(line, target, anchor)

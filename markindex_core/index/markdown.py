"""Parse Markdown with markdown-it-py into headings, block boundaries, front matter and links."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from markindex_core.config import MARKDOWN_SUFFIXES, MAX_TITLE_CHARS, SETEXT_WARN_CHARS

_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


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


@lru_cache(maxsize=2)
def _parser(setext: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table").use(front_matter_plugin)
    # Block structure is all we need: inline parsing would cost ~45% of the time for nothing.
    md.disable(["inline", "text_join"])
    if not setext:
        md.disable("lheading")
    return md


def parse_markdown(text: str, doc_path: str, *, setext: bool = True) -> ParsedMarkdown:
    """Parse normalized text (LF newlines) of the document at library-relative `doc_path`."""
    env: dict[str, Any] = {}
    tokens = _parser(setext).parse(text, env)
    headings: list[Heading] = []
    block_starts: list[int] = []
    links: list[Link] = []
    warnings: list[str] = []
    front_matter: dict[str, Any] | None = None
    fm_end = 0
    doc_dir = posixpath.dirname(doc_path)
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        if (tok.level == 0 and tok.nesting >= 0) or (
            tok.type == "list_item_open" and tok.level == 1
        ):
            block_starts.append(tok.map[0])
        if tok.type == "front_matter":
            fm_end = tok.map[1]
            front_matter, problem = _load_front_matter(tok.content)
            if problem:
                warnings.append(f"front matter: {problem}")
        elif tok.type == "heading_open" and tok.level == 0:
            headings.append(_heading(tok, tokens[i + 1].content, warnings))
        elif tok.type == "inline" and "](" in tok.content:
            links.extend(_inline_links(tok, doc_dir))
    for ref in env.get("references", {}).values():
        ref_map = ref.get("map")
        link = _resolve(str(ref.get("href", "")), doc_dir, ref_map[0] + 1 if ref_map else 0)
        if link:
            links.append(link)
    links.sort(key=lambda ln: (ln.line, ln.target))
    return ParsedMarkdown(headings, block_starts, front_matter, fm_end, links, warnings)


def _heading(tok: Token, raw_title: str, warnings: list[str]) -> Heading:
    """A heading from its opening token; warns about a setext heading that looks accidental."""
    title = _clean_title(raw_title)
    assert tok.map is not None
    start, end = tok.map
    if tok.markup == "-" and (end - start > 2 or len(title) > SETEXT_WARN_CHARS):
        warnings.append(
            f"line {start + 1}: setext h2 spans {end - start - 1} lines / {len(title)} chars"
            " (a converter page break?); consider --no-setext"
        )
    return Heading(int(tok.tag[1]), title, start, end)


def _inline_links(tok: Token, doc_dir: str) -> list[Link]:
    assert tok.map is not None
    links: list[Link] = []
    for m in _INLINE_LINK.finditer(tok.content):
        line = tok.map[0] + tok.content.count("\n", 0, m.start()) + 1
        link = _resolve(m.group(1), doc_dir, line)
        if link:
            links.append(link)
    return links


def _clean_title(raw: str) -> str:
    title = " ".join(raw.split())
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
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _resolve(href: str, doc_dir: str, line: int) -> Link | None:
    """Resolve an internal link to a library-relative path; external links return None."""
    if not href or href.startswith("#") or _SCHEME.match(href) or href.startswith("//"):
        return None
    path, _, anchor = href.partition("#")
    path = unquote(path.split("?", 1)[0])
    if not path.lower().endswith(MARKDOWN_SUFFIXES):
        return None
    target = posixpath.normpath(
        path.lstrip("/") if path.startswith("/") else posixpath.join(doc_dir, path)
    )
    if target.startswith("../") or target == "..":
        target = "../" + target.lstrip("./")  # outside the library: kept, will show as broken
    return Link(line, target, anchor)

"""Turn one file's bytes into a ParsedDocument: decode, parse, build the tree, cut passages, segment."""

from __future__ import annotations

import posixpath

import xxhash

from markindex_core.config import DESCRIPTION_CHARS, TreeParams
from markindex_core.index.decode import Undecodable, decode, split_lines
from markindex_core.index.markdown import ParsedMarkdown, parse_markdown
from markindex_core.index.passages import cut_passages
from markindex_core.index.tree import build_sections
from markindex_core.model import ParsedDocument, Passage, Section, SkippedFile
from markindex_core.text import segment


def content_hash(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def build_document(
    rel_path: str, data: bytes, mtime_ns: int, params: TreeParams
) -> ParsedDocument | SkippedFile:
    """Build everything the store writes for one document, or say why it is skipped."""
    try:
        decoded = decode(data)
    except Undecodable as exc:
        return SkippedFile(rel_path, str(exc))
    lines = split_lines(decoded.text)
    parsed = parse_markdown(decoded.text, rel_path, setext=params.setext)
    parsed.block_starts = sorted(set(parsed.block_starts))
    fm = parsed.front_matter
    title = _title(fm, parsed, rel_path)
    sections = build_sections(lines, parsed, title, params)
    passages = cut_passages(sections, lines, parsed.block_starts, parsed.front_matter_end)
    section_terms = [
        _section_terms(s, passages_of) for s, passages_of in _group(sections, passages)
    ]
    return ParsedDocument(
        path=rel_path,
        content_hash=content_hash(data),
        size=len(data),
        mtime_ns=mtime_ns,
        encoding=decoded.encoding,
        title=title,
        description=_description(fm, lines, parsed),
        front_matter=fm,
        lines=lines,
        sections=sections,
        passages=passages,
        section_terms=section_terms,
        links=[(ln.line, ln.target, ln.anchor) for ln in parsed.links],
        warnings=parsed.warnings,
    )


def _title(fm: dict[str, object] | None, parsed: ParsedMarkdown, rel_path: str) -> str:
    if fm and isinstance(fm.get("title"), str) and str(fm["title"]).strip():
        return str(fm["title"]).strip()[:300]
    for h in parsed.headings:
        if h.level == 1 and h.title:
            return h.title
    for h in parsed.headings:
        if h.title:
            return h.title
    return posixpath.splitext(posixpath.basename(rel_path))[0]


def _description(fm: dict[str, object] | None, lines: list[str], parsed: ParsedMarkdown) -> str:
    if fm:
        for key in ("description", "summary", "abstract"):
            value = fm.get(key)
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())[:DESCRIPTION_CHARS]
    first_heading = parsed.headings[0].line if parsed.headings else len(lines)
    start = parsed.front_matter_end
    heading_ends = {h.line: h.end for h in parsed.headings}
    i = start
    while i < len(lines):
        if i in heading_ends:
            i = heading_ends[i]
            continue
        text = lines[i].strip()
        if text and not text.startswith(("<", "```", "~~~", "|", "!", "[")):
            para = []
            while i < len(lines) and lines[i].strip() and i not in heading_ends:
                para.append(lines[i].strip())
                i += 1
            return " ".join(" ".join(para).split())[:DESCRIPTION_CHARS]
        i += 1
        if i > first_heading + 200:
            break
    return ""


def _group(sections: list[Section], passages: list[Passage]) -> list[tuple[Section, list[Passage]]]:
    by_node: list[list[Passage]] = [[] for _ in sections]
    for p in passages:
        by_node[p.node_index].append(p)
    return list(zip(sections, by_node, strict=True))


def _section_terms(sec: Section, passages: list[Passage]) -> tuple[str, str, str]:
    title = "" if sec.kind == "chunk" else segment.terms_text(sec.title)
    keys = segment.terms_text(" \n ".join(sec.key_items)) if sec.key_items else ""
    body = " ".join(p.terms for p in passages)
    return title, keys, body

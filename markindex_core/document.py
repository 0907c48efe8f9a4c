"""Turn one file's bytes into a ParsedDocument: decode, parse, build the tree, cut passages, segment."""

from __future__ import annotations

import itertools
import posixpath
from bisect import bisect_left, bisect_right

import xxhash

from markindex_core import segment
from markindex_core.config import TreeParams
from markindex_core.decode import Undecodable, decode, split_lines
from markindex_core.model import ParsedDocument, Passage, Section, SkippedFile
from markindex_core.parse import ParsedMarkdown, parse_markdown
from markindex_core.tokens import estimate_tokens
from markindex_core.tree import build_sections

PASSAGE_MIN_TOKENS = 12  # shorter blocks (a bold label, a one-line lead-in) join the next block
PASSAGE_MAX_TOKENS = 320  # longer blocks (big tables, code, long lists) are cut by lines
DESCRIPTION_CHARS = 240


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
    passages = _passages(sections, lines, parsed)
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


def _passages(sections: list[Section], lines: list[str], parsed: ParsedMarkdown) -> list[Passage]:
    """Cut each node's own body into block-aligned passages (1-based inclusive ranges)."""
    out: list[Passage] = []
    starts = parsed.block_starts
    fm_end = parsed.front_matter_end
    for idx, sec in enumerate(sections):
        a = max(sec.body_start - 1, fm_end if sec.start_line == 1 else 0)
        b = sec.end_line  # exclusive, 0-based
        if a >= b:
            continue
        lo, hi = bisect_right(starts, a), bisect_left(starts, b)
        cuts = [a, *starts[lo:hi], b]
        pending: tuple[int, int] | None = None
        for x, y in itertools.pairwise(cuts):
            while x < y and not lines[x].strip():
                x += 1
            while y > x and not lines[y - 1].strip():
                y -= 1
            if x >= y:
                continue
            if pending is not None:
                x = pending[0]
                pending = None
            text = "\n".join(lines[x:y])
            tokens = estimate_tokens(text)
            if tokens < PASSAGE_MIN_TOKENS:
                pending = (x, y)
                continue
            out.extend(_cut_long(idx, lines, x, y, tokens))
        if pending is not None:
            out.extend(_cut_long(idx, lines, pending[0], pending[1], 0))
    return out


def _cut_long(idx: int, lines: list[str], a: int, b: int, tokens: int) -> list[Passage]:
    if tokens <= PASSAGE_MAX_TOKENS or b - a == 1:
        return [Passage(idx, a + 1, b, segment.terms_text("\n".join(lines[a:b])))]
    out: list[Passage] = []
    start, acc = a, 0
    for i in range(a, b):
        t = estimate_tokens(lines[i]) + 1
        if acc and acc + t > PASSAGE_MAX_TOKENS:
            out.append(Passage(idx, start + 1, i, segment.terms_text("\n".join(lines[start:i]))))
            start, acc = i, 0
        acc += t
    out.append(Passage(idx, start + 1, b, segment.terms_text("\n".join(lines[start:b]))))
    return out


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

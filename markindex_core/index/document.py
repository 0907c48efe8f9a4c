"""Turn one file's bytes into a ParsedDocument: decode, parse, build the tree, cut passages, segment."""

from __future__ import annotations

from markindex_core.config import LINE_BLOCK_SIZE, MAX_TITLE_CHARS, TreeParams
from markindex_core.index.decode import Undecodable, decode, split_lines
from markindex_core.index.describe import derive_description, derive_title
from markindex_core.index.markdown import ParsedMarkdown, parse_markdown
from markindex_core.index.passages import cut_passages
from markindex_core.index.reading import content_hash
from markindex_core.index.tree import build_sections
from markindex_core.model import ParsedDocument, Section, SkippedFile
from markindex_core.text import segment
from markindex_core.text.tokens import LineTokens


def build_document(
    rel_path: str, data: bytes, mtime_ns: int, params: TreeParams
) -> ParsedDocument | SkippedFile:
    """Build everything the store writes for one document, or say why it is skipped."""
    return build_taken(rel_path, [data], mtime_ns, params)


def build_taken(
    rel_path: str, box: list[bytes], mtime_ns: int, params: TreeParams
) -> ParsedDocument | SkippedFile:
    """`build_document` of the bytes in `box`, taken out of it: when the caller holds no other
    reference, they are freed once decoded (a big file's bytes were held through its parse)."""
    data = box.pop()
    digest, size = content_hash(data), len(data)
    try:
        decoded = decode(data)
    except Undecodable as exc:
        return SkippedFile(rel_path, str(exc))
    del data
    lines = split_lines(decoded.text)
    parsed = parse_markdown(decoded.text, rel_path, setext=params.setext, lines=lines)
    encoding = decoded.encoding
    # From here on only the lines are read: the text goes (4 bytes a character in a document
    # with one character beyond U+FFFF, then ~3x its size).
    del decoded
    parsed.block_starts = sorted(set(parsed.block_starts))
    fm = parsed.front_matter
    title = _title(fm, parsed, rel_path, lines)
    tokens = LineTokens(lines)  # shared: the tree and the passages measure the same lines
    sections = build_sections(lines, parsed, title, params, line_tokens=tokens)
    passages = cut_passages(sections, lines, parsed.block_starts, parsed.front_matter_end, tokens)
    section_terms = [_section_terms(s, lines) for s in sections]
    description = _description(fm, lines, parsed)
    line_count = len(lines)
    return ParsedDocument(
        path=rel_path,
        content_hash=digest,
        size=size,
        mtime_ns=mtime_ns,
        encoding=encoding,
        title=title,
        description=description,
        front_matter=fm,
        line_count=line_count,
        line_blocks=take_line_blocks(lines),  # last: it empties `lines`
        sections=sections,
        passages=passages,
        section_terms=section_terms,
        links=[(ln.line, ln.target, ln.anchor) for ln in parsed.links],
        warnings=parsed.warnings,
    )


def take_line_blocks(lines: list[str]) -> list[bytes]:
    """The rows of the `line_blocks` table: LINE_BLOCK_SIZE lines each, joined, UTF-8.

    Made from the last block back, each block's lines removed from `lines` once encoded: the
    lines are freed as their blocks are made rather than all held with all the blocks."""
    blocks: list[bytes] = []
    for b in reversed(range(0, len(lines), LINE_BLOCK_SIZE)):
        blocks.append("\n".join(lines[b:]).encode())
        del lines[b:]
    blocks.reverse()
    return blocks


def _title(
    fm: dict[str, object] | None, parsed: ParsedMarkdown, rel_path: str, lines: list[str]
) -> str:
    return derive_title(fm, parsed.headings, lines, parsed.front_matter_end, rel_path)


def _description(fm: dict[str, object] | None, lines: list[str], parsed: ParsedMarkdown) -> str:
    return derive_description(fm, lines, parsed)


def _section_terms(sec: Section, lines: list[str]) -> tuple[str, str]:
    """A node's title and key item terms. Its body terms are its passages' terms joined, which
    the store joins when it writes them (joined here too, a big file's terms were held twice)."""
    title = sec.title
    if sec.kind == "section" and len(title) >= MAX_TITLE_CHARS:
        # A title is cut for display; every word of its heading lines stays searchable (the
        # heading's markup, `##` or a setext underline, holds no words).
        title = " ".join(lines[sec.start_line - 1 : sec.body_start - 1])
    return segment.heading_terms(title, sec.key_items, chunk=sec.kind == "chunk")

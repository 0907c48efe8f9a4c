"""Cut a node's own text into passages: the evidence units that search results cite.

Passages follow Markdown block boundaries and group blocks the way a reader would quote them: a
law article (`第…条`) with its numbered clauses, a lead-in sentence ending in a colon with the list or
code that follows, a short label with the block after it. Long blocks (big tables, code, lists)
are cut by lines so that evidence stays a few lines long.
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable

from markindex_core.config import (
    GROUP_MAX_TOKENS,
    PASSAGE_MAX_TOKENS,
    PASSAGE_MIN_TOKENS,
)
from markindex_core.model import Passage, Section
from markindex_core.text import segment
from markindex_core.text.patterns import LAW_ARTICLE
from markindex_core.text.tokens import LineTokens

_LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,9}[.)])\s")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")


def cut_passages(
    sections: list[Section],
    lines: list[str],
    block_starts: list[int],
    front_matter_end: int,
    tokens: LineTokens | None = None,
) -> list[Passage]:
    """Passages of every node's own body (1-based inclusive ranges), in document order.
    `tokens` measures `lines` (made here when the caller has none to share)."""
    span = (tokens or LineTokens(lines)).span
    out: list[Passage] = []
    for idx, sec in enumerate(sections):
        a = max(sec.body_start - 1, front_matter_end if sec.start_line == 1 else 0)
        b = sec.end_line  # exclusive, 0-based
        if a >= b:
            continue
        lo, hi = bisect_right(block_starts, a), bisect_left(block_starts, b)
        blocks = [_trim(lines, x, y) for x, y in itertools.pairwise([a, *block_starts[lo:hi], b])]
        for x, y, n in _group([blk for blk in blocks if blk[0] < blk[1]], lines, span):
            out.extend(_cut_long(idx, lines, x, y, n, span))
    return out


def _trim(lines: list[str], x: int, y: int) -> tuple[int, int]:
    while x < y and not lines[x].strip():
        x += 1
    while y > x and not lines[y - 1].strip():
        y -= 1
    return x, y


def _group(
    blocks: list[tuple[int, int]], lines: list[str], span: Callable[[int, int], int]
) -> list[tuple[int, int, int]]:
    """Join blocks into reader-shaped groups: (first line, end line, estimated tokens)."""
    groups: list[tuple[int, int, int]] = []
    cur: tuple[int, int] | None = None
    cur_tokens = 0
    cur_article = cur_leadin = False
    for x, y in blocks:
        first = lines[x]
        tokens = span(x, y)
        # An article heading holds a 第: the regex runs only on the few lines that have one.
        article = "第" in first and LAW_ARTICLE.match(first) is not None
        if cur is not None:
            fits = cur_tokens + tokens <= GROUP_MAX_TOKENS
            join = cur_tokens < PASSAGE_MIN_TOKENS or (
                fits
                and not _HEADING.match(first)
                and (
                    (cur_article and not article)
                    or (
                        cur_leadin
                        and (
                            _LIST_ITEM.match(first) is not None
                            or first.startswith(("```", "~~~", "|", "    "))
                        )
                    )
                )
            )
            if join:
                cur = (cur[0], y)
                cur_tokens += tokens
                continue
            groups.append((*cur, cur_tokens))
        cur, cur_tokens = (x, y), tokens
        cur_article = article
        cur_leadin = lines[y - 1].rstrip().endswith((":", "："))
    if cur is not None:
        groups.append((*cur, cur_tokens))
    return groups


def _cut_long(
    idx: int, lines: list[str], a: int, b: int, tokens: int, span: Callable[[int, int], int]
) -> list[Passage]:
    if b - a == 1 or tokens <= PASSAGE_MAX_TOKENS:
        return [_passage(idx, lines, a, b)]
    out: list[Passage] = []
    start, acc = a, 0
    for i in range(a, b):
        t = span(i, i + 1) + 1
        if acc and acc + t > PASSAGE_MAX_TOKENS:
            out.append(_passage(idx, lines, start, i))
            start, acc = i, 0
        acc += t
    out.append(_passage(idx, lines, start, b))
    return out


def _passage(idx: int, lines: list[str], a: int, b: int) -> Passage:
    """Lines [a, b) of node `idx` as a passage, its terms UTF-8 encoded (see `Passage`)."""
    return Passage(idx, a + 1, b, segment.terms_bytes("\n".join(lines[a:b])))

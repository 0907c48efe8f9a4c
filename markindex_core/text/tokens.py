"""Approximate token counts: one per CJK character, one per four other characters."""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from itertools import accumulate

# Runs, not single characters: counting run lengths makes ~10x fewer objects on Chinese text.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
# A longer text is counted this many characters at a time: the runs of a 50 MB line of Chinese,
# found at once, were ~5x its size in strings. A run cut in two counts the same characters.
_COUNT_PIECE_CHARS = 1 << 16

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """Count tokens the cheap way; a real tokenizer can be passed wherever a counter is taken."""
    if text.isascii():
        return (len(text) + 3) // 4
    cjk = _cjk_chars(text)
    return cjk + (len(text) - cjk + 3) // 4


def _cjk_chars(text: str) -> int:
    """The CJK characters of `text` (the length of its `_CJK_RUN` runs), a bounded piece at a
    time."""
    find = _CJK_RUN.findall
    if len(text) <= _COUNT_PIECE_CHARS:
        return sum(map(len, find(text)))
    step = _COUNT_PIECE_CHARS
    return sum(sum(map(len, find(text, i, i + step))) for i in range(0, len(text), step))


class LineTokens:
    """`estimate_tokens` of any run of a document's lines, joined by newlines, in constant time.

    The estimate depends only on a text's length and its CJK characters, and both add up over
    lines (newlines are not CJK): prefix sums of the two, made once per document, answer for every
    block and line that the tree and the passages measure. Joining and scanning each block and
    line on its own was most of the passage code's time outside segmentation. CJK characters are
    counted line by line: ASCII lines (most lines of most documents) are skipped without a scan.
    """

    def __init__(self, lines: list[str]) -> None:
        # Arrays, not lists: an int object and a pointer per line was ~4x a big file's lines.
        self._len = array("q", [0])
        self._len.extend(accumulate(map(len, lines)))
        self._cjk = array("q", [0])
        self._cjk.extend(accumulate(0 if line.isascii() else _cjk_chars(line) for line in lines))

    def span(self, a: int, b: int) -> int:
        """`estimate_tokens("\\n".join(lines[a:b]))`."""
        cjk = self._cjk[b] - self._cjk[a]
        chars = self._len[b] - self._len[a] + b - a - 1  # the newlines between the lines
        return cjk + (chars - cjk + 3) // 4  # b == a: chars is -1, and the answer 0

"""Approximate token counts: one per CJK character, one per four other characters."""

from __future__ import annotations

import re
from collections.abc import Callable

# Runs, not single characters: counting run lengths makes ~10x fewer objects on Chinese text.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """Count tokens the cheap way; a real tokenizer can be passed wherever a counter is taken."""
    if text.isascii():
        return (len(text) + 3) // 4
    cjk = sum(map(len, _CJK_RUN.findall(text)))
    return cjk + (len(text) - cjk + 3) // 4

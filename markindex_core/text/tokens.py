"""Approximate token counts: one per CJK character, one per four other characters."""

from __future__ import annotations

import re
from collections.abc import Callable

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """Count tokens the cheap way; a real tokenizer can be passed wherever a counter is taken."""
    cjk = len(_CJK.findall(text)) if not text.isascii() else 0
    return cjk + (len(text) - cjk + 3) // 4

"""The shape of a cited range: which passages may share one citation.

A passage is cut at Markdown blocks, so the one that scores best may stop a few lines short of
the sentence that answers while the next passage, also among the best, holds it. In prose one
citation over both reads better than two tight ones that each miss part of the answer. In a law
or any Chinese text the neighbour is usually another article that answers something else, so
there evidence stays as cut.
"""

from __future__ import annotations

import re

from markindex_core.config import PROSE_MAX_CJK_SHARE
from markindex_core.text.patterns import LAW_ARTICLE

# Runs, not single characters: a Chinese passage makes a few strings, not one per character.
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def is_prose(text: str) -> bool:
    """Whether a passage may cite its neighbours: not a law article, and mostly not Chinese."""
    if LAW_ARTICLE.match(text):
        return False
    chars = len("".join(text.split()))
    return chars == 0 or sum(map(len, _CJK_RUN.findall(text))) <= PROSE_MAX_CJK_SHARE * chars

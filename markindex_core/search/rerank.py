"""Re-ranking of the best candidates by document coherence.

BM25 scores each passage on its own: a reference line in some other document that repeats two
rare names of the question can outrank the paragraph that answers, though the answering
document holds several passages that match the question well. Among the best RERANK_DEPTH
candidates, each document's evidence is summed (its DOC_EVIDENCE_PASSAGES best passages), and a
passage is raised by its document's share of the best document's sum. Only the top candidates
are looked at, so the cost is a few hundred additions whatever the size of the library.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from markindex_core.config import (
    CONTENTS_LINK_SHARE,
    DOC_EVIDENCE_PASSAGES,
    DOC_WEIGHT,
    LINK_PENALTY,
    RERANK_DEPTH,
)

# A Markdown link to a heading of the same document: `[text](#anchor)`.
_LINK = re.compile(r"\[[^\]\n]*\]\(#[^)\s]*\)")


def by_document(
    ranked: list[tuple[float, int]], doc_of: Mapping[int, int]
) -> list[tuple[float, int]]:
    """`ranked` ((score, passage id), best first) again, its head raised by document evidence."""
    head = ranked[:RERANK_DEPTH]
    if len(head) < 2 or DOC_WEIGHT <= 0:
        return ranked
    best = document_evidence(head, doc_of)
    top = max(best.values()) or 1.0
    rescored = [(score + DOC_WEIGHT * best[doc_of[pid]] / top, pid) for score, pid in head]
    rescored.sort(reverse=True)
    return rescored + ranked[RERANK_DEPTH:]


def document_evidence(head: list[tuple[float, int]], doc_of: Mapping[int, int]) -> dict[int, float]:
    """Each document's summed score over its best DOC_EVIDENCE_PASSAGES passages in `head`."""
    scores: dict[int, list[float]] = {}
    for score, pid in head:  # best first: each document's first scores are its best
        kept = scores.setdefault(doc_of[pid], [])
        if len(kept) < DOC_EVIDENCE_PASSAGES:
            kept.append(score)
    return {doc: sum(kept) for doc, kept in scores.items()}


def is_contents(text: str) -> bool:
    """Whether a passage is mostly links to the document's own headings: a table of contents.

    It names the topics of a question without answering it, and BM25 ranks it high exactly
    because it names so many of them.
    """
    chars = len("".join(text.split()))
    links = sum(len("".join(m.group().split())) for m in _LINK.finditer(text))
    return chars > 0 and links >= CONTENTS_LINK_SHARE * chars


def demote_contents(
    ranked: list[tuple[float, int]], texts: Callable[[list[int]], dict[int, str]]
) -> list[tuple[float, int]]:
    """`ranked` again, each head passage that is mostly in-document links lowered.

    Only a passage whose link share reaches CONTENTS_LINK_SHARE counts as a table of contents:
    a definition that links to two other objects of the same document still answers.
    """
    head = ranked[:RERANK_DEPTH]
    if not head or LINK_PENALTY <= 0:
        return ranked
    text_of = texts([pid for _, pid in head])
    rescored = [
        (score - (LINK_PENALTY if is_contents(text_of.get(pid, "")) else 0.0), pid)
        for score, pid in head
    ]
    rescored.sort(reverse=True)
    return rescored + ranked[RERANK_DEPTH:]

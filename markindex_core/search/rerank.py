"""Re-ranking of the best candidates by document coherence.

BM25 scores each passage on its own: a reference line in some other document that repeats two
rare names of the question can outrank the paragraph that answers, though the answering
document holds several passages that match the question well. Among the best RERANK_DEPTH
candidates, each document's evidence is summed (its DOC_EVIDENCE_PASSAGES best passages), and a
passage is raised by its document's share of the best document's sum. Only the top candidates
are looked at, so the cost is a few hundred additions whatever the size of the library.
"""

from __future__ import annotations

from collections.abc import Mapping

from markindex_core.config import DOC_EVIDENCE_PASSAGES, DOC_WEIGHT, RERANK_DEPTH


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

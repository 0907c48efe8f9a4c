"""Retrieval evaluation: questions with gold line ranges -> hit@1, hit@5, MRR, evidence size, precision.

Question files are JSONL: {"id", "question", "lang": "zh"|"en"|"mixed", "gold": [{"doc_path", "start_line",
"end_line"} | {"doc_path", "title_path": [...]} | {"doc_path"}]}. A result hits when its cited range (the
passage) intersects a gold range; title paths match by prefix; a bare doc path matches anywhere in it.

Evidence lines: the size of the top result's cited passage (median reported). Precision, two ways:
`precision@1` is the share of the top result's lines inside gold (0 for a question whose top result
misses), `hit_precision` the same share for the first result that hits (over answered questions).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markindex_core.errors import InvalidArgument
from markindex_core.library import Library
from markindex_core.search.searcher import Hit

K = 5


@dataclass
class QuestionResult:
    id: str
    lang: str
    question: str
    rank: int | None  # 1-based rank of the first hit within the top K, None when missed
    evidence_lines: int  # lines cited by the top result
    precision: float  # share of the top result's lines inside gold
    hit_precision: float  # the same for the first hitting result (0 when missed)
    mode: str
    elapsed_ms: float
    top: list[dict[str, Any]] = field(default_factory=list)


def load_questions(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgument(
                f"cannot read questions {path}: {exc.strerror}", "pass a JSONL file"
            ) from None
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                q = json.loads(line)
                assert isinstance(q["question"], str) and isinstance(q["gold"], list)
            except (ValueError, KeyError, AssertionError, TypeError):
                raise InvalidArgument(
                    f"{path}:{n}: not a question record", 'each line needs "question" and "gold"'
                ) from None
            q.setdefault("id", f"{path.stem}-{n}")
            q.setdefault("lang", "unknown")
            out.append(q)
    return out


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0) + 1)


def hits_gold(hit: Hit, gold: list[dict[str, Any]]) -> bool:
    for g in gold:
        if g.get("doc_path") != hit.doc_path:
            continue
        if "start_line" in g:
            if _overlap(
                hit.passage_start, hit.passage_end, int(g["start_line"]), int(g["end_line"])
            ):
                return True
        elif "title_path" in g:
            want = list(g["title_path"])
            if hit.title_path[: len(want)] == want:
                return True
        else:
            return True
    return False


def gold_share(hit: Hit, gold: list[dict[str, Any]]) -> float:
    """Share of the hit's cited lines that fall inside gold line ranges."""
    n = hit.passage_end - hit.passage_start + 1
    if n <= 0:
        return 0.0
    inside = 0
    for line in range(hit.passage_start, hit.passage_end + 1):
        for g in gold:
            if g.get("doc_path") != hit.doc_path:
                continue
            if "start_line" not in g or int(g["start_line"]) <= line <= int(g["end_line"]):
                inside += 1
                break
    return inside / n


def evaluate(
    lib: Library,
    questions: list[dict[str, Any]],
    *,
    max_evidence_lines: int | None = None,
    k: int = K,
) -> dict[str, Any]:
    results: list[QuestionResult] = []
    for q in questions:
        res = lib.search(q["question"], limit=k)
        rank = None
        hit_precision = 0.0
        for i, h in enumerate(res.hits, 1):
            size = h.passage_end - h.passage_start + 1
            if max_evidence_lines is not None and size > max_evidence_lines:
                continue
            if hits_gold(h, q["gold"]):
                rank = i
                hit_precision = gold_share(h, q["gold"])
                break
        top = res.hits[0] if res.hits else None
        results.append(
            QuestionResult(
                id=str(q["id"]),
                lang=str(q.get("lang", "unknown")),
                question=q["question"],
                rank=rank,
                evidence_lines=(top.passage_end - top.passage_start + 1) if top else 0,
                precision=gold_share(top, q["gold"]) if top else 0.0,
                hit_precision=hit_precision,
                mode=res.mode,
                elapsed_ms=res.elapsed_ms,
                top=[{"citation": h.citation, "title_path": h.title_path} for h in res.hits],
            )
        )
    groups: dict[str, list[QuestionResult]] = {"overall": results}
    for r in results:
        groups.setdefault(r.lang, []).append(r)
    return {
        "k": k,
        "max_evidence_lines": max_evidence_lines,
        "metrics": {name: _metrics(rs) for name, rs in groups.items()},
        "questions": [r.__dict__ for r in results],
    }


def _metrics(rs: list[QuestionResult]) -> dict[str, float]:
    n = len(rs) or 1
    hits = [r for r in rs if r.rank is not None]
    return {
        "questions": len(rs),
        "hit@1": sum(1 for r in rs if r.rank == 1) / n,
        "hit@5": len(hits) / n,
        "mrr": sum(1 / r.rank for r in hits if r.rank) / n,
        "median_evidence_lines": statistics.median([r.evidence_lines for r in rs]) if rs else 0,
        "precision@1": sum(r.precision for r in rs) / n,
        "hit_precision": (sum(r.hit_precision for r in hits) / len(hits)) if hits else 0.0,
        "p50_ms": statistics.median([r.elapsed_ms for r in rs]) if rs else 0.0,
    }

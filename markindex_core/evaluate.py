"""Retrieval evaluation: questions with gold line ranges -> hit@1, hit@5, MRR, evidence size, precision.

Modes: `evaluate` ranks with search (BM25); `evaluate_agent` lets a model run `retrieve` on each
question (the llm extra); `evaluate_routing` ranks whole documents by their browse metadata.

Question files are JSONL: {"id", "question", "lang": "zh"|"en"|"mixed", "gold": [{"doc_path", "start_line",
"end_line"} | {"doc_path", "title_path": [...]} | {"doc_path"}]}. A result hits when its cited range (the
passage) intersects a gold range; title paths match by prefix; a bare doc path matches anywhere in it.

Evidence lines: the size of the top result's cited passage (median reported). Precision, two ways:
`precision@1` is the share of the top result's lines inside gold (0 for a question whose top result
misses), `hit_precision` the same share for the first result that hits (over answered questions).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markindex_core.config import EVAL_AGENT_CONCURRENCY, MAX_QUESTIONS_BYTES, RETRIEVE_MAX_STEPS
from markindex_core.errors import InvalidArgument
from markindex_core.library import Library
from markindex_core.search.searcher import Hit
from markindex_core.text import segment
from markindex_core.text.stopwords import is_stopword

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


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, refused beyond MAX_QUESTIONS_BYTES (`--questions /dev/zero` would
    otherwise read until memory runs out)."""
    with path.open("rb") as f:
        data = f.read(MAX_QUESTIONS_BYTES + 1)
    if len(data) > MAX_QUESTIONS_BYTES:
        raise InvalidArgument(
            f"questions {path} are larger than {MAX_QUESTIONS_BYTES // 1_000_000} MB",
            "pass a JSONL file of questions (one per line), split if it is really this large",
        )
    return data


def load_questions(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            text = _read_bounded(path).decode("utf-8")
        except OSError as exc:
            raise InvalidArgument(
                f"cannot read questions {path}: {exc.strerror}", "pass a JSONL file"
            ) from None
        except UnicodeDecodeError:
            raise InvalidArgument(
                f"questions {path} are not UTF-8 text", "save the file as UTF-8 JSONL"
            ) from None
        # "\n" only: U+2028 and friends may stand inside a JSON string.
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                q = json.loads(line)
            except ValueError:
                raise InvalidArgument(f"{path}:{n}: not JSON", "one JSON object per line") from None
            problem = _record_problem(q)
            if problem:
                raise InvalidArgument(
                    f"{path}:{n}: not a question record: {problem}",
                    'each line needs "question" and "gold": [{"doc_path", "start_line",'
                    ' "end_line"}, ...] (lines optional) with 1 <= start_line <= end_line',
                )
            q.setdefault("id", f"{path.stem}-{n}")
            q.setdefault("lang", "unknown")
            q["id"], q["lang"] = str(q["id"]), str(q["lang"])
            out.append(q)
    return out


def stored_gold_paths(lib: Library, questions: list[dict[str, Any]]) -> list[str]:
    """Spell every gold `doc_path` as the index does, as the tools take a path (`./a.md` is
    `a.md`, a name typed in another Unicode normalization the stored one), so that citing the
    document counts; return the gold paths that name no document, which nothing can hit."""
    unknown: dict[str, None] = {}
    for q in questions:
        for g in q["gold"]:
            doc = lib.document(g["doc_path"])
            if doc is None:
                unknown[g["doc_path"]] = None
            else:
                g["doc_path"] = doc["path"]
    return list(unknown)


def _record_problem(q: object) -> str:
    """What is wrong with one question record ('' when nothing is)."""
    if not isinstance(q, dict):
        return "not an object"
    if not isinstance(q.get("question"), str):
        return '"question" is not a string'
    gold = q.get("gold")
    if not isinstance(gold, list):
        return '"gold" is not a list'
    for g in gold:
        if not isinstance(g, dict) or not isinstance(g.get("doc_path"), str):
            return 'a gold range without a "doc_path" string'
        a, b = g.get("start_line"), g.get("end_line")
        if a is not None or b is not None:  # a line range (else the document or title path)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)):
                return f"gold lines are not whole numbers: {a!r}, {b!r}"
            if not 1 <= a <= b:  # type: ignore[operator]
                return f"gold lines out of order: {a}-{b}"
        tp = g.get("title_path", [])
        if not isinstance(tp, list) or not all(isinstance(t, str) for t in tp):
            return '"title_path" is not a list of strings'
    return ""


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0) + 1)


@dataclass(frozen=True)
class Cited:
    """A cited line range: a search hit's passage or a piece of agent evidence."""

    doc_path: str
    start: int
    end: int
    title_path: list[str]


def _cited(hit: Hit) -> Cited:
    return Cited(hit.doc_path, hit.passage_start, hit.passage_end, list(hit.title_path))


def range_hits_gold(c: Cited, gold: list[dict[str, Any]]) -> bool:
    for g in gold:
        if g.get("doc_path") != c.doc_path:
            continue
        if "start_line" in g:
            if _overlap(c.start, c.end, int(g["start_line"]), int(g["end_line"])):
                return True
        elif "title_path" in g:
            want = list(g["title_path"])
            if c.title_path[: len(want)] == want:
                return True
        else:
            return True
    return False


def _lines_inside(c: Cited, gold: list[dict[str, Any]]) -> int:
    inside = 0
    for line in range(c.start, c.end + 1):
        for g in gold:
            if g.get("doc_path") != c.doc_path:
                continue
            if "start_line" not in g or int(g["start_line"]) <= line <= int(g["end_line"]):
                inside += 1
                break
    return inside


def hits_gold(hit: Hit, gold: list[dict[str, Any]]) -> bool:
    return range_hits_gold(_cited(hit), gold)


def gold_share(hit: Hit, gold: list[dict[str, Any]]) -> float:
    """Share of the hit's cited lines that fall inside gold line ranges."""
    n = hit.passage_end - hit.passage_start + 1
    if n <= 0:
        return 0.0
    return _lines_inside(_cited(hit), gold) / n


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


def _metrics(rs: Sequence[QuestionResult]) -> dict[str, float]:
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


# ----- Agent mode: a model runs retrieve() on every question ------------------------------------
@dataclass
class AgentQuestionResult(QuestionResult):
    """One question in agent mode: the fields of search mode, measured on the cited evidence in
    the order cited, plus what the run cost. `evidence_lines` counts every cited line, `precision`
    is the share of all of them inside gold; `mode` is the stop reason (or `error`)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    tool_calls: int = 0
    error: str = ""


def evaluate_agent(
    lib: Library,
    questions: list[dict[str, Any]],
    *,
    model: str,
    concurrency: int = EVAL_AGENT_CONCURRENCY,
    rpm: int | None = None,
    tpm: int | None = None,
    base_url: str | None = None,
    max_steps: int = RETRIEVE_MAX_STEPS,
    max_evidence_lines: int | None = None,
    k: int = K,
) -> dict[str, Any]:
    """Run retrieve on every question, `concurrency` at a time, all sharing one rate limit.

    A question whose run fails (the model keeps erroring) counts as a miss with its error and
    never stops the others.
    """
    import asyncio

    from markindex_core.llm.limits import RateLimiter
    from markindex_core.llm.models import resolve_model

    if concurrency < 1:
        raise InvalidArgument("--concurrency must be at least 1", f"got {concurrency}")
    limiter = RateLimiter(rpm, tpm)
    resolved = resolve_model(model, base_url, limiter=limiter)

    async def run_all() -> list[AgentQuestionResult]:
        gate = asyncio.Semaphore(concurrency)

        async def one(q: dict[str, Any]) -> AgentQuestionResult:
            async with gate:
                return await _agent_question(lib, q, resolved, max_steps, max_evidence_lines, k)

        return list(await asyncio.gather(*(one(q) for q in questions)))

    results = asyncio.run(run_all())
    groups: dict[str, list[AgentQuestionResult]] = {"overall": results}
    for r in results:
        groups.setdefault(r.lang, []).append(r)
    return {
        "k": k,
        "max_evidence_lines": max_evidence_lines,
        "model": model,
        "metrics": {name: _agent_metrics(rs) for name, rs in groups.items()},
        "questions": [r.__dict__ for r in results],
    }


async def _agent_question(
    lib: Library,
    q: dict[str, Any],
    model: Any,
    max_steps: int,
    max_evidence_lines: int | None,
    k: int,
) -> AgentQuestionResult:
    import time

    from markindex_core.errors import MarkindexError
    from markindex_core.llm.agent import retrieve_async

    base = {"id": str(q["id"]), "lang": str(q.get("lang", "unknown")), "question": q["question"]}
    t0 = time.perf_counter()
    try:
        res = await retrieve_async(lib, q["question"], model=model, max_steps=max_steps)
    except MarkindexError as exc:
        ms = (time.perf_counter() - t0) * 1000
        return AgentQuestionResult(
            **base, rank=None, evidence_lines=0, precision=0.0, hit_precision=0.0,
            mode="error", elapsed_ms=ms, error=str(exc),
        )  # fmt: skip
    cited = [Cited(e.doc_path, e.start_line, e.end_line, e.title_path) for e in res.evidence]
    rank = next(
        (
            i
            for i, c in enumerate(cited[:k], 1)
            if (max_evidence_lines is None or c.end - c.start + 1 <= max_evidence_lines)
            and range_hits_gold(c, q["gold"])
        ),
        None,
    )
    lines = sum(c.end - c.start + 1 for c in cited)
    share = sum(_lines_inside(c, q["gold"]) for c in cited) / lines if lines else 0.0
    return AgentQuestionResult(
        **base,
        rank=rank,
        evidence_lines=lines,
        precision=share,
        hit_precision=share if rank is not None else 0.0,
        mode=res.stop_reason,
        elapsed_ms=(time.perf_counter() - t0) * 1000,
        top=[
            {"citation": f"[{c.doc_path}, L{c.start}-{c.end}]", "title_path": c.title_path}
            for c in cited
        ],
        requests=res.usage.requests,
        input_tokens=res.usage.input_tokens,
        output_tokens=res.usage.output_tokens,
        steps=res.steps,
        tool_calls=res.tool_calls,
    )


def _agent_metrics(rs: list[AgentQuestionResult]) -> dict[str, Any]:
    n = len(rs) or 1
    out: dict[str, Any] = dict(_metrics(list(rs)))
    out.update(
        {
            "requests_per_question": sum(r.requests for r in rs) / n,
            "input_tokens_per_question": sum(r.input_tokens for r in rs) / n,
            "output_tokens_per_question": sum(r.output_tokens for r in rs) / n,
            "steps_per_question": sum(r.steps for r in rs) / n,
            "tool_calls_per_question": sum(r.tool_calls for r in rs) / n,
            "requests": sum(r.requests for r in rs),
            "input_tokens": sum(r.input_tokens for r in rs),
            "output_tokens": sum(r.output_tokens for r in rs),
            "stop_reasons": dict(Counter(r.mode for r in rs)),
            "errors": sum(1 for r in rs if r.error),
        }
    )
    return out


# ----- Routing: can an agent pick the right document from browse metadata alone? ----------------
BM25_K1 = 1.2
BM25_B = 0.75


@dataclass(frozen=True)
class BrowseEntry:
    """One document as `browse_documents` lists it: what an agent sees before opening it."""

    path: str
    title: str
    description: str


def browse_entries(lib: Library) -> list[BrowseEntry]:
    """Walk every folder through the `browse_documents` tool, every part of every page."""
    out: list[BrowseEntry] = []
    todo = [""]
    while todo:
        folder = todo.pop()
        part, parts = 1, 1
        while part <= parts:
            data = _browse_page(lib, folder, part)
            parts = int(data["parts"])
            todo.extend(str(f["path"]) for f in data["folders"])
            out.extend(
                BrowseEntry(
                    str(d["path"]), str(d.get("title") or ""), str(d.get("description") or "")
                )
                for d in data["documents"]
            )
            part += 1
    return sorted(out, key=lambda e: e.path)


def _browse_page(lib: Library, folder: str, part: int) -> dict[str, Any]:
    envelope = json.loads(lib.call_tool("browse_documents", {"folder": folder, "part": part}))
    if not envelope.get("success"):
        raise InvalidArgument(
            f"browse_documents failed on folder {folder!r}: {envelope.get('error')}",
            "index the library first: markindex index ROOT",
        )
    data: dict[str, Any] = envelope["data"]
    return data


def entry_terms(entry: BrowseEntry) -> list[str]:
    """Path words, title and description: the only text an agent has while browsing."""
    path_words = entry.path.translate(_PATH_PUNCT)
    return segment.terms(f"{path_words}\n{entry.title}\n{entry.description}")


_PATH_PUNCT = str.maketrans(dict.fromkeys("/\\-_.()[]", " "))


def query_terms(question: str) -> list[str]:
    """The question's topic words (stop words dropped), each identifier with its parts, once."""
    seen: dict[str, None] = {}
    for group in segment.word_groups(question, stop=is_stopword):
        for term in group:
            seen.setdefault(term, None)
    return list(seen)


def bm25_rank(
    docs: list[list[str]], query: list[str], k1: float = BM25_K1, b: float = BM25_B
) -> list[int]:
    """Indexes of `docs` (each a list of terms) by plain Okapi BM25 for `query`, best first.

    Ties keep the documents' order; documents matching no query term are left out.
    """
    n = len(docs)
    if not n:
        return []
    avg = sum(len(d) for d in docs) / n or 1.0
    counts = [Counter(d) for d in docs]
    df = Counter(t for c in counts for t in set(query) if t in c)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
    scores: list[tuple[float, int]] = []
    for i, c in enumerate(counts):
        norm = k1 * (1 - b + b * len(docs[i]) / avg)
        s = sum(idf[t] * c[t] * (k1 + 1) / (c[t] + norm) for t in idf if c[t])
        if s > 0:
            scores.append((-s, i))
    scores.sort()
    return [i for _, i in scores]


def evaluate_routing(
    lib: Library, questions: list[dict[str, Any]], *, k: int = K
) -> dict[str, Any]:
    """Doc-level hit@k of ranking every document by BM25 over its browse metadata alone."""
    entries = browse_entries(lib)
    docs = [entry_terms(e) for e in entries]
    results: list[dict[str, Any]] = []
    for q in questions:
        order = bm25_rank(docs, query_terms(q["question"]))[:k]
        gold = {str(g.get("doc_path")) for g in q["gold"]}
        top = [entries[i].path for i in order]
        rank = next((n for n, p in enumerate(top, 1) if p in gold), None)
        results.append(
            {"id": str(q["id"]), "lang": str(q.get("lang", "unknown")), "rank": rank, "top": top}
        )
    groups: dict[str, list[dict[str, Any]]] = {"overall": results}
    for r in results:
        groups.setdefault(r["lang"], []).append(r)
    return {
        "k": k,
        "documents": len(entries),
        "metrics": {name: _routing_metrics(rs) for name, rs in groups.items()},
        "questions": results,
    }


def _routing_metrics(rs: list[dict[str, Any]]) -> dict[str, float]:
    n = len(rs) or 1
    ranks = [int(r["rank"]) for r in rs if r["rank"] is not None]
    return {
        "questions": len(rs),
        "hit@1": sum(1 for r in ranks if r == 1) / n,
        "hit@5": len(ranks) / n,
        "mrr": sum(1 / r for r in ranks) / n,
    }

"""Search ranking on halves of the dev questions: per language and per half, plus where gold sits.

Usage: python eval/tune_rank.py --db INDEX.db [--root DIR] [--questions FILE ...] [--depth]
       [--misses] [--latency]

A ranking change is judged on the odd and the even half of the questions (by their position in
each file) separately, per language: a gain that shows on one half only is one question's luck.
`--depth` searches with limit=50 and reports in how many questions the gold passage is in the top
1/5/10/20/50 and the gold document first: how much a re-ranking of the candidates can gain.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench import search_latency

from markindex_core.evaluate import evaluate, hits_gold, load_questions
from markindex_core.library import Library

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = sorted((REPO.parent / "shared" / "eval").glob("questions-dev-*.jsonl"))
DEPTHS = (1, 5, 10, 20, 50)


def halves(questions: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Odd and even positions within each question file (files interleave languages)."""
    out: dict[str, list[dict[str, Any]]] = {"odd": [], "even": []}
    seen: dict[str, int] = {}
    for q in questions:
        src = str(q["id"]).rsplit("-", 1)[0]
        seen[src] = seen.get(src, 0) + 1
        out["odd" if seen[src] % 2 else "even"].append(q)
    return out


def quality(lib: Library, questions: list[dict[str, Any]], misses: bool) -> None:
    """hit@1, hit@5, median evidence, precision per half and language."""
    print(
        f"{'half':5} {'lang':6} {'n':>3} {'hit@1':>6} {'hit@5':>6} {'lines':>5} {'p@1':>5} {'phit':>5}"
    )
    for name, qs in [("all", questions), *halves(questions).items()]:
        report = evaluate(lib, qs)
        for lang, m in report["metrics"].items():
            print(
                f"{name:5} {lang:6} {m['questions']:3d} {m['hit@1']:6.1%} {m['hit@5']:6.1%}"
                f" {m['median_evidence_lines']:5g} {m['precision@1']:5.2f}"
                f" {m['hit_precision']:5.2f}"
            )
        if misses and name == "all":
            for r in report["questions"]:
                if r["rank"] != 1:
                    print(f"   {r['id']} rank={r['rank']} top={r['top'][:2]}")


def depth(lib: Library, questions: list[dict[str, Any]]) -> None:
    """Where the gold passage and the gold document sit among 50 results."""
    rows: dict[str, list[tuple[int | None, bool]]] = {}
    for q in questions:
        hits = lib.search(q["question"], limit=50).hits
        rank = next((i for i, h in enumerate(hits, 1) if hits_gold(h, q["gold"])), None)
        gold_docs = {g["doc_path"] for g in q["gold"]}
        doc_first = bool(hits) and hits[0].doc_path in gold_docs
        rows.setdefault(str(q["lang"]), []).append((rank, doc_first))
        rows.setdefault("overall", []).append((rank, doc_first))
        print(f"   {q['id']} gold rank={rank} doc first={doc_first}")
    for lang, rs in rows.items():
        n = len(rs)
        cells = " ".join(
            f"top{d}={sum(1 for r, _ in rs if r is not None and r <= d) / n:.0%}" for d in DEPTHS
        )
        print(f"{lang:8} n={n:3d} {cells} doc-first={sum(1 for _, f in rs if f) / n:.0%}")


def latency(lib: Library, questions: list[dict[str, Any]], rounds: int = 3) -> None:
    """p50/p95 wall time of `search` over the questions (the benchmark's measure)."""
    lat = search_latency(lib, [str(q["question"]) for q in questions], rounds)
    print(
        f"latency ms: p50={lat['p50_ms']:.1f} p95={lat['p95_ms']:.1f} n={rounds * len(questions)}"
    )


def override(pairs: list[str]) -> None:
    """Set ranking constants (NAME=VALUE, VALUE a Python literal) for a what-if run."""
    import ast

    from markindex_core.search import evidence, rerank, searcher
    from markindex_core.store import search_queries

    for pair in pairs:
        name, _, value = pair.partition("=")
        modules = [m for m in (searcher, rerank, evidence, search_queries) if hasattr(m, name)]
        if not modules:
            raise SystemExit(f"no ranking constant {name}")
        for module in modules:
            setattr(module, name, ast.literal_eval(value))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--root", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--questions", type=Path, nargs="*", default=DEFAULT_QUESTIONS)
    ap.add_argument("--depth", action="store_true", help="gold rank among 50 results")
    ap.add_argument("--misses", action="store_true", help="list questions not hit at 1")
    ap.add_argument("--latency", action="store_true", help="search p50/p95")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a ranking constant (searcher, rerank, evidence, search queries) for this run",
    )
    ap.add_argument("--out", type=Path, help="write the full report of all questions as JSON")
    args = ap.parse_args()
    override(args.set)
    lib = Library(args.root, args.db)
    questions = load_questions(args.questions)
    if args.depth:
        depth(lib, questions)
    quality(lib, questions, args.misses)
    if args.out:
        args.out.write_text(json.dumps(evaluate(lib, questions), ensure_ascii=False, indent=1))
    if args.latency:
        latency(lib, questions)


if __name__ == "__main__":
    main()

"""`markindex search`, `links`, `backlinks` and `eval`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def register(sub: Any, common: Callable[..., None], indexing: Callable[..., None]) -> None:
    p = sub.add_parser(
        "search",
        help="keyword search (Chinese, English, mixed) with passage citations",
        description="BM25 search over section titles, merged headings and text. Prints "
        "the best passage of each matching section as a citation [doc_path, Lx-y].",
    )
    common(p)
    p.add_argument("query", metavar="QUERY", help="words, a question, or an identifier")
    p.add_argument("--folder", help="only documents under this folder (relative to ROOT)")
    p.add_argument("--doc", help="only this document (path relative to ROOT)")
    p.add_argument("--limit", type=int, default=10, help="number of results (1-50, default 10)")
    p.set_defaults(func=cmd_search)
    register_eval(sub, common)
    register_links(sub, common)


def cmd_search(args: argparse.Namespace) -> int:
    from markindex_core.cli import emit_json
    from markindex_core.library import Library

    lib = Library(args.root, args.db)
    result = lib.search(args.query, folder=args.folder, doc_path=args.doc, limit=args.limit)
    if args.json:
        emit_json(result.to_json())
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if result.notice:
        console.print(f"[yellow]{result.notice}[/]", highlight=False)
    # Two columns read well at 80 characters: the citation, the section path and the snippet stack.
    table = Table(show_lines=True, expand=True)
    table.add_column("score", justify="right", width=6)
    table.add_column("citation · section · snippet", ratio=1)
    for hit in result.hits:
        cell = Text(hit.citation, style="bold cyan")
        cell.append("\n" + " › ".join(hit.title_path), style="dim")
        snippet = Text("\n" + hit.snippet)
        snippet.highlight_words(
            [t for t in result.terms if len(t) > 1], style="bold yellow", case_sensitive=False
        )
        cell.append_text(snippet)
        table.add_row(f"{hit.score:.2f}", cell)
    console.print(table)
    console.print(f"[dim]{len(result.hits)} results, {result.mode}, {result.elapsed_ms:.1f} ms[/]")
    return 0 if result.hits else 1


def register_eval(sub: Any, common: Callable[..., None]) -> None:
    p = sub.add_parser(
        "eval",
        help="measure retrieval quality on questions with gold line ranges",
        description="Run every question of one or more JSONL files through search and report "
        "hit@1, hit@5, MRR, evidence lines and precision, per language and overall.",
    )
    common(p)
    p.add_argument(
        "--questions",
        action="append",
        required=True,
        metavar="FILE",
        help="JSONL question file (repeatable)",
    )
    p.add_argument(
        "--max-evidence-lines",
        type=int,
        default=None,
        metavar="N",
        help="count a hit only when its cited passage is at most N lines",
    )
    p.add_argument("--out", metavar="FILE", help="write the full report (every question) as JSON")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from markindex_core.cli import emit_json
    from markindex_core.evaluate import evaluate, load_questions
    from markindex_core.library import Library

    lib = Library(args.root, args.db)
    questions = load_questions(Path(q) for q in args.questions)
    report = evaluate(lib, questions, max_evidence_lines=args.max_evidence_lines)
    if args.out:
        Path(args.out).write_text(
            json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8"
        )
    if args.json:
        emit_json(report["metrics"])
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"retrieval quality (k={report['k']}, max evidence {args.max_evidence_lines or '∞'} lines)"
    )
    for col in (
        "set",
        "n",
        "hit@1",
        "hit@5",
        "MRR",
        "lines",
        "prec@1",
        "prec hit",
        "p50 ms",
    ):
        table.add_column(col, justify="right" if col != "set" else "left")
    for name, m in report["metrics"].items():
        table.add_row(
            name,
            str(m["questions"]),
            f"{m['hit@1']:.1%}",
            f"{m['hit@5']:.1%}",
            f"{m['mrr']:.3f}",
            f"{m['median_evidence_lines']:g}",
            f"{m['precision@1']:.2f}",
            f"{m['hit_precision']:.2f}",
            f"{m['p50_ms']:.1f}",
        )
    Console().print(table)
    Console(stderr=True).print(
        "[dim]lines: median lines cited by the top result; prec@1: share of the top result's lines "
        "inside gold; prec hit: the same for the first hitting result[/]"
    )
    return 0


def register_links(sub: Any, common: Callable[..., None]) -> None:
    p = sub.add_parser(
        "links",
        help="a document's outgoing internal links (or every broken link)",
        description="List the internal Markdown links of DOC with their line numbers, marking broken "
        "ones; without DOC, list every broken link in the library.",
    )
    common(p)
    p.add_argument("doc", metavar="DOC", nargs="?", help="document path relative to ROOT")
    p.set_defaults(func=cmd_links)
    p = sub.add_parser(
        "backlinks",
        help="documents that link to DOC",
        description="List every document (and line) that links to DOC.",
    )
    common(p)
    p.add_argument("doc", metavar="DOC", help="document path relative to ROOT")
    p.set_defaults(func=cmd_backlinks)


def cmd_links(args: argparse.Namespace) -> int:
    from markindex_core.cli import emit_json
    from markindex_core.library import Library
    from markindex_core.suggest import unknown_document

    lib = Library(args.root, args.db)
    if args.doc:
        doc = lib.document(args.doc)
        if doc is None:
            raise unknown_document(lib.store, args.doc)
        rows = lib.store.links_from(doc["id"])
        data: dict[str, Any] = {"path": doc["path"], "links": rows}
    else:
        rows = lib.store.broken_links()
        data = {"broken": rows}
    if args.json:
        emit_json(data)
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table()
    if args.doc:
        for col in ("line", "target", "anchor", "status"):
            table.add_column(col)
        for r in rows:
            table.add_row(
                str(r["line"]), r["target"], r["anchor"], "[red]broken[/]" if r["broken"] else "ok"
            )
    else:
        for col in ("source", "line", "missing target"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["source"], str(r["line"]), r["target"])
    Console().print(table)
    return 0


def cmd_backlinks(args: argparse.Namespace) -> int:
    from markindex_core.cli import emit_json
    from markindex_core.library import Library

    lib = Library(args.root, args.db)
    rows = lib.store.links_to(args.doc.strip("/"))
    if args.json:
        emit_json({"path": args.doc, "backlinks": rows})
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for col in ("source", "line", "anchor"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["source"], str(r["line"]), r["anchor"])
    Console().print(table)
    return 0

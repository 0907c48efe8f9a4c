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
    table = Table(show_lines=False, expand=True)
    table.add_column("score", justify="right", width=6)
    table.add_column("citation", overflow="fold", ratio=2)
    table.add_column("section", overflow="fold", ratio=2)
    table.add_column("snippet", ratio=4)
    for hit in result.hits:
        snippet = Text(hit.snippet)
        snippet.highlight_words(
            [t for t in result.terms if len(t) > 1], style="bold yellow", case_sensitive=False
        )
        table.add_row(
            f"{hit.score:.2f}", Text(hit.citation), Text(" › ".join(hit.title_path)), snippet
        )
    console.print(table)
    console.print(f"[dim]{len(result.hits)} results, {result.mode}, {result.elapsed_ms:.1f} ms[/]")
    return 0 if result.hits else 1

"""`markindex index` (build or update the index) and `markindex tree` (one document's outline)."""

from __future__ import annotations

import argparse
from typing import Any

from markindex_core.cli.common import (
    Subparsers,
    add_indexing_options,
    add_library_args,
    emit_json,
    open_library,
)
from markindex_core.config import CLI_PROGRESS_PATH_CHARS


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "index",
        help="build or update the index of a library (incremental)",
        description="Parse every Markdown file under ROOT into its section tree and "
        "update the index: only new or changed files are rebuilt.",
    )
    add_library_args(p)
    add_indexing_options(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser(
        "tree",
        help="print a document's section outline",
        description="Print the optimized section tree of one document: node ids, "
        "kinds, titles, line ranges and tokens.",
    )
    add_library_args(p)
    p.add_argument("doc", metavar="DOC", help="document path relative to ROOT")
    p.add_argument("--depth", type=int, default=None, help="levels to show (default: all)")
    p.set_defaults(func=cmd_tree)


def cmd_index(args: argparse.Namespace) -> int:

    lib = open_library(args)
    if args.json:
        report = lib.index(ignore=args.ignore, setext=args.setext)
        emit_json(report.to_json())
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from markindex_core.text.safe import printable

    err = Console(stderr=True)
    with Progress(
        TextColumn("indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, path: str) -> None:
            bar.update(
                task,
                completed=done,
                total=total,
                description=escape(printable(path[-CLI_PROGRESS_PATH_CHARS:])),
            )

        report = lib.index(ignore=args.ignore, setext=args.setext, progress=progress)
    out = Console()
    if report.full_rebuild:
        out.print(f"full rebuild: {printable(report.full_rebuild)}", markup=False)
    for path, warning in report.warnings:
        err.print(f"warning {printable(path)}: {printable(warning)}", markup=False, highlight=False)
    for path, reason in report.skipped:
        err.print(f"skipped {printable(path)}: {printable(reason)}", markup=False, highlight=False)
    for path, error in report.errors:
        err.print(f"error {printable(path)}: {printable(error)}", markup=False, highlight=False)
    out.print(
        f"added {len(report.added)}, updated {len(report.updated)}, removed {len(report.removed)}, "
        f"unchanged {report.unchanged}, skipped {len(report.skipped)}, warnings {len(report.warnings)} "
        f"in {report.seconds:.2f}s → {printable(str(lib.db_path))}",
        highlight=False,
        markup=False,
    )
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    from markindex_core.store.outline import nest
    from markindex_core.store.suggest import unknown_document

    lib = open_library(args)
    doc = lib.document(args.doc)
    if doc is None:
        raise unknown_document(lib.store, args.doc)
    outline = nest(lib.store.nodes(doc["id"]), depth=args.depth)
    if args.json:
        emit_json(
            {
                "path": doc["path"],
                "title": doc["title"],
                "tokens": doc["tokens"],
                "lines": doc["line_count"],
                "nodes": outline,
            }
        )
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.tree import Tree

    from markindex_core.text.safe import printable

    def safe(s: str) -> str:
        return escape(printable(s))

    tree = Tree(
        f"[bold]{safe(doc['path'])}[/] — {safe(doc['title'])} "
        f"[dim]({doc['line_count']} lines, {doc['tokens']} tokens)[/]"
    )

    def add(parent: Tree, entries: list[dict[str, Any]]) -> None:
        for e in entries:
            label = (
                f"[cyan]{e['node_id']}[/] [magenta]{e['kind']}[/] {safe(e['title'] or '(untitled)')} "
                f"[dim]L{e['start_line']}-{e['end_line']} · {e['tokens']} tok[/]"
            )
            if e.get("key_items"):
                label += f" [dim]+{len(e['key_items'])} merged[/]"
            if e.get("children_count"):
                label += f" [dim]… {e['children_count']} more[/]"
            add(parent.add(label), e.get("children", []))

    add(tree, outline)
    Console().print(tree)
    return 0

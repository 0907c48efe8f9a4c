"""The `markindex` command line: index, tree, search, links, status, eval, mcp, daemon, tui."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from markindex_core.errors import MarkindexError

EPILOG = "Every command takes --db FILE (default ROOT/.markindex/index.db) and --json."


def _common(p: argparse.ArgumentParser, root: bool = True) -> None:
    if root:
        p.add_argument("root", metavar="ROOT", help="the library folder")
    p.add_argument("--db", metavar="FILE", help="index file (default: ROOT/.markindex/index.db)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _indexing_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATTERN",
        help="gitignore-style pattern relative to ROOT to leave out (repeatable)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--setext",
        dest="setext",
        action="store_true",
        default=None,
        help="treat `===`/`---` underlines as headings (default; remembered by the index)",
    )
    g.add_argument(
        "--no-setext",
        dest="setext",
        action="store_false",
        help="treat `---` as a thematic break and `===` as text (remembered by the index)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="markindex",
        description="Vectorless, structure-first retrieval over a folder of long Markdown documents.",
        epilog=EPILOG,
    )
    from markindex_core import __version__

    parser.add_argument("--version", action="version", version=f"markindex {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "index",
        help="build or update the index of a library (incremental)",
        description="Parse every Markdown file under ROOT into its section tree and "
        "update the index: only new or changed files are rebuilt.",
    )
    _common(p)
    _indexing_options(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser(
        "tree",
        help="print a document's section outline",
        description="Print the optimized section tree of one document: node ids, "
        "kinds, titles, line ranges and tokens.",
    )
    _common(p)
    p.add_argument("doc", metavar="DOC", help="document path relative to ROOT")
    p.add_argument("--depth", type=int, default=None, help="levels to show (default: all)")
    p.set_defaults(func=cmd_tree)

    from markindex_core import cli_more

    cli_more.register(sub, _common, _indexing_options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except MarkindexError as exc:
        _error(exc.message, exc.hint, getattr(args, "json", False), exc.code)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def _error(message: str, hint: str, as_json: bool, code: str = "ERROR") -> None:
    if as_json:
        print(
            json.dumps({"error": message, "hint": hint, "code": code}, ensure_ascii=False),
            file=sys.stderr,
        )
    else:
        print(f"error: {message}" + (f" (hint: {hint})" if hint else ""), file=sys.stderr)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def cmd_index(args: argparse.Namespace) -> int:
    from markindex_core.library import Library

    lib = Library(args.root, args.db)
    if args.json:
        report = lib.index(ignore=args.ignore, setext=args.setext)
        emit_json(report.to_json())
        return 0
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
            bar.update(task, completed=done, total=total, description=path[-60:])

        report = lib.index(ignore=args.ignore, setext=args.setext, progress=progress)
    out = Console()
    if report.full_rebuild:
        out.print(f"full rebuild: {report.full_rebuild}")
    for path, warning in report.warnings:
        err.print(f"warning {path}: {warning}", markup=False, highlight=False)
    for path, reason in report.skipped:
        err.print(f"skipped {path}: {reason}", markup=False, highlight=False)
    for path, error in report.errors:
        err.print(f"error {path}: {error}", markup=False, highlight=False)
    out.print(
        f"added {len(report.added)}, updated {len(report.updated)}, removed {len(report.removed)}, "
        f"unchanged {report.unchanged}, skipped {len(report.skipped)}, warnings {len(report.warnings)} "
        f"in {report.seconds:.2f}s → {lib.db_path}",
        highlight=False,
    )
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    from markindex_core.library import Library
    from markindex_core.outline import nest
    from markindex_core.suggest import unknown_document

    lib = Library(args.root, args.db)
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

    tree = Tree(
        f"[bold]{escape(doc['path'])}[/] — {escape(doc['title'])} "
        f"[dim]({doc['line_count']} lines, {doc['tokens']} tokens)[/]"
    )

    def add(parent: Tree, entries: list[dict[str, Any]]) -> None:
        for e in entries:
            label = (
                f"[cyan]{e['node_id']}[/] [magenta]{e['kind']}[/] {escape(e['title'] or '(untitled)')} "
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


if __name__ == "__main__":
    sys.exit(main())

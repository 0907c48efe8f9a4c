"""`markindex index` (build or update the index) and `markindex tree` (one document's outline)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from markindex_core.cli.common import (
    Subparsers,
    add_indexing_options,
    add_library_args,
    add_model_server_args,
    console,
    emit_json,
    help_epilog,
    ignore_patterns,
    int_between,
    open_library,
    require_document,
)
from markindex_core.config import CLI_PROGRESS_PATH_CHARS, SUMMARY_CONCURRENCY

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from markindex_core.index.indexer import IndexReport
    from markindex_core.llm.summaries import Summarizer


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "index",
        help="build or update the index of a library (incremental)",
        description="Parse every Markdown file under ROOT into its section tree and "
        "update the index: only new or changed files are rebuilt.",
        epilog=help_epilog(
            [
                "markindex index ~/docs                      # build, then update by content hash",
                "markindex index ~/docs --db /tmp/docs.db    # a read-only library: index elsewhere",
                "markindex index ~/docs --rebuild            # replace a damaged index (see check)",
                "markindex index ~/docs --json | jq .added",
            ],
            "0 when the index is up to date; 1 when the run failed, when a file or folder could "
            "not be read (what the index held there is kept), or when summaries were asked for "
            "and none could be written. Skipped files (binary, too large) are reported, not "
            "failures.",
        ),
    )
    add_library_args(p)
    add_indexing_options(p)
    add_summary_options(p)
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="build a new index from the folder alone and swap it in whole (for a damaged "
        "index, see `markindex check`); readers keep the old one until then, and cached "
        "summaries are kept when the old file still gives them up",
    )
    p.add_argument(
        "--rehash",
        action="store_true",
        help="read and hash every file, not only those whose size or mtime changed: finds "
        "edits that kept both (`cp -p`, `rsync -t`, `touch -r`); the daemon does this for every "
        "file an event names",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="with --summary-model: index, then print the requests, estimated tokens and cost "
        "the summaries still need, without making any request",
    )
    p.set_defaults(func=cmd_index)

    p = sub.add_parser(
        "tree",
        help="print a document's section outline",
        description="Print the optimized section tree of one document: node ids, "
        "kinds, titles, line ranges and tokens, and summaries where a model wrote them.",
        epilog=help_epilog(
            [
                "markindex tree ~/docs guides/install.md",
                "markindex tree ~/docs guides/install.md --depth 1 --json",
            ],
            "0 when the tree was printed; 1 when there is no such document (similar paths are "
            "suggested) or no usable index.",
        ),
    )
    add_library_args(p)
    p.add_argument("doc", metavar="DOC", help="document path relative to ROOT")
    p.add_argument(
        "--depth", type=int_between(1), default=None, help="levels to show (default: all)"
    )
    p.set_defaults(func=cmd_tree)


def add_summary_options(p: argparse.ArgumentParser) -> None:
    """--summary-model and its limits (the `llm` extra), for commands that write the index."""
    g = p.add_argument_group("summaries (needs the llm extra: pip install 'markindex[llm]')")
    g.add_argument(
        "--summary-model",
        metavar="P:M",
        help="write section summaries and document descriptions with this model, e.g. "
        "openai:gpt-4o-mini, anthropic:claude-3-5-haiku-latest, openai-chat:NAME --base-url URL "
        "(cached in the index: an unchanged section is never asked for twice)",
    )
    add_model_server_args(g, limits_prefix="summary-")
    g.add_argument(
        "--summary-concurrency",
        type=int,
        default=SUMMARY_CONCURRENCY,
        metavar="N",
        help=f"requests in flight at once (default {SUMMARY_CONCURRENCY})",
    )


def summarizer_from_args(
    args: argparse.Namespace, *, estimate: bool = False, slice_seconds: float | None = None
) -> Summarizer | None:
    """The summary hook the options ask for (None without --summary-model); fails before any
    indexing when the extra or a key is missing."""
    from markindex_core.errors import UsageError

    if args.summary_model is None:
        given = [
            name
            for name, value in (
                ("--estimate", estimate),
                ("--base-url", args.base_url),
                ("--summary-rpm", args.summary_rpm),
                ("--summary-tpm", args.summary_tpm),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"{given[0]} needs --summary-model", "e.g. --summary-model openai:gpt-4o-mini"
            )
        return None
    from markindex_core.llm.summaries import Summarizer, SummarySettings

    settings = SummarySettings(
        model=args.summary_model,
        base_url=args.base_url,
        rpm=args.summary_rpm,
        tpm=args.summary_tpm,
        concurrency=args.summary_concurrency,
    )
    return Summarizer(settings, estimate_only=estimate, slice_seconds=slice_seconds)


def _warn_if_empty(report: IndexReport, root: Path) -> None:
    """An index of nothing is most often the wrong folder: say so, rather than 'added 0'."""
    if report.added or report.updated or report.unchanged or report.skipped or report.errors:
        return
    report.warnings.append(
        (
            "",
            f"no Markdown file (.md, .markdown) under {root}: is it the library folder? "
            "(dot-folders and ignored files are left out)",
        )
    )


def cmd_index(args: argparse.Namespace) -> int:
    lib = open_library(args)
    ignore = ignore_patterns(args, lib.root)
    hook = summarizer_from_args(args, estimate=args.estimate)
    if args.json:
        report = lib.index(
            ignore=ignore,
            setext=args.setext,
            after_write=hook,
            rebuild=args.rebuild,
            rehash=args.rehash,
        )
        _warn_if_empty(report, lib.root)
        if hook is not None and hook.estimate_only:
            assert hook.last is not None and hook.last.estimate is not None
            emit_json(hook.last.estimate.to_json())
        else:
            emit_json(report.to_json())
        return _status(report, hook)
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from markindex_core.text.safe import printable

    err = console(stderr=True)
    with Progress(
        TextColumn("indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.description}"),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # drawn for no one, it leaves an empty line behind
    ) as bar:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, path: str) -> None:
            bar.update(
                task,
                completed=done,
                total=total,
                description=escape(printable(path[-CLI_PROGRESS_PATH_CHARS:])),
            )

        report = lib.index(
            ignore=ignore,
            setext=args.setext,
            progress=progress,
            after_write=hook,
            rebuild=args.rebuild,
            rehash=args.rehash,
        )
    _warn_if_empty(report, lib.root)
    out = console()
    if report.full_rebuild:
        out.print(f"full rebuild: {printable(report.full_rebuild)}", markup=False)
    for path, warning in report.warnings:
        where = f" {printable(path)}" if path else ""
        err.print(f"warning{where}: {printable(warning)}", markup=False, highlight=False)
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
    if hook is not None:
        _print_summaries(out, err, hook)
    return _status(report, hook)


def _status(report: IndexReport, hook: Summarizer | None) -> int:
    """1 when something that should be in the index is not: unreadable paths, or not one of
    the summaries asked for (a script must not take either for success)."""
    run = hook.last if hook is not None else None
    no_summary = run is not None and run.estimate is None and run.errors and not run.written
    return 1 if report.errors or no_summary else 0


def _print_summaries(out: Console, err: Console, hook: Summarizer) -> None:
    from markindex_core.text.safe import printable

    run = hook.last
    if run is None:
        return
    model = printable(run.model)
    if run.estimate is not None:
        e = run.estimate
        cost = f"${e.cost_usd:,.4f}" if e.cost_usd is not None else "cost unknown (no price known)"
        out.print(
            f"estimate for {model}: {e.calls:,} requests, {e.input_tokens:,} input tokens, "
            f"{e.output_tokens:,} output tokens (estimated), {cost}; "
            f"{run.from_cache:,} written from the cache, no request made",
            markup=False,
            highlight=False,
        )
        return
    for message in run.error_messages:
        err.print(f"summary error: {printable(message)}", markup=False, highlight=False)
    out.print(
        f"summaries by {model}: {run.planned:,} needed, {run.from_cache:,} from the cache, "
        f"{run.requests:,} requests, {run.written:,} written, {run.errors:,} errors "
        f"in {run.seconds:.2f}s",
        markup=False,
        highlight=False,
    )


def cmd_tree(args: argparse.Namespace) -> int:
    from markindex_core.store.outline import nest

    lib = open_library(args, own_index=True)
    doc = require_document(lib, args.doc)
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
    from rich.text import Text
    from rich.tree import Tree

    from markindex_core.text.safe import printable

    # Text pieces, never markup: a title is shown as it is (`[b]`, a trailing `\`), escaped only
    # for the terminal's sake.
    tree = Tree(
        Text.assemble(
            (printable(doc["path"]), "bold"),
            f" — {printable(doc['title'])} ",
            (f"({doc['line_count']} lines, {doc['tokens']} tokens)", "dim"),
        )
    )

    def add(parent: Tree, entries: list[dict[str, Any]]) -> None:
        for e in entries:
            label = Text.assemble(
                (e["node_id"], "cyan"),
                " ",
                (e["kind"], "magenta"),
                f" {printable(e['title'] or '(untitled)')} ",
                (f"L{e['start_line']}-{e['end_line']} · {e['tokens']} tok", "dim"),
            )
            if e.get("key_items"):
                label.append(f" +{len(e['key_items'])} merged", "dim")
            if e.get("children_count"):
                label.append(f" … {e['children_count']} more", "dim")
            if e.get("summary"):  # model-written: untrusted text like the document's own
                label.append(f"\n{printable(e['summary'])}", "dim italic")
            add(parent.add(label), e.get("children", []))

    add(tree, outline)
    # Wrapped at the width even into a pipe: a tree is drawn line by line, and without
    # wrapping rich cuts each line there, line ranges and all.
    console().print(tree, soft_wrap=False)
    return 0

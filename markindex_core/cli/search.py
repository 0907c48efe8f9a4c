"""`markindex search`: keyword search with passage citations."""

from __future__ import annotations

import argparse

from markindex_core.cli.common import (
    Subparsers,
    add_library_args,
    console,
    emit_json,
    help_epilog,
    int_between,
    library_relative,
    on_disk_relative,
    open_library,
    require_document,
)
from markindex_core.config import SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT

# Section and snippet sit this far in, under the score column of the citation line.
_INDENT = 8


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "search",
        help="keyword search (Chinese, English, mixed) with passage citations",
        description="BM25 search over section titles, merged headings and text. Prints "
        "the best passage of each matching section as a citation [doc_path, Lx-y].",
        epilog=help_epilog(
            [
                'markindex search ~/docs "how long until a data breach must be reported"',
                "markindex search ~/docs 数据泄露 --folder laws --limit 5",
                "markindex search ~/docs max_connections --doc specs/config.md",
                "markindex search ~/docs proxy --json | jq -r '.hits[].citation'",
            ],
            "0 when something matched; 1 when nothing did (as grep; with --json too, whose "
            "output then has no hits) or on an error.",
        ),
    )
    add_library_args(p)
    p.add_argument("query", metavar="QUERY", help="words, a question, or an identifier")
    p.add_argument("--folder", help="only documents under this folder (relative to ROOT)")
    p.add_argument("--doc", help="only this document (path relative to ROOT)")
    p.add_argument(
        "--limit",
        type=int_between(1, SEARCH_MAX_LIMIT),
        default=SEARCH_DEFAULT_LIMIT,
        help=f"number of results (1-{SEARCH_MAX_LIMIT}, default {SEARCH_DEFAULT_LIMIT})",
    )
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    from markindex_core.errors import LibraryNotFound

    lib = open_library(args, own_index=True)
    doc, folder = None, library_relative(args.folder)
    # An unknown scope is said as such, with suggestions, not as "nothing matched".
    if args.doc is not None:
        # as stored (its Unicode normalization may differ)
        doc = str(require_document(lib, args.doc)["path"])
    if folder:
        stored = lib.store.lookup_folder(folder)  # its Unicode normalization may differ
        if stored is None and (on_disk := on_disk_relative(lib, args.folder)):
            stored = lib.store.lookup_folder(on_disk)  # as the shell completed it
        if stored is None:
            raise LibraryNotFound(
                f"no folder {folder!r} with documents in this library",
                "check the folder's path relative to ROOT, or search without --folder",
            )
        folder = stored
    result = lib.search(args.query, folder=folder, doc_path=doc, limit=args.limit)
    from markindex_core.serve.status import daemon_states, daemon_warning

    # A live daemon that is not keeping the index current: said with the results.
    warning = daemon_warning(daemon_states(lib.db_path)[0]) or lib.unfinished_run_warning()
    # Cited files edited since they were indexed: their line numbers may have moved.
    drift = lib.drift_warning([h.doc_path for h in result.hits])
    warning = f"{warning}; {drift}" if warning and drift else warning or drift
    if args.json:
        emit_json({**result.to_json(), **({"warning": warning} if warning else {})})
        return 0 if result.hits else 1
    import re

    from rich.text import Text

    from markindex_core.text.safe import printable

    out = console()
    if warning:
        console(stderr=True).print(Text(f"warning: {printable(warning)}", style="yellow"))
    if result.notice:
        out.print(Text(printable(result.notice), style="yellow"))
    # Whole words: a stemmed term ("interpol") marks the word it matched ("interpolated"). A
    # word is letters, digits and '_' outside CJK, whose text has no spaces: CJK terms match as is.
    word = r"[^\W\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]"
    parts = [re.escape(t) for t in sorted(result.terms, key=len, reverse=True) if len(t) > 1]
    words = re.compile(f"{word}*(?:{'|'.join(parts)}){word}*", re.IGNORECASE) if parts else None
    for i, hit in enumerate(result.hits):
        # The citation is what gets copied or grepped: one line, never folded by us (a
        # terminal wraps it softly, and copies it whole); section and snippet wrap below it.
        head = Text(f"{hit.score:6.2f}  ", style="dim")
        head.append(printable(hit.citation), style="bold cyan")
        out.print(head, soft_wrap=True)
        body = Text(" › ".join(map(printable, hit.title_path)), style="dim")
        snippet = Text("\n" + printable(hit.snippet, multiline=True))
        if words is not None:
            snippet.highlight_regex(words, style="bold yellow")
        body.append_text(snippet)
        # Wrapped under the citation, as a table was; no line ends in padding (pipes, diffs).
        for line in body.wrap(out, max(20, out.width - _INDENT)):
            line.rstrip()
            out.print(Text(" " * _INDENT).append_text(line), soft_wrap=True)
        if i < len(result.hits) - 1:
            out.print()
    n = len(result.hits)
    out.print(
        f"[dim]{n} result{'' if n == 1 else 's'}, {result.mode}, {result.elapsed_ms:.1f} ms[/]"
    )
    return 0 if result.hits else 1

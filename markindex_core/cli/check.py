"""`markindex check`: read every page of the index and say whether it is whole."""

from __future__ import annotations

import argparse

from markindex_core.cli.common import (
    Subparsers,
    add_library_args,
    console,
    emit_json,
    help_epilog,
    open_library,
)
from markindex_core.errors import IndexMissing


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "check",
        help="read the whole index and report damage (a bad disk, a cut copy)",
        description="Read every page of the index: SQLite's structure check over every table, "
        "then every posting list of the search index. A normal run reads only what it needs, "
        "so an index damaged elsewhere still opens and says 'unchanged'. Takes about two "
        "seconds per 100 MB of index; it only reads, and runs beside a daemon.",
        epilog=help_epilog(
            [
                "markindex check ~/docs || markindex index ~/docs --rebuild",
                "markindex check ~/docs --db /mnt/backup/docs.db --json",
            ],
            "0 when the index is whole; 1 when it is damaged (then run `markindex index ROOT "
            "--rebuild`) or cannot be opened.",
        ),
    )
    add_library_args(p)
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from markindex_core.store.integrity import check_index
    from markindex_core.text.safe import printable

    lib = open_library(args)
    if not lib.has_index():
        raise IndexMissing(f"no index at {lib.db_path}", lib.build_hint())
    if args.json:
        report = check_index(lib.db_path)
        emit_json(report.to_json())
        return 0 if report.ok else 1
    err = console(stderr=True, highlight=False)
    with err.status("reading every page of the index…"):  # ~2 s per 100 MB: say it works
        report = check_index(lib.db_path)
    out = console(highlight=False)
    where = printable(str(lib.db_path))
    if report.ok:
        out.print(f"{where}: whole (checked in {report.seconds:.1f} s)", markup=False)
        return 0
    err.print(f"{where}: damaged", markup=False)
    for problem in report.problems:  # SQLite's answer may hold several lines
        for line in problem.splitlines():
            err.print(f"  {printable(line)}", markup=False)
    err.print(
        f"rebuild it from the library: markindex index {printable(str(lib.root))} "
        f"--db {where} --rebuild",
        markup=False,
        soft_wrap=True,  # one line, to copy whole
    )
    return 1

"""`markindex tui`: registers the sub-command; the Textual app is imported only when it runs."""

from __future__ import annotations

import argparse
import importlib

from markindex_core.cli.common import (
    LOG_JSON_HELP,
    Subparsers,
    add_library_args,
    help_epilog,
    open_library,
)


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "tui",
        help="browse, search and cite a library in the terminal",
        description="The terminal app: library tree (folders, documents, sections), original "
        "lines with line numbers, live search, document metadata and index status. Offers to "
        "build the index when there is none; follows changes a daemon commits.",
        epilog=help_epilog(
            ["markindex tui ~/docs", "markindex tui ~/docs --watch"],
            "0 when the app was quit; 1 when it cannot run (no terminal, no such folder, the "
            "index of another library), or its --watch watcher did not stop cleanly.",
        ),
    )
    add_library_args(p, json_help=LOG_JSON_HELP)
    p.add_argument(
        "--watch",
        action="store_true",
        help="keep the index live from inside the app (when no daemon is running)",
    )
    p.set_defaults(func=cmd_tui)


def cmd_tui(args: argparse.Namespace) -> int:
    import sys

    from markindex_core.errors import InvalidArgument

    if not (sys.stdin.isatty() and sys.stdout is not None and sys.stdout.isatty()):
        # Without a terminal the app would draw escape codes into a file or pipe and wait for
        # keys that never come, for ever (systemd, cron, `markindex tui ROOT > out`).
        raise InvalidArgument(
            "the terminal app needs a terminal: stdin or stdout is not one",
            "run it in a terminal; in scripts use `markindex search`, `tree` or `status`",
        )
    # Another library's index would be shown (and `i` would write) under ROOT's name.
    open_library(args, own_index=True)
    # Core stays headless: the TUI package is looked up by name, only for this command.
    app_module = importlib.import_module("markindex_tui.app")
    code: int = app_module.run(args)
    return code

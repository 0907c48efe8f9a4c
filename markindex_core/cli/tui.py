"""`markindex tui`: registers the sub-command; the Textual app is imported only when it runs."""

from __future__ import annotations

import argparse
import importlib

from markindex_core.cli.common import (
    Subparsers,
    add_library_args,
)


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "tui",
        help="browse, search and cite a library in the terminal",
        description="The terminal app: library tree (folders, documents, sections), original "
        "lines with line numbers, live search, document metadata and index status. Offers to "
        "build the index when there is none; follows changes a daemon commits.",
    )
    add_library_args(p)
    p.add_argument(
        "--watch",
        action="store_true",
        help="keep the index live from inside the app (when no daemon is running)",
    )
    p.set_defaults(func=cmd_tui)


def cmd_tui(args: argparse.Namespace) -> int:
    # Core stays headless: the TUI package is looked up by name, only for this command.
    app_module = importlib.import_module("markindex_tui.app")
    code: int = app_module.run(args)
    return code

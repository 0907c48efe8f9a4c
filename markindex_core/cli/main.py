"""The `markindex` command line: one parser, the explicit list of command modules, one error exit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from markindex_core.cli import daemon, evaluate, index, links, mcp, retrieve, search, tui
from markindex_core.errors import MarkindexError

EPILOG = "Every command takes --db FILE (default ROOT/.markindex/index.db) and --json."

# Each module registers its sub-commands; heavy imports (mcp, textual, watchdog) wait until one runs.
COMMAND_MODULES = (index, search, links, retrieve, evaluate, mcp, daemon, tui)


def build_parser() -> argparse.ArgumentParser:
    from markindex_core import __version__

    parser = argparse.ArgumentParser(
        prog="markindex",
        description="Vectorless, structure-first retrieval over a folder of long Markdown documents.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"markindex {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    from markindex_core.logs import setup_logging

    setup_logging(json=getattr(args, "json", False), verbose=getattr(args, "verbose", False))
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
        from markindex_core.text.safe import json_controls_escaped

        line = json.dumps({"error": message, "hint": hint, "code": code}, ensure_ascii=False)
        print(json_controls_escaped(line), file=sys.stderr)
    else:
        from markindex_core.text.safe import printable

        line = f"error: {message}" + (f" (hint: {hint})" if hint else "")
        print(printable(line), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

"""The `markindex` command line: one parser, the explicit list of command modules, one error exit."""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any, NoReturn

from markindex_core.errors import MarkindexError, UsageError

EPILOG = """Every command takes --db FILE (default ROOT/.markindex/index.db) and --json;
`markindex COMMAND --help` explains one command, with examples.

examples:
  markindex index ~/docs                          # build the index (incremental afterwards)
  markindex search ~/docs "how do I upgrade"      # passages cited as [doc_path, Lx-y]
  markindex tui ~/docs                            # browse, search and cite in the terminal
  markindex mcp /abs/path/to/docs                 # serve it to an agent over MCP (stdio)

Exit status: 0 on success; 1 on a failure (one line on stderr with a hint), also when search
or retrieve found nothing, and when links found a broken link or missing anchor; 2 for a usage
error; 130 when interrupted (Ctrl-C), except the live index (daemon, mcp --watch), which stops
cleanly with 0. status, check and links say more in their own help."""


def command_modules() -> tuple[ModuleType, ...]:
    """Each module registers its sub-commands; heavy imports (mcp, textual, watchdog) wait until
    one runs. Loaded inside `main`, so a Ctrl-C while they load is caught like any other."""
    from markindex_core.cli import (
        check,
        daemon,
        evaluate,
        index,
        links,
        mcp,
        retrieve,
        search,
        tui,
    )

    return (index, search, links, retrieve, evaluate, mcp, daemon, check, tui)


def build_parser(json_errors: bool = False) -> argparse.ArgumentParser:
    """The whole command line; with `json_errors`, a usage error is a JSON line on stderr too,
    like every other error of a command run with --json."""
    from markindex_core import __version__
    from markindex_core.cli.common import HelpFormatter

    class Parser(argparse.ArgumentParser):  # sub-command parsers are made of the same class
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("formatter_class", HelpFormatter)  # examples kept one per line
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> NoReturn:
            if not json_errors:
                super().error(message)
            _error(message, f"see `{self.prog} --help`", True, "USAGE")
            sys.exit(2)

    parser = Parser(
        prog="markindex",
        description="Vectorless, structure-first retrieval over a folder of long Markdown documents.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"markindex {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        module.register(sub)
    return parser


def _reserve_standard_fds() -> None:
    """A closed fd 0, 1 or 2 (`<&-`, `>&-`, `2>&-`) is taken by /dev/null at once, so no index
    file or socket opened later gets its number (the MCP stdin guard would replace such a file;
    a stray write to stdout would land in it). sys.stdin/stdout stay None, so a closed stdout is
    still an error and a closed stdin an empty one; what was meant for a closed stderr is
    dropped, never printed on stdout (where print(file=None) would send it)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (kept open)


def main(argv: Sequence[str] | None = None) -> int:
    _reserve_standard_fds()
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        return _run(words)
    except KeyboardInterrupt:  # while the command ran, or while its modules loaded
        if "--json" in words:  # with --json, every error is a JSON line
            hint = "run it again; an index run completes what an interrupted one left"
            _error("interrupted", hint, True, "INTERRUPTED")
        else:
            print("interrupted", file=sys.stderr)
        return 130


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C back while the command modules load, and deliver it right after, where `main`
    catches it. Landing during an import, it can be raised in the import lock's weakref callback,
    where CPython only prints it ('Exception ignored in … KeyboardInterrupt', a traceback) and
    goes on: the command ran as if no Ctrl-C had come."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """`parser.parse_args(words)`, but `links ROOT --db FILE DOC` finds its DOC: argparse gives
    an optional positional nothing where it reads ROOT, then has no place for a DOC after the
    options (`unrecognized arguments: DOC`), where `tree ROOT --db FILE DOC` works."""
    args, extra = parser.parse_known_args(words)
    late_doc = len(extra) == 1 and not extra[0].startswith("-")
    if late_doc and args.command == "links" and args.doc is None:
        args.doc = extra[0]
        return args
    return parser.parse_args(words)  # the usage error for what is left over, if anything


def _run(words: list[str]) -> int:
    """Parse `words` and run the command, every error but Ctrl-C as one line on stderr."""
    with _interrupts_held():
        import apsw

        from markindex_core.cli.common import tolerant_stdout
        from markindex_core.logs import setup_logging

        tolerant_stdout()
        parser = build_parser(json_errors="--json" in words)
    if not words:  # `markindex` alone: what it does and how to start, not a usage error
        parser.print_help(sys.stderr)
        return 2
    args = _parse(parser, words)
    func: Callable[[argparse.Namespace], int] = args.func
    setup_logging(json=getattr(args, "json", False), verbose=getattr(args, "verbose", False))
    try:
        return func(args)
    except UsageError as exc:
        _error(exc.message, exc.hint, getattr(args, "json", False), exc.code)
        return 2
    except MarkindexError as exc:
        _error(exc.message, exc.hint, getattr(args, "json", False), exc.code)
        return 1
    except BrokenPipeError:  # a plain print to a reader that stopped early
        from markindex_core.cli.common import reader_gone

        reader_gone()
        return 0
    except OSError as exc:  # a path the system refuses: permissions, a name too long, …
        _error(*_os_error(exc), getattr(args, "json", False), "OS_ERROR")
        return 1
    except ImportError as exc:  # a module loaded late, refused (no file descriptor left, …)
        _error(*_import_error(exc), getattr(args, "json", False))
        return 1
    except UnicodeEncodeError:  # a path argument holding bytes that are not UTF-8
        message = "a path or argument holds bytes that are not valid UTF-8 (a legacy file name?)"
        _error(message, "rename it, or pass another path", getattr(args, "json", False))
        return 1
    except (apsw.Error, UnicodeDecodeError) as exc:  # found while reading (see DAMAGE_ERRORS)
        if isinstance(exc, apsw.CantOpenError) and (fds := _out_of_descriptors()):
            _error(fds.message, fds.hint, getattr(args, "json", False), fds.code)
            return 1
        from markindex_core.store.files import DAMAGE_ERRORS, damage_detail

        damaged = isinstance(exc, DAMAGE_ERRORS)
        message = f"the index is {'damaged' if damaged else 'unusable'}: {damage_detail(exc)}"
        hint = (
            "rebuild it from the library: `markindex index ROOT --rebuild` (with the same --db);"
            " if a daemon keeps it live, restart the daemon instead: it checks the index and"
            " rebuilds it"
        )
        _error(message, hint, getattr(args, "json", False), "INDEX_UNUSABLE")
        return 1


def _os_error(exc: OSError) -> tuple[str, str]:
    """An OSError the command met, as a message and what to do next."""
    where = f" {exc.filename}" if exc.filename else ""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"permission denied:{where}",
            "check the permissions of that path and its folders, or pass --db FILE elsewhere",
        )
    if exc.errno in (errno.EMFILE, errno.ENFILE) and (fds := _out_of_descriptors(exc.errno)):
        return fds.message, fds.hint
    if exc.errno == errno.ENAMETOOLONG:
        return f"a name is too long:{where}", "use shorter file and folder names (255 bytes each)"
    return f"cannot use{where}: {exc.strerror or exc}", "check that path and its folders"


def _out_of_descriptors(errno_: int = 0) -> MarkindexError | None:
    """`store.files.out_of_descriptors`, imported when needed: nothing but `errors` is loaded
    before `main` can catch a Ctrl-C (see `command_modules`)."""
    from markindex_core.store.files import out_of_descriptors

    return out_of_descriptors(errno_)


def _import_error(exc: ImportError) -> tuple[str, str]:
    """A part of markindex or of a dependency that could not be loaded when first needed."""
    if "Too many open files" in str(exc) and (fds := _out_of_descriptors(errno.EMFILE)):
        return fds.message, fds.hint
    return (
        f"a part of markindex could not be loaded: {exc}",
        "reinstall it (`pip install --force-reinstall markindex`) in this environment",
    )


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

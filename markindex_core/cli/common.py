"""What every command shares: the ROOT/--db/--json arguments, indexing options, JSON output and
opening the library. Heavy modules load inside the commands, so `--help` stays fast."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from markindex_core.library import Library

# The `sub` object argparse returns from add_subparsers.
Subparsers = Any

# What --json does for the commands that print no result (servers, the terminal app).
LOG_JSON_HELP = "write logs to stderr as JSON lines, one object per record"
# What Ctrl-C gives, for every command but the live index, which stops cleanly on it.
INTERRUPTED_STATUS = "130 when interrupted (Ctrl-C)"


class HelpFormatter(argparse.HelpFormatter):
    """Paragraphs are filled to the terminal's width; a paragraph with indented lines (the
    examples) keeps its lines as written, so each example stays one line to copy."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for para in text.split("\n\n"):
            if any(line.startswith("  ") for line in para.splitlines()):
                paragraphs.append("\n".join(indent + line for line in para.splitlines()))
            else:
                paragraphs.append(super()._fill_text(para, width, indent))
        return "\n\n".join(paragraphs)


def help_epilog(
    examples: list[str], exit_status: str, *, interrupted: str | None = INTERRUPTED_STATUS
) -> str:
    """The end of a command's --help: examples, one per line, and what its exit status means
    (usage errors are the same for every command; `interrupted` says what Ctrl-C gives, None
    when `exit_status` says it)."""
    lines = "\n".join(f"  {e}" for e in examples)
    tail = "2 for a usage error (a wrong or missing argument)"
    if interrupted:
        tail += f"; {interrupted}"
    return (
        f"examples:\n{lines}\n\nExit status: {exit_status} {tail}. Errors are one line on "
        "stderr (a JSON object with --json)."
    )


def int_between(low: int, high: int | None = None, what: str = "whole number") -> Any:
    """An argparse `type` for a whole number from `low` to `high` (no bound when None) that
    says what is wrong in one line."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {what}") from None
        if n < low or (high is not None and n > high):
            bounds = f"{low}-{high}" if high is not None else f"{low} or more"
            raise argparse.ArgumentTypeError(f"{n} is out of range ({bounds})")
        return n

    return parse


def _file_name(text: str) -> str:
    """A non-empty file name: `--db ""` (an unset shell variable) must not mean the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty file name (an unset shell variable?)")
    return text


def add_library_args(
    p: argparse.ArgumentParser, root: bool = True, json_help: str = "print machine-readable JSON"
) -> None:
    """ROOT (unless the command has none), --db and --json (`json_help`: what it does there)."""
    if root:
        p.add_argument("root", metavar="ROOT", help="the library folder")
    p.add_argument(
        "--db",
        metavar="FILE",
        type=_file_name,
        help="index file (default: ROOT/.markindex/index.db)",
    )
    p.add_argument("--json", action="store_true", help=json_help)


def add_indexing_options(p: argparse.ArgumentParser) -> None:
    """--ignore/--clear-ignore and --setext/--no-setext, for every command that writes the
    index (`ignore_patterns` reads the first pair)."""
    ignoring = p.add_mutually_exclusive_group()
    ignoring.add_argument(
        "--ignore",
        action="append",
        default=None,
        metavar="PATTERN",
        help="gitignore-style pattern relative to ROOT to leave out (repeatable; remembered by "
        "the index: the patterns given replace those it remembers)",
    )
    ignoring.add_argument(
        "--clear-ignore",
        action="store_true",
        help="forget the --ignore patterns the index remembers (ignore files still apply)",
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


def ignore_patterns(args: argparse.Namespace, root: Path) -> list[str] | None:
    """The --ignore patterns a run applies: those given, none after --clear-ignore, or None for
    those the index remembers. An absolute path of this machine inside `root` (as a shell
    completes it) becomes the anchored pattern it names, here, once: the index remembers that,
    which still means the same files when the library has moved."""
    from markindex_core.index.scan import normalize_ignore_pattern

    if args.ignore:
        return [normalize_ignore_pattern(p, root) for p in args.ignore]
    return [] if args.clear_ignore else None


def add_model_server_args(p: Any, *, limits_prefix: str = "") -> None:
    """--base-url and the request limits (`--{limits_prefix}rpm`, `--{limits_prefix}tpm`): one
    definition for every command that asks a model (`p`: a parser or an argument group)."""
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="the model server's base URL, overriding OPENAI_BASE_URL, OLLAMA_BASE_URL, … "
        "(e.g. a local vLLM, llama.cpp, Ollama or LiteLLM server)",
    )
    p.add_argument(
        f"--{limits_prefix}rpm",
        type=int,
        metavar="N",
        help="at most N model requests in any 60 s window",
    )
    p.add_argument(
        f"--{limits_prefix}tpm",
        type=int,
        metavar="N",
        help="at most N estimated input tokens in any 60 s window (a CJK character is 1 token, "
        "other characters 1 per 4)",
    )


def open_library(args: argparse.Namespace, *, own_index: bool = False) -> Library:
    """The library named by ROOT and --db. With `own_index` (commands that answer from the
    index), an index that holds another library is refused (OTHER_LIBRARY), as the MCP tools
    do: its documents would be cited as ROOT's."""
    from markindex_core.library import Library

    lib = Library(args.root, args.db)
    if own_index:
        lib.require_own_index()
    return lib


def require_stdout() -> None:
    """Fail when file descriptor 1 is closed (`>&-`, sys.stdout is None), as `echo` does,
    rather than print nowhere and report success."""
    if sys.stdout is None:
        from markindex_core.errors import OutputClosed

        raise OutputClosed(
            "standard output is closed: the result cannot be printed",
            "run it with stdout open (e.g. `> /dev/null` to discard the output)",
        )


def tolerant_stdout() -> None:
    """Under a locale whose encoding lacks what is printed (latin-1, ASCII), a Chinese title or
    a `→` would stop the command with UnicodeEncodeError: show such characters as escapes."""
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors in (
        "strict",
        "surrogateescape",
    ):
        sys.stdout.reconfigure(errors="backslashreplace")


def reader_gone() -> None:
    """The reader of stdout stopped early (`| head -1`): later writes go to /dev/null, so the
    command ends with its own exit status, and the interpreter's last flush does not fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def emit_json(data: Any) -> None:
    """Exact data as JSON on stdout; DEL and C1 characters are \\u-escaped like C0 ones."""
    from markindex_core.text.safe import json_controls_escaped

    require_stdout()
    text = json.dumps(data, ensure_ascii=False, indent=2)
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except UnicodeEncodeError:  # a locale that lacks some characters: \u escapes, exact still
        text = json.dumps(data, ensure_ascii=True, indent=2)
    try:
        sys.stdout.write(json_controls_escaped(text) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone()


def console(*, stderr: bool = False, highlight: bool = True) -> Console:
    """A rich console for human output. Emoji codes stay text: a title `Deploy :x:` or a file
    `a:x:b.md` must not be shown as an emoji (and a file name then named a file that isn't)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """Rich exits 1 here ('nothing matched' for search): go on quietly instead."""
            self.quiet = True
            if not self.stderr:
                reader_gone()

    if not stderr:
        require_stdout()
    out = _Console(stderr=stderr, highlight=highlight, emoji=False)
    # Into a file or pipe, rich would break lines at 80 columns: a message stays one line there,
    # for logs and grep (tables keep their width).
    out.soft_wrap = not out.is_terminal
    return out


def library_relative(path: str | None) -> str | None:
    """A document or folder as the index names it: `./guides/` is `guides`, `.` is the whole
    library (every command takes a path the way `search --doc` and the tools do)."""
    from markindex_core.store.db import clean_relative

    return None if path is None else clean_relative(path)


def on_disk_relative(lib: Library, raw: str) -> str | None:
    """What `raw` names relative to ROOT when read as a path on disk (absolute, or from the
    working directory, as the shell completes it: `docs/guides/a.md`); None outside ROOT."""
    path = Path(raw).expanduser()
    if not path.is_absolute() and not path.exists():
        return None
    try:
        return library_relative(path.resolve().relative_to(lib.root).as_posix())
    except (ValueError, OSError):
        return None


def find_document(lib: Library, raw: str) -> dict[str, Any] | None:
    """The document DOC names, or None: a path relative to ROOT (`./a.md`, or the other
    Unicode normalization, finds it), else a path on disk inside ROOT."""
    doc = lib.document(library_relative(raw) or raw)
    if doc is None and (rel := on_disk_relative(lib, raw)):
        doc = lib.document(rel)
    return doc


def require_document(lib: Library, raw: str) -> dict[str, Any]:
    """The document DOC names, or NOT_FOUND with similar paths (see `find_document`)."""
    from markindex_core.store.suggest import unknown_document

    doc = find_document(lib, raw)
    if doc is None:
        raise unknown_document(lib.store, raw, lib.command)
    return doc

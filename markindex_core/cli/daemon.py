"""`markindex daemon` (live index, plus MCP over stdio) and `markindex status`."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from markindex_core.cli.common import (
    LOG_JSON_HELP,
    Subparsers,
    add_indexing_options,
    add_library_args,
    console,
    emit_json,
    help_epilog,
    ignore_patterns,
    open_library,
)
from markindex_core.cli.index import add_summary_options
from markindex_core.config import (
    DAEMON_QUIET_MS,
    DAEMON_QUIET_MS_MAX,
    DAEMON_SUMMARY_SLICE_S,
    DAEMON_SWEEP_S,
    DAEMON_SWEEP_S_MAX,
    STATUS_ERRORS_SHOWN,
    STATUS_SKIPPED_SHOWN,
)

if TYPE_CHECKING:
    from rich.console import Console


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "daemon",
        help="keep the index live with a file watcher, and serve MCP over stdio",
        description="Reconcile the index with ROOT, then watch ROOT and re-index changed files "
        "within a second. Serves MCP over stdio in the same process (stdout is the MCP wire; "
        "logs go to stderr) until stdin closes or SIGTERM/SIGINT/SIGHUP. If another process "
        "holds the writer lock, serves read-only and takes over writing when it frees.",
        epilog=help_epilog(
            [
                "markindex daemon ~/docs --no-mcp            # only keep the index live",
                "markindex daemon /abs/path/to/docs          # as an MCP host's stdio server",
            ],
            "0 when it stopped on request (stdin closed, SIGTERM, SIGINT or Ctrl-C, SIGHUP); 1 "
            "when it could not start or could not go on (the library folder gone, another folder "
            "behind its path), or its last write or status at the stop failed;",
            interrupted=None,
        ),
    )
    add_library_args(p, json_help=LOG_JSON_HELP)
    add_indexing_options(p)
    p.add_argument(
        "--poll",
        action="store_true",
        help="watch by polling (automatic on network and FUSE file systems, and when inotify"
        " limits are reached)",
    )
    p.add_argument(
        "--quiet-ms",
        type=int,
        default=None,
        metavar="N",
        help=f"reconcile once file events pause for N ms (default {DAEMON_QUIET_MS})",
    )
    p.add_argument(
        "--sweep-s",
        type=float,
        default=None,
        metavar="S",
        help="when idle, compare every file's size and mtime with the index every S seconds, a"
        " safety net for changes no file event reports (default"
        f" {DAEMON_SWEEP_S:.0f}; 0 turns it off)",
    )
    p.add_argument(
        "--no-mcp",
        dest="mcp",
        action="store_false",
        help="only keep the index live (no MCP on stdio; stops on SIGTERM/SIGINT/SIGHUP)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log every skipped file")
    add_summary_options(p)
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser(
        "status",
        help="show the index's size, freshness, skipped files and whether a daemon is writing",
        description="Documents, nodes, last index time, skipped files, and the live daemon's "
        "state (pid, heartbeat, queue, errors) when one runs.",
        epilog=help_epilog(
            [
                "markindex status ~/docs",
                "markindex status ~/docs --json | jq .daemon",
                "markindex status ~/docs > /dev/null || echo 'index not healthy'",
            ],
            "0 when the index is there (live or static); 1 when it is not (or unusable, or "
            "another library's); 2 "
            "when its daemon stopped keeping it live (ended without stopping, frozen, or unable "
            "to write) or the last index run stopped before its end (killed, Ctrl-C), is stopped "
            "(Ctrl-Z) or has made no progress for 10 minutes: for health checks, which take any "
            "status but 0 as unhealthy.",
        ),
    )
    add_library_args(p)
    p.set_defaults(func=cmd_status)


def cmd_daemon(args: argparse.Namespace) -> int:
    from markindex_core.errors import UsageError
    from markindex_core.index.scan import normalize_ignore_pattern
    from markindex_core.serve.daemon import run_daemon

    if args.quiet_ms is not None and not 0 <= args.quiet_ms <= DAEMON_QUIET_MS_MAX:
        raise UsageError(
            f"--quiet-ms must be between 0 and {DAEMON_QUIET_MS_MAX}",
            f"e.g. --quiet-ms {DAEMON_QUIET_MS}",
        )
    if args.sweep_s is not None and not 0 <= args.sweep_s <= DAEMON_SWEEP_S_MAX:
        raise UsageError(
            f"--sweep-s must be between 0 and {DAEMON_SWEEP_S_MAX}",
            f"e.g. --sweep-s {DAEMON_SWEEP_S}",
        )
    for pattern in args.ignore or []:
        normalize_ignore_pattern(pattern)  # reject bad patterns before anything starts
    lib = open_library(args)
    lib.check_target()
    hook = None
    if args.summary_model is not None:  # never a model request unless asked for
        from markindex_core.cli.index import summarizer_from_args

        hook = summarizer_from_args(args, slice_seconds=DAEMON_SUMMARY_SLICE_S)
    run_daemon(
        lib,
        ignore=ignore_patterns(args, lib.root),
        setext=args.setext,
        poll=args.poll,
        quiet_ms=args.quiet_ms,
        sweep_s=args.sweep_s,
        serve_mcp=args.mcp,
        after_write=hook,
    )
    return 0


def _ago(t: float | None) -> str:
    if not t:
        return "never"
    s = max(0.0, time.time() - t)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    if s < 120:
        return f"{when} ({s:.0f} s ago)"
    if s < 7200:
        return f"{when} ({s / 60:.0f} min ago)"
    return when


def cmd_status(args: argparse.Namespace) -> int:
    from markindex_core.serve.status import read_status

    lib = open_library(args)
    st = read_status(lib, compare_folder=True)
    code = (
        1
        if not st["indexed"] or st["other_library"]
        else 2
        if st["not_updating"] or st["unfinished_run"]
        else 0
    )
    if args.json:
        emit_json(st)
        return code

    out = console(highlight=False)
    _print_index(out, st)
    if not st["indexed"] and not st["error"]:
        out.print(_escape(lib.build_hint()))
    _print_daemon(out, st)
    _print_skipped(out, st["skipped"])
    return code


def _escape(text: str) -> str:
    """Untrusted text for a rich console: no markup, no control characters."""
    from rich.markup import escape as escape_markup

    from markindex_core.text.safe import printable

    return escape_markup(printable(text))


def _print_index(out: Console, st: dict[str, Any]) -> None:
    out.print(f"[bold]{_escape(st['root'])}[/] → {_escape(st['db'])}")
    if not st["indexed"]:  # an index there that cannot be opened is not "not indexed"
        label = "cannot read the index" if st["error"] else "not indexed"
        out.print(f"[yellow]{label}[/]{': ' + _escape(st['error']) if st['error'] else ''}")
        return
    out.print(
        f"documents {st['documents']}, nodes {st['nodes']}, tokens {st['tokens']}, "
        f"links {st['links']}, skipped {len(st['skipped'])}"
    )
    secs = st["last_index_seconds"]
    out.print(f"last indexed {_ago(st['last_index_at'])}" + (f" in {secs:.2f} s" if secs else ""))
    if st.get("other_library"):
        out.print(
            f"[red]the index of another library: {_escape(st['indexed_root'])}; nothing here is"
            " about this folder: pass another --db[/]"
        )
    elif st.get("indexed_root") not in (None, st["root"]):
        out.print(f"[yellow]the index of another folder: {_escape(st['indexed_root'])}[/]")
    if st.get("ignore"):
        patterns = ", ".join(map(_escape, st["ignore"]))
        out.print(f"left out by --ignore (remembered): {patterns}; `--clear-ignore` forgets them")
    _print_drift(out, st.get("changed_on_disk"))
    if st.get("unfinished_run"):
        from markindex_core.store.runs import unfinished_warning

        out.print(f"[yellow]{_escape(unfinished_warning(st['unfinished_run']))}[/]")
    if st.get("rebuild_due"):
        out.print(
            f"[yellow]built by another version of markindex ({_escape(st['rebuild_due'])}): "
            "the next `markindex index` or daemon start rebuilds every document[/]"
        )


def _print_drift(out: Console, drift: dict[str, Any] | None) -> None:
    """How the folder differs from an index no daemon keeps live: what `index` would do."""
    if drift is None:
        return
    counts = {"changed": drift["changed"], "new": drift["added"], "gone": drift["removed"]}
    if not any(counts.values()):
        out.print("the folder matches the index")
        return
    said = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    shown = ", ".join(_escape(p) for p in drift["examples"])
    more = ", …" if sum(counts.values()) > len(drift["examples"]) else ""
    out.print(
        f"[yellow]since then, in the folder: {said} ({shown}{more}): run `markindex index` to"
        " bring the index up to date[/]"
    )


def _print_daemon(out: Console, st: dict[str, Any]) -> None:
    from markindex_core.serve.status import ENDED_HINT, ended_reason

    d = st["daemon"]
    if d and d.get("unresponsive"):
        out.print(
            f"[red]daemon: pid {d['pid']} holds the writer lock but has not responded for "
            f"{d['heartbeat_age']:.0f} s: the index is not updating[/]"
        )
        out.print(
            f"  [yellow]it was stopped (SIGSTOP, Ctrl-Z) or hangs: resume it (kill -CONT "
            f"{d['pid']}), or end it and start `markindex daemon` again[/]"
        )
        if d.get("last_reconcile_at"):
            out.print(f"  last reconcile {_ago(d['last_reconcile_at'])}")
        for other in st.get("other_daemons", []):
            _print_live_daemon(out, other)
    elif d and d["alive"]:
        _print_live_daemon(out, d)
        for other in st.get("other_daemons", []):
            _print_live_daemon(out, other)
    elif d and d.get("ended"):
        out.print(f"[red]{_escape(ended_reason(d))}: the index is no longer kept live[/]")
        out.print(f"  [yellow]{ENDED_HINT}[/]")
    elif st["writer_locked"]:
        pid = st["writer_pid"]
        out.print(
            f"no daemon; another process{f' (pid {pid})' if pid else ''} is writing the index"
        )
    elif d and d.get("reason") and str(d.get("state", "")).startswith("stopped"):
        out.print(f"daemon: not running; it stopped because {_escape(d['reason'])}")
        _print_status_file_problem(out, d)
    else:
        out.print("daemon: not running")
        if d:
            _print_status_file_problem(out, d)


def _print_live_daemon(out: Console, d: dict[str, Any]) -> None:
    from markindex_core.serve.status import stale_warning

    state = str(d.get("state"))
    role = "writing" if d["writing"] else "read-only" if state == "read-only" else "not writing"
    parts = [f"pid {d['pid']}", role]
    if state != role:
        parts.append(_escape(state))
    if d.get("observer"):
        parts.append(_escape(str(d["observer"])))
    parts.append(f"queue {d.get('queue', 0)}")
    parts.append(f"heartbeat {d['heartbeat_age']:.1f} s ago")
    out.print("daemon: " + ", ".join(parts))
    if d.get("reason"):
        # Waiting for another writer is normal; a failure to write is not.
        colour = "yellow" if state == "read-only" else "red"
        out.print(f"  [{colour}]{_escape(d['reason'])}[/]")
        if d.get("hint"):
            out.print(f"  [{'dim' if state == 'read-only' else 'yellow'}]{_escape(d['hint'])}[/]")
    warning = stale_warning(d)
    if warning and not d.get("reason"):  # a reason and its hint are printed above
        # What every tool envelope says too: a folder it cannot read, a long catch-up.
        out.print(f"  [yellow]{_escape(warning)}[/]")
    if d.get("last_reconcile_at"):
        out.print(f"  last reconcile {_ago(d['last_reconcile_at'])}")
    if d.get("notice"):
        out.print(f"  [yellow]{_escape(d['notice'])}[/]")
    _print_status_file_problem(out, d)
    if d.get("error_count"):
        out.print(f"  [red]{d['error_count']} errors[/], latest:")
        for e in d["errors"][-STATUS_ERRORS_SHOWN:]:
            out.print(f"    {_escape(e['path'] or '-')}: {_escape(e['error'])}")


def _print_status_file_problem(out: Console, d: dict[str, Any]) -> None:
    """A daemon that cannot update the status file beside the index (seen through its own
    record): not a stop, but readers without that record take it for hung or gone."""
    if d.get("status_file_error"):
        out.print(f"  [yellow]{_escape(d['status_file_error'])}[/]")
        if d.get("status_file_hint"):
            out.print(f"  [dim]{_escape(d['status_file_hint'])}[/]")


def _print_skipped(out: Console, skipped: list[dict[str, Any]]) -> None:
    for s in skipped[:STATUS_SKIPPED_SHOWN]:
        out.print(f"[dim]skipped {_escape(s['path'])}: {_escape(s['reason'])}[/]")
    if len(skipped) > STATUS_SKIPPED_SHOWN:
        more = len(skipped) - STATUS_SKIPPED_SHOWN
        out.print(f"[dim]… {more} more skipped (see --json)[/]")

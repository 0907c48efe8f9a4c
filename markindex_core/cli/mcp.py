"""`markindex mcp ROOT`: serve a library to agents over MCP (stdio by default, read-only tools)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import sys
import threading
import time
from typing import TYPE_CHECKING

from markindex_core.cli.common import (
    INTERRUPTED_STATUS,
    LOG_JSON_HELP,
    Subparsers,
    add_indexing_options,
    add_library_args,
    help_epilog,
    ignore_patterns,
    int_between,
    open_library,
)
from markindex_core.config import MCP_HTTP_HOST, MCP_HTTP_PORT
from markindex_core.errors import MarkindexError, WriterBusy

if TYPE_CHECKING:
    from markindex_core.library import Library

log = logging.getLogger("markindex.mcp")


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve the library to agents over MCP (stdio, read-only tools)",
        description="Serve ROOT's index to an MCP client: five read-only tools (browse_documents, "
        "get_document, get_document_structure, get_node_content, search_documents) and agent "
        "instructions. stdout carries only JSON-RPC; logs go to stderr. Build the index first "
        "with `markindex index ROOT`, or pass --reindex-on-start to update it in the background "
        "while the server answers from the existing index.",
        epilog=help_epilog(
            [
                "markindex mcp /abs/path/to/docs                    # stdio, for an MCP host",
                "markindex mcp /abs/path/to/docs --reindex-on-start",
                "markindex mcp /abs/path/to/docs --watch            # keep the index live",
                "markindex mcp /abs/path/to/docs --transport streamable-http --port 8765",
            ],
            "0 when the server stopped (stdin closed; with --watch also SIGTERM, SIGINT or "
            "Ctrl-C, SIGHUP, as the daemon); 1 when it could not start (no such folder, a folder "
            "with no Markdown and no index, the index of another library, a port in use);",
            interrupted=f"{INTERRUPTED_STATUS} without --watch",
        ),
    )
    add_library_args(p, json_help=LOG_JSON_HELP)
    add_indexing_options(p)
    p.add_argument(
        "--reindex-on-start",
        action="store_true",
        help="bring the index up to date in a background thread after start-up",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="keep the index live as files change (what `markindex daemon` does; stdio only)",
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "streamable-http"),
        default="stdio",
        help="stdio (default) or streamable-http (serves http://HOST:PORT/mcp)",
    )
    p.add_argument(
        "--host", default=MCP_HTTP_HOST, help=f"HTTP bind address (default {MCP_HTTP_HOST})"
    )
    p.add_argument(
        "--port",
        type=int_between(1, 65535, "port number"),
        default=MCP_HTTP_PORT,
        help=f"HTTP port (default {MCP_HTTP_PORT})",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="also accept this Host header over HTTP, e.g. behind a reverse proxy (repeatable; "
        "HOST:* for any port). The bound host:port is always accepted",
    )
    p.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept this Origin header over HTTP, e.g. https://mcp.example.org (repeatable)",
    )
    p.set_defaults(func=cmd_mcp)


class StartupReindex:
    """`--reindex-on-start`: a build on a daemon thread (never inside a tool call), and what tool
    envelopes should say meanwhile (`warning`).

    A daemon thread, not a worker of the event loop: when the client goes away the process exits
    at once; an interrupted build is rolled back by SQLite and resumed by the next run.
    """

    def __init__(self, lib: Library, *, ignore: list[str] | None, setext: bool | None) -> None:
        self.lib, self.ignore, self.setext = lib, ignore, setext
        self._state: str | None = None  # set while answers may not match the folder
        lib.expect_build()  # tools say INDEX_BUILDING, not INDEX_MISSING, until the build has run

    def warning(self) -> str | None:
        return self._state

    async def start(self) -> None:
        self._state = f"the index is being brought up to date (re-index at start, {_now()})"
        threading.Thread(target=self._work, name="markindex-reindex", daemon=True).start()

    def _work(self) -> None:
        t0 = time.perf_counter()
        log.info("indexing %s in the background", self.lib.root)
        try:
            report = self.lib.index(ignore=self.ignore, setext=self.setext)
        except WriterBusy as exc:  # another writer brings it up to date
            log.warning("background indexing skipped: %s", exc)
            self._state = None
            return
        except Exception as exc:  # what it is goes to the log; the envelopes say it failed
            detail = exc.message if isinstance(exc, MarkindexError) else type(exc).__name__
            log.exception("background indexing failed")
            self._state = (
                f"the re-index at start failed ({detail}); answers come from the index as it "
                "was, which may miss changes to the folder"
            )
            return
        self._state = None
        log.info(
            "index up to date in %.1fs: added %d, updated %d, removed %d, unchanged %d",
            time.perf_counter() - t0,
            len(report.added),
            len(report.updated),
            len(report.removed),
            report.unchanged,
        )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _check_http_options(args: argparse.Namespace) -> None:
    """--allowed-host/--allowed-origin only mean something over HTTP: say so rather than ignore."""
    from markindex_core.errors import UsageError

    if args.transport == "stdio" and (args.allowed_host or args.allowed_origin):
        raise UsageError(
            "--allowed-host and --allowed-origin apply to HTTP only",
            "add --transport streamable-http, or leave them out",
        )
    if (args.ignore or args.clear_ignore or args.setext is not None) and not (
        args.watch or args.reindex_on_start
    ):
        raise UsageError(
            "--ignore, --clear-ignore and --setext apply when mcp indexes",
            "add --watch (a live index) or --reindex-on-start, or leave them out",
        )
    if args.transport != "stdio" and args.watch:
        # The live index serves MCP over stdio only; served over HTTP, it went to stdin instead.
        raise UsageError(
            "--watch serves MCP over stdio only",
            "to serve a live index over HTTP, run `markindex daemon ROOT --no-mcp` beside "
            "`markindex mcp ROOT --transport streamable-http` (its answers say when the daemon "
            "falls behind)",
        )


def _refuse_empty_library(lib: Library) -> None:
    """Hosts start servers in their own working directory, so a relative ROOT often names the
    wrong folder (`lib` from `/` is `/usr/lib`). A folder with no index and no Markdown file is
    refused instead of served as an empty library."""
    from markindex_core.errors import InvalidArgument
    from markindex_core.index.scan import holds_markdown

    if not lib.has_index() and not holds_markdown(lib.root):
        raise InvalidArgument(
            f"{lib.root} holds no Markdown files and has no index",
            "pass the library folder as an absolute path (MCP hosts start servers in their own "
            "working directory)",
        )


def _check_listen(host: str, port: int) -> None:
    """Fail now, with a clear message, when HOST:PORT cannot be listened on (in use, no such
    address): the HTTP server would otherwise end in a traceback after saying it serves."""
    import socket

    from markindex_core.errors import InvalidArgument

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise InvalidArgument(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            "pick a free --port (or another --host)",
        ) from None


def cmd_mcp(args: argparse.Namespace) -> int:
    _check_http_options(args)
    stdio = args.transport == "stdio"
    if stdio:
        from markindex_core.serve.mcp_server import guard_stdout

        guard_stdout()  # before anything else can write to stdout

    if not stdio:
        _check_listen(args.host, args.port)
    # Another library's index would fail every tool call: refused here, as a wrong folder is.
    lib = open_library(args, own_index=True)
    _refuse_empty_library(lib)
    if args.watch:
        return _run_watch(lib, args)
    from markindex_core.serve.status import DaemonWatch

    # A daemon in another process may keep this index live: its trouble reaches the envelopes,
    # and so does a re-index at start that runs or failed.
    daemon = DaemonWatch(lib.db_path)
    reindex = (
        StartupReindex(lib, ignore=ignore_patterns(args, lib.root), setext=args.setext)
        if args.reindex_on_start
        else None
    )
    lib.live_warning = lambda: (reindex.warning() if reindex else None) or daemon()
    if not args.reindex_on_start and not lib.has_index():
        log.warning(
            "no index at %s yet: tools will say so until `markindex index %s` has run",
            lib.db_path,
            lib.root,
        )
    background = [reindex.start] if reindex is not None else []
    import anyio

    from markindex_core.serve import mcp_server

    if stdio:
        _exit_on_ctrl_c()
        anyio.run(functools.partial(mcp_server.run_stdio, lib, background=background))
    else:
        log.info("serving MCP at http://%s:%d/mcp", args.host, args.port)
        anyio.run(
            functools.partial(
                mcp_server.run_http,
                lib,
                host=args.host,
                port=args.port,
                allowed_hosts=args.allowed_host,
                allowed_origins=args.allowed_origin,
                background=background,
            )
        )
    return 0


def _exit_on_ctrl_c() -> None:
    """Ctrl-C ends a stdio server at once, with 130. Its stdin is read in a thread no cancellation
    can wake (anyio's wrap_file), and asyncio and the interpreter waited for that thread: the
    server hung until the client sent a line or closed the pipe. Nothing here needs a clean
    stop: the tools only read, and a --reindex-on-start build cut short leaves an index that
    opens (the next run completes it). The daemon (`mcp --watch`) stops its own way."""
    import os
    import signal

    def stop(signum: int, frame: object) -> None:
        log.info("interrupted (Ctrl-C): stopping")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(130)

    signal.signal(signal.SIGINT, stop)


def _run_watch(lib: Library, args: argparse.Namespace) -> int:
    """`--watch`: the daemon's live index with MCP over stdio in the same process."""
    from markindex_core.serve.daemon import run_daemon

    run_daemon(
        lib,
        ignore=ignore_patterns(args, lib.root),
        setext=args.setext,
        poll=False,
        quiet_ms=None,
        serve_mcp=True,
    )
    return 0

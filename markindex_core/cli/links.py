"""`markindex links` and `backlinks`: the internal link graph between documents."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from markindex_core.cli.common import (
    Subparsers,
    add_library_args,
    console,
    emit_json,
    find_document,
    help_epilog,
    library_relative,
    open_library,
    require_document,
)

if TYPE_CHECKING:
    from rich.text import Text


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "links",
        help="a document's outgoing internal links (or every broken link)",
        description="List the internal Markdown links of DOC with their line numbers, marking broken "
        "ones and those whose #anchor the linked document does not have; without DOC, list every "
        "broken link and every missing anchor in the library.",
        epilog=help_epilog(
            [
                "markindex links ~/docs                      # every broken link and missing anchor",
                "markindex links ~/docs guides/install.md    # one document's links",
                "markindex links ~/docs --json | jq '.broken | length'",
            ],
            "0 when no link is broken and no anchor missing (in DOC, or in the whole "
            "library); 1 when some are (they are listed, on stdout, with --json too: a link "
            "check for scripts and CI), or when there is no such document or no usable index "
            "(stdout empty, one line on stderr);",
        ),
    )
    add_library_args(p)
    p.add_argument("doc", metavar="DOC", nargs="?", help="document path relative to ROOT")
    p.set_defaults(func=cmd_links)
    p = sub.add_parser(
        "backlinks",
        help="documents that link to DOC",
        description="List every document (and line) that links to DOC.",
        epilog=help_epilog(
            ["markindex backlinks ~/docs specs/config.md"],
            "0 when the links to DOC were listed; 1 when no document is DOC and nothing links "
            "to it (a typo: similar paths are suggested), or no usable index.",
        ),
    )
    add_library_args(p)
    p.add_argument("doc", metavar="DOC", help="document path relative to ROOT")
    p.set_defaults(func=cmd_backlinks)


def _cell(value: str | None) -> Text:
    """A table cell from document text: no markup, control characters made visible, and
    wrapped whole when the table is too narrow (a path cut to `a/b…` names no file)."""
    from rich.text import Text

    from markindex_core.text.safe import printable

    return Text(printable(value or ""), overflow="fold")


def cmd_links(args: argparse.Namespace) -> int:
    """List the links, then exit 1 when any listed is broken or misses its anchor (0 when
    none), with or without --json: scripts and CI run `links` as a link checker, as they run
    `check` for damage, and need the status to say whether it found something."""
    from markindex_core.store.anchors import missing_anchors

    lib = open_library(args, own_index=True)
    if args.doc:
        doc = require_document(lib, args.doc)
        rows = lib.store.links_from(doc["id"])
        missing = missing_anchors(lib.store, ((r["target"], r["anchor"]) for r in rows))
        for r in rows:
            r["anchor_missing"] = (r["target"], r["anchor"]) in missing
        data: dict[str, Any] = {"path": doc["path"], "links": rows}
        found = any(r["broken"] or r["anchor_missing"] for r in rows)
    else:
        anchored = lib.store.anchored_links()
        missing = missing_anchors(lib.store, ((r["target"], r["anchor"]) for r in anchored))
        rows = lib.store.broken_links()
        no_anchor = [r for r in anchored if (r["target"], r["anchor"]) in missing]
        data = {"broken": rows, "missing_anchors": no_anchor}
        found = bool(rows or no_anchor)
    status = 1 if found else 0
    if args.json:
        emit_json(data)
        return status
    if args.doc:
        _print_links(str(doc["path"]), rows)
    else:
        _print_broken(rows, no_anchor)
    return status


def _print_links(path: str, rows: list[dict[str, Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    from markindex_core.text.safe import printable

    if not rows:  # an empty table would read as a listing that failed
        console().print(Text(f"{printable(path)} has no internal links"))
        return
    table = Table()
    for col in ("line", "target", "anchor", "status"):
        table.add_column(col)
    for r in rows:
        if r["broken"]:
            status: Text | str = Text("broken", style="red")
        elif r["anchor_missing"]:
            status = Text("missing anchor", style="yellow")
        else:
            status = "ok"
        table.add_row(str(r["line"]), _cell(r["target"]), _cell(r["anchor"]), status)
    console().print(table)


def _print_broken(broken: list[dict[str, Any]], no_anchor: list[dict[str, Any]]) -> None:
    """Broken links, then links whose target is there but not its anchor (a table each, or
    one line when there are none)."""
    from rich.table import Table

    if not broken and not no_anchor:
        console().print("no broken links and no missing anchors")
        return
    if broken:
        table = Table(title="broken links")
        for col in ("source", "line", "missing target"):
            table.add_column(col)
        for r in broken:
            table.add_row(_cell(r["source"]), str(r["line"]), _cell(r["target"]))
        console().print(table)
    if no_anchor:
        table = Table(title="missing anchors")
        for col in ("source", "line", "target", "missing anchor"):
            table.add_column(col)
        for r in no_anchor:
            table.add_row(
                _cell(r["source"]), str(r["line"]), _cell(r["target"]), _cell(r["anchor"])
            )
        console().print(table)


def cmd_backlinks(args: argparse.Namespace) -> int:
    from markindex_core.store.suggest import unknown_document

    lib = open_library(args, own_index=True)
    wanted = library_relative(args.doc) or args.doc  # `./a.md` is `a.md`, as everywhere
    doc = find_document(lib, args.doc)
    path = doc["path"] if doc is not None else wanted
    rows = lib.store.links_to(path)
    if doc is None and not rows:  # a missing document that nothing links to: a typo, say so
        raise unknown_document(lib.store, args.doc, lib.command)
    if args.json:
        emit_json({"path": path, "backlinks": rows})
        return 0
    from rich.table import Table
    from rich.text import Text

    from markindex_core.text.safe import printable

    if not rows:
        console().print(Text(f"no document links to {printable(path)}"))
        return 0
    table = Table()
    for col in ("source", "line", "anchor"):
        table.add_column(col)
    for r in rows:
        table.add_row(_cell(r["source"]), str(r["line"]), _cell(r["anchor"]))
    console().print(table)
    return 0

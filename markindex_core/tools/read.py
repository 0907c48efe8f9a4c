"""What the navigation tools do: browse a folder, describe a document, outline its sections.

Each handler takes the caller's library, a read-only store and validated arguments, and returns
`(data, next_steps)` or raises `ToolFailure` / `BadInput`. They read the index, never the disk.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from markindex_core.config import (
    BROWSE_PAGE_ENTRIES,
    DESCRIPTION_PREVIEW_CHARS,
    DOC_LINKS_SHOWN,
    FRONT_MATTER_MAX_CHARS,
    MAX_NODE_IDS,
    READ_STRUCTURE_FIRST_TOKENS,
    STRUCTURE_KEY_ITEMS_SHOWN,
    TOOL_ANCHOR_CHARS,
    TOOL_PAGE_CHARS,
    TOOL_SUGGESTIONS_SHOWN,
    TOOL_SUMMARY_CHARS,
    TOOL_TITLE_CHARS,
    TOOL_TITLE_PATH_CHARS,
    TOOL_WARNINGS_SHOWN,
)
from markindex_core.store.outline import nest
from markindex_core.tools.check import node_id, steps
from markindex_core.tools.page import (
    Result,
    check_folder,
    find_document,
    iso,
    json_len,
    pages_by_size,
    pick_part,
    preview,
    same_version,
    stale,
)

if TYPE_CHECKING:
    from markindex_core.store.db import Store
    from markindex_core.tools.access import IndexAccess


# ----- browse_documents --------------------------------------------------------------------------
def browse_documents(lib: IndexAccess, store: Store, args: dict[str, Any]) -> Result:
    folder = check_folder(store, args["folder"])
    subs, docs = store.folder_entries(folder)
    entries: list[dict[str, Any]] = [
        {"path": posixpath.join(folder, name) if folder else name, "documents": n, "tokens": tok}
        for name, n, tok in subs
    ]
    n_folders = len(entries)
    entries += [
        {
            "path": d["path"],
            "title": preview(d["title"] or "", TOOL_TITLE_CHARS),
            "description": preview(d["description"] or "", DESCRIPTION_PREVIEW_CHARS),
            "tokens": d["tokens"],
            "read_structure_first": d["tokens"] > READ_STRUCTURE_FIRST_TOKENS,
        }
        for d in docs
    ]
    pages = pages_by_size([json_len(e) + 1 for e in entries], TOOL_PAGE_CHARS, BROWSE_PAGE_ENTRIES)
    part = args["part"]
    page = pick_part(
        pages, part, f"folder {folder or '(root)'!r}", ("browse_documents", {"folder": folder})
    )
    shown = [entries[i] for i in page]
    data = {
        "folder": folder,
        "part": part,
        "parts": len(pages),
        "folders": [e for i, e in zip(page, shown, strict=True) if i < n_folders],
        "documents": [e for i, e in zip(page, shown, strict=True) if i >= n_folders],
        "total_folders": n_folders,
        "total_documents": len(docs),
        "documents_below": store.count_documents(folder),
    }
    calls: list[tuple[str, dict[str, Any]]] = []
    if part < len(pages):
        calls.append(("browse_documents", {"folder": folder, "part": part + 1}))
    if data["documents"]:
        calls.append(("get_document", {"doc_path": data["documents"][0]["path"]}))
    if data["folders"]:
        calls.append(("browse_documents", {"folder": data["folders"][0]["path"]}))
    message = (
        "open a document with get_document (its outline with get_document_structure), or go into "
        "a sub-folder with browse_documents(folder=...); use search_documents when browsing stalls"
    )
    if part < len(pages):
        message = (
            f"this is part {part} of {len(pages)}: ask for part={part + 1} to see more. " + message
        )
    return data, steps(message, *calls)


# ----- get_document ------------------------------------------------------------------------------
def _front_matter_keys(front: Any) -> tuple[dict[str, list[str]] | None, str]:
    """Front matter too large to show: its keys, as many as fit the same budget, and a note."""
    size = json_len(front)
    if not isinstance(front, dict):
        return None, f"front matter is {size} characters; not shown"
    keys: list[str] = []
    budget = FRONT_MATTER_MAX_CHARS
    for key in sorted(str(k) for k in front):
        key = preview(key, TOOL_TITLE_CHARS)
        budget -= len(key) + 4  # quotes, comma, space
        if budget < 0:
            break
        keys.append(key)
    note = f"front matter is {size} characters; only its keys are listed"
    if len(keys) < len(front):
        note += f" (the first {len(keys)} of {len(front)}, sorted)"
    return {"keys": keys}, note


def _fit_lists(data: dict[str, Any]) -> bool:
    """Drop the last entries of the section and link lists, in turn, until the answer fits one
    page: get_document has no parts, and 100 long titles, 100 long link targets and 100 backlinks
    beside large front matter overflow it. True when an entry was dropped."""
    lists = [data["top_level_nodes"], data["links"]["outgoing"], data["links"]["backlinks"]]
    excess = json_len(data) - TOOL_PAGE_CHARS
    cut = False
    while excess > 0 and any(lists):
        for entries in lists:
            if entries and excess > 0:
                excess -= json_len(entries.pop()) + 1
                cut = True
    return cut


def get_document(lib: IndexAccess, store: Store, args: dict[str, Any]) -> Result:
    doc = find_document(store, args["doc_path"])
    path = doc["path"]
    nodes = store.nodes(doc["id"])
    top = [n for n in nodes if n["parent_id"] is None]
    outgoing = store.links_from(doc["id"])
    backlinks = store.links_to(path)
    front = doc["front_matter"]
    front_note = None
    if front is not None and json_len(front) > FRONT_MATTER_MAX_CHARS:
        front, front_note = _front_matter_keys(front)
    big = doc["tokens"] > READ_STRUCTURE_FIRST_TOKENS
    data: dict[str, Any] = {
        "doc_path": path,
        "title": doc["title"],
        "description": preview(doc["description"] or "", FRONT_MATTER_MAX_CHARS // 2),
        "front_matter": front,
        "size_bytes": doc["size"],
        "line_count": doc["line_count"],
        "tokens": doc["tokens"],
        "read_structure_first": big,
        "node_count": len(nodes),
        "top_level_nodes": [
            {
                "node_id": n["node_id"],
                "title": n["title"] or n["kind"],
                "start_line": n["start_line"],
                "end_line": n["subtree_end"],
                "tokens": n["subtree_tokens"],
            }
            for n in top[:DOC_LINKS_SHOWN]
        ],
        "encoding": doc["encoding"],
        "warnings": [
            preview(str(w), TOOL_TITLE_CHARS) for w in doc["warnings"][:TOOL_WARNINGS_SHOWN]
        ],
        "modified": iso(doc["mtime_ns"] / 1e9 if doc["mtime_ns"] else None),
        "indexed_at": iso(doc["indexed_at"]),
        "links": {
            "outgoing": [
                {
                    **lk,
                    "target": preview(lk["target"], TOOL_TITLE_CHARS),
                    "anchor": preview(lk["anchor"], TOOL_ANCHOR_CHARS),
                }
                for lk in outgoing[:DOC_LINKS_SHOWN]
            ],
            "outgoing_total": len(outgoing),
            "broken_total": sum(1 for lk in outgoing if lk["broken"]),
            "backlinks": [
                {**lk, "anchor": preview(lk["anchor"], TOOL_ANCHOR_CHARS)}
                for lk in backlinks[:DOC_LINKS_SHOWN]
            ],
            "backlinks_total": len(backlinks),
        },
    }
    if front_note:
        data["front_matter_note"] = front_note
    cut = _fit_lists(data)
    if (
        cut
        or len(outgoing) > DOC_LINKS_SHOWN
        or len(backlinks) > DOC_LINKS_SHOWN
        or len(top) > DOC_LINKS_SHOWN
    ):
        data["lists_note"] = (
            f"lists show at most {DOC_LINKS_SHOWN} entries (fewer when they would not fit one "
            "answer); the *_total fields count all, get_document_structure lists every section"
        )
    if big:
        return data, steps(
            f"this document is long ({doc['tokens']} tokens): read its outline first and then only "
            "the sections you need",
            ("get_document_structure", {"doc_path": path}),
        )
    ids = [n["node_id"] for n in top][:MAX_NODE_IDS]
    return data, steps(
        "short enough to read whole: get_node_content with the top-level node ids and "
        "subtree=true, or read the outline first with get_document_structure",
        ("get_node_content", {"doc_path": path, "node_ids": ids, "subtree": True}),
        ("get_document_structure", {"doc_path": path}),
    )


# ----- get_document_structure --------------------------------------------------------------------
def _flatten(
    entries: list[dict[str, Any]],
    parent: str | None,
    level: int,
    kids: dict[str, int],
    out: list[dict[str, Any]],
) -> None:
    for e in entries:
        item: dict[str, Any] = {
            "node_id": e["node_id"],
            "parent_id": parent,
            "level": level,
            "kind": e["kind"],
            "title": e["title"] or "",
            "start_line": e["start_line"],
            "end_line": e["end_line"],
            "own_end_line": e["own_end_line"],
            "tokens": e["tokens"],
        }
        items = e.get("key_items") or []
        if items:
            item["merged_headings"] = [
                preview(str(t), TOOL_TITLE_PATH_CHARS) for t in items[:STRUCTURE_KEY_ITEMS_SHOWN]
            ]
            if len(items) > STRUCTURE_KEY_ITEMS_SHOWN:
                item["merged_headings_total"] = len(items)
        if e.get("summary"):
            item["summary"] = preview(str(e["summary"]), TOOL_SUMMARY_CHARS)
        n_kids = kids.get(e["node_id"], 0)
        if n_kids:
            item["children"] = n_kids
            if "children" not in e:
                item["children_hidden"] = True
        out.append(item)
        _flatten(e.get("children", []), e["node_id"], level + 1, kids, out)


def get_document_structure(lib: IndexAccess, store: Store, args: dict[str, Any]) -> Result:
    doc = find_document(store, args["doc_path"])
    path = doc["path"]
    nodes = store.nodes(doc["id"])
    root = args.get("node_id")
    if root is not None:
        root = node_id(root, "node_id")
        if not any(n["node_id"] == root for n in nodes):
            raise stale(path, [root])
    kids: dict[str, int] = {}
    for n in nodes:
        if n["parent_id"] is not None:
            kids[n["parent_id"]] = kids.get(n["parent_id"], 0) + 1
    flat: list[dict[str, Any]] = []
    _flatten(nest(nodes, depth=args["depth"], root_id=root), None, 1, kids, flat)
    if root is not None and flat:
        by_id = {n["node_id"]: n for n in nodes}
        flat[0]["parent_id"] = by_id[root]["parent_id"]
    pages = pages_by_size([json_len(e) + 1 for e in flat], TOOL_PAGE_CHARS)
    part = args["part"]
    again = ("get_document_structure", {"doc_path": path, "node_id": root, "depth": args["depth"]})
    version = same_version(doc, nodes, args, again)
    page = pick_part(pages, part, f"the outline of {path}", again)
    shown = [flat[i] for i in page]
    data = {
        "doc_path": path,
        "title": doc["title"],
        "line_count": doc["line_count"],
        "tokens": doc["tokens"],
        "node_id": root,
        "depth": args["depth"],
        "part": part,
        "parts": len(pages),
        "version": version,
        "entries_total": len(flat),
        "nodes": shown,
    }
    calls: list[tuple[str, dict[str, Any]]] = []
    if part < len(pages):
        calls.append(("get_document_structure", {**again[1], "part": part + 1, "version": version}))
    hidden = [e["node_id"] for e in shown if e.get("children_hidden")]
    if hidden:
        calls.append(("get_document_structure", {"doc_path": path, "node_id": hidden[0]}))
    leaves = [e["node_id"] for e in shown if not e.get("children")][:TOOL_SUGGESTIONS_SHOWN]
    if leaves:
        calls.append(("get_node_content", {"doc_path": path, "node_ids": leaves}))
    message = (
        "pick sections by title and line range, then read them with get_node_content "
        "(subtree=true reads a section with all its sub-sections); entries with children_hidden "
        "have deeper levels: pass their node_id (or a larger depth) to see them"
    )
    if part < len(pages):
        message = (
            f"this is part {part} of {len(pages)}: ask for part={part + 1} for the rest. " + message
        )
    return data, steps(message, *calls)

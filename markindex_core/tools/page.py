"""Shared pieces of the agent tools: JSON-size paging within the response budget, and lookups of
documents, folders and node ids in the index (with suggestions when they are unknown)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import xxhash

from markindex_core.config import TOOL_SUGGESTIONS_SHOWN
from markindex_core.store.suggest import candidate_paths, similar_paths
from markindex_core.tools.check import ToolFailure, library_path, steps

if TYPE_CHECKING:
    from markindex_core.store.db import Store

Result = tuple[dict[str, Any], dict[str, Any]]
VERSION_CHARS = 16  # of a document's version in paged answers (see `document_version`)

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f\u2028\u2029]')


def json_len(value: Any) -> int:
    """Characters `value` takes inside the JSON envelope."""
    if isinstance(value, str) and not _NEEDS_ESCAPE.search(value):
        return len(value) + 2
    return len(json.dumps(value, ensure_ascii=False))


def pages_by_size(sizes: Sequence[int], budget: int, max_items: int | None = None) -> list[range]:
    """Split items into consecutive pages whose sizes sum to at most `budget` (never empty pages,
    except the single page of an empty list)."""
    pages: list[range] = []
    start, used = 0, 0
    for i, size in enumerate(sizes):
        full = used + size > budget or (max_items is not None and i - start >= max_items)
        if i > start and full:
            pages.append(range(start, i))
            start, used = i, 0
        used += size
    pages.append(range(start, len(sizes)))
    return pages


def pick_part(pages: list[range], part: int, what: str, again: tuple[str, dict[str, Any]]) -> range:
    if part > len(pages):
        tool, args = again
        raise ToolFailure(
            "OUT_OF_RANGE",
            f"part {part} does not exist: {what} has {len(pages)} part(s)",
            details={"part": part, "parts": len(pages)},
            next_steps=steps("ask for a part between 1 and parts", (tool, {**args, "part": 1})),
        )
    return pages[part - 1]


def document_version(doc: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    """A hash of the document's text and of its indexed outline (node ids and line ranges).
    The text alone is not enough: a re-index with other settings (`--no-setext`) keeps the text
    and changes the sections, and so the entries and lines each part holds."""
    outline = ";".join(
        f"{n['node_id']}:{n['start_line']}:{n['end_line']}:{n['subtree_end']}" for n in nodes
    )
    return xxhash.xxh3_64_hexdigest(f"{doc['hash']};{outline}".encode())[:VERSION_CHARS]


def same_version(
    doc: dict[str, Any],
    nodes: list[dict[str, Any]],
    args: dict[str, Any],
    again: tuple[str, dict[str, Any]],
) -> str:
    """The document's version (`document_version`), after refusing a `version` from an
    earlier part that no longer matches: the lines of that part and of the one asked for would
    come from two versions of the document, and lines could be skipped or read twice."""
    current = document_version(doc, nodes)
    given = args.get("version")
    if given is not None and given != current:
        tool, call = again
        raise ToolFailure(
            "DOCUMENT_CHANGED",
            f"{doc['path']} changed since the part you read (version {given!r} is now"
            f" {current!r}): its lines and sections may have moved",
            details={"doc_path": doc["path"], "version": current},
            next_steps=steps(
                "read it again from part 1 (what you read of it before may be out of date)",
                (tool, {**call, "part": 1}),
            ),
        )
    return current


def preview(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def iso(seconds: float | None) -> str | None:
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


# ----- lookups -----------------------------------------------------------------------------------
def find_document(store: Store, raw: str, field: str = "doc_path") -> dict[str, Any]:
    path = library_path(raw, field)
    doc = store.lookup_document(path)
    if doc is not None:
        return doc
    hits = similar_paths(candidate_paths(store, path), path)
    if store.count_documents(path):
        hint = "that is a folder: list it with browse_documents"
        calls: tuple[tuple[str, dict[str, Any]], ...] = (("browse_documents", {"folder": path}),)
    elif hits:
        hint = "did you mean one of the similar paths?"
        calls = tuple(("get_document", {"doc_path": h}) for h in hits[:TOOL_SUGGESTIONS_SHOWN])
    else:
        hint = "list documents with browse_documents, or find them with search_documents"
        calls = (("browse_documents", {"folder": ""}),)
    raise ToolFailure(
        "NOT_FOUND",
        f"no document {path!r} in this library",
        details={"doc_path": path, "similar": hits},
        next_steps=steps(hint, *calls),
    )


def check_folder(store: Store, raw: str, field: str = "folder") -> str:
    folder = library_path(raw, field, folder=True)
    found = store.lookup_folder(folder) if folder else folder
    if found is not None:
        return found  # as stored: `dossier-é` typed in NFC finds the NFD folder macOS made
    if store.document(folder) is not None:
        raise ToolFailure(
            "NOT_FOUND",
            f"{folder!r} is a document, not a folder",
            details={field: folder},
            next_steps=steps("open it with get_document", ("get_document", {"doc_path": folder})),
        )
    known: set[str] = set()
    for f in store.folders():
        parts = f.split("/") if f else []
        known.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    hits = similar_paths(sorted(known), folder)
    raise ToolFailure(
        "NOT_FOUND",
        f"no folder {folder!r} with documents in this library",
        details={field: folder, "similar": hits},
        next_steps=steps(
            "did you mean one of the similar folders?" if hits else "list the library's top level",
            *(("browse_documents", {"folder": h}) for h in hits[:TOOL_SUGGESTIONS_SHOWN]),
            *(() if hits else (("browse_documents", {"folder": ""}),)),
        ),
    )


def stale(doc_path: str, unknown: list[str]) -> ToolFailure:
    return ToolFailure(
        "NODE_NOT_FOUND",
        f"unknown node id(s) in {doc_path}: {', '.join(unknown)}",
        details={"doc_path": doc_path, "unknown_node_ids": unknown},
        next_steps=steps(
            "node ids belong to one document and change when it is re-indexed: "
            "re-read the structure and use the ids it lists",
            ("get_document_structure", {"doc_path": doc_path}),
        ),
    )

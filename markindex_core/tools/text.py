"""What the text tools do: read nodes' original lines with line numbers, and search.

Content pages are cut by the JSON size of the numbered lines, so every page fits the response
budget and all pages of a call together return every line exactly once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from markindex_core.config import (
    TOOL_NOTICE_CHARS,
    TOOL_PAGE_CHARS,
    TOOL_SNIPPET_CHARS,
    TOOL_TERMS_SHOWN,
    TOOL_TITLE_PATH_CHARS,
)
from markindex_core.store.outline import title_path
from markindex_core.tools.check import BadInput, node_id, steps
from markindex_core.tools.page import (
    Result,
    check_folder,
    find_document,
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

LINE_PIECE_CHARS = TOOL_PAGE_CHARS // 4  # a longer line is served in pieces
_ENTRY_CHARS = 200  # a node entry's keys, ids and numbers, besides its title path and content


# ----- get_node_content --------------------------------------------------------------------------
def _units(lines: list[str], first: int) -> list[tuple[int, str]]:
    """(line number, formatted text) per line; lines longer than a piece are served in pieces,
    the continuation pieces prefixed `n│… ` so a reader sees they belong to line n."""
    out: list[tuple[int, str]] = []
    for offset, text in enumerate(lines):
        n = first + offset
        if len(text) <= LINE_PIECE_CHARS:
            out.append((n, f"{n}│ {text}"))
            continue
        # Escapes can make JSON up to 6x longer than the text: shrink pieces accordingly.
        piece = max(1_000, int(LINE_PIECE_CHARS * len(text) / json_len(text)))
        for k in range(0, len(text), piece):
            out.append((n, f"{n}│{'… ' if k else ' '}{text[k : k + piece]}"))
    return out


def get_node_content(lib: IndexAccess, store: Store, args: dict[str, Any]) -> Result:
    doc = find_document(store, args["doc_path"])
    path = doc["path"]
    wanted = list(
        dict.fromkeys(node_id(v, f"node_ids[{i}]") for i, v in enumerate(args["node_ids"]))
    )
    nodes = store.nodes(doc["id"])
    by_id = {n["node_id"]: n for n in nodes}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise stale(path, unknown)
    subtree = bool(args["subtree"])
    blocks: list[tuple[dict[str, Any], int, int, list[tuple[int, str]]]] = []
    for nid in wanted:
        n = by_id[nid]
        start, end = n["start_line"], n["subtree_end"] if subtree else n["end_line"]
        blocks.append((n, start, end, _units(store.read_lines(doc["id"], start, end), start)))
    flat = [(b, u) for b, block in enumerate(blocks) for u in block[3]]
    # Each node's entry also carries its title path: counted with its first line, so that titles
    # full of characters JSON escapes can't push a page over the response budget.
    paths = [
        [preview(t, TOOL_TITLE_PATH_CHARS) for t in title_path(by_id, n["node_id"])]
        for n, *_ in blocks
    ]
    sizes, counted = [], set()
    for b, (_, text) in flat:
        sizes.append(json_len(text) + (0 if b in counted else json_len(paths[b]) + _ENTRY_CHARS))
        counted.add(b)
    pages = pages_by_size(sizes, TOOL_PAGE_CHARS)
    part = args["part"]
    again = ("get_node_content", {"doc_path": path, "node_ids": wanted, "subtree": subtree})
    version = same_version(doc, nodes, args, again)
    page = pick_part(pages, part, "this content", again)
    out: list[dict[str, Any]] = []
    by_block: dict[int, list[tuple[int, str]]] = {}
    for i in page:
        b, unit = flat[i]
        by_block.setdefault(b, []).append(unit)
    for b, units in by_block.items():
        n, start, end, all_units = blocks[b]
        out.append(
            {
                "node_id": n["node_id"],
                "title_path": paths[b],
                "kind": n["kind"],
                "start_line": start,
                "end_line": end,
                "first_line": units[0][0],
                "last_line": units[-1][0],
                "complete": len(units) == len(all_units),
                "content": "\n".join(text for _, text in units),
            }
        )
    if part == 1:  # nodes with no lines of their own still show up once
        for b, (n, start, end, units) in enumerate(blocks):
            if not units:
                out.append(
                    {
                        "node_id": n["node_id"],
                        "title_path": paths[b],
                        "kind": n["kind"],
                        "start_line": start,
                        "end_line": end,
                        "complete": True,
                        "content": "",
                    }
                )
    data = {
        "doc_path": path,
        "part": part,
        "parts": len(pages),
        "version": version,
        "subtree": subtree,
        "nodes": out,
    }
    if part < len(pages):
        nxt = flat[pages[part].start][1][0]
        return data, steps(
            f"part {part} of {len(pages)}: the content goes on at line {nxt}; ask for part={part + 1}",
            ("get_node_content", {**again[1], "part": part + 1, "version": version}),
        )
    cite = out[0] if out else None
    example = (
        f"[{path}, L{cite['first_line']}-{cite['last_line']}]"
        if cite and "first_line" in cite
        else f"[{path}, Lx-y]"
    )
    return data, steps(
        f"cite what you use by its line numbers, e.g. {example} (narrow it to the lines that carry "
        "the answer); read neighbouring sections via get_document_structure if context is missing"
    )


# ----- search_documents --------------------------------------------------------------------------
def search_documents(lib: IndexAccess, store: Store, args: dict[str, Any]) -> Result:
    query = args["query"].strip()
    if not query:
        raise BadInput("`query` is empty: pass words, a question or an identifier", "query")
    doc_path = find_document(store, args["doc_path"])["path"] if args.get("doc_path") else None
    folder = check_folder(store, args["folder"]) if args.get("folder") and not doc_path else None
    result = lib.search(query, folder=folder or None, doc_path=doc_path, limit=args["limit"])
    results = [
        {
            "rank": i + 1,
            "citation": h.citation,
            "doc_path": h.doc_path,
            "node_id": h.node_id,
            "title_path": [preview(t, TOOL_TITLE_PATH_CHARS) for t in h.title_path],
            "kind": h.kind,
            "node_lines": [h.start_line, h.end_line],
            "passage_lines": [h.passage_start, h.passage_end],
            "score": h.score,
            "snippet": preview(h.snippet, TOOL_SNIPPET_CHARS),
        }
        for i, h in enumerate(result.hits)
    ]
    # Titles and snippets full of characters JSON escapes (quotes, backslashes, controls) can
    # take twice their length: the last results give way rather than the whole answer failing.
    kept = pages_by_size([json_len(r) for r in results], TOOL_PAGE_CHARS)[0]
    left_out = len(results) - len(kept)
    results = results[: len(kept)]
    # A fragment match names the indexed words it matched, and a word can be 32 768 characters
    # (an inlined base64 image): notice and terms are cut like every other indexed text shown.
    notice = preview(result.notice, TOOL_NOTICE_CHARS)
    if doc_path and args.get("folder"):  # the narrower scope wins: say so, not silently
        ignored = "`folder` was ignored: `doc_path` names one document"
        notice = f"{ignored}; {notice}" if notice else ignored
    data = {
        "query": query,
        "scope": {"folder": folder, "doc_path": doc_path},
        "mode": result.mode,
        "relaxed": result.relaxed,
        "notice": notice,
        "terms": [preview(t, TOOL_TITLE_PATH_CHARS) for t in result.terms[:TOOL_TERMS_SHOWN]],
        "count": len(results),
        "results": results,
    }
    if left_out:
        data["left_out"] = left_out  # the response budget is full: narrow the scope for more
    if not results:
        return data, steps(
            "nothing matched: try other or fewer words, synonyms, the other language, or a wider "
            "scope; or browse the library",
            ("browse_documents", {"folder": folder or ""}),
        )
    top = results[0]
    message = (
        "read the best hits with get_node_content (passage_lines is the evidence, node_lines the "
        "whole section) and cite [doc_path, Lx-y] from the lines you read"
    )
    if result.relaxed:
        message = preview(result.notice, TOOL_NOTICE_CHARS) + ". " + message
    if left_out:
        message += f"; {left_out} more results did not fit this answer: narrow the scope for them"
    return data, steps(
        message,
        ("get_node_content", {"doc_path": top["doc_path"], "node_ids": [top["node_id"]]}),
    )

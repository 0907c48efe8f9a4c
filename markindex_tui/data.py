"""What the app shows, read from the index; every function here runs in a worker thread.

Each function takes the `Library` and uses `lib.store`, the calling thread's own read-only
connection (APSW connections must not cross threads). Results are plain data for the UI thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import apsw

from markindex_core.config import DESCRIPTION_PREVIEW_CHARS, TOOL_TITLE_CHARS
from markindex_core.errors import MarkindexError
from markindex_core.index.drift import folder_drift
from markindex_core.library import Library
from markindex_core.serve.status import daemon_warning, read_status
from markindex_core.store.runs import unfinished_warning
from markindex_core.tools.page import preview as cut
from markindex_tui.settings import TUI_FOLDER_VIEW_PAGE, TUI_PREVIEW_MAX_LINES

RefKind = Literal["folder", "document", "node", "skipped", "more"]


@dataclass(frozen=True)
class Ref:
    """What a tree line stands for; `key` survives a refresh of the index."""

    kind: RefKind
    path: str  # folder path ('' = library root) or document path
    node_id: str = ""
    start: int = 0  # first line of the node
    end: int = 0  # last line of its whole subtree
    reason: str = ""  # skipped files: why

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.path, self.node_id)

    @property
    def doc_path(self) -> str | None:
        return self.path if self.kind in ("document", "node") else None

    @property
    def folder(self) -> str:
        """The folder this entry lives in (a folder is its own folder)."""
        return self.path if self.kind == "folder" else self.path.rpartition("/")[0]


@dataclass(frozen=True)
class FolderListing:
    folder: str
    subfolders: list[tuple[str, int, int]]  # (name, documents, tokens)
    docs: list[dict[str, Any]]
    skipped: list[tuple[str, str]]  # (path, reason) of files the indexer could not use


@dataclass(frozen=True)
class DocListing:
    doc: dict[str, Any]
    nodes: list[dict[str, Any]]  # pre-order rows of `Store.nodes`

    @cached_property
    def _by_parent(self) -> dict[str | None, list[dict[str, Any]]]:
        out: dict[str | None, list[dict[str, Any]]] = {}
        for n in self.nodes:
            out.setdefault(n["parent_id"], []).append(n)
        return out

    def children(self, parent_id: str | None) -> list[dict[str, Any]]:
        return self._by_parent.get(parent_id, [])

    def has_children(self, node_id: str) -> bool:
        return node_id in self._by_parent

    def ancestry(self, node_id: str) -> list[str]:
        """`node_id` and its ancestors' ids, the top-level section first."""
        by_id = {n["node_id"]: n for n in self.nodes}
        ids: list[str] = []
        cur: str | None = node_id
        while cur is not None and cur in by_id:
            ids.append(cur)
            cur = by_id[cur]["parent_id"]
        return ids[::-1]


@dataclass(frozen=True)
class DocMeta:
    """What the metadata panel shows of a document: its row and its links."""

    doc: dict[str, Any]
    links_out: list[dict[str, Any]]
    links_in: list[dict[str, Any]]


@dataclass(frozen=True)
class FolderDoc:
    """A document as `browse_documents` shows it to an agent, plus its size."""

    path: str
    title: str
    description: str
    tokens: int
    size: int  # bytes
    lines: int


@dataclass(frozen=True)
class FolderPage:
    """Documents `offset`… of those directly in `folder` (`total` in all)."""

    folder: str
    offset: int
    total: int
    docs: list[FolderDoc]

    @property
    def left(self) -> int:
        return max(0, self.total - self.offset - len(self.docs))


@dataclass(frozen=True)
class Preview:
    """The lines of one tree entry, with their real line numbers."""

    ref: Ref
    info: DocMeta | None
    start: int = 1
    lines: list[str] = field(default_factory=list)
    span_end: int = 0  # the entry's real last line (more than shown when cut)
    title: str = ""
    documents: int = 0  # folders: documents below
    folder: FolderPage | None = None  # folders: the first page of their own documents
    summary: str | None = None  # nodes: the model-written summary, when the index has one
    own: tuple[int, int] | None = None  # nodes: their own lines (first, last), as indexed now

    @property
    def cut(self) -> bool:
        return self.start + len(self.lines) - 1 < self.span_end


@dataclass(frozen=True)
class Status:
    documents: int
    skipped: int
    last_index_at: float | None
    writer: str  # "daemon" | "writer" | "none"
    indexed: bool = True  # False: no index file at the path, or it cannot be read
    error: str | None = None  # why it cannot be read
    stale: str | None = None  # why a live daemon is not keeping the index current
    unfinished: str | None = None  # the last index run stopped before its end (store/runs.py)
    status_file: str | None = None  # why the daemon can't update its status file, what to do


def folder_listing(lib: Library, folder: str) -> FolderListing:
    store = lib.store
    subfolders, docs = store.folder_entries(folder)
    skipped = [(p, r) for p, r in store.skipped() if p.rpartition("/")[0] == folder]
    return FolderListing(folder, subfolders, docs, skipped)


def doc_listing(lib: Library, path: str) -> DocListing | None:
    store = lib.store
    doc = store.document(path)
    if doc is None:
        return None
    return DocListing(doc, store.nodes(doc["id"]))


def doc_meta(lib: Library, path: str) -> DocMeta | None:
    store = lib.store
    doc = store.document(path)
    if doc is None:
        return None
    return DocMeta(doc, store.links_from(doc["id"]), store.links_to(path))


def preview(
    lib: Library,
    ref: Ref,
    info: DocMeta | None,
    focus: tuple[int, int] | None = None,
    max_lines: int = TUI_PREVIEW_MAX_LINES,
    keep: tuple[int, int] | None = None,
    listed: int = 0,
) -> Preview:
    """Load only `ref`'s line range (cut to `max_lines`, keeping `focus` lines in view).

    `info` is reused when the caller already has this document's metadata. A refresh reads
    what holds the reader's place again: `keep` is the window (first, last line) around it, and
    `listed` how many of a folder's documents were listed.
    """
    doc_path = ref.doc_path
    if ref.kind == "folder":
        below = lib.store.count_documents(ref.path)
        page = folder_page(lib, ref.path, limit=max(TUI_FOLDER_VIEW_PAGE, listed))
        return Preview(ref, None, documents=below, folder=page)
    if doc_path is None:
        return Preview(ref, None)
    if info is None or info.doc["path"] != doc_path:
        info = doc_meta(lib, doc_path)
    if info is None:
        return Preview(ref, None)
    doc = info.doc
    summary, own = None, None
    if ref.kind == "document":
        start, end, title = 1, int(doc["line_count"]), str(doc["title"])
    else:
        node = lib.store.node(doc["id"], ref.node_id)
        if node is None:
            return Preview(ref, info)
        start, end, title = node["start_line"], node["subtree_end"], str(node["title"] or "")
        summary, own = node["summary"], (int(node["start_line"]), int(node["end_line"]))
    first = start
    if keep is not None:
        max_lines = max(max_lines, keep[1] - keep[0] + 1)
        first = max(start, min(keep[0], end - max_lines + 1))
    elif focus is not None and focus[1] > start + max_lines - 1:
        first = max(start, focus[0] - 10)
    last = min(end, first + max_lines - 1)
    lines = lib.store.read_lines(doc["id"], first, last)
    return Preview(ref, info, first, lines, end, title, summary=summary, own=own)


def folder_page(
    lib: Library, folder: str, offset: int = 0, limit: int = TUI_FOLDER_VIEW_PAGE
) -> FolderPage:
    """One page of a folder's documents, cut as the browse tool cuts them for an agent."""
    total, rows = lib.store.folder_documents(folder, offset, limit)
    docs = [
        FolderDoc(
            path=str(r["path"]),
            title=cut(str(r["title"] or ""), TOOL_TITLE_CHARS),
            description=cut(str(r["description"] or ""), DESCRIPTION_PREVIEW_CHARS),
            tokens=int(r["tokens"]),
            size=int(r["size"]),
            lines=int(r["line_count"]),
        )
        for r in rows
    ]
    return FolderPage(folder, offset, total, docs)


def more_lines(
    lib: Library, p: Preview, start: int, count: int = TUI_PREVIEW_MAX_LINES
) -> list[str]:
    """The next window of `p`'s range, from `start`."""
    if p.info is None or start > p.span_end:
        return []
    return lib.store.read_lines(p.info.doc["id"], start, min(p.span_end, start + count - 1))


def status(lib: Library) -> Status:
    """Index totals and who writes it, via the core's `read_status` (shared with the CLI)."""
    info = read_status(lib)
    stale = daemon_warning(info["daemon"])  # also a frozen daemon that holds the lock
    run = info["unfinished_run"]  # a run killed or stopped midway
    if info["daemon_writing"]:
        writer = "daemon"
    elif info["writer_locked"]:
        writer = "writer"  # e.g. a `markindex index` run
    else:
        writer = "none"
    return Status(
        documents=int(info["documents"]),
        skipped=len(info["skipped"]),
        last_index_at=info["last_index_at"],
        writer=writer,
        indexed=bool(info["indexed"]),
        error=info["error"],
        stale=stale,
        unfinished=unfinished_warning(run) if run else None,
        status_file=status_file_problem(info["daemon"]),
    )


def status_file_problem(daemon: dict[str, Any] | None) -> str | None:
    """Why the daemon can't update the status file beside the index, and what to do (as
    `markindex status` says it). Not a stop, the daemon keeps the index live; but readers that
    see neither its fallback file nor its record take it for hung until the file is fixed."""
    if daemon is None or not daemon.get("status_file_error"):
        return None
    error, hint = daemon["status_file_error"], daemon.get("status_file_hint")
    return f"{error} ({hint})" if hint else str(error)


def folder_changes(lib: Library) -> str | None:
    """How the folder differs from an index no daemon keeps live, in a few words for the
    status line (`index.drift.folder_drift`: a stat of every file), or None when it matches."""
    try:
        drift = folder_drift(lib.root, lib.store)
    except (MarkindexError, apsw.Error, OSError):  # no usable index: the status line says so
        return None
    if drift is None or not drift.count:
        return None
    parts = [
        (len(drift.changed), "changed"),
        (len(drift.added), "new"),
        (len(drift.removed), "gone"),
    ]
    said = ", ".join(f"{n} {word}" for n, word in parts if n)
    files = "file" if drift.count == 1 else "files"
    return f"{said} on disk since indexed ({drift.count} {files}: i updates)"


def age(seconds_ago: float) -> str:
    """'just now', '5 min ago', '3 h ago', '2 days ago'."""
    if seconds_ago < 60:
        return "just now"
    if seconds_ago < 3600:
        return f"{int(seconds_ago // 60)} min ago"
    if seconds_ago < 86400:
        return f"{int(seconds_ago // 3600)} h ago"
    return f"{int(seconds_ago // 86400)} days ago"


def documents(n: int) -> str:
    """'1 document', '2 documents'."""
    return f"{n:,} document{'' if n == 1 else 's'}"


def now() -> float:
    return time.time()

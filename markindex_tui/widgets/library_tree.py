"""The library tree: folders → documents → sections, loaded lazily in worker threads.

As in Textual's `DirectoryTree`, each node carries one record (`Entry`: its `Ref`, a `loaded`
flag and what was read for it) and one loader worker takes nodes from a queue, so there are no
maps beside the tree to keep in step with it. Unlike `DirectoryTree`'s, the loader ends when the
queue is empty (the next request starts it again), so "every worker done" means "tree loaded".
A rebuild after the index changed swaps in a fresh queue and cancels the old loader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, NamedTuple

import apsw
from rich.style import Style
from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode
from textual.worker import Worker

from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_core.text.safe import printable
from markindex_tui.cells import mark_cut_label
from markindex_tui.data import DocListing, FolderListing, Ref, doc_listing, folder_listing
from markindex_tui.failures import report_failure
from markindex_tui.settings import TUI_FOLDER_PAGE

Key = tuple[str, str, str]


class Row(NamedTuple):
    """One child line of a folder, document or section; its label is made only when its page
    is added."""

    ref: Ref
    size: int = 0  # folders: documents below; documents: tokens
    section: dict[str, Any] | None = None  # sections: their row of `Store.nodes`

    def label(self) -> Text:
        if self.section is not None:
            return node_label(self.section)
        name = printable(self.ref.path.rpartition("/")[2])
        if self.ref.kind == "folder":
            return folder_label(name, self.size)
        if self.ref.kind == "document":
            return Text.assemble(name, (f" {_short(self.size)}", "dim"))
        return Text.assemble(name, (" skipped", "dim italic"))


@dataclass(eq=False)
class Entry:
    """What one tree node stands for and what was read for it (the node's `data`)."""

    ref: Ref
    loaded: bool = False  # children added (or queued to be)
    listing: DocListing | None = None  # documents and their sections: the document's nodes
    rows: list[Row] = field(default_factory=list)  # every child line (folders, documents, sections)
    shown: int = 0  # child lines added so far (paging)


Node = TreeNode[Entry]


def _short(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def folder_label(name: str, docs: int) -> Text:
    return Text.assemble((name + "/", "bold"), (f" {docs}", "dim"))


def node_label(n: dict[str, Any]) -> Text:
    """A section's title; merged headings (keyItems) follow it, chunks and prefaces are marked."""
    title = printable(str(n["title"]))
    if n["kind"] == "chunk":
        text = Text.assemble((title or "chunk", "italic"), (" ≡ chunk", "dim"))
    elif n["kind"] == "preface" or not title:
        text = Text(f"({n['kind']})", style="italic")
    else:
        text = Text(title)
    merged = [printable(k) for k in n["key_items"] if printable(k) != title]
    if merged:
        text.append(" + " + " · ".join(merged), style="dim italic")
    return text


class LibraryTree(Tree[Entry]):
    """Folders, documents and sections of one library; children are fetched on first expand."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right", "expand_node", "Expand", show=False),
        Binding("left", "collapse_or_parent", "Collapse / parent", show=False),
        Binding("home", "scroll_home", "First entry", show=False),
        Binding("end", "scroll_end", "Last entry", show=False),
    ]

    def __init__(self, lib: Library, **kwargs: Any) -> None:
        super().__init__(Text(printable(lib.root.name)), data=Entry(Ref("folder", "")), **kwargs)
        self.lib = lib
        self.auto_expand = True
        self._queue: asyncio.Queue[Node] = asyncio.Queue()
        self._loader: Worker[None] | None = None  # runs while the queue has work

    def on_resize(self) -> None:
        # Deep section trees must stay readable in an 80-column terminal.
        self.guide_depth = 2 if self.size.width < 48 else 3
        # A resize (the panes stack or unstack) left the tree scrolled away from its cursor.
        self.call_after_refresh(self._cursor_into_view)

    def _cursor_into_view(self) -> None:
        if self.cursor_node is not None:
            self.scroll_to_node(self.cursor_node, animate=False)

    def on_mount(self) -> None:
        self.root.expand()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)  # (the message does not bubble to the app)

    # ----- loading ------------------------------------------------------------------------------
    @on(Tree.NodeExpanded)
    def _on_expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        event.stop()
        self._request(event.node)

    @on(Tree.NodeSelected)
    def _on_selected(self, event: Tree.NodeSelected[Entry]) -> None:
        entry = event.node.data
        if entry is not None and entry.ref.kind == "more":
            event.stop()
            self._next_page(event.node)

    @on(Tree.NodeHighlighted)
    def _keep_label_in_view(self, event: Tree.NodeHighlighted[Entry]) -> None:
        """Textual scrolls a tree only up and down, so deep in folders and sections the cursor's
        label sat right of the pane, unseen: scroll sideways until it starts in view."""
        x = self.label_x(event.node)
        view = self.scrollable_content_region.width
        shown = min(self.get_label_width(event.node), view // 2)
        if x < self.scroll_x or x + shown > self.scroll_x + view:
            self.scroll_to(x=max(0, x - 2 * self.guide_depth), animate=False)

    def label_x(self, node: Node) -> int:
        """The column where `node`'s label starts: its line's guides come before it."""
        depth = 0
        while node.parent is not None:
            depth, node = depth + 1, node.parent
        return max(0, depth - (0 if self.show_root else 1)) * self.guide_depth

    def render_line(self, y: int) -> Strip:
        """A label wider than the pane ends with "…" at its edge, on a whole character (and
        one scrolled sideways past its start begins with "…").

        Textual crops the line at the pane's edges without a mark (a CJK character split by the
        edge became a blank), so a cut label read as a whole one.
        """
        strip = super().render_line(y)
        scroll_x, scroll_y = self.scroll_offset
        node = self.get_node_at_line(y + scroll_y)
        if node is None:
            return strip
        return mark_cut_label(
            strip, self.render_label(node, Style(), Style()).plain, self.label_x(node) - scroll_x
        )

    def _request(self, node: Node) -> None:
        """Add `node`'s children: sections at once, folders and documents via the loader."""
        entry = node.data
        if entry is None or entry.loaded:
            return
        if entry.ref.kind == "node":
            self._fill_section(node)
        elif entry.ref.kind in ("folder", "document"):
            entry.loaded = True
            self._queue.put_nowait(node)
            if self._loader is None:
                # A function, not a coroutine: a loader cancelled before it starts leaves none.
                drain = partial(self._drain, self._queue)
                self._loader = self.run_worker(drain, group="tree-load", exit_on_error=False)

    async def ensure_loaded(self, node: Node) -> None:
        """Load `node`'s children if not yet done, and wait until the queue is worked off."""
        self._request(node)
        await self._queue.join()

    async def _drain(self, queue: asyncio.Queue[Node]) -> None:
        """The loader: one node at a time, each read in a thread; ends when the queue is empty."""
        try:
            while not queue.empty():
                node = queue.get_nowait()
                try:
                    await self._load(node)
                finally:
                    queue.task_done()
        finally:
            if queue is self._queue:
                self._loader = None

    async def _load(self, node: Node) -> None:
        entry = node.data
        assert entry is not None
        placeholder = node.add_leaf(Text("loading…", style="dim italic"))
        try:
            if entry.ref.kind == "folder":
                listing = await asyncio.to_thread(folder_listing, self.lib, entry.ref.path)
                self._fill_folder(node, listing)
            else:
                doc = await asyncio.to_thread(doc_listing, self.lib, entry.ref.path)
                if doc is not None:
                    entry.listing = doc
                    self._fill_children(node, doc, None)
        except (MarkindexError, apsw.Error) as exc:
            entry.loaded = False  # the next expand tries again
            self.notify(
                printable(str(exc)),
                title="cannot read the index",
                severity="error",
                markup=False,
            )
        finally:
            placeholder.remove()

    def _restart_loader(self) -> None:
        """Drop loads queued for a tree that is being rebuilt; their waiters are released."""
        old, self._queue = self._queue, asyncio.Queue()
        if self._loader is not None:
            self._loader.cancel()
            self._loader = None
        while not old.empty():
            old.get_nowait()
            old.task_done()

    def _add(self, parent: Node, label: Text, ref: Ref, listing: DocListing | None = None) -> Node:
        expandable = ref.kind in ("folder", "document") or (
            listing is not None and listing.has_children(ref.node_id)
        )
        return parent.add(label, data=Entry(ref, listing=listing), allow_expand=expandable)

    def _fill_folder(self, node: Node, listing: FolderListing, upto: int = 0) -> None:
        entry = node.data
        assert entry is not None
        entry.rows = folder_rows(listing)
        entry.shown = 0
        self._add_page(node, max(upto, TUI_FOLDER_PAGE))
        if not entry.rows and node.is_root:
            node.add_leaf(Text("no documents", style="dim italic"))

    def _add_page(self, node: Node, count: int) -> Node | None:
        """Add the folder's next `count` rows and a "… N more" line when some are left."""
        entry = node.data
        assert entry is not None
        end = min(len(entry.rows), entry.shown + count)
        listing = entry.listing  # the document's sections, for section rows
        page = entry.rows[entry.shown : end]
        added = [self._add(node, row.label(), row.ref, listing) for row in page]
        entry.shown = end
        left = len(entry.rows) - end
        if left:
            label = Text(f"… {left} more (enter)", style="dim italic")
            self._add(node, label, Ref("more", entry.ref.path, entry.ref.node_id))
        return added[0] if added else None

    def _next_page(self, more: Node) -> Node | None:
        parent = more.parent
        if parent is None or parent.data is None:
            return None
        more.remove()
        first = self._add_page(parent, TUI_FOLDER_PAGE)
        if first is not None:
            self.focus_node(first)
        return first

    def _fill_children(
        self, node: Node, doc: DocListing, parent_id: str | None, upto: int = 0
    ) -> None:
        """Add a document's or section's sections, a page at a time like a folder's entries
        (one heading can have 50 000 sub-sections: adding all at once froze the app)."""
        entry = node.data
        assert entry is not None
        path = doc.doc["path"]
        entry.listing = doc
        entry.rows = [
            Row(Ref("node", path, n["node_id"], n["start_line"], n["subtree_end"]), section=n)
            for n in doc.children(parent_id)
        ]
        entry.shown = 0
        self._add_page(node, max(upto, TUI_FOLDER_PAGE))

    def _fill_section(self, node: Node, upto: int = 0) -> None:
        entry = node.data
        if entry is None or entry.listing is None or entry.loaded:
            return
        self._fill_children(node, entry.listing, entry.ref.node_id, upto)
        entry.loaded = True

    # ----- navigation ---------------------------------------------------------------------------
    def focus_node(self, node: Node) -> None:
        """Put the cursor on `node` (tree lines must be rebuilt first to know its line)."""
        _ = self.last_line
        self.move_cursor(node)
        self.scroll_to_node(node, animate=False)

    def node_for(self, key: Key) -> Node | None:
        return next((n for n in self.walk() if _key(n) == key), None)

    async def reveal(self, doc_path: str, node_id: str | None = None) -> Node | None:
        """Open the folders, document and sections down to one node and put the cursor on it."""
        for _ in range(3):  # the index changed and the tree was rebuilt meanwhile: start again
            root = self.root
            target = await self._open_down(_chain(doc_path), node_id)
            if root is self.root:
                if target is not None:
                    self.focus_node(target)
                return target
        return None

    async def _open_down(self, chain: list[Key], node_id: str | None) -> Node | None:
        """Expand and load along `chain` (folders, then the document), then down to `node_id`."""
        node, target = self.root, None
        for key in chain:
            node.expand()
            await self.ensure_loaded(node)
            child = self._child(node, key)
            if child is None:
                return target
            node = target = child
        node.expand()
        await self.ensure_loaded(node)
        listing = node.data.listing if node.data is not None else None
        if not node_id or listing is None:
            return target
        ids = listing.ancestry(node_id)
        for i, nid in enumerate(ids):
            child = self._child(node, ("node", listing.doc["path"], nid))
            if child is None:
                break
            node = target = child
            if i < len(ids) - 1:
                node.expand()
                self._fill_section(node)
        return target

    def _child(self, node: Node, key: Key) -> Node | None:
        """`node`'s child for `key`, adding further pages of a folder when paging hides it."""
        while True:
            found = next((c for c in node.children if _key(c) == key), None)
            more = node.children[-1] if node.children else None
            if found is not None or more is None or _key(more)[0] != "more":
                return found
            more.remove()
            self._add_page(node, TUI_FOLDER_PAGE)

    def action_expand_node(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand and not node.is_expanded:
            node.expand()

    def action_collapse_or_parent(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded and not node.is_root:
            node.collapse()
        elif node.parent is not None:
            self.focus_node(node.parent)

    # ----- refresh after the index changed ------------------------------------------------------
    def walk(self) -> Iterator[Node]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    async def reload(self) -> None:
        """Re-read every open folder and document and rebuild, keeping expansion and cursor.

        Listings are read in a thread; whatever was opened or selected meanwhile (a jump to a
        search hit) is what the rebuilt tree shows, so a rebuild never undoes a jump.
        """
        fl: dict[str, FolderListing] = {}
        dl: dict[str, DocListing] = {}
        read: set[Key] = set()
        for _ in range(3):  # read what was opened while the last read ran, then rebuild
            todo = self._opened().keys() - read
            if not todo:
                break
            read |= todo
            folders = [k[1] for k in todo if k[0] == "folder"]
            docs = [k[1] for k in todo if k[0] == "document"]
            more_fl, more_dl = await asyncio.to_thread(self._fetch, folders, docs)
            fl.update(more_fl)
            dl.update(more_dl)
        opened = self._opened()
        shown = {k: e.shown for k, e in opened.items()}
        cursor = self.selected_ref()
        label = str(self.cursor_node.label) if self.cursor_node is not None else ""
        self._restart_loader()
        self.clear()
        self.root.data = Entry(Ref("folder", ""))
        stack = [self.root]
        while stack:
            node = stack.pop()
            if _key(node) in opened and self._refill(node, fl, dl, shown):
                node.expand()
                stack.extend(node.children)
        self._restore_cursor(cursor, label)

    def _opened(self) -> dict[Key, Entry]:
        return {_key(n): n.data for n in self.walk() if n.is_expanded and n.data is not None}

    def _fetch(
        self, folders: list[str], docs: list[str]
    ) -> tuple[dict[str, FolderListing], dict[str, DocListing]]:
        fl = {f: folder_listing(self.lib, f) for f in folders}
        dl = {d: listing for d in docs if (listing := doc_listing(self.lib, d)) is not None}
        return fl, dl

    def _refill(
        self,
        node: Node,
        fl: dict[str, FolderListing],
        dl: dict[str, DocListing],
        shown: dict[Key, int],
    ) -> bool:
        """Add an open node's children again from fresh listings; False when it is gone."""
        entry = node.data
        assert entry is not None
        ref = entry.ref
        if ref.kind == "folder" and ref.path in fl:
            self._fill_folder(node, fl[ref.path], shown.get(ref.key, 0))
        elif ref.kind == "document" and ref.path in dl:
            self._fill_children(node, dl[ref.path], None, shown.get(ref.key, 0))
        elif ref.kind == "node" and ref.path in dl:
            self._fill_section(node, shown.get(ref.key, 0))
        else:
            return False
        entry.loaded = True
        return True

    def _restore_cursor(self, ref: Ref | None, label: str = "") -> None:
        """Back on the same entry, or on the closest one still there (its document or folder);
        `label` is the entry's line as it was, to say which section is gone."""
        if ref is None:
            return
        candidates: list[Key] = [ref.key]
        if ref.kind == "node":
            candidates.append(("document", ref.path, ""))
        if ref.doc_path is not None:  # now skipped (made binary, too big): its line says why
            candidates.append(("skipped", ref.doc_path, ""))
        path = ref.folder
        while True:
            candidates.append(("folder", path, ""))
            if not path:
                break
            path = path.rpartition("/")[0]
        by_key = {_key(n): n for n in self.walk()}
        if ref.doc_path is not None and ("document", ref.doc_path, "") not in by_key:
            # Else the cursor moves for no reason anyone can see.
            skipped = by_key.get(("skipped", ref.doc_path, ""))
            title, why = (
                ("document skipped", f"is no longer indexed: {printable(skipped.data.ref.reason)}")
                if skipped is not None and skipped.data is not None
                else (
                    "document removed",
                    "was removed from the index (deleted, moved or now ignored): showing the"
                    " closest entry still there",
                )
            )
            self.notify(
                f"{printable(ref.doc_path)} {why}",
                title=title,
                severity="warning",
                markup=False,
            )
        elif ref.kind == "node" and ref.key not in by_key:
            self.notify(
                f"the section {label} is no longer in {printable(ref.path)} (renamed, moved or"
                " removed): showing the document",
                title="section gone",
                severity="warning",
                markup=False,
            )
        for key in candidates:
            if (node := by_key.get(key)) is not None:
                self.focus_node(node)
                return

    def selected_ref(self) -> Ref | None:
        node = self.cursor_node
        return node.data.ref if node is not None and node.data is not None else None


def _key(node: Node) -> Key:
    """The node's `Ref.key`; plain lines ("loading…", "no documents") have an empty one."""
    return node.data.ref.key if node.data is not None else ("", "", "")


def _chain(doc_path: str) -> list[Key]:
    """The keys below the root down to a document: its folders, then the document."""
    parts = doc_path.split("/")
    chain: list[Key] = [("folder", "/".join(parts[:i]), "") for i in range(1, len(parts))]
    chain.append(("document", doc_path, ""))
    return chain


def folder_rows(listing: FolderListing) -> list[Row]:
    """A folder's child lines: sub-folders, documents, then files the indexer skipped."""
    base = listing.folder + "/" if listing.folder else ""
    out = [Row(Ref("folder", base + name), n) for name, n, _tokens in listing.subfolders]
    out += [Row(Ref("document", d["path"]), int(d["tokens"])) for d in listing.docs]
    out += [Row(Ref("skipped", path, reason=reason)) for path, reason in listing.skipped]
    return out

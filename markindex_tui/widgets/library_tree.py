"""The library tree: folders → documents → sections, loaded lazily in worker threads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar

import apsw
from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from markindex_core.errors import MarkindexError
from markindex_core.library import Library
from markindex_tui.data import DocListing, FolderListing, Ref, doc_listing, folder_listing
from markindex_tui.settings import TUI_FOLDER_PAGE

Key = tuple[str, str, str]
Node = TreeNode[Ref]


def _short(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def folder_label(name: str, docs: int) -> Text:
    return Text.assemble((name + "/", "bold"), (f" {docs}", "dim"))


def doc_label(doc: dict[str, Any]) -> Text:
    name = str(doc["path"]).rpartition("/")[2]
    return Text.assemble(name, (f" {_short(int(doc['tokens']))}", "dim"))


def node_label(n: dict[str, Any]) -> Text:
    """A section's title; merged headings (keyItems) follow it, chunks and prefaces are marked."""
    title = str(n["title"])
    if n["kind"] == "chunk":
        text = Text.assemble((title or "chunk", "italic"), (" ≡ chunk", "dim"))
    elif n["kind"] == "preface" or not title:
        text = Text(f"({n['kind']})", style="italic")
    else:
        text = Text(title)
    merged = [k for k in n["key_items"] if k != title]
    if merged:
        text.append(" + " + " · ".join(merged), style="dim italic")
    return text


class LibraryTree(Tree[Ref]):
    """Folders, documents and sections of one library; children are fetched on first expand."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right", "expand_node", "Expand", show=False),
        Binding("left", "collapse_or_parent", "Collapse / parent", show=False),
        Binding("home", "scroll_home", "First entry", show=False),
        Binding("end", "scroll_end", "Last entry", show=False),
    ]

    def __init__(self, lib: Library, **kwargs: Any) -> None:
        super().__init__(lib.root.name, data=Ref("folder", ""), **kwargs)
        self.lib = lib
        self.auto_expand = True
        self._by_key: dict[Key, Node] = {}
        self._loaded: set[Key] = set()
        self._pending: dict[Key, asyncio.Future[None]] = {}
        self._docs: dict[str, DocListing] = {}
        self._folders: dict[str, FolderListing] = {}
        self._shown: dict[str, int] = {}  # folder -> entries shown (paging)
        self._entries: dict[str, list[tuple[Text, Ref, bool]]] = {}
        self._epoch = 0  # bumped by reload(): loads started before it are dropped

    def on_resize(self) -> None:
        # Deep section trees must stay readable in an 80-column terminal.
        self.guide_depth = 2 if self.size.width < 48 else 3

    def on_mount(self) -> None:
        self._by_key[self.root.data.key] = self.root  # type: ignore[union-attr]
        self.root.expand()

    # ----- loading ------------------------------------------------------------------------------
    @on(Tree.NodeExpanded)
    def _on_expanded(self, event: Tree.NodeExpanded[Ref]) -> None:
        event.stop()
        node = event.node
        ref = node.data
        if ref is None or ref.key in self._loaded:
            return
        if ref.kind == "node":
            self._fill_section(node)
        else:
            self.run_worker(self.ensure_loaded(node), group="tree-load", exit_on_error=False)

    @on(Tree.NodeSelected)
    def _on_selected(self, event: Tree.NodeSelected[Ref]) -> None:
        ref = event.node.data
        if ref is not None and ref.kind == "more":
            event.stop()
            self._next_page(event.node)

    async def ensure_loaded(self, node: Node) -> None:
        """Fetch a folder's or document's children in a thread, once; concurrent callers wait."""
        ref = node.data
        if ref is None or ref.key in self._loaded:
            return
        if ref.key in self._pending:
            await self._pending[ref.key]
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[ref.key] = future
        epoch = self._epoch
        placeholder = node.add_leaf(Text("loading…", style="dim italic"))
        try:
            if ref.kind == "folder":
                listing = await asyncio.to_thread(folder_listing, self.lib, ref.path)
                if epoch == self._epoch:  # else a reload rebuilt the tree meanwhile
                    self._folders[ref.path] = listing
                    self._fill_folder(node, listing)
            elif ref.kind == "document":
                doc = await asyncio.to_thread(doc_listing, self.lib, ref.path)
                if epoch == self._epoch and doc is not None:
                    self._docs[ref.path] = doc
                    self._fill_document(node, doc)
            if epoch == self._epoch:
                self._loaded.add(ref.key)
        except (MarkindexError, apsw.Error) as exc:
            self.notify(str(exc), title="cannot read the index", severity="error")
        finally:
            placeholder.remove()
            if self._pending.get(ref.key) is future:
                del self._pending[ref.key]
            future.set_result(None)

    def _add(self, parent: Node, label: Text, ref: Ref, expandable: bool) -> Node:
        node = parent.add(label, data=ref, allow_expand=expandable)
        self._by_key[ref.key] = node
        return node

    def _fill_folder(self, node: Node, listing: FolderListing, upto: int = 0) -> None:
        entries = self._folder_entries(listing)
        shown = min(len(entries), max(upto, TUI_FOLDER_PAGE))
        for label, ref, expandable in entries[:shown]:
            self._add(node, label, ref, expandable)
        self._shown[listing.folder] = shown
        self._add_more(node, listing.folder, shown, len(entries))
        if not entries and node.is_root:
            node.add_leaf(Text("no documents", style="dim italic"))

    def _folder_entries(self, listing: FolderListing) -> list[tuple[Text, Ref, bool]]:
        cached = self._entries.get(listing.folder)
        if cached is None:
            cached = self._entries[listing.folder] = self._make_entries(listing)
        return cached

    def _make_entries(self, listing: FolderListing) -> list[tuple[Text, Ref, bool]]:
        base = listing.folder + "/" if listing.folder else ""
        out: list[tuple[Text, Ref, bool]] = [
            (folder_label(name, n), Ref("folder", base + name), True)
            for name, n, _tokens in listing.subfolders
        ]
        out += [(doc_label(d), Ref("document", d["path"]), True) for d in listing.docs]
        out += [
            (
                Text.assemble(path.rpartition("/")[2], (" skipped", "dim italic")),
                Ref("skipped", path, reason=reason),
                False,
            )
            for path, reason in listing.skipped
        ]
        return out

    def _add_more(self, node: Node, folder: str, shown: int, total: int) -> None:
        if shown < total:
            label = Text(f"… {total - shown} more (enter)", style="dim italic")
            self._add(node, label, Ref("more", folder, offset=shown), False)

    def _next_page(self, more: Node) -> None:
        ref, parent = more.data, more.parent
        if ref is None or parent is None or ref.path not in self._folders:
            return
        entries = self._folder_entries(self._folders[ref.path])
        more.remove()
        self._by_key.pop(ref.key, None)
        end = min(len(entries), ref.offset + TUI_FOLDER_PAGE)
        first: Node | None = None
        for label, child, expandable in entries[ref.offset : end]:
            added = self._add(parent, label, child, expandable)
            first = first or added
        self._shown[ref.path] = end
        self._add_more(parent, ref.path, end, len(entries))
        if first is not None:
            self.focus_node(first)

    def _fill_document(self, node: Node, doc: DocListing) -> None:
        self._fill_children(node, doc, None)

    def _fill_children(self, node: Node, doc: DocListing, parent_id: str | None) -> None:
        kids = {n["parent_id"] for n in doc.nodes}
        for n in doc.children(parent_id):
            ref = Ref("node", doc.doc["path"], n["node_id"], n["start_line"], n["subtree_end"])
            self._add(node, node_label(n), ref, n["node_id"] in kids)

    def _fill_section(self, node: Node) -> None:
        ref = node.data
        if ref is None or ref.path not in self._docs:
            return
        self._fill_children(node, self._docs[ref.path], ref.node_id)
        self._loaded.add(ref.key)

    # ----- navigation ---------------------------------------------------------------------------
    def focus_node(self, node: Node) -> None:
        """Put the cursor on `node` (tree lines must be rebuilt first to know its line)."""
        _ = self.last_line
        self.move_cursor(node)
        self.scroll_to_node(node, animate=False)

    def node_for(self, key: Key) -> Node | None:
        return self._by_key.get(key)

    async def reveal(self, doc_path: str, node_id: str | None = None) -> Node | None:
        """Open the folders, document and sections down to one node and put the cursor on it."""
        parts = doc_path.split("/")
        chain: list[Key] = [("folder", "", "")]
        chain += [("folder", "/".join(parts[:i]), "") for i in range(1, len(parts))]
        chain.append(("document", doc_path, ""))
        target: Node | None = None
        for key in chain:
            node = await self._find(key)
            if node is None:
                return target
            node.expand()
            await self.ensure_loaded(node)
            target = node
        if node_id and doc_path in self._docs:
            by_id = {n["node_id"]: n for n in self._docs[doc_path].nodes}
            ids: list[str] = []
            cur: str | None = node_id
            while cur is not None and cur in by_id:
                ids.append(cur)
                cur = by_id[cur]["parent_id"]
            for i, nid in enumerate(reversed(ids)):
                node = self._by_key.get(("node", doc_path, nid))
                if node is None:
                    break
                target = node
                if i < len(ids) - 1:
                    node.expand()
                    self._fill_section_once(node)
        if target is not None:
            self.focus_node(target)
        return target

    def _fill_section_once(self, node: Node) -> None:
        if node.data is not None and node.data.key not in self._loaded:
            self._fill_section(node)

    async def _find(self, key: Key) -> Node | None:
        """The node for `key`, loading further pages of its folder when paging hides it."""
        node = self._by_key.get(key)
        while node is None:
            folder = key[1].rpartition("/")[0] if key[1] else None
            more = self._by_key.get(("more", folder or "", ""))
            if folder is None or more is None:
                return None
            self._next_page(more)
            node = self._by_key.get(key)
        return node

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
        """Re-read every open folder and document and rebuild, keeping expansion and cursor."""
        expanded = [n.data.key for n in self.walk() if n.is_expanded and n.data is not None]
        cursor = self.cursor_node.data if self.cursor_node is not None else None
        shown = dict(self._shown)
        folders = [k[1] for k in expanded if k[0] == "folder"]
        docs = [k[1] for k in expanded if k[0] == "document"]

        def fetch() -> tuple[dict[str, FolderListing], dict[str, DocListing]]:
            fl = {f: folder_listing(self.lib, f) for f in folders}
            dl = {d: listing for d in docs if (listing := doc_listing(self.lib, d)) is not None}
            return fl, dl

        self._epoch += 1
        epoch = self._epoch
        fl, dl = await asyncio.to_thread(fetch)
        if epoch != self._epoch:
            return  # a newer reload is under way
        self.clear()
        self._entries.clear()
        self._pending.clear()
        self._by_key = {self.root.data.key: self.root}  # type: ignore[union-attr]
        self._loaded.clear()
        self._folders, self._docs = fl, dl
        open_keys = set(expanded)
        todo = [self.root]
        while todo:
            node = todo.pop()
            ref = node.data
            if ref is None or ref.key not in open_keys:
                continue
            if ref.kind == "folder" and ref.path in fl:
                self._fill_folder(node, fl[ref.path], shown.get(ref.path, 0))
            elif ref.kind == "document" and ref.path in dl:
                self._fill_document(node, dl[ref.path])
            elif ref.kind == "node" and ref.path in dl:
                self._fill_section(node)
            else:
                continue
            self._loaded.add(ref.key)
            node.expand()
            todo.extend(node.children)
        self._restore_cursor(cursor)

    def _restore_cursor(self, ref: Ref | None) -> None:
        """Back on the same entry, or on the closest one still there (its document or folder)."""
        if ref is None:
            return
        candidates: list[Key] = [ref.key]
        if ref.kind == "node":
            candidates.append(("document", ref.path, ""))
        path = ref.folder
        while True:
            candidates.append(("folder", path, ""))
            if not path:
                break
            path = path.rpartition("/")[0]
        for key in candidates:
            if (node := self._by_key.get(key)) is not None:
                self.focus_node(node)
                return

    def selected_ref(self) -> Ref | None:
        node = self.cursor_node
        return node.data if node is not None else None

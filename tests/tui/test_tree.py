"""The library tree's loader: one queue, one worker, and rebuilds that race with loads."""

from __future__ import annotations

import asyncio

import pytest

from markindex_core.library import Library
from markindex_tui.testing import SIZE, make_app, settle
from markindex_tui.widgets.library_tree import LibraryTree, Node

pytestmark = pytest.mark.timeout(60)


def attached(tree: LibraryTree, node: Node) -> bool:
    while node.parent is not None:
        node = node.parent
    return node is tree.root


async def test_jump_lands_when_the_tree_is_rebuilt_meanwhile(indexed_sample: Library) -> None:
    app = make_app(indexed_sample.root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        doc = indexed_sample.store.document("guides/install.md")
        assert doc is not None
        deepest = indexed_sample.store.nodes(doc["id"])[-1]["node_id"]
        target = ("node", "guides/install.md", deepest)
        for _ in range(5):
            # Whichever ends first, the cursor ends on the target in the tree on screen.
            node, _ = await asyncio.gather(tree.reveal("guides/install.md", deepest), tree.reload())
            assert node is not None and node.data is not None
            assert node.data.ref.key == target
            shown = tree.cursor_node
            assert shown is not None and shown.data is not None
            assert shown.data.ref.key == target
            assert attached(tree, shown)
            tree.root.collapse_all()
            tree.root.expand()
            await tree.reload()  # start again from a tree with only the root open
            await settle(pilot)


async def test_each_node_is_loaded_once(indexed_sample: Library) -> None:
    app = make_app(indexed_sample.root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        guides = tree.node_for(("folder", "guides", ""))
        assert guides is not None
        await asyncio.gather(*(tree.ensure_loaded(guides) for _ in range(4)))
        guides.expand()
        await settle(pilot)
        assert [str(c.label) for c in guides.children] == ["install.md 449"]
        assert guides.data is not None and guides.data.loaded

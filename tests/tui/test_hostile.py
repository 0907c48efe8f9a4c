"""Hostile libraries: markup in names, an index that changes or vanishes, huge documents."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static
from textual.widgets._toast import Toast

from markindex_core.library import Library
from markindex_tui.screens.build import BuildScreen
from markindex_tui.testing import make_app, settle, wait_until
from markindex_tui.widgets.library_tree import LibraryTree
from markindex_tui.widgets.status_bar import StatusBar

pytestmark = pytest.mark.timeout(60)

LINK_NAME = "[link=https:evil]x.md"  # Textual's markup parser raises MarkupError on it


def toasts(app: object) -> list[str]:
    return [t.render().plain for t in app.screen.query(Toast)]  # type: ignore[attr-defined]


async def test_a_citation_with_markup_in_the_file_name_is_shown_as_text(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "d").mkdir(parents=True)
    (root / LINK_NAME).write_text("# Evil\n\nbody\n", encoding="utf-8")
    (root / "d" / "[bold red]y.md").write_text("# Red\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        for path in (LINK_NAME, "d/[bold red]y.md"):
            await tree.reveal(path)
            await settle(pilot)
            await pilot.press("c")
            await wait_until(pilot, lambda p=path: any(p in t for t in toasts(app)))  # type: ignore[misc]
            assert app.clipboard == f"[{path}, L1-3]"
    assert app.return_code in (None, 0)


async def test_a_failed_build_keeps_saying_why(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nbody\n", encoding="utf-8")
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    app = make_app(root, blocker / "index.db")  # its folder cannot be made: a file is there
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BuildScreen)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.pause(0.5)  # the progress timer (every 0.1 s) had time to run
        shown = str(app.screen.query_one("#build-file", Static).render())
        assert "not built: cannot put the index at" in shown and "is a file" in shown
        assert str(blocker) in shown
        assert any("is a file, not a folder" in t for t in toasts(app))
        assert isinstance(app.screen, BuildScreen)
        assert not app.screen.has_class("-building")  # the buttons are back: try again or quit


async def test_a_full_rebuild_and_a_removed_index_are_followed(tmp_path: Path) -> None:
    root, db = tmp_path / "lib", tmp_path / "elsewhere" / "index.db"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nbody\n", encoding="utf-8")
    Library(root, db).index()
    app = make_app(root, db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        status = app.screen.query_one(StatusBar)
        assert [str(c.label) for c in tree.root.children] == ["a.md 3"]

        # `rm index.db*; markindex index --db …`: a new file, whose connection counts anew
        for f in db.parent.glob("index.db*"):
            f.unlink()
        (root / "b.md").write_text("# B\n\nbody\n", encoding="utf-8")
        Library(root, db).index()
        await wait_until(pilot, lambda: len(tree.root.children) == 2)
        assert [str(c.label) for c in tree.root.children] == ["a.md 3", "b.md 3"]

        for f in db.parent.glob("index.db*"):
            f.unlink()
        await wait_until(pilot, lambda: "no index file" in str(status.render()))
        assert "0 documents" not in str(status.render())

        await pilot.press("i")  # builds it again; the app follows the new file
        await wait_until(pilot, lambda: "2 documents" in str(status.render()))
        db.write_bytes(b"not an index")
        await wait_until(pilot, lambda: "index unusable" in str(status.render()))
        assert "not an SQLite database" in str(status.render())


async def test_failures_of_screen_workers_are_not_silent(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    for name in ("a", "b"):
        (root / f"{name}.md").write_text(f"# {name}\n\nbody\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("down")  # a.md
        await settle(pilot)
        for f in lib.db_path.parent.glob("index.db*"):
            f.unlink()
        await pilot.press("r")  # the screen's reload worker fails: no index
        await wait_until(pilot, lambda: any("no index at" in t for t in toasts(app)))
        assert any(t.startswith("refresh index") for t in toasts(app))
        app.clear_notifications()
        await pilot.press("down")  # b.md: the screen's preview worker fails
        await wait_until(pilot, lambda: any("no index at" in t for t in toasts(app)))
        assert any(t.startswith("load preview") for t in toasts(app))


async def test_sections_with_many_subsections_are_paged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import markindex_tui.widgets.library_tree as library_tree

    monkeypatch.setattr(library_tree, "TUI_FOLDER_PAGE", 2)  # 50 000 sub-sections in real life
    root = tmp_path / "lib"
    root.mkdir()
    filler = " ".join(f"word{j}" for j in range(400))  # big enough not to be merged
    parts = [f"## Part {i}\n\nzebra{i} {filler}\n\n" for i in range(5)]
    (root / "big.md").write_text("# Top\n\nintro\n\n" + "".join(parts), encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        doc = await tree.reveal("big.md")
        await settle(pilot)
        assert doc is not None
        top = doc.children[0]
        assert str(top.label).startswith("Top")
        tree.focus_node(top)
        await pilot.press("right")
        await settle(pilot)
        assert [str(c.label) for c in top.children] == ["Part 0", "Part 1", "… 3 more (enter)"]
        await pilot.press("down", "down", "down", "enter")  # the "… more" line
        await settle(pilot)
        assert [str(c.label) for c in top.children][2:] == ["Part 2", "Part 3", "… 1 more (enter)"]
        await pilot.press("r")  # a reload rebuilds the tree and keeps the pages that were open
        await settle(pilot)
        top_again = tree.node_for(("node", "big.md", top.data.ref.node_id if top.data else ""))
        assert top_again is not None and len(top_again.children) == 5
        await pilot.press("slash", *"zebra4", "enter")  # the hit is on a page not shown yet
        await settle(pilot)
        ref = tree.selected_ref()
        assert ref is not None and ref.kind == "node"
        assert str(tree.cursor_node.label if tree.cursor_node else "") == "Part 4"


async def test_a_one_megabyte_line_is_cut_in_the_preview(tmp_path: Path) -> None:
    from markindex_tui.settings import TUI_PREVIEW_LINE_CHARS
    from markindex_tui.widgets.lines_view import LinesView

    root = tmp_path / "lib"
    root.mkdir()
    (root / "long.md").write_text("# Long\n\n" + "x" * 1_000_000 + "\n\nend\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("down")  # long.md: all its lines in the preview
        await settle(pilot)
        lines = app.screen.query_one(LinesView)
        rows = lines.text.split("\n")
        assert rows[0] == "# Long" and rows[-1] == "end"  # line numbers stay those of the file
        long_row = rows[2]
        assert long_row.startswith("x" * TUI_PREVIEW_LINE_CHARS)
        assert long_row.endswith(
            f" … [{1_000_000 - TUI_PREVIEW_LINE_CHARS:,} more characters on this line]"
        )
        assert len(long_row) < TUI_PREVIEW_LINE_CHARS + 100


async def test_no_citation_is_made_up_when_the_document_could_not_be_read(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nbody\n\nmore\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        for f in lib.db_path.parent.glob("index.db*"):
            f.unlink()
        await pilot.press("down", "c")  # a.md: its preview fails, its line count is unknown
        await settle(pilot)
        assert app.clipboard != "[a.md, L1-1]"  # the document has 5 lines
        assert any("lines are not loaded" in t for t in toasts(app))


async def test_the_cursor_label_stays_in_view_deep_in_folders(tmp_path: Path) -> None:
    """30 folders deep the label starts far right of a 39-column pane: the tree scrolls sideways
    to it, and back when the cursor returns to the top."""
    root = tmp_path / "lib"
    rel = "/".join(f"level{i:02d}" for i in range(30)) + "/deep.md"
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_text("# Deep\n\n" + "words " * 300 + "\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        node = await tree.reveal(rel)
        await settle(pilot)
        assert node is not None and tree.cursor_node is node
        view = tree.scrollable_content_region.width
        depth = rel.count("/") + 1
        label_x = (depth - (0 if tree.show_root else 1)) * tree.guide_depth
        assert tree.scroll_x <= label_x < tree.scroll_x + view, (tree.scroll_x, label_x, view)
        await pilot.press("home")
        await settle(pilot)
        assert tree.cursor_line == 0 and tree.scroll_x == 0


async def test_a_daemon_that_cannot_write_is_not_shown_as_writing(tmp_path: Path) -> None:
    """A live daemon in another process that holds the lock but cannot write (an immutable index
    file) is 'not updating', with its reason; once it writes again, 'daemon writing'."""
    import subprocess

    from tests.daemon.helpers import DaemonProcess

    root, db = tmp_path / "lib", tmp_path / "idx" / "index.db"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nbody\n", encoding="utf-8")
    Library(root, db).index()
    (root / "b.md").write_text("# B\n\nmore\n", encoding="utf-8")

    def chattr(flag: str) -> bool:
        return subprocess.run(["chattr", flag, str(db)], capture_output=True).returncode == 0

    if not chattr("+i"):
        pytest.skip("chattr +i is not available here")
    daemon = DaemonProcess(root, db)
    try:
        app = make_app(root, db)
        async with app.run_test(size=(160, 30)) as pilot:
            bar = app.screen.query_one(StatusBar)
            await wait_until(pilot, lambda: "daemon not updating" in str(bar.render()), 20)
            assert "read-only" in str(bar.render())
            chattr("-i")
            await wait_until(pilot, lambda: "daemon writing" in str(bar.render()), 30)
            assert "not updating" not in str(bar.render())
    finally:
        chattr("-i")
        assert daemon.stop() == 0, daemon.log


async def test_a_frozen_daemon_is_shown_as_not_updating(tmp_path: Path) -> None:
    """A daemon stopped with SIGSTOP keeps the writer lock and stops beating: not 'being
    indexed', but 'daemon not updating' and why."""
    import os
    import signal

    from markindex_core.serve.status import STALE_AFTER_S
    from tests.daemon.helpers import DaemonProcess

    root, db = tmp_path / "lib", tmp_path / "idx" / "index.db"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nbody\n", encoding="utf-8")
    daemon = DaemonProcess(root, db)
    try:
        daemon.wait_writing()
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        app = make_app(root, db)
        async with app.run_test(size=(160, 30)) as pilot:
            bar = app.screen.query_one(StatusBar)
            await wait_until(
                pilot, lambda: "daemon not updating" in str(bar.render()), STALE_AFTER_S + 20
            )
            assert "has not responded" in str(bar.render())
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
        assert daemon.stop() == 0, daemon.log


async def test_a_daemon_that_cannot_update_its_status_file_says_so_in_the_status_line(
    tmp_path: Path,
) -> None:
    """A daemon whose status file is made immutable keeps writing, and the status line said
    nothing of it: now it shows the problem and its hint, the path's control characters
    escaped."""
    import subprocess

    from markindex_core.serve.status import status_path
    from tests.daemon.helpers import DaemonProcess

    root, db = tmp_path / "lib", tmp_path / "idx\x1b[2J" / "index.db"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nbody\n", encoding="utf-8")

    def chattr(flag: str) -> bool:
        done = subprocess.run(["chattr", flag, status_path(db)], capture_output=True)
        return done.returncode == 0

    daemon = DaemonProcess(root, db)
    try:
        daemon.wait_writing()
        if not chattr("+i"):
            pytest.skip("chattr +i is not available here")
        app = make_app(root, db)
        async with app.run_test(size=(160, 30)) as pilot:
            bar = app.screen.query_one(StatusBar)
            said = "cannot update the status file"
            await wait_until(pilot, lambda: said in str(bar.render()), 20)
            shown = str(bar.render())
            assert "Operation not permitted" in shown and "`chattr -i -a`" in shown, shown
            assert "idx\\x1b[2J" in shown and "\x1b" not in shown, shown
            assert "daemon writing" in shown and "not updating" not in shown, shown
    finally:
        chattr("-i")
        assert daemon.stop() == 0, daemon.log


async def test_a_preview_replaced_before_it_scrolled_to_its_passage(tmp_path: Path) -> None:
    """Showing a cited passage scrolls to it after the next refresh; when another preview (a
    refresh of the index, the next highlight) replaced it first, that scroll looked up a row of
    the old text in the new one and the app died with a ValueError traceback."""
    from markindex_tui import data
    from markindex_tui.widgets.lines_view import LinesView

    root = tmp_path / "lib"
    root.mkdir()
    (root / "long.md").write_text(
        "# Long\n\n" + "".join(f"line {i}\n" for i in range(400)), encoding="utf-8"
    )
    (root / "short.md").write_text("# Short\n\nbody\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        view = app.screen.query_one(LinesView)
        long_p = data.preview(lib, data.Ref("document", "long.md"), None)
        short_p = data.preview(lib, data.Ref("document", "short.md"), None)
        view.show(long_p, focus=(250, 252))  # scrolls to row 249 after the next refresh…
        view.show(short_p)  # …but three rows are shown by then
        await settle(pilot)
        assert view.text == "# Short\n\nbody" and view.scroll_y == 0
    assert app.return_code in (None, 0)


FILLER = " ".join(f"word{j}" for j in range(400))  # big enough not to be merged into its parent


def _two_sections(intro_lines: int) -> str:
    intro = "".join(f"intro {i}\n" for i in range(intro_lines))
    return f"# Top\n\n{intro}\n## Sub\n\nzebra {FILLER}\n\n## Other\n\nquagga {FILLER}\n"


async def test_a_result_whose_section_moved_since_the_search(tmp_path: Path) -> None:
    """The document was re-indexed between the search and enter: its section kept its id but
    moved down. The app selected the old line numbers and `c` copied the old citation, which
    names lines that now hold something else. Now it says so and cites the section as it is."""
    from markindex_tui.screens.browse import BrowseScreen
    from markindex_tui.screens.search import SearchScreen
    from markindex_tui.widgets.lines_view import LinesView

    root = tmp_path / "lib"
    root.mkdir()
    doc = root / "a.md"
    doc.write_text(_two_sections(1), encoding="utf-8")
    lib = Library(root)
    lib.index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zebra")
        await settle(pilot)
        search = app.screen
        assert isinstance(search, SearchScreen) and search.result is not None
        old = search.result.hits[0]
        doc.write_text(_two_sections(21), encoding="utf-8")  # Sub is 20 lines further down
        lib.index()
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("changed since the search" in t for t in toasts(app)))
        screen = app.screen
        assert isinstance(screen, BrowseScreen)
        # Once the jump is done and before the preview has checked the section, `c` copied the
        # old citation. It now waits for the check.
        app.clear_notifications()
        await screen.jump_to(old).wait()
        assert screen.citation() != old.citation
        await wait_until(pilot, lambda: any("changed since the search" in t for t in toasts(app)))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, BrowseScreen)
        ref = screen.query_one(LibraryTree).selected_ref()
        assert ref is not None and ref.key == ("node", "a.md", old.node_id)
        lines = doc.read_text(encoding="utf-8").split("\n")
        assert ref.start == lines.index("## Sub") + 1 == old.start_line + 20
        assert screen.citation() == f"[a.md, L{ref.start}-{ref.end}]" != old.citation
        view = screen.query_one(LinesView)
        assert view.selection.is_empty and view.line_number_start == ref.start


async def test_a_result_whose_document_was_deleted_since_the_search(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    doc = root / "a.md"
    doc.write_text(_two_sections(1), encoding="utf-8")
    (root / "b.md").write_text("# B\n\nbody\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zebra")
        await settle(pilot)
        doc.unlink()
        lib.index()
        await pilot.press("enter")  # before: nothing happened, not a word why
        await wait_until(pilot, lambda: any("no longer in the index" in t for t in toasts(app)))
        await settle(pilot)
        assert app.screen.citation() is None  # type: ignore[attr-defined]
    assert app.return_code in (None, 0)


async def test_the_open_document_deleted_meanwhile_is_said(tmp_path: Path) -> None:
    """The document on screen was deleted and another process updated the index: the tree and
    preview jumped to the library folder without a word, as if a key had been pressed. The app
    now says that the document is no longer in the index."""
    root = tmp_path / "lib"
    root.mkdir()
    doc = root / "a.md"
    doc.write_text(_two_sections(1), encoding="utf-8")
    (root / "b.md").write_text("# B\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter", "down")  # a.md, its first section
        await settle(pilot)
        ref = app.screen.query_one(LibraryTree).selected_ref()
        assert ref is not None and ref.doc_path == "a.md"
        doc.unlink()
        other = Library(root)
        other.index()
        other.close()
        await wait_until(pilot, lambda: any("a.md" in t and "removed" in t for t in toasts(app)))
        b = app.screen.query_one(LibraryTree).selected_ref()
        assert b is not None and b.doc_path is None


async def test_quitting_during_the_first_build_stops_it(tmp_path: Path) -> None:
    """The build runs in a thread the event loop waits for when the app ends: quitting while a
    big library was being indexed left the terminal hanging until every file was read. The
    build now stops at the next file once the app is quitting (what was written is kept, the
    next run completes it)."""
    import asyncio

    root = tmp_path / "lib"
    root.mkdir()
    total = 1500
    body = "words and more words 数据安全 " * 100
    for i in range(total):
        (root / f"d{i:04d}.md").write_text(f"# Doc {i}\n\n{body}\n", encoding="utf-8")
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, BuildScreen)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen._progress[0] > 0)
        # What ctrl+q does, called at once: a key pressed through the pilot waits until the app
        # is idle, behind the build's progress updates, and a quick host finishes the build first.
        await app.action_quit()
    # What the process does before it can end: wait for the executor's threads (the build).
    await asyncio.get_running_loop().shutdown_default_executor()
    lib = Library(root)
    built = lib.store.count_documents() if lib.has_index() else 0
    assert built < total
    assert lib.index().added  # the next run completes the work
    assert lib.store.count_documents() == total


async def test_a_commit_elsewhere_keeps_the_readers_place_in_a_long_preview(
    tmp_path: Path,
) -> None:
    """Reading line 900 of a long document (four windows loaded), any commit by another
    process, even of another file, reloaded the preview from its first window: the view jumped
    back to line 1 and the cursor to the first line. The place and the cursor stay."""
    from textual.geometry import Offset

    from markindex_tui.settings import TUI_PREVIEW_MAX_LINES
    from markindex_tui.widgets.lines_view import LinesView

    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text(
        "# Long\n\n" + "".join(f"line {i}\n" for i in range(3, 2001)), encoding="utf-8"
    )
    (root / "b.md").write_text("# B\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("down", "tab")  # a.md, the preview focused
        await settle(pilot)
        view = app.screen.query_one(LinesView)
        tree = app.screen.query_one(LibraryTree)
        for _ in range(40):
            await pilot.press("pagedown")
            await settle(pilot)

        def top_line() -> int:
            row, _ = view.wrapped_document.offset_to_location(Offset(0, round(view.scroll_y)))
            return view.line_number_start + row

        def place() -> tuple[int, int, int]:
            """The file's line at the top, and the cursor's line and column."""
            row, column = view.cursor_location
            return top_line(), view.line_number_start + row, column

        before = place()
        assert before[0] > 600 and before[1] > 600 and view.shown is not None, before
        assert len(view.shown.lines) > 3 * TUI_PREVIEW_MAX_LINES
        (root / "c.md").write_text("# C\n\nbody\n", encoding="utf-8")
        other = Library(root)
        other.index()
        other.close()
        await wait_until(pilot, lambda: len(tree.root.children) == 3)
        await settle(pilot)
        assert place() == before
        # A window around the place is read again, not all that was loaded: laying out
        # thousands of long lines again on every commit of a daemon froze the app.
        assert len(view.shown.lines) <= 2 * TUI_PREVIEW_MAX_LINES + 1
        await pilot.press("down")  # the cursor goes on from where it was
        await settle(pilot)
        after = place()
        assert after[1] == before[1] + 1 and after[0] >= before[0]


async def test_the_open_document_now_skipped_is_shown_as_skipped(tmp_path: Path) -> None:
    """The document on screen was overwritten with binary data and another process indexed
    it: the app said it was "removed from the index (deleted, moved or now ignored)" and moved
    the cursor to the library folder, while the tree listed it as skipped, with the reason,
    right there. The cursor now goes to that line and the notice says why it is not indexed."""
    root = tmp_path / "lib"
    root.mkdir()
    doc = root / "a.md"
    doc.write_text(_two_sections(1), encoding="utf-8")
    (root / "b.md").write_text("# B\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter", "down")  # a.md, its first section
        await settle(pilot)
        doc.write_bytes(b"\x00\x01binary\xff\xfe" * 100)
        other = Library(root)
        other.index()
        other.close()
        await wait_until(pilot, lambda: any("a.md" in t for t in toasts(app)))
        await settle(pilot)
        ref = app.screen.query_one(LibraryTree).selected_ref()
        assert ref is not None and ref.key == ("skipped", "a.md", ""), ref
        said = next(t for t in toasts(app) if "a.md" in t)
        assert said == f"document skipped\na.md is no longer indexed: {ref.reason}", said


async def test_a_commit_after_a_jump_keeps_the_found_passage_selected(tmp_path: Path) -> None:
    """After a jump to a passage the reader paged on; a commit elsewhere then read the lines
    around their place (55bfb20), which no longer held the passage, and the selection, clamped
    into that window, marked line 1229, far from the passage (while `c` still cited it). A
    found passage is shown again as after the jump, as before that change."""
    from markindex_tui.widgets.lines_view import LinesView

    root = tmp_path / "lib"
    root.mkdir()
    lines = [f"line {i}" for i in range(3, 2001)]
    lines[997] = "the zebrafish passage"  # line 1000
    (root / "a.md").write_text("# Long\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (root / "b.md").write_text("# B\n\nbody\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zebrafish", "enter")
        await settle(pilot)
        view = app.screen.query_one(LinesView)

        def selected() -> tuple[int, int]:
            """The file's lines selected (first, last)."""
            start = view.line_number_start
            return start + view.selection.end[0], start + view.selection.start[0]

        passage = selected()
        assert passage[0] <= 1000 <= passage[1], passage
        await pilot.press("ctrl+l", *["pagedown"] * 25)  # the passage's window and the next
        await settle(pilot)
        (root / "c.md").write_text("# C\n\nbody\n", encoding="utf-8")
        other = Library(root)
        other.index()
        other.close()
        tree = app.screen.query_one(LibraryTree)
        await wait_until(pilot, lambda: tree.node_for(("document", "c.md", "")) is not None)
        await settle(pilot)
        assert selected() == passage
        assert "the zebrafish passage" in view.selected_text


async def test_the_open_section_renamed_meanwhile_is_said(tmp_path: Path) -> None:
    """The section on screen lost its heading's old name in an edit another process indexed:
    the cursor moved up to its document, and the preview to line 1, without a word."""
    root = tmp_path / "lib"
    root.mkdir()
    doc = root / "a.md"
    doc.write_text(_two_sections(1), encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        await pilot.press("slash", *"zebra", "enter")  # the section "Sub"
        await settle(pilot)
        ref = tree.selected_ref()
        assert ref is not None and ref.kind == "node"
        doc.write_text(_two_sections(1).replace("## Sub", "## Renamed"), encoding="utf-8")
        other = Library(root)
        other.index()
        other.close()
        await wait_until(pilot, lambda: any("a.md" in t for t in toasts(app)))
        now = tree.selected_ref()
        assert now is not None and now.key == ("document", "a.md", "")
        said = next(t for t in toasts(app) if "a.md" in t)
        assert "Sub" in said and "no longer in a.md" in said, said

"""The terminal app driven like a person would: keys in, tree, preview and status out."""

from __future__ import annotations

import html
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from textual import events
from textual.widgets import OptionList

from markindex_core.library import Library
from markindex_core.serve.status import read_status, read_status_file
from markindex_tui.app import MarkindexApp
from markindex_tui.screens.browse import BrowseScreen
from markindex_tui.screens.build import BuildScreen
from markindex_tui.screens.help import HelpScreen
from markindex_tui.screens.search import SearchScreen
from markindex_tui.testing import SIZE, make_app, settle, wait_until
from markindex_tui.widgets.library_tree import LibraryTree
from markindex_tui.widgets.lines_view import LinesView
from markindex_tui.widgets.status_bar import StatusBar
from tests.core.helpers import two_libraries

pytestmark = pytest.mark.timeout(60)


def labels(node: object) -> list[str]:
    return [c.label.plain for c in node.children]  # type: ignore[attr-defined]


def tree_of(app: MarkindexApp) -> LibraryTree:
    return app.screen.query_one(LibraryTree)


async def test_open_expand_folder_and_document_and_see_section_lines(
    sample_app: MarkindexApp,
) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = tree_of(app)
        assert labels(tree.root) == ["guides/ 1", "laws/ 1", "specs/ 1", "README.md 63"]
        await pilot.press("down", "enter")  # guides/
        await settle(pilot)
        assert tree.cursor_node is not None
        assert labels(tree.cursor_node) == ["install.md 449"]
        await pilot.press("down", "enter")  # install.md
        await settle(pilot)
        assert labels(tree.cursor_node) == ["(preface)", "Installing Widget Server"]
        await pilot.press("down", "down", "right")  # Installing Widget Server, expanded
        await settle(pilot)
        section = tree.cursor_node
        assert section is not None and str(section.label) == "Installing Widget Server"
        kids = labels(section)
        assert kids[0] == "Requirements"
        assert kids[1].startswith("Installation + ")  # merged headings (keyItems) are shown
        await pilot.press("down")  # Requirements: L12-17
        await settle(pilot)
        lines = app.screen.query_one(LinesView)
        assert lines.line_number_start == 12
        text = Path(app.lib.root, "guides/install.md").read_text(encoding="utf-8").splitlines()
        assert lines.text.split("\n") == text[11:17]
        screen = app.screen
        assert isinstance(screen, BrowseScreen)
        assert screen.citation() == "[guides/install.md, L12-17]"
        await pilot.press("c")
        assert app.clipboard == "[guides/install.md, L12-17]"


async def test_document_metadata_and_status(sample_app: MarkindexApp) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("end")  # README.md
        await settle(pilot)
        preview = app.screen.query_one(LinesView).shown
        assert preview is not None and preview.info is not None
        assert preview.info.doc["path"] == "README.md"
        assert preview.start == 1 and len(preview.lines) == 5
        status = app.screen.query_one(StatusBar)
        assert status.status is not None and status.status.documents == 4
        assert "4 documents" in str(status.render())


async def test_search_english_and_jump_to_the_passage(sample_app: MarkindexApp) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.press(*"upgrade")
        await settle(pilot)
        search = app.screen
        assert isinstance(search, SearchScreen)
        assert search.result is not None and search.result.hits
        hit = search.result.hits[0]
        assert hit.doc_path == "guides/install.md"
        assert search.query_one(OptionList).option_count == len(search.result.hits)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, BrowseScreen)
        tree = tree_of(app)
        assert tree.cursor_node is not None and tree.cursor_node.data is not None
        assert tree.cursor_node.data.ref.key == ("node", hit.doc_path, hit.node_id)
        lines = app.screen.query_one(LinesView)
        sel = lines.selection
        first = lines.line_number_start + min(sel.start[0], sel.end[0])
        last = lines.line_number_start + max(sel.start[0], sel.end[0])
        assert (first, last) == (hit.passage_start, hit.passage_end)
        assert app.screen.citation() == hit.citation


async def test_search_chinese_opens_the_law(sample_app: MarkindexApp) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"核心数据")
        await settle(pilot)
        search = app.screen
        assert isinstance(search, SearchScreen)
        assert search.result is not None and search.result.hits
        assert search.result.hits[0].doc_path == "laws/数据安全管理办法.md"
        await pilot.press("enter")
        await settle(pilot)
        tree = tree_of(app)
        assert tree.cursor_node is not None and tree.cursor_node.data is not None
        assert tree.cursor_node.data.ref.path == "laws/数据安全管理办法.md"
        assert "核心数据" in app.screen.query_one(LinesView).selected_text


async def test_scope_search_to_the_current_document(sample_app: MarkindexApp) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter", "down")  # guides/ → install.md under the cursor
        await settle(pilot)
        await pilot.press("slash", *"数据 install")
        await settle(pilot)
        search = app.screen
        assert isinstance(search, SearchScreen)
        assert search.scope.kind == "library"
        assert search.result is not None
        everywhere = {h.doc_path for h in search.result.hits}
        assert "laws/数据安全管理办法.md" in everywhere
        await pilot.press("ctrl+s")  # folder guides/
        await settle(pilot)
        assert search.scope.kind == "folder" and search.scope.folder == "guides"
        await pilot.press("ctrl+s")  # document guides/install.md
        await settle(pilot)
        assert search.scope.kind == "document"
        assert search.result is not None and search.result.hits
        assert {h.doc_path for h in search.result.hits} == {"guides/install.md"}
        await pilot.press("escape")
        await pilot.press("slash")  # the scope and query are remembered
        await settle(pilot)
        again = app.screen
        assert isinstance(again, SearchScreen)
        assert again.scope.kind == "document" and again.query_text == "数据 install"


async def test_enter_right_after_a_scope_change_opens_a_result_of_the_new_scope(
    tmp_path: Path,
) -> None:
    """Enter pressed while the search of a newly chosen scope still ran opened the first result
    of the scope before: the query was the same, so the old results passed for the new ones
    (here: the one hit in b.md, when the whole library was asked for). Enter now waits for the
    new scope's results."""
    root = tmp_path / "lib"
    (root / "f").mkdir(parents=True)
    filler = " ".join(f"zebra word{j}" for j in range(300))
    body = "# D\n\n" + "".join(f"## S{k}\n\n{filler}\n\n" for k in range(40))
    for i in range(40):  # a library search takes ~0.1 s: enter comes before its results
        (root / "f" / f"d{i}.md").write_text(body, encoding="utf-8")
    (root / "b.md").write_text("# B\n\nzebra once\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("end", "slash", *"zebra word7")  # b.md; the whole library
        await settle(pilot)
        search = app.screen
        assert isinstance(search, SearchScreen) and search.scope.kind == "library"
        await pilot.press("ctrl+s")  # this document
        await settle(pilot)
        assert search.result is not None and [h.doc_path for h in search.result.hits] == ["b.md"]
        # The whole library again, and open at once: both keys reach the app together, as
        # from a quick typist (the pilot's press waits until the app is idle after each key).
        for key, char in (("ctrl+s", None), ("enter", "\r")):
            app.post_message(events.Key(key, char))
        await settle(pilot)
        ref = tree_of(app).selected_ref()
        assert ref is not None and ref.path.startswith("f/"), ref


async def test_help_lists_every_binding(sample_app: MarkindexApp) -> None:
    app = sample_app
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        from markindex_tui.app import help_sections
        from markindex_tui.screens.help import class_bindings

        described = {
            b.description
            for _, classes, keep in help_sections()
            for b in class_bindings(classes, keep)
        }
        for needed in (
            "Search",
            "Copy citation",
            "Reload",
            "Help",
            "Scope",
            "Open result",
            "Expand",
        ):
            assert needed in described
        await pilot.press("escape")
        assert isinstance(app.screen, BrowseScreen)


async def test_help_says_what_each_key_does_where_it_is_pressed(tmp_path: Path) -> None:
    """The preview's help listed "home: Scroll Home" and "home / ^a: Cursor line start" (and the
    same for end): the text area's binding replaces its scroll view's, so home moved the cursor
    to the start of its line and never scrolled home. Each key is listed once per section, with
    what it does there."""
    from markindex_tui.app import help_sections
    from markindex_tui.screens.help import class_bindings

    for title, classes, keep in help_sections():
        keys = [k.strip() for b in class_bindings(classes, keep) for k in b.key.split(",")]
        assert len(keys) == len(set(keys)), (title, keys)
    preview = next(s for s in help_sections() if s[0].startswith("Preview"))
    does = {
        k.strip(): b.description for b in class_bindings(*preview[1:]) for k in b.key.split(",")
    }
    assert (does["home"], does["end"]) == ("Cursor line start", "Cursor line end")

    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n\n" + "".join(f"line {i}\n" for i in range(200)))
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "tab", "pagedown", "pagedown", "right", "right")
        await settle(pilot)
        view = app.screen.query_one(LinesView)
        row, scrolled = view.cursor_location[0], view.scroll_y
        assert row > 0 and scrolled > 0 and view.cursor_location[1] == 2
        await pilot.press("home")
        await settle(pilot)
        assert view.cursor_location == (row, 0) and view.scroll_y == scrolled


async def test_refresh_after_another_process_indexes(indexed_sample: Library) -> None:
    root = indexed_sample.root
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(
            "down", "enter", "down", "enter", "down", "down"
        )  # a section of install.md
        await settle(pilot)
        tree = tree_of(app)
        before = tree.selected_ref()
        assert before is not None and before.kind == "node"
        (root / "guides" / "faq.md").write_text("# FAQ\n\nQuestions.\n", encoding="utf-8")
        subprocess.run(
            [sys.executable, "-m", "markindex_core", "index", str(root), "--json"],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONWARNDEFAULTENCODING": "0"},
        )
        await wait_until(
            pilot,
            lambda: (
                (g := tree.node_for(("folder", "guides", ""))) is not None
                and any(x.startswith("faq.md") for x in labels(g))
            ),
        )
        await settle(pilot)
        assert tree.cursor_node is not None and tree.selected_ref() == before
        status = app.screen.query_one(StatusBar).status
        assert status is not None and status.documents == 5


async def test_empty_library(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert labels(tree_of(app).root) == ["no documents"]
        await pilot.press("slash", *"anything")
        await settle(pilot)
        assert isinstance(app.screen, SearchScreen)
        assert app.screen.result is not None and not app.screen.result.hits
        await pilot.press("enter", "escape", "c")  # nothing to open, nothing to cite: no crash
        await settle(pilot)
        assert isinstance(app.screen, BrowseScreen)


async def test_missing_index_offers_to_build_it(sample_library: Path) -> None:
    app = make_app(sample_library)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BuildScreen)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        await settle(pilot)
        assert labels(tree_of(app).root) == ["guides/ 1", "laws/ 1", "specs/ 1", "README.md 63"]


async def test_declining_the_build_quits(sample_library: Path) -> None:
    app = make_app(sample_library)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("escape")
        await pilot.pause()
    assert not app.lib.has_index()


async def test_binary_markdown_is_shown_as_skipped(sample_library: Path) -> None:
    (sample_library / "guides" / "blob.md").write_bytes(bytes(range(256)) * 64)
    Library(sample_library).index()
    app = make_app(sample_library)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        tree = tree_of(app)
        assert tree.cursor_node is not None
        assert labels(tree.cursor_node) == ["install.md 449", "blob.md skipped"]
        await pilot.press("down", "down")
        await settle(pilot)
        ref = tree.selected_ref()
        assert ref is not None and ref.kind == "skipped" and ref.reason
        preview = app.screen.query_one(LinesView).shown
        assert preview is not None and preview.lines == []
        status = app.screen.query_one(StatusBar).status
        assert status is not None and status.skipped == 1


async def test_watch_indexes_a_new_file_inside_the_app(indexed_sample: Library) -> None:
    root = indexed_sample.root
    app = make_app(root, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = tree_of(app)
        await pilot.press("down", "enter")  # guides/
        await wait_until(pilot, lambda: app.watch_label() == "watching")
        (root / "guides" / "new.md").write_text("# New\n\nFresh text.\n", encoding="utf-8")
        await wait_until(
            pilot,
            lambda: (
                (g := tree.node_for(("folder", "guides", ""))) is not None
                and any(x.startswith("new.md") for x in labels(g))
            ),
        )
        assert "watching" in str(app.screen.query_one(StatusBar).render())


async def test_the_watch_label_says_when_a_burst_of_file_events_is_still_read(
    indexed_sample: Library,
) -> None:
    """watchdog reads a burst of events far slower than it is made (7000 renames: about 3 s);
    the app's watcher label said "watching" throughout, while the tree was behind the folder."""
    import asyncio

    from tests.daemon.helpers import keep_watchdog_reading

    root = indexed_sample.root
    (root / "f").mkdir()
    (root / "f" / "x.txt").write_text("x\n", encoding="utf-8")
    app = make_app(root, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await wait_until(pilot, lambda: app.watch_label() == "watching")
        burst = asyncio.create_task(asyncio.to_thread(keep_watchdog_reading, root, 7000))
        labels_seen: set[str] = set()

        def reading() -> bool:
            labels_seen.add(app.watch_label())
            return any("file events" in label for label in labels_seen)

        await wait_until(pilot, reading, timeout=30)
        await burst
        await wait_until(pilot, lambda: app.watch_label() == "watching", timeout=60)
    assert any(re.fullmatch(r"watching \(reading ~\d+ file events\)", x) for x in labels_seen)


async def test_watch_asked_while_an_index_run_writes_takes_over_when_it_ends(
    indexed_sample: Library,
) -> None:
    """`tui --watch` while a `markindex index` run held the writer lock said 'another process
    keeps this index live; not watching' and never watched: once the run ended, nothing kept
    the index live and the app showed no sign of it. Only a writing daemon keeps it live; any
    other writer is waited for (read-only), then the app's watcher takes over."""
    from markindex_core.store.lock import WriterLock

    root = indexed_sample.root
    other = WriterLock(indexed_sample.db_path)
    assert other.try_acquire()  # as an index run in another process holds it
    try:
        app = make_app(root, watch=True)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await wait_until(pilot, lambda: app.watch_label() == "watching (read-only)")
            other.release()
            await wait_until(pilot, lambda: app.watch_label() == "watching")
            (root / "guides" / "later.md").write_text("# Later\n\nokapi\n", encoding="utf-8")
            await wait_until(
                pilot,
                lambda: {h.doc_path for h in app.lib.search("okapi").hits} == {"guides/later.md"},
            )
    finally:
        other.release()


async def test_watch_never_reconciles_this_library_into_anothers_index(tmp_path: Path) -> None:
    """`tui B --db a.db --watch`, a.db being library A's index: the app's watcher reconciled B
    into it, removing every document of A without a word. The watcher now stops and says why
    (as `daemon` and `index` refuse such an index), and A's index is left whole."""
    a, b, db = two_libraries(tmp_path)
    app = make_app(b, db, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await wait_until(pilot, lambda: app.watch_label() == "watcher stopped")
    assert Library(a, db).store.document_paths() == ["a.md"]


PILOT_AND_END = """
import asyncio, sys
from pathlib import Path
from markindex_tui.testing import SIZE, make_app, settle, wait_until

async def main() -> None:
    app = make_app(Path(sys.argv[1]), watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await wait_until(pilot, lambda: app.watch_label() == "watching")

asyncio.run(main())
"""


def test_watch_closes_the_index_when_the_program_ends_right_after_the_app(
    indexed_sample: Library,
) -> None:
    """A program that closes the app with its watcher on and ends at once (a Pilot script
    leaving `run_test`; `markindex tui --watch` quit with q) printed `RuntimeError: cannot
    schedule new futures after shutdown` from the watcher's shutdown thread: at interpreter
    exit Python stopped the writer thread before that thread queued its last close there. The
    index was left open with the mark of a write under way, and the status file said the
    daemon still watched, so `status` took it for killed. Now the close runs once the writer
    has ended: no traceback, and the index and its status end as after any clean stop."""
    root, db = indexed_sample.root, indexed_sample.db_path
    done = subprocess.run(
        [sys.executable, "-c", PILOT_AND_END, str(root)],
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "RuntimeError" not in done.stderr, done.stderr
    daemon = read_status_file(db)
    assert daemon is not None and daemon["state"] == "stopped" and not daemon["writing"], daemon
    status = read_status(Library(root))
    assert status["unfinished_run"] is None and not status["not_updating"], status


def test_core_stays_headless() -> None:
    code = (
        "import sys, markindex_core.cli.main as c; c.build_parser(); "
        "import markindex_core.library, markindex_core.search.searcher; "
        "assert not any(m == 'textual' or m.startswith(('textual.', 'markindex_tui')) "
        "for m in sys.modules), 'core imported the TUI'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_has_a_tui_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "markindex_core", "tui", "--help"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "--watch" in out and "ROOT" in out


def test_the_index_of_another_library_is_refused(tmp_path: Path) -> None:
    """`markindex tui ROOT --db FILE` with FILE the index of another library opened that
    library's documents under ROOT's name (and `i` would have indexed ROOT into it), where
    every other command refuses it (OTHER_LIBRARY). The app now refuses it too, with the same
    one-line error, before drawing anything. Run in a pseudo-terminal, as a person would."""
    first, second = tmp_path / "first", tmp_path / "second"
    for root in (first, second):
        root.mkdir()
        (root / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    db = tmp_path / "first.db"
    Library(first, db).index()
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "markindex_core", "tui", str(second), "--db", str(db)],
        stdin=terminal,
        stdout=terminal,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        os.close(terminal)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        finally:
            os.close(controller)
    assert proc.returncode == 1 and "is the index of the library" in err, err
    assert "Traceback" not in err


async def test_big_folders_are_paged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import markindex_tui.widgets.library_tree as library_tree

    monkeypatch.setattr(library_tree, "TUI_FOLDER_PAGE", 2)
    root = tmp_path / "many"
    root.mkdir()
    for i in range(5):
        (root / f"d{i}.md").write_text(f"# Doc {i}\n\nzebra{i} text\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = tree_of(app)
        assert labels(tree.root) == ["d0.md 5", "d1.md 5", "… 3 more (enter)"]
        await pilot.press("down", "down", "down", "enter")
        await settle(pilot)
        assert labels(tree.root)[2:] == ["d2.md 5", "d3.md 5", "… 1 more (enter)"]
        await pilot.press("slash", *"zebra4", "enter")  # the hit is on a page not shown yet
        await settle(pilot)
        assert tree.cursor_node is not None and tree.cursor_node.data is not None
        assert tree.cursor_node.data.ref.path == "d4.md"


async def test_an_unfinished_index_run_is_said_and_i_completes_it(indexed_sample: Library) -> None:
    root = indexed_sample.root
    for i in range(30):
        (root / f"added{i}.md").write_text(f"# Added {i}\n\nText {i}.\n", encoding="utf-8")

    class Stop(Exception):
        pass

    def stop(done: int, total: int, path: str) -> None:
        raise Stop  # as Ctrl-C does to a run: it ends at its first file

    with pytest.raises(Stop):
        Library(root).index(progress=stop, workers=0)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(StatusBar)
        assert bar.status is not None and bar.status.unfinished is not None
        assert "last index run unfinished" in str(bar.render())
        await pilot.press("i")
        await wait_until(pilot, lambda: bar.status is not None and bar.status.unfinished is None)
        assert bar.status.documents == 34 and "unfinished" not in str(bar.render())


async def test_a_library_of_one_document_is_counted_in_the_singular(tmp_path: Path) -> None:
    """A library of one file showed '1 documents' in the status line, and a search finding one
    section '1 results'. Both now read in the singular."""
    root = tmp_path / "one"
    root.mkdir()
    (root / "only.md").write_text("# Only\n\nthe single zqword here\n", encoding="utf-8")
    Library(root).index()
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "· 1 document ·" in str(app.screen.query_one(StatusBar).render())
        await pilot.press("slash", *"zqword")
        await settle(pilot)
        await wait_until(pilot, lambda: getattr(app.screen, "result", None) is not None)
        info = str(app.screen.query_one("#search-info").render())
        assert "· 1 result" in info and "1 results" not in info, info


async def test_building_and_updating_one_document_is_said_in_the_singular(tmp_path: Path) -> None:
    """Building the index of a one-file library said "indexed 1 documents", and `i` after an
    edit "1 documents changed"."""
    from textual.widgets._toast import Toast

    root = tmp_path / "one"
    root.mkdir()
    (root / "only.md").write_text("# Only\n\nbody\n", encoding="utf-8")
    app = make_app(root)
    async with app.run_test(size=SIZE, notifications=True) as pilot:

        def toasts() -> list[str]:
            return [t.render().plain for t in app.screen.query(Toast)]

        await settle(pilot)
        await pilot.press("enter")  # build it
        await wait_until(pilot, lambda: any("indexed" in t for t in toasts()))
        assert "index built\nindexed 1 document" in toasts()
        (root / "only.md").write_text("# Only\n\nmore body\n", encoding="utf-8")
        await pilot.press("i")
        await wait_until(pilot, lambda: any("changed" in t for t in toasts()))
        assert "index updated\n1 document changed" in toasts()


def on_screen(app: MarkindexApp) -> str:
    """The characters the terminal shows (from the screenshot: markup dropped, spaces kept)."""
    svg = app.export_screenshot()
    texts = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape(" ".join(texts)).replace("\xa0", " ")


async def test_a_narrow_search_box_still_says_why_nothing_was_found(
    sample_app: MarkindexApp,
) -> None:
    """In a 40x10 terminal the line under the search box was cut after 'in whole library
    (ctrl+s:', so a search that found nothing showed an empty list with no word of it, nor of
    what to try. The line now wraps (up to three lines), and the count and the advice show."""
    app = sample_app
    async with app.run_test(size=(40, 10)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zzqqxxnothing")
        await settle(pilot)
        await wait_until(pilot, lambda: getattr(app.screen, "result", None) is not None)
        await pilot.pause()
        text = on_screen(app)
        assert "0 results" in text and "nothing matched" in text and "language" in text, text


async def test_a_static_index_behind_its_folder_says_so_in_the_status_line(tmp_path: Path) -> None:
    """With no daemon, the status line compares the folder with the index (every
    TUI_DRIFT_POLL_SECONDS, and when the index changes) and says what `i` would bring in."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    (root / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
    Library(root).index()
    (root / "a.md").write_text("# A\n\nalpha, edited since\n", encoding="utf-8")
    (root / "c.md").write_text("# C\n\ncharlie\n", encoding="utf-8")
    app = make_app(root)
    async with app.run_test(size=(160, 24)) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(StatusBar)
        await wait_until(pilot, lambda: bar.changes is not None)
        text = str(bar.render())
        assert "1 changed, 1 new on disk since indexed (2 files: i updates)" in text, text
        await pilot.press("i")
        await wait_until(pilot, lambda: bar.status is not None and bar.status.documents == 3)
        await wait_until(pilot, lambda: bar.changes is None)
        assert "on disk since indexed" not in str(bar.render())

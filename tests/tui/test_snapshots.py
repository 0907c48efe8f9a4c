"""Snapshots of the main screens (plain `def`: the plugin runs the app itself).

Deterministic: fixed sizes, a frozen clock, no cursor blink, workers drained; the library is the
shipped sample, whose folder name (not its temporary path) is all that reaches the screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from markindex_core.library import Library
from markindex_tui.testing import make_app, settle


def test_browse_section(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("down", "enter", "down", "enter", "down", "down", "right")
        await settle(pilot)
        await pilot.press("down", "down")  # "Installation" (+ merged headings)
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(100, 30), run_before=drive)


def test_chinese_document_80x24(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("down", "down", "enter", "down", "enter", "down")
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(80, 24), run_before=drive)


def test_search_results_chinese(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("slash", *"数据 安全")
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(100, 30), run_before=drive)


def test_search_jump_highlights_passage(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("slash", *"upgrade", "enter")
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(100, 30), run_before=drive)


def test_help_80x24(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(80, 24), run_before=drive)


def test_light_theme(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("end", "t")
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(100, 30), run_before=drive)


def test_missing_index(snap_compare: Any, sample_library: Path) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)

    assert snap_compare(make_app(sample_library), terminal_size=(80, 24), run_before=drive)


def test_folder_documents(snap_compare: Any, indexed_sample: Library) -> None:
    async def drive(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("down")  # guides/: its documents with title, description and size
        await settle(pilot)

    assert snap_compare(make_app(indexed_sample.root), terminal_size=(100, 30), run_before=drive)

"""Render the app's main views to SVG (and PNG when a converter exists) from a real run.

    python -m markindex_tui.screenshots [--library DIR] [--out DIR]

The library defaults to the evaluation corpus beside the repository when present, else the
shipped `examples/library`; it is indexed into a temporary folder (never written into).
"""

from __future__ import annotations

import argparse
import asyncio
import html
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.cells import cell_len
from textual.pilot import Pilot

from markindex_core.library import Library
from markindex_tui.screens.browse import BrowseScreen
from markindex_tui.testing import app_for, settle
from markindex_tui.widgets.library_tree import LibraryTree

log = logging.getLogger("markindex.screenshots")
REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"
SAMPLE = REPO / "examples" / "library"
SIZE = (120, 36)
PNG_WIDTH = 1600

Drive = Callable[[Pilot[None]], Awaitable[None]]


def find_node(lib: Library, doc_path: str, words: tuple[str, ...]) -> str | None:
    """The first node of `doc_path` whose title contains one of `words`."""
    doc = lib.store.document(doc_path)
    if doc is None:
        return None
    for n in lib.store.nodes(doc["id"]):
        if any(w in n["title"] for w in words):
            return str(n["node_id"])
    return None


def pick(lib: Library, preferred: list[str], want_cjk: bool) -> str:
    """A document to show: the first preferred one present, else any (with CJK text if asked)."""
    paths = lib.store.document_paths()
    for p in preferred:
        if p in paths:
            return p
    for p in paths:
        if not want_cjk or any("\u4e00" <= ch <= "\u9fff" for ch in p):
            return p
    return paths[0]


async def reveal(pilot: Pilot[None], doc_path: str, node_id: str | None) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, BrowseScreen)
    tree = screen.query_one(LibraryTree)
    await tree.reveal(doc_path, node_id)
    tree.focus()
    await settle(pilot)


async def reveal_folder(pilot: Pilot[None], doc_path: str) -> None:
    """Put the cursor on the folder holding `doc_path`: its documents fill the right pane."""
    screen = pilot.app.screen
    assert isinstance(screen, BrowseScreen)
    tree = screen.query_one(LibraryTree)
    node = await tree.reveal(doc_path)
    if node is not None and node.parent is not None:
        node.collapse()
        tree.focus_node(node.parent)
    tree.focus()
    await settle(pilot)


async def search(pilot: Pilot[None], query: str, scope_presses: int = 0) -> None:
    await pilot.press("slash")
    await settle(pilot)
    await pilot.press(*list(query))
    for _ in range(scope_presses):
        await pilot.press("ctrl+s")
    await settle(pilot)


def views(lib: Library) -> dict[str, tuple[tuple[int, int], Drive]]:
    en = pick(
        lib,
        ["dotnet-csharpstandard/standard/csharp-language-standard-draft-v8.combined.md"],
        want_cjk=False,
    )
    zh = pick(lib, ["LawRefBook-Laws/民法典/中华人民共和国民法典.md"], want_cjk=True)
    listed = pick(lib, ["rust-lang-rfcs/text/0195-associated-items.md"], want_cjk=False)
    en_node = find_node(lib, en, ("6.4.5.6", "Interpolated string", "Install", "Usage"))
    zh_node = find_node(lib, zh, ("第一千零三十四条", "第六章 隐私权", "第二章", "总则"))
    en_query = "interpolated string" if "csharp" in en else "install"
    zh_query = "个人信息 处理" if "民法典" in zh else "数据 安全"

    async def browse(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await reveal(pilot, en, en_node)

    async def results(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await search(pilot, en_query)

    async def chinese(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await reveal(pilot, zh, zh_node)

    async def chinese_search(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await search(pilot, zh_query)
        await pilot.press("enter")
        await settle(pilot)

    async def folder(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await reveal_folder(pilot, listed)

    async def help_(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    async def light(pilot: Pilot[None]) -> None:
        await browse(pilot)
        await pilot.press("t")
        await settle(pilot)

    return {
        "browse": (SIZE, browse),
        "folder-documents": (SIZE, folder),
        "search-results": (SIZE, results),
        "chinese-document": (SIZE, chinese),
        "chinese-search-jump": (SIZE, chinese_search),
        "help": (SIZE, help_),
        "browse-light": (SIZE, light),
        "browse-80x24": ((80, 24), browse),
    }


async def shoot(lib: Library, name: str, size: tuple[int, int], drive: Drive, out: Path) -> Path:
    app = app_for(lib)
    async with app.run_test(size=size) as pilot:
        await drive(pilot)
        app.save_screenshot(f"{name}.svg", path=str(out))
    return out / f"{name}.svg"


# A run of cells as Textual writes it: <text class x y textLength clip-path>text</text>.
_RUN = re.compile(
    r'(<text\b[^>]*?\bx=")([\d.]+)("[^>]*?\btextLength="([\d.]+)"[^>]*>)([^<]*)(</text>)'
)


def _place_letters(m: re.Match[str]) -> str:
    """Give each letter of a run the x of its own cell (CJK letters take two cells)."""
    widths = [cell_len(ch) for ch in html.unescape(m[5])]
    if len(widths) < 2:
        return m[0]
    # Rich gives a run the length of its characters (not cells) at one cell each.
    cell, x = float(m[4]) / len(widths), float(m[2])
    xs = []
    for w in widths:
        xs.append(f"{x:.1f}")
        x += w * cell
    return m[1] + " ".join(xs) + m[3] + m[5] + m[6]


def mono_family() -> str:
    """A monospace font that also has CJK letters, when fontconfig knows one, else the generic
    family: cairosvg draws a run in one font, without falling back per letter."""
    fc_list = shutil.which("fc-list")
    if fc_list is not None:
        found = subprocess.run(
            [fc_list, ":lang=zh-cn", "family"], capture_output=True, text=True, check=False
        ).stdout
        for line in sorted(found.splitlines()):
            name = line.split(",")[0].strip()
            if "mono" in name.lower():
                return name
    return "monospace"


def renderable_svg(svg: str, family: str = "monospace") -> str:
    """The screenshot as SVG renderers draw it on the terminal's grid, spaces included.

    Textual writes each run of cells as its own <text>, so the space after a highlighted word
    opens the next run (as `&#160;`), and it relies on a web font (Fira Code) and on
    `textLength`, which PNG converters ignore: with the fallback font's own letter widths a
    run grew into the next one and covered its leading space ("stringexpressions"). So every
    letter is placed at its cell, spaces are kept (xml:space="preserve"; a renderer may strip
    U+00A0 as white space) and a font that is installed (`family`) is asked for.
    """
    svg = svg.replace("&#160;", " ")
    svg = re.sub(r"font-family:\s*Fira Code,\s*monospace", f"font-family: {family}", svg)
    svg = _RUN.sub(_place_letters, svg)
    return re.sub(r"<svg\b", '<svg xml:space="preserve"', svg, count=1)


def to_png(svg: Path) -> Path | None:
    """PNG beside the SVG: rsvg-convert when present (it falls back to CJK fonts), else cairosvg."""
    png = svg.with_suffix(".png")
    converter = shutil.which("rsvg-convert")
    family = "monospace" if converter is not None else mono_family()  # rsvg falls back itself
    source = renderable_svg(svg.read_text(encoding="utf-8"), family).encode("utf-8")
    if converter is not None:
        cmd = [converter, "-w", str(PNG_WIDTH), "-o", str(png)]
        subprocess.run(cmd, input=source, check=True)  # the SVG on stdin
        return png
    try:
        import cairosvg
    except ImportError:
        return None
    cairosvg.svg2png(bytestring=source, write_to=str(png), output_width=PNG_WIDTH)
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m markindex_tui.screenshots", description=__doc__
    )
    parser.add_argument("--library", type=Path, help="library folder (default: corpus or sample)")
    parser.add_argument("--out", type=Path, default=REPO / "screenshots", help="output folder")
    parser.add_argument("--no-png", action="store_true", help="write SVG only")
    args = parser.parse_args(argv)
    root = args.library or (CORPUS if CORPUS.is_dir() else SAMPLE)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="markindex-shots-") as tmp:
        lib = Library(root, Path(tmp) / "index.db")
        sys.stderr.write(f"indexing {root.name} …\n")
        lib.index()
        for name, (size, drive) in views(lib).items():
            svg = asyncio.run(shoot(lib, name, size, drive, args.out))
            png = None if args.no_png else to_png(svg)
            sys.stderr.write(f"wrote {svg.name}" + (f" and {png.name}" if png else "") + "\n")
        lib.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

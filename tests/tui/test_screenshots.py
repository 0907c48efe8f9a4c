"""The README's PNG screenshots keep the space after a highlighted word."""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from markindex_tui.screenshots import PNG_WIDTH, renderable_svg, to_png


def ink_runs(png: Path, cell: float) -> int:
    """Runs of letters on the text line, split where a gap is at least half a cell wide."""
    image = pytest.importorskip("PIL.Image").open(png).convert("L")
    width, height = image.size
    rows = range(int(height * 0.55), int(height * 0.9))  # below the window's title bar
    columns = range(int(width * 0.02), int(width * 0.98))  # inside the window's frame
    inked = [x for x in columns if any(image.getpixel((x, y)) > 128 for y in rows)]
    gaps = [b - a for a, b in itertools.pairwise(inked) if b - a > cell / 2]
    return len(gaps) + 1 if inked else 0


def test_space_after_a_highlighted_word_survives_in_the_png(tmp_path: Path) -> None:
    pytest.importorskip("cairosvg")
    console = Console(record=True, width=24, file=io.StringIO())
    console.print(Text.assemble("WWWWWWWW ", ("MMMM", "bold underline"), " WWWW"))
    svg = tmp_path / "shot.svg"
    svg.write_text(console.export_svg(title="t"), encoding="utf-8")
    assert ">&#160;WWWW</text>" in svg.read_text(encoding="utf-8")  # the space opens a run
    png = to_png(svg)
    assert png is not None
    view_width = float(re.findall(r'viewBox="0 0 ([\d.]+)', svg.read_text(encoding="utf-8"))[0])
    cell = 12.2 * PNG_WIDTH / view_width
    assert ink_runs(png, cell) == 3  # three words, not glued together


def test_renderable_svg_places_letters_on_their_cells() -> None:
    run = '<text class="r1" x="10" y="20" textLength="36.6" clip-path="c">中&#160;a</text>'
    out = renderable_svg(f"<svg>{run}</svg>")
    assert out.startswith('<svg xml:space="preserve">')
    assert 'x="10.0 34.4 46.6"' in out and ">中 a</text>" in out  # 中 takes two cells

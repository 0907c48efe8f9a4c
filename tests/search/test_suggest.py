"""Suggestions for an unknown document path: near names, at a bounded cost in a large library."""

from __future__ import annotations

from pathlib import Path

import pytest

from markindex_core.library import Library
from markindex_core.store import suggest
from markindex_core.store.suggest import candidate_paths, unknown_document


def _library(root: Path) -> Library:
    for folder in ("guides", "ops", "ref"):
        for name in ("install", "upgrade", "backup", "tuning", "faq"):
            path = root / folder / f"{folder}-{name}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# {name}\n\n{name} text\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    return lib


def test_a_near_name_is_suggested(tmp_path: Path) -> None:
    lib = _library(tmp_path / "lib")
    error = unknown_document(lib.store, "ops/ops-instal.md", lib.command)
    assert error.hint.startswith("did you mean: ops/ops-install.md"), error.hint


def test_a_large_library_compares_a_bounded_set_of_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """difflib compared the path with every document's (~0.1 ms each: half a second at 5 440
    documents). Past the bound, the same folder's paths and those holding the file name asked
    for are compared, so a misspelled folder still finds the document."""
    lib = _library(tmp_path / "lib")
    monkeypatch.setattr(suggest, "SUGGEST_CANDIDATES", 4)
    near = candidate_paths(lib.store, "gides/ops-backup.md")  # folder misspelled
    assert near == ["ops/ops-backup.md"]
    near = candidate_paths(lib.store, "ref/ref-bakup.md")
    assert near == [
        "ref/ref-backup.md",
        "ref/ref-faq.md",
        "ref/ref-install.md",
        "ref/ref-tuning.md",
    ]
    assert (
        "did you mean: ref/ref-backup.md"
        in unknown_document(lib.store, "ref/ref-bakup.md", lib.command).hint
    )
    assert candidate_paths(lib.store, "zz/100%_x.md") == []  # LIKE wildcards are literal
    monkeypatch.setattr(suggest, "SUGGEST_CANDIDATES", 100)
    assert len(candidate_paths(lib.store, "zz/x.md")) == 15  # a small library: every path


def test_without_a_near_name_the_hint_names_commands_that_exist(tmp_path: Path) -> None:
    """It said to list documents with `markindex tree`, which shows one document's sections.
    The commands name the user's own library and index, not a ROOT placeholder to fill in."""
    lib = _library(tmp_path / "lib")
    hint = unknown_document(lib.store, "zzz/qqq.md", lib.command).hint
    assert f"markindex search {lib.root} WORDS" in hint and f"markindex tui {lib.root}`" in hint
    elsewhere = Library(lib.root, tmp_path / "elsewhere.db")  # --db given: named in the hint
    hint = unknown_document(lib.store, "zzz/qqq.md", elsewhere.command).hint
    assert f"markindex tui {lib.root} --db {tmp_path / 'elsewhere.db'}`" in hint, hint

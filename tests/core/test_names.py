"""Document and folder names as people type them: a path the index gives back, or the same path
typed in another Unicode normalization, finds the same document everywhere (CLI, tools, API)."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

from markindex_core.library import Library

from .helpers import REPO_ROOT


def markindex(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *argv],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def test_a_path_of_mixed_normalizations_is_found_typed_in_either(tmp_path: Path) -> None:
    """A folder one system wrote in NFD (macOS) holding a file another wrote in NFC: the stored
    path is neither all-NFC nor all-NFD, so `tree`, `search --doc`, the tools and the API said
    "no document 'dossier-é/résumé.md'", and suggested `dossier-é/résumé.md`, which looks the
    same. Any spelling that is the same text in Unicode's eyes now finds it."""
    root = tmp_path / "lib"
    folder = root / _nfd("dossier-é") / _nfc("sous-é")
    folder.mkdir(parents=True)
    stored = f"{_nfd('dossier-é')}/{_nfc('sous-é')}/{_nfc('résumé.md')}"
    (root / stored).write_text("# Résumé\n\nespresso notes\n", encoding="utf-8")
    db = tmp_path / "index.db"
    assert markindex("index", str(root), "--db", str(db)).returncode == 0
    lib = Library(root, db)
    typed_folder = f"{_nfd('dossier-é')}/{_nfc('sous-é')}"
    for typed in (_nfc(stored), _nfd(stored)):
        shown = markindex("tree", str(root), typed, "--db", str(db), "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["path"] == stored
        found = markindex("search", str(root), "espresso", "--doc", typed, "--db", str(db))
        assert found.returncode == 0, found.stderr
        doc = lib.document(typed)
        assert doc is not None and doc["path"] == stored
        answer = json.loads(lib.call_tool("get_document", {"doc_path": typed}))
        assert answer["success"] and answer["data"]["doc_path"] == stored, answer
    for typed in (_nfc(typed_folder), _nfd(typed_folder)):
        listed = json.loads(lib.call_tool("browse_documents", {"folder": typed}))
        assert listed["success"], listed
        assert [d["path"] for d in listed["data"]["documents"]] == [stored]
        assert [h.doc_path for h in lib.search("espresso", folder=typed).hits] == [stored]
    lib.close()

"""Document and folder names as people type them: a path the index gives back, or the same path
typed in another Unicode normalization, finds the same document everywhere (CLI, tools, API)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from markindex_core.library import Library

from .helpers import markindex


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


def test_a_link_typed_in_the_other_normalization_is_not_broken(tmp_path: Path) -> None:
    """A link written `café.md` (NFC, as keyboards type it) to the file macOS wrote as
    `café.md` in NFD: macOS opens it under either spelling, but `links` reported it broken,
    `backlinks` and `get_document` did not list it, and its anchor was never checked. Links
    now name the document the way the tools find one typed in the other normalization."""
    root = tmp_path / "lib"
    root.mkdir()
    stored = _nfd("café.md")
    (root / stored).write_text("# Café\n\n## Menu\n\nespresso\n", encoding="utf-8")
    typed = _nfc("café.md")
    (root / "src.md").write_text(
        f"# Src\n\n[a]({typed}#menu)\n[b]({typed}#nope)\n[c](caf%C3%A9.md)\n", encoding="utf-8"
    )
    db = tmp_path / "index.db"
    assert markindex("index", str(root), "--db", str(db)).returncode == 0
    out = markindex("links", str(root), "src.md", "--db", str(db), "--json")
    rows = json.loads(out.stdout)["links"]
    assert [(r["line"], r["target"], r["broken"], r["anchor_missing"]) for r in rows] == [
        (3, stored, False, False),
        (4, stored, False, True),
        (5, stored, False, False),
    ]
    every = json.loads(markindex("links", str(root), "--db", str(db), "--json").stdout)
    assert every["broken"] == []
    assert [(r["line"], r["target"], r["anchor"]) for r in every["missing_anchors"]] == [
        (4, stored, "nope")
    ]
    back = markindex("backlinks", str(root), typed, "--db", str(db), "--json")
    assert [r["line"] for r in json.loads(back.stdout)["backlinks"]] == [3, 4, 5]
    lib = Library(root, db)
    doc = json.loads(lib.call_tool("get_document", {"doc_path": stored}))["data"]
    assert doc["links"]["backlinks_total"] == 3
    source = json.loads(lib.call_tool("get_document", {"doc_path": "src.md"}))["data"]
    assert source["links"]["broken_total"] == 0
    lib.close()


def test_two_files_whose_names_differ_only_in_normalization_keep_their_own_links(
    tmp_path: Path,
) -> None:
    """On Linux `café.md` in NFC and in NFD are two files: a link spelled exactly as one of
    them names that one, never the other."""
    root = tmp_path / "lib"
    root.mkdir()
    for form in (_nfc("café.md"), _nfd("café.md")):
        (root / form).write_text("# Café\n\nespresso\n", encoding="utf-8")
    (root / "src.md").write_text(f"# Src\n\n[a]({_nfc('café.md')})\n", encoding="utf-8")
    db = tmp_path / "index.db"
    assert markindex("index", str(root), "--db", str(db)).returncode == 0
    lib = Library(root, db)
    assert [r["line"] for r in lib.store.links_to(_nfc("café.md"))] == [3]
    assert lib.store.links_to(_nfd("café.md")) == []
    source = lib.document("src.md")
    assert source is not None
    assert [r["target"] for r in lib.store.links_from(source["id"])] == [_nfc("café.md")]
    lib.close()


def test_the_python_api_takes_a_document_path_as_the_tools_do(tmp_path: Path) -> None:
    """`Library.document("./guides/a.md")` and `Library.outline("guides//a.md")` gave None and
    [] where `get_document`, `tree` and `Library.search(doc_path=)` find the document: the API
    looked the path up as given. It now takes it as they do."""
    root = tmp_path / "lib"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "a.md").write_text("# A\n\nespresso\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    for typed in ("guides/a.md", "./guides/a.md", "guides//a.md", "guides/./a.md"):
        doc = lib.document(typed)
        assert doc is not None and doc["path"] == "guides/a.md", typed
        assert [n["title"] for n in lib.outline(typed)] == ["A"], typed
        answer = json.loads(lib.call_tool("get_document", {"doc_path": typed}))
        assert answer["data"]["doc_path"] == "guides/a.md", typed
    assert lib.document("guides") is None
    lib.close()


def test_eval_counts_a_gold_document_named_as_the_tools_take_it(tmp_path: Path) -> None:
    """`eval` compared a gold `doc_path` with the cited path as written: a gold `./a.md`, or
    `café.md` typed in NFC for the file macOS wrote in NFD, never matched and the question
    scored 0 without a word, like a gold path that names no document at all. Gold paths are
    now taken as the tools take a path, and one that names no document is said on stderr."""
    root = tmp_path / "lib"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "a.md").write_text("# A\n\nespresso beans\n", encoding="utf-8")
    (root / _nfd("café.md")).write_text("# Café\n\nmacchiato foam\n", encoding="utf-8")
    db = tmp_path / "index.db"
    assert markindex("index", str(root), "--db", str(db)).returncode == 0
    records = [
        {"question": "espresso", "gold": [{"doc_path": "./guides/a.md"}]},
        {
            "question": "macchiato",
            "gold": [{"doc_path": _nfc("café.md"), "start_line": 3, "end_line": 3}],
        },
        {"question": "espresso", "gold": [{"doc_path": "guides/gone.md"}]},
    ]
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    for extra in ([], ["--json"]):
        out = markindex("eval", str(root), "--db", str(db), "--questions", str(questions), *extra)
        assert out.returncode == 0, out.stderr
        assert "guides/gone.md" in out.stderr, out.stderr
        assert "guides/a.md" not in out.stderr and "caf" not in out.stderr, out.stderr
        if extra:
            assert json.loads(out.stdout)["overall"]["hit@5"] == 2 / 3

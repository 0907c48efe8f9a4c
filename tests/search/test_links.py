"""The link graph: forward, backward and broken internal links, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from markindex_core.library import Library
from markindex_core.store.anchors import anchor_key, slug


def _cli(*args: str, status: int = 0) -> dict[str, Any]:
    """`markindex ARGS --json`'s answer, once it exited with `status` (`links` exits 1 when it
    lists a broken link or a missing anchor)."""
    out = _run(*args, "--json")
    assert out.returncode == status, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "markindex_core", *args], capture_output=True, text=True
    )


def test_links_backlinks_and_broken(indexed_sample: Library) -> None:
    root = str(indexed_sample.root)
    links = _cli("links", root, "guides/install.md", status=1)["links"]
    assert {(ln["target"], ln["broken"]) for ln in links} == {
        ("specs/配置参考.md", False),
        ("guides/missing.md", True),
    }
    back = _cli("backlinks", root, "guides/install.md")["backlinks"]
    assert {b["source"] for b in back} == {"README.md", "specs/配置参考.md"}
    broken = _cli("links", root, status=1)["broken"]
    assert broken == [{"source": "guides/install.md", "line": 51, "target": "guides/missing.md"}]


def test_link_lines_point_at_the_link(indexed_sample: Library) -> None:
    lines = (indexed_sample.root / "guides/install.md").read_text(encoding="utf-8").splitlines()
    doc = indexed_sample.document("guides/install.md")
    assert doc is not None
    for link in indexed_sample.store.links_from(doc["id"]):
        assert link["target"].rsplit("/", 1)[-1] in lines[link["line"] - 1]


def test_unknown_document_suggests_similar(indexed_sample: Library) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "markindex_core",
            "links",
            str(indexed_sample.root),
            "guides/instal.md",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert "guides/install.md" in out.stderr and "Traceback" not in out.stderr


def test_backlinks_takes_the_document_as_links_does(indexed_sample: Library) -> None:
    """`./guides/install.md` is that document; a missing one is named as such, unless links
    point at it (who links to a deleted page is worth knowing)."""
    root = str(indexed_sample.root)
    back = _cli("backlinks", root, "./guides/install.md")
    assert back["path"] == "guides/install.md"
    assert {b["source"] for b in back["backlinks"]} == {"README.md", "specs/配置参考.md"}
    missing = _cli("backlinks", root, "guides/missing.md")
    assert [b["source"] for b in missing["backlinks"]] == ["guides/install.md"]
    typo = subprocess.run(
        [sys.executable, "-m", "markindex_core", "backlinks", root, "guides/instal.md", "--json"],
        capture_output=True,
        text=True,
    )
    assert typo.returncode == 1 and "guides/install.md" in typo.stdout + typo.stderr
    assert "Traceback" not in typo.stderr


def test_missing_anchors_are_their_own_kind(tmp_path: Path) -> None:
    """A link to a document that has no such heading or id is a missing anchor, not a broken
    link; GitHub's heading anchors (numbered when repeated) and ids written out all count."""
    (tmp_path / "target.md").write_text(
        "# Getting `started` *now*\n\n## Set-up & Install\n\n## Notes\n\n## Notes\n\n"
        '## Scope {#the-scope}\n\n<a name="legacy"></a>\n\n[fig](#x){:name="fig-1"}\n',
        encoding="utf-8",
    )
    anchors = [
        "getting-started-now",
        "set-up--install",
        "Set-up-Install",
        "notes-1",
        "the-scope",
        "legacy",
        "fig-1",
        "no-such-heading",
        "notes-2",
    ]
    (tmp_path / "source.md").write_text(
        "".join(f"[{a}](target.md#{a})\n\n" for a in anchors) + "[gone](gone.md#x)\n",
        encoding="utf-8",
    )
    lib = Library(tmp_path)
    lib.index()
    lib.close()
    report = _cli("links", str(tmp_path), status=1)
    assert report["broken"] == [{"source": "source.md", "line": 19, "target": "gone.md"}]
    assert [(r["line"], r["anchor"]) for r in report["missing_anchors"]] == [
        (15, "no-such-heading"),
        (17, "notes-2"),
    ]
    rows = _cli("links", str(tmp_path), "source.md", status=1)["links"]
    assert [r["anchor"] for r in rows if r["anchor_missing"]] == ["no-such-heading", "notes-2"]
    assert [r["target"] for r in rows if r["broken"]] == ["gone.md"]


def test_heading_anchors_as_github_makes_them() -> None:
    assert slug("Hello, World!") == "hello-world"
    assert slug("Set-up & Install") == "set-up--install"
    assert slug("snake_case and `code`") == "snake_case-and-code"
    assert slug("第一章 总则（一）") == "第一章-总则一"
    assert slug("Ünïcödé Straße") == "ünïcödé-straße"
    assert anchor_key("Set-up--Install") == "set-up-install"


def _human(*args: str) -> str:
    out = _run(*args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_no_links_is_said_in_words_not_as_an_empty_table(tmp_path: Path) -> None:
    """A library with no broken link, a document without links and one nothing links to each
    printed an empty table (`links` even titled it 'broken links'), which reads as a failed
    listing. Each now says in one line that there is nothing, and what the command looked for."""
    root = _index(tmp_path, {"a.md": "# A\n\n[b](b.md)\n", "b.md": "# B\n\nno links here\n"})
    assert _human("links", root).strip() == "no broken links and no missing anchors"
    assert _human("links", root, "b.md").strip() == "b.md has no internal links"
    assert _human("backlinks", root, "a.md").strip() == "no document links to a.md"
    assert "│ a.md" in _human("backlinks", root, "b.md")  # a listing still shows its table


def _index(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    lib = Library(root)
    lib.index()
    lib.close()
    return str(root)


LINKED = {
    "a.md": "# A\n\n[b](b.md) and [its part](b.md#part-two)\n",
    "b.md": "# B\n\n## Part two\n\ntext\n",
}


def test_links_exits_0_when_no_link_is_broken(tmp_path: Path) -> None:
    """A library (and a document) whose links all lead somewhere: 0, with or without --json."""
    root = _index(tmp_path, LINKED)
    for doc in ([], ["a.md"]):
        assert _run("links", root, *doc).returncode == 0
        assert _cli("links", root, *doc, status=0)


@pytest.mark.parametrize(
    ("link", "kind", "shown"),
    [
        ("[gone](gone.md)", "broken", "broken"),
        ("[nope](b.md#no-such-part)", "missing_anchors", "missing anchor"),
    ],
)
def test_links_exits_1_when_it_finds_a_broken_link_or_missing_anchor(
    tmp_path: Path, link: str, kind: str, shown: str
) -> None:
    """`links` exited 0 even when it listed broken links, so a script or CI job running it as
    a link check passed whatever it found. It now exits 1 (as `check` does on damage) when it
    lists a broken link or missing anchor, in the library or in DOC, with --json too, whose
    answer is still printed whole; a DOC whose own links are fine is still 0, and a usage
    error stays 2."""
    root = _index(tmp_path, {**LINKED, "c.md": f"# C\n\n{link}\n"})
    human = _run("links", root)
    assert human.returncode == 1 and "c.md" in human.stdout, human.stderr
    report = _cli("links", root, status=1)
    assert [(r["source"], r["line"]) for r in report[kind]] == [("c.md", 3)]
    assert report["broken" if kind == "missing_anchors" else "missing_anchors"] == []
    one = _run("links", root, "c.md")
    assert one.returncode == 1 and shown in one.stdout, one.stderr
    rows = _cli("links", root, "c.md", status=1)["links"]
    assert [(r["broken"], r["anchor_missing"]) for r in rows] == [
        (kind == "broken", kind == "missing_anchors")
    ]
    assert _run("links", root, "a.md").returncode == 0  # only DOC's own links count
    assert _cli("links", root, "a.md", status=0)
    assert _run("links", root, "--no-such-option").returncode == 2


def test_links_takes_doc_after_the_options_as_every_command_does(tmp_path: Path) -> None:
    """`markindex links ROOT --db FILE DOC` failed with `unrecognized arguments: DOC` (exit 2,
    the top-level usage), where `tree ROOT --db FILE DOC` and `backlinks` work: argparse gave
    the optional DOC nothing where it read ROOT, then had no place for it. DOC is now taken
    wherever it stands; anything more is still a usage error."""
    root = _index(tmp_path, LINKED)
    db = str(tmp_path / ".markindex" / "index.db")
    for argv in (
        ["links", root, "--db", db, "a.md"],
        ["links", root, "--json", "a.md"],
        ["links", "--json", root, "a.md"],
    ):
        out = _run(*argv)
        assert out.returncode == 0, (argv, out.stderr)
        assert "b.md" in out.stdout and "part-two" in out.stdout, (argv, out.stdout)
    every = _run("links", root, "--db", db, "--json")
    assert every.returncode == 0 and json.loads(every.stdout)["broken"] == []
    assert _run("links", root, "--db", db, "a.md", "b.md").returncode == 2
    assert _run("links", root, "--db", db, "--no-such-option").returncode == 2
    assert _run("search", root, "part", "--json", "stray").returncode == 2

"""The link graph: forward, backward and broken internal links, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from markindex_core.library import Library


def _cli(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "markindex_core", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_links_backlinks_and_broken(indexed_sample: Library) -> None:
    root = str(indexed_sample.root)
    links = _cli("links", root, "guides/install.md")["links"]
    assert {(ln["target"], ln["broken"]) for ln in links} == {
        ("specs/配置参考.md", False),
        ("guides/missing.md", True),
    }
    back = _cli("backlinks", root, "guides/install.md")["backlinks"]
    assert {b["source"] for b in back} == {"README.md", "specs/配置参考.md"}
    broken = _cli("links", root)["broken"]
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

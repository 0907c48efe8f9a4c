"""A small library whose sections are long enough to be summarized (see llm/summaries.py)."""

from __future__ import annotations

from pathlib import Path


def paragraph(topic: str, words: int = 420) -> str:
    """About `words` words of plain English about `topic` (~5 characters a word: 500+ tokens)."""
    base = f"The {topic} procedure covers planning, review, approval and records of {topic}. "
    out: list[str] = []
    n = 0
    while n < words:
        out.append(base)
        n += len(base.split())
    return "".join(out).strip()


def write_library(root: Path) -> dict[str, Path]:
    """Three documents: one without a front-matter description (three long sections), one with
    its own description (two long sections), one too small for any section summary."""
    root.mkdir(parents=True, exist_ok=True)
    guide = root / "guide.md"
    guide.write_text(
        "# Operations guide\n\n"
        + "".join(f"## {t.title()}\n\n{paragraph(t)}\n\n" for t in ("backup", "restore", "audit")),
        encoding="utf-8",
    )
    policy = root / "policy.md"
    policy.write_text(
        "---\ntitle: Retention policy\ndescription: How long records are kept.\n---\n\n"
        "# Retention policy\n\n"
        + "".join(f"## {t.title()}\n\n{paragraph(t)}\n\n" for t in ("retention", "deletion")),
        encoding="utf-8",
    )
    note = root / "note.md"
    note.write_text("# Note\n\nA short note about nothing in particular.\n", encoding="utf-8")
    return {"guide": guide, "policy": policy, "note": note}

"""The shape of cited ranges: adjacent prose passages of one section share a citation."""

from __future__ import annotations

from pathlib import Path

from markindex_core.library import Library
from markindex_core.search.evidence import is_prose


def _library(tmp_path: Path, files: dict[str, str]) -> Library:
    root = tmp_path / "lib"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    for n in range(8):  # other documents: the query words stay rare
        (root / f"n{n}.md").write_text(f"# Note {n}\n\nAbout gardening {n}.\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    return lib


def _filler(n: int) -> str:
    """Words found nowhere else: they make each section long enough to stay its own node."""
    return " ".join(f"filler{n}x{i}" for i in range(200))


GUIDE = (
    "# Operations guide\n\n## Key rotation\n\n"
    "The zorblax rotation job runs every night and replaces the zorblax signing key with a"
    " fresh one drawn from the hardware module.\n\n"
    "Old keys stay valid for one more day, so a rotation never breaks a session that is"
    f" already open when the job runs.\n\n{_filler(1)}\n\n"
    "## Backups\n\nA zorblax backup is written before each rotation and kept for a month by the"
    f" storage team.\n\n{_filler(2)}\n"
)


def test_adjacent_prose_passages_of_a_section_share_one_citation(tmp_path: Path) -> None:
    # The second paragraph answers "what happens to old keys" but ranks below the first; before,
    # each was its own result and the top one stopped short of the answer.
    lib = _library(tmp_path, {"guide.md": GUIDE})
    hits = lib.search("zorblax rotation old keys valid").hits
    top = hits[0]
    assert top.doc_path == "guide.md"
    assert (top.passage_start, top.passage_end) == (5, 9)
    rotation = [h for h in hits if h.title_path[-1:] == ["Key rotation"]]
    assert len(rotation) == 1  # the freed slot goes to another section
    assert any(h.title_path[-1:] == ["Backups"] for h in hits)
    lib.close()


LAW = (
    "# 网关管理办法\n\n## 第一章 总则\n\n"
    "第一条 夸克网关的签名密钥应当每晚轮换，轮换工作由运维部门负责组织实施并记录在案。\n\n"
    "第二条 旧密钥在轮换后继续有效一日，轮换不得中断已经建立的会话，运维部门应当予以保障。\n"
)


def test_adjacent_law_articles_stay_separate_citations(tmp_path: Path) -> None:
    lib = _library(tmp_path, {"law.md": LAW})
    hits = [h for h in lib.search("夸克网关 签名密钥 每晚 会话").hits if h.doc_path == "law.md"]
    spans = {(h.passage_start, h.passage_end) for h in hits}
    assert {(5, 5), (7, 7)} <= spans  # two adjacent articles: two citations, not one
    lib.close()


def test_prose_is_neither_an_article_nor_mostly_chinese() -> None:
    assert is_prose("The job runs every night.")
    assert is_prose("TiDB 的 `tidb_mem_quota_query` variable limits memory per query.")
    assert not is_prose("第十二条 旧密钥继续有效。")
    assert not is_prose("**第三条** Keys rotate nightly.")
    assert not is_prose("旧密钥在轮换后继续有效一日，轮换不得中断已经建立的会话。")


def test_the_first_results_cite_the_same_lines_whatever_the_limit(tmp_path: Path) -> None:
    lib = _library(tmp_path, {"guide.md": GUIDE})
    query = "zorblax rotation old keys valid"
    wide = lib.search(query, limit=10).hits
    for limit in (1, 2, 5):
        assert [h.citation for h in lib.search(query, limit=limit).hits] == [
            h.citation for h in wide[:limit]
        ]
    assert wide[0].citation == "[guide.md, L5-9]"
    lib.close()

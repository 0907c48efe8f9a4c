"""`eval --mode routing`: rank documents by what browsing shows (path words, title, description)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from markindex_core.evaluate import (
    BrowseEntry,
    bm25_rank,
    browse_entries,
    entry_terms,
    evaluate_routing,
    query_terms,
)
from markindex_core.library import Library
from markindex_core.text import segment
from tests.paths import REPO


def test_bm25_ranks_by_rare_matching_terms_and_drops_non_matches() -> None:
    docs = [
        ["common", "word", "alpha"],
        ["common", "zebra", "zebra"],
        ["unrelated", "text"],
        ["common", "zebra"] + ["filler"] * 30,
    ]
    order = bm25_rank(docs, ["zebra", "common"])
    assert order[0] == 1  # two zebras in a short document
    assert order.index(3) > order.index(1)  # the same words in a long document count less
    assert 2 not in order  # nothing matches
    assert bm25_rank([], ["x"]) == [] and bm25_rank(docs, []) == []


def test_bm25_ties_keep_document_order() -> None:
    assert bm25_rank([["a"], ["a"], ["a"]], ["a"]) == [0, 1, 2]


def test_query_terms_drop_stop_words_and_keep_identifier_parts() -> None:
    terms = query_terms("What is the lifetime_capture rule?")
    assert "what" not in terms and "the" not in terms
    assert set(segment.terms("lifetime_capture rule")) <= set(terms)
    assert "lifetime_capture" in terms and len(terms) == len(set(terms))
    zh = query_terms("车牌被偷了怎么办")
    assert zh and "怎么办" not in zh


def test_entry_terms_split_path_words() -> None:
    terms = entry_terms(BrowseEntry("text/3498-lifetime-capture.md", "T", "D"))
    assert set(segment.terms("3498 lifetime capture")) <= set(terms)


@pytest.fixture
def small_library(tmp_path: Path) -> Iterator[Library]:
    root = tmp_path / "lib"
    docs = {
        "rfcs/0001-zebra-crossing.md": "# Zebra crossing\n\nHow pedestrians cross roads.\n",
        "rfcs/0002-hidden.md": "# Something\n\nAbout boats.\n\n## Part\n\n"
        + "filler text. " * 200
        + "\n\nThe giraffe detail lives deep in the body only.\n",
        "laws/交通法.md": "# 道路交通法\n\n第一条 为了维护道路交通秩序，制定本法。\n",
    }
    for rel, text in docs.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    lib = Library(root, tmp_path / "i.db")
    lib.index()
    yield lib
    lib.close()


QUESTIONS = [
    {"id": "q1", "lang": "en", "question": "How do zebra crossings work for pedestrians?",
     "gold": [{"doc_path": "rfcs/0001-zebra-crossing.md", "start_line": 1, "end_line": 3}]},
    {"id": "q2", "lang": "en", "question": "Where is the giraffe detail?",
     "gold": [{"doc_path": "rfcs/0002-hidden.md"}]},
    {"id": "q3", "lang": "zh", "question": "维护道路交通秩序的法律是哪部？",
     "gold": [{"doc_path": "laws/交通法.md"}]},
]  # fmt: skip


def test_browse_entries_walk_every_folder(small_library: Library) -> None:
    paths = [e.path for e in browse_entries(small_library)]
    assert paths == ["laws/交通法.md", "rfcs/0001-zebra-crossing.md", "rfcs/0002-hidden.md"]


def test_routing_sees_only_browse_metadata(small_library: Library) -> None:
    report = evaluate_routing(small_library, QUESTIONS)
    ranks = {q["id"]: q["rank"] for q in report["questions"]}
    assert ranks["q1"] == 1 and ranks["q3"] == 1
    assert ranks["q2"] is None  # the words are only in the body, which browsing does not show
    m = report["metrics"]
    assert m["overall"]["questions"] == 3 and m["overall"]["hit@5"] == pytest.approx(2 / 3)
    assert m["en"]["hit@5"] == 0.5 and m["zh"]["hit@5"] == 1.0
    assert report["documents"] == 3


def test_cli_routing_mode_reports_per_language(small_library: Library, tmp_path: Path) -> None:
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in QUESTIONS) + "\n")
    out = tmp_path / "report.json"
    argv = [sys.executable, "-m", "markindex_core.cli.main", "eval", str(small_library.root)]
    argv += ["--db", str(small_library.db_path), "--questions", str(qfile)]
    argv += ["--mode", "routing", "--json", "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert set(metrics) == {"overall", "en", "zh"}
    assert metrics["overall"]["hit@5"] == pytest.approx(2 / 3)
    assert json.loads(out.read_text(encoding="utf-8"))["questions"][1]["rank"] is None
    table = subprocess.run(argv[:-3], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert table.returncode == 0 and "routing" in table.stdout and "hit@5" in table.stdout


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"question": "q", "gold": [1]}', 'without a "doc_path"'),
        ('{"question": "q", "gold": [{"doc_path": "a.md", "start_line": 4}]}', "whole numbers"),
        (
            '{"question": "q", "gold": [{"doc_path": "a.md", "start_line": "x", "end_line": 2}]}',
            "whole numbers",
        ),
        (
            '{"question": "q", "gold": [{"doc_path": "a.md", "start_line": 1e400, "end_line": 2}]}',
            "whole numbers",
        ),
        (
            '{"question": "q", "gold": [{"doc_path": "a.md", "start_line": 5, "end_line": 2}]}',
            "out of order",
        ),
        (
            '{"question": "q", "gold": [{"doc_path": "a.md", "start_line": 1, "end_line": 2, "title_path": 5}]}',
            "title_path",
        ),
        ('{"question": 3, "gold": []}', '"question"'),
        ("[1, 2]", "not an object"),
        ("{nope", "not JSON"),
    ],
)
def test_malformed_question_records_are_one_clear_error(
    tmp_path: Path, line: str, problem: str
) -> None:
    from markindex_core.errors import InvalidArgument
    from markindex_core.evaluate import load_questions

    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "fine", "gold": []}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match=f"q.jsonl:2: .*{problem}"):
        load_questions([path])


def test_question_files_keep_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    from markindex_core.errors import InvalidArgument
    from markindex_core.evaluate import load_questions

    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "a\u2028b", "gold": [], "lang": 7}\n', encoding="utf-8")
    (q,) = load_questions([path])
    assert q["question"] == "a\u2028b" and q["lang"] == "7"
    path.write_bytes(b'{"question": "\xff", "gold": []}\n')
    with pytest.raises(InvalidArgument, match="not UTF-8"):
        load_questions([path])

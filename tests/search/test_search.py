"""Search over the sample library: modes, scopes, citations, hostile queries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from markindex_core.library import Library


def _doc_id(lib: Library, path: str) -> int:
    doc = lib.document(path)
    assert doc is not None, path
    return int(doc["id"])


def test_english_question_finds_the_passage(indexed_sample: Library) -> None:
    result = indexed_sample.search("which setting was renamed in version 2.0 from max_conn")
    top = result.hits[0]
    assert top.doc_path == "guides/install.md"
    lines = (indexed_sample.root / top.doc_path).read_text(encoding="utf-8").splitlines()
    cited = "\n".join(lines[top.passage_start - 1 : top.passage_end])
    assert "max_conn" in cited


def test_chinese_question_finds_the_article(indexed_sample: Library) -> None:
    result = indexed_sample.search("数据泄露以后多长时间内要报告？")
    assert result.hits
    top = result.hits[0]
    assert top.doc_path == "laws/数据安全管理办法.md"
    text = "\n".join(
        indexed_sample.store.read_lines(
            _doc_id(indexed_sample, top.doc_path), top.passage_start, top.passage_end
        )
    )
    assert "二十四小时" in text


def test_mixed_query_identifier_in_chinese_doc(indexed_sample: Library) -> None:
    result = indexed_sample.search("mem_quota_query 默认值")
    assert result.hits[0].doc_path == "specs/配置参考.md"
    # One section has both words; the others shown are announced as a relaxed match.
    assert result.mode == "relaxed"
    assert result.notice.startswith("only 1 section contains all 2 query words")


def test_relaxation_is_announced(indexed_sample: Library) -> None:
    result = indexed_sample.search("proxy certificates zebra unicorn")
    assert result.mode == "relaxed"
    assert result.relaxed and "no section contains all" in result.notice
    assert result.hits


def test_substring_fallback_for_fragments(indexed_sample: Library) -> None:
    result = indexed_sample.search("quota_que")
    assert result.mode == "substring"
    assert any(h.doc_path == "specs/配置参考.md" for h in result.hits)


def test_cited_lines_are_exactly_the_file_lines(indexed_sample: Library) -> None:
    for query in (
        "install pip virtual environment",
        "数据分类分级",
        "log_level 可选值",
        "EADDRINUSE",
    ):
        for hit in indexed_sample.search(query).hits:
            disk = (indexed_sample.root / hit.doc_path).read_text(encoding="utf-8").splitlines()
            stored = indexed_sample.store.read_lines(
                _doc_id(indexed_sample, hit.doc_path), hit.passage_start, hit.passage_end
            )
            assert stored == disk[hit.passage_start - 1 : hit.passage_end]
            assert hit.start_line <= hit.passage_start <= hit.passage_end <= hit.end_line
            assert hit.citation == f"[{hit.doc_path}, L{hit.passage_start}-{hit.passage_end}]"


def test_scope_is_applied_before_the_limit(indexed_sample: Library) -> None:
    # "EADDRINUSE" is in both the guide and the Chinese config reference.
    everywhere = indexed_sample.search("EADDRINUSE", limit=1)
    assert everywhere.hits[0].doc_path == "guides/install.md" or len(everywhere.hits) == 1
    scoped = indexed_sample.search("EADDRINUSE", folder="specs", limit=1)
    assert [h.doc_path for h in scoped.hits] == ["specs/配置参考.md"]
    in_doc = indexed_sample.search("EADDRINUSE", doc_path="guides/install.md", limit=1)
    assert [h.doc_path for h in in_doc.hits] == ["guides/install.md"]
    assert indexed_sample.search("EADDRINUSE", folder="laws").hits == []


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "x" * 10_000,
        '"',
        '"unbalanced',
        "a*",
        "NEAR(a b)",
        "-x",
        "title:foo",
        "^",
        "(",
        ")",
        "AND",
        "OR OR",
        "NOT",
        "'; DROP TABLE nodes; --",
        "\x00",
        "中" * 5000,
        "{}[]<>",
        "🙂",
    ],
)
def test_hostile_queries_never_raise(indexed_sample: Library, query: str) -> None:
    result = indexed_sample.search(query)
    assert result.mode in ("strict", "relaxed", "substring", "none")
    if not result.hits:
        assert result.notice
    json.dumps(result.to_json())


def test_search_cli_json(indexed_sample: Library) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "markindex_core",
            "search",
            str(indexed_sample.root),
            "升级 max_connections",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["hits"] and data["hits"][0]["citation"].startswith("[")


@pytest.mark.parametrize("as_json", [False, True])
def test_search_cli_exits_1_when_nothing_matched(indexed_sample: Library, as_json: bool) -> None:
    """As grep, with or without --json (it exited 0 with --json, 1 without): a script can tell
    "no match" from a match the same way in both."""
    cmd = [sys.executable, "-m", "markindex_core", "search", str(indexed_sample.root)]
    json_flag = ["--json"] if as_json else []
    nothing = subprocess.run([*cmd, "zqxjvwk", *json_flag], capture_output=True, text=True)
    assert nothing.returncode == 1 and not nothing.stderr, nothing.stderr
    if as_json:
        assert json.loads(nothing.stdout)["hits"] == []
    else:
        assert "nothing matched" in nothing.stdout and "0 results" in nothing.stdout
    found = subprocess.run([*cmd, "max_connections", *json_flag], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr


def test_nothing_matched_advises_what_can_help(indexed_sample: Library, tmp_path: Path) -> None:
    """A search that found nothing always said 'try other words or a wider scope', also over
    the whole library (where no scope is wider) and over an index of no documents (where no
    words help). The advice now fits: a wider scope only for a scoped search, other words or
    the other language otherwise, and an empty index is named as such."""
    cmd = [sys.executable, "-m", "markindex_core", "search", "--json"]

    def notice(root: Path, *extra: str) -> str:
        done = subprocess.run([*cmd, str(root), "zqxjvwk", *extra], capture_output=True, text=True)
        assert done.returncode == 1, done.stderr
        return str(json.loads(done.stdout)["notice"])

    whole = notice(indexed_sample.root)
    assert whole.startswith("nothing matched") and "scope" not in whole, whole
    assert "other" in whole and "language" in whole, whole
    scoped = notice(indexed_sample.root, "--folder", "guides")
    assert scoped.startswith("nothing matched") and "wider scope" in scoped, scoped
    empty = tmp_path / "empty"
    empty.mkdir()
    Library(empty).index()
    assert "no documents" in notice(empty)


def test_eval_command_reports_metrics(indexed_sample: Library, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    rows = [
        {
            "id": "1",
            "question": "数据安全事件多久要报告",
            "lang": "zh",
            "gold": [{"doc_path": "laws/数据安全管理办法.md", "start_line": 25, "end_line": 25}],
        },
        {
            "id": "2",
            "question": "which port does the server listen on by default",
            "lang": "mixed",
            "gold": [{"doc_path": "specs/配置参考.md"}],
        },
        {
            "id": "3",
            "question": "upgrade from version 1.x",
            "lang": "en",
            "gold": [
                {
                    "doc_path": "guides/install.md",
                    "title_path": ["Installing Widget Server", "Upgrading"],
                }
            ],
        },
    ]
    questions.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8"
    )
    report = tmp_path / "report.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "markindex_core",
            "eval",
            str(indexed_sample.root),
            "--questions",
            str(questions),
            "--max-evidence-lines",
            "60",
            "--out",
            str(report),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    metrics = json.loads(out.stdout)
    assert set(metrics) == {"overall", "zh", "mixed", "en"}
    assert metrics["overall"]["questions"] == 3
    assert metrics["overall"]["hit@5"] == 1.0
    full = json.loads(report.read_text(encoding="utf-8"))
    assert len(full["questions"]) == 3


def test_relaxed_search_ranks_sections_with_every_word_first(tmp_path: Path) -> None:
    # "quokka" is everywhere (low IDF); a short section repeats "zebra"; only one long section
    # holds both words, once each. By BM25 alone the zebra section would come first.
    root = tmp_path / "lib"
    root.mkdir()
    filler = " ".join(f"word{i}" for i in range(300))
    (root / "both.md").write_text(
        f"# Both\n\n{filler} zebra {filler} quokka {filler}\n", encoding="utf-8"
    )
    (root / "zebra.md").write_text("# Stripes\n\nzebra zebra zebra zebra\n", encoding="utf-8")
    for n in range(12):
        (root / f"q{n}.md").write_text(f"# Q{n}\n\nquokka number {n}\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    result = lib.search("zebra quokka")
    assert result.mode == "relaxed" and result.notice.startswith("only 1 section contains")
    assert result.hits[0].doc_path == "both.md"
    lib.close()


def test_every_word_of_a_long_heading_is_searchable(tmp_path: Path) -> None:
    """A title is cut to MAX_TITLE_CHARS for display; the words after the cut still find it."""
    from markindex_core.config import MAX_TITLE_CHARS

    root = tmp_path / "lib"
    root.mkdir()
    head = "word " * (MAX_TITLE_CHARS // 5 + 10) + "zebrafish exemption"
    (root / "a.md").write_text(
        "# Doc\n\n" + "lead text " * 200 + f"\n\n## {head}\n\n" + "body text here. " * 300
        + "\n\n## Other\n\n" + "more text " * 300 + "\n",
        encoding="utf-8",
    )  # fmt: skip
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    hits = lib.search("zebrafish exemption").hits
    assert hits and hits[0].title_path[-1].startswith("word word")
    assert len(hits[0].title_path[-1]) <= MAX_TITLE_CHARS


@pytest.mark.parametrize("query", ["`quota_que`", '"quota_que"', "(quota_que)", "quota_que?"])
def test_a_fragment_in_quotes_or_brackets_is_still_a_fragment(
    indexed_sample: Library, query: str
) -> None:
    """Agents write identifiers in backticks or quotes, and questions end in `?`: the fragment
    pass looked for `quota_que?` whole, found no indexed word holding it, and said nothing
    matched, while `quota_que` alone finds `mem_quota_query`."""
    result = indexed_sample.search(query)
    assert result.mode == "substring", result.notice
    assert any(h.doc_path == "specs/配置参考.md" for h in result.hits)


def test_stopwords_are_no_fragments(indexed_sample: Library) -> None:
    """The fragment pass looked for every word of the query inside indexed words, stopwords
    too: `zqxjvwk the` answered with sections holding `the`, `other`, `these` as "matched word
    fragments", and `where is quota_que?` ranked words holding `where` with the fragment asked
    for. Stopwords are left out of the ranking, and so out of the fragments."""
    nothing = indexed_sample.search("zqxjvwk the")
    assert nothing.mode == "none" and not nothing.hits, nothing.notice
    result = indexed_sample.search("where is the quota_que?")
    assert result.mode == "substring"
    assert result.hits[0].doc_path == "specs/配置参考.md"
    assert all("quota_que" in t for t in result.terms), result.terms


@pytest.mark.parametrize("lead", ["……" * 40, " ".join(["ﷺ"] * 12)])
def test_the_snippet_shows_the_match_after_text_that_nfkc_lengthens(
    tmp_path: Path, lead: str
) -> None:
    """The snippet is centred on the first matched term, found in the NFKC-folded text; its
    offset there was used in the original text. Characters NFKC writes longer (`…` is `...`,
    `ﷺ` 18 characters) moved the window ahead of the term, and the snippet showed none of it."""
    root = tmp_path / "lib"
    root.mkdir()
    pad = " ".join(["padding"] * 60)
    (root / "a.md").write_text(f"# A\n\nLead {lead} then qwertyzap appears, {pad}.\n", "utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    hit = lib.search("qwertyzap").hits[0]
    assert "qwertyzap" in hit.snippet, hit.snippet
    lib.close()


def test_a_snippet_starts_and_ends_on_whole_words(tmp_path: Path) -> None:
    """A snippet cut out of a long paragraph began and ended inside words ('…und the world',
    'the end of WatchList stre…'), so its first and last words read as typos. A cut in the
    middle of a word now moves to the space next to it; Chinese, which has no spaces, is cut
    where it is."""
    root = tmp_path / "lib"
    root.mkdir()
    words = [f"word{i:03d}" for i in range(120)]
    words[60] = "qwertyzap"
    (root / "en.md").write_text("# En\n\n" + " ".join(words) + "\n", "utf-8")
    (root / "zh.md").write_text(
        "# Zh\n\n" + "数据处理" * 40 + "星际航行" + "数据处理" * 40, "utf-8"
    )
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    snippet = lib.search("qwertyzap").hits[0].snippet
    assert snippet.startswith("…") and snippet.endswith("…") and "qwertyzap" in snippet
    assert all(w in words for w in snippet.strip("…").split()), snippet
    chinese = lib.search("星际航行").hits[0].snippet
    assert "星际航行" in chinese and len(chinese.strip("…")) >= 150, chinese
    lib.close()


def test_the_python_api_takes_a_scope_as_the_tools_do(tmp_path: Path) -> None:
    """`Library.search` found nothing for `folder="./specs"`, `folder="."`, `a//b` or a name
    typed in the other Unicode normalization than the file system's (macOS writes NFD), where
    `search_documents` and `markindex search --folder` find the folder: it ran the scope as
    given, and a scope naming nothing matches nothing."""
    import unicodedata

    root = tmp_path / "lib"
    stored = unicodedata.normalize("NFD", "dossier-é")
    (root / stored / "sub").mkdir(parents=True)
    (root / stored / "sub" / "notes.md").write_text("# Notes\n\nespresso notes\n", "utf-8")
    (root / "other.md").write_text("# Other\n\nespresso elsewhere\n", encoding="utf-8")
    lib = Library(root, tmp_path / "index.db")
    lib.index()
    typed = unicodedata.normalize("NFC", stored)
    note = f"{stored}/sub/notes.md"
    for folder in (typed, f"./{typed}/", f"{typed}//sub", f"{stored}/./sub/"):
        assert [h.doc_path for h in lib.search("espresso", folder=folder).hits] == [note], folder
    assert len(lib.search("espresso", folder=".").hits) == 2
    for doc in (f"{typed}/sub/notes.md", f"./{stored}//sub/notes.md"):
        assert [h.doc_path for h in lib.search("espresso", doc_path=doc).hits] == [note], doc
    assert lib.search("espresso", folder="nowhere").hits == []
    lib.close()


def test_a_rare_word_is_ranked_by_when_common_words_fill_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranking keeps the rarest query words while their passages fit a budget, and at least
    three. When those three alone were over it, a word in a handful of passages was dropped too
    if its parts were common (`deviceClasses`: device, class): on a library ten times the
    corpus such a question lost the one word that named its answer. A word that rare costs
    nothing to rank by, and is kept."""
    from markindex_core.search import searcher

    root = tmp_path / "lib"
    root.mkdir()
    for n in range(30):
        (root / f"common{n}.md").write_text(
            f"# Common {n}\n\nalpha beta gamma about a device and its class {n}.\n",
            encoding="utf-8",
        )
    (root / "answer.md").write_text(
        "# Answer\n\nThe deviceClasses field lists what may be claimed.\n", encoding="utf-8"
    )
    lib = Library(root)
    lib.index()
    monkeypatch.setattr(searcher, "POSTINGS_BUDGET", 10)  # the three common words fill it
    hits = lib.search("alpha beta gamma deviceClasses").hits
    assert "answer.md" in [h.doc_path for h in hits[:3]], [h.doc_path for h in hits]
    lib.close()

"""Re-ranking of the best candidates: what a passage-by-passage BM25 cannot see."""

from __future__ import annotations

from pathlib import Path

import pytest

from markindex_core.config import QUANTITY_DEPTH, QUANTITY_WEIGHT
from markindex_core.library import Library
from markindex_core.search import rerank
from markindex_core.search.rerank import (
    asks_quantity,
    by_document,
    by_quantity,
    by_title,
    demote_contents,
    document_evidence,
    is_contents,
    is_references,
    states_quantity,
    title_match,
)
from markindex_core.store.search_queries import SearchQueries


def _filler(n: int) -> str:
    """Words found nowhere else: they make each section long enough to stay its own node."""
    return " ".join(f"filler{n}x{i}" for i in range(200))


def _indexed_with_notes(root: Path) -> Library:
    """Index `root` after adding 12 unrelated notes, so the test words are rare (high IDF)."""
    for n in range(12):
        (root / f"n{n}.md").write_text(f"# Note {n}\n\nAbout gardening {n}.\n", encoding="utf-8")
    lib = Library(root)
    lib.index()
    return lib


def test_a_document_answering_with_several_passages_outranks_a_passing_mention(
    tmp_path: Path,
) -> None:
    # A reading list names both rare words in one line and wins on BM25 alone; the guide uses
    # them in three sections. The guide's best passage must come first.
    root = tmp_path / "lib"
    root.mkdir()
    (root / "refs.md").write_text(
        "# Further reading\n\n- Notes on zorblax frobnication, and links about gardening, cooking,"
        " music, travel, painting, chess, sailing and the weather.\n",
        encoding="utf-8",
    )
    (root / "guide.md").write_text(
        "# Operations guide\n\n## Setup\n\nThe zorblax step runs once at install time and its"
        f" quota is set by the operator.\n\n{_filler(1)}\n\n## Limits\n\nEach run of the"
        " frobnication step has a quota of ten units before it pauses.\n\n"
        f"{_filler(2)}\n\n## Failures\n\nWhen frobnication fails, the zorblax unit is rolled"
        f" back and the operator is told.\n\n{_filler(3)}\n",
        encoding="utf-8",
    )
    lib = _indexed_with_notes(root)
    hits = lib.search("zorblax frobnication quota").hits
    assert [h.doc_path for h in hits[:2]] == ["guide.md", "guide.md"]
    assert "refs.md" in [h.doc_path for h in hits]
    lib.close()


def test_document_evidence_sums_each_documents_best_three() -> None:
    head = [(1.0, 1), (0.9, 2), (0.8, 3), (0.7, 4), (0.6, 5), (0.5, 6)]
    doc_of = {1: 10, 2: 20, 3: 20, 4: 20, 5: 20, 6: 30}
    assert document_evidence(head, doc_of) == {10: 1.0, 20: 0.9 + 0.8 + 0.7, 30: 0.5}


def test_only_the_head_is_rescored_and_the_tail_keeps_its_order() -> None:
    ranked = [(1.0 - i / 100, i) for i in range(60)]
    doc_of = {i: i % 2 for i in range(60)}
    out = by_document(ranked, doc_of)
    assert [s for s, _ in out[:40]] == sorted((s for s, _ in out[:40]), reverse=True)
    assert [pid for _, pid in out[40:]] == list(range(40, 60))
    assert {pid for _, pid in out[:40]} == set(range(40))


def test_a_table_of_contents_gives_way_to_the_sections_it_lists(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    sections = [
        ("Summary", "A gateway for quux traffic."),
        ("Quux gateway retries", "The gateway retries a failed request three times."),
        ("Quux gateway timeouts", "Requests time out after thirty seconds."),
        ("Quux gateway metrics", "The gateway exports request counts."),
    ]
    contents = "\n".join(f"- [{t}](#{t.lower().replace(' ', '-')})" for t, _ in sections)
    body = "\n\n".join(f"## {t}\n\n{text}\n\n{_filler(n)}" for n, (t, text) in enumerate(sections))
    (root / "kep.md").write_text(
        f"# KEP-9: Quux gateway\n\n## Table of Contents\n\n{contents}\n\n{body}\n",
        encoding="utf-8",
    )
    lib = _indexed_with_notes(root)
    hits = lib.search("how often does the quux gateway retry a failed request").hits
    assert hits[0].title_path[-1] == "Quux gateway retries"
    assert all(h.title_path[-1] != "Table of Contents" for h in hits[:3])
    lib.close()


def test_contents_are_links_to_own_headings_not_any_links() -> None:
    assert is_contents("- [Summary](#summary)\n- [Design Details](#design-details)")
    assert not is_contents("- [Summary](https://example.org/summary)\n- [Design](https://x.y)")
    assert not is_contents(
        "itemEncoding | [Encoding Object](#encoding-object) | Applies nested Encoding Objects"
        " in the same manner as the [Media Type Object](#media-type-object)'s field."
    )
    assert not is_contents("")


def test_lowering_contents_keeps_every_candidate_in_score_order() -> None:
    toc = "- [A](#a)\n- [B](#b)\n- [C](#c)"
    ranked = [(1.0 - i / 100, i) for i in range(60)]
    out = demote_contents(
        ranked,
        lambda ids: {i: toc if i == 0 else "text" for i in ids},
        lambda ids: dict.fromkeys(ids, "Overview"),
    )
    assert sorted(pid for _, pid in out) == list(range(60))
    assert out == sorted(out, reverse=True)
    assert out[0][1] == 1 and 0 in [pid for _, pid in out[1:]]


def test_reference_section_titles() -> None:
    for title in (
        "References",
        "## See also",
        "Further Reading",
        "参考资料",
        "相关链接",
        "Reference materials",
    ):
        assert is_references(title), title
    for title in (
        "Reference-level explanation",
        "API reference",
        "Referencing objects",
        "Links between documents",
    ):
        assert not is_references(title), title


def test_a_references_list_gives_way_to_the_passage_that_answers(tmp_path: Path) -> None:
    """A References section repeats the question's names (titles of cited documents) and says
    nothing itself: the section that answers comes first."""
    root = tmp_path / "lib"
    root.mkdir()
    others = "\n".join(
        f"- Other reference {i}: " + " ".join(f"ref{i}x{j}" for j in range(12)) for i in range(16)
    )
    (root / "auth.md").write_text(
        "# Authentication\n\n## Lifecycle\n\n"
        "An expired authenticator used to sign in is rejected by the verifier, which tells the "
        f"subscriber to renew it.\n\n{_filler(1)}\n\n"
        "## References\n\n"
        "- Expired authenticator sign in: verifier guidance\n"
        f"- Expired authenticator renewal and sign in\n\n{others}\n",
        encoding="utf-8",
    )
    lib = _indexed_with_notes(root)
    hits = lib.search("what happens when an expired authenticator is used to sign in").hits
    assert [h.title_path[-1] for h in hits[:2]] == ["Lifecycle", "References"]
    lib.close()


def test_the_section_titled_with_the_questions_topic_outranks_one_that_mentions_it(
    tmp_path: Path,
) -> None:
    """BM25 prefers "Design Details", which repeats the question's words; the section titled
    "Priority" answers it, and its title is nothing but a word of the question."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "kep.md").write_text(
        "# KEP-7: Widget admission\n\n## Design Details\n\nThe admission controller reads the"
        " widget spec and copies the widget's priority value into the audit record, where the"
        " highest priority value seen is kept with the widget. A widget with no priority value"
        f" gets the default value.\n\n{_filler(1)}\n\n## Priority\n\nThe highest value a"
        f" widget may ask for is 1000; a higher one is rejected.\n\n{_filler(2)}\n",
        encoding="utf-8",
    )
    lib = _indexed_with_notes(root)
    hits = lib.search("what is the highest priority value a widget may have").hits
    assert [h.title_path[-1] for h in hits[:2]] == ["Priority", "Design Details"]
    lib.close()


def test_title_match_is_led_by_how_much_of_the_title_the_query_asks() -> None:
    asked = {"prioriti", "valu", "widget"}
    rarity = {"prioriti": 3.0, "valu": 1.0, "widget": 4.0, "design": 1.0, "detail": 1.0}.get

    def match(title: str) -> float:
        return title_match(title, asked, 8.0, lambda t: rarity(t, 2.0))

    assert match("Priority") > match("Priority of the owner") > 0
    assert match("Widget priority value") > match("Priority")  # names more of the question
    assert match("Design Details") == 0.0
    assert match("优先级 Priority") == 0.0  # Chinese titles are left out
    assert match("") == 0.0


def test_only_the_head_is_raised_by_its_title() -> None:
    ranked = [(1.0 - i / 100, i) for i in range(60)]
    titles = {0: "Overview", 5: "Priority", 30: "Priority"}
    out = by_title(
        ranked, lambda ids: {i: titles.get(i, "Other") for i in ids}, {"prioriti"}, lambda t: 1.0
    )
    assert out[0][1] == 5
    assert [pid for _, pid in out[20:]] == list(range(20, 60))  # 30 is past the head: unmoved
    assert out[:20] == sorted(out[:20], reverse=True)


def test_word_rarity_follows_the_index_as_it_changes(tmp_path: Path) -> None:
    """The title match weighs words by IDF, kept per searcher: after a write (a live index
    writes all the time) a word new to the index must not keep the IDF of a word found nowhere."""
    root = tmp_path / "lib"
    root.mkdir()
    lib = _indexed_with_notes(root)
    searcher = lib.searcher()
    lib.search("gardening")
    assert searcher._rarity("zebra") == 0.0
    (root / "z.md").write_text("# Zebra\n\nA zebra crossing.\n", encoding="utf-8")
    lib.index()
    lib.search("gardening")
    assert lib.searcher() is searcher and searcher._rarity("zebra") > 0
    lib.close()


def test_each_word_is_counted_once_per_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting a word's passages walks all of them (milliseconds for a common word in a large
    library): the choice of ranking words and the title match share one count per word, and the
    next search of the same index counts nothing again; after a write, it counts anew."""
    root = tmp_path / "lib"
    root.mkdir()
    lib = _indexed_with_notes(root)
    counted: list[str] = []
    count = SearchQueries.passage_doc_frequency

    def spy(self: SearchQueries, term: str) -> int:
        counted.append(term)
        return count(self, term)

    monkeypatch.setattr(SearchQueries, "passage_doc_frequency", spy)
    question = "which gardening note talks about roses tulips and daisies"
    first = lib.search(question).hits
    assert counted and len(counted) == len(set(counted))
    counted.clear()
    assert lib.search(question).hits == first and counted == []
    (root / "r.md").write_text("# Roses\n\nRoses in the garden.\n", encoding="utf-8")
    lib.index()
    lib.search(question)
    assert "rose" in counted
    lib.close()


def test_questions_that_ask_for_a_quantity() -> None:
    for q in (
        "How many replicas may a region have?",
        "how long is a token valid",
        "the default timeout of the exporter",
        "What is the maximum name length?",
    ):
        assert asks_quantity(q), q
    for q in ("Which fields does a span carry?", "why is the token rotated", "最长能拖多久？"):
        assert not asks_quantity(q), q  # Chinese questions are left out (measured: no gain)


def test_a_passage_states_a_quantity_unless_its_only_numbers_number_items() -> None:
    assert states_quantity("A snapshot is kept for 35 days.")
    assert states_quantity("Set it to v2 or later.")
    assert not states_quantity("1. Stop the server.\n2) Copy the files.\n## 3 Restart")
    assert not states_quantity("No number here.")


def test_a_quantity_question_raises_the_head_passages_that_state_a_number() -> None:
    ranked = [(1.0, 1), (0.9, 2), (0.8, 3)] + [(0.5 - i / 1000, 10 + i) for i in range(30)]
    text = {1: "Retention is set by the operator.", 2: "Kept for 35 days.", 3: "None."}
    text |= {10 + i: "Kept 9 days." for i in range(30)}

    def texts(ids: list[int]) -> dict[int, str]:
        assert len(ids) <= QUANTITY_DEPTH  # only the head is read
        return {pid: text[pid] for pid in ids}

    out = by_quantity(ranked, texts, "how long is a snapshot kept")
    assert [pid for _, pid in out[:3]] == [2, 1, 3]
    assert {pid: s for s, pid in out}[2] == pytest.approx(0.9 + QUANTITY_WEIGHT)
    assert out[QUANTITY_DEPTH:] == ranked[QUANTITY_DEPTH:]  # the tail keeps its scores and order
    assert by_quantity(ranked, texts, "who keeps the snapshot") == ranked


def test_search_raises_the_passage_that_states_the_quantity_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    (root / "ops.md").write_text(
        "# Operations\n\n## Snapshot retention\n\nSnapshot retention is set by the operator each"
        f" year.\n\n{_filler(1)}\n\n## Snapshots\n\nA snapshot is kept for 35 days, then"
        f" deleted.\n\n{_filler(2)}\n",
        encoding="utf-8",
    )
    lib = _indexed_with_notes(root)

    def scores(question: str) -> dict[str, float]:
        return {h.title_path[-1]: h.score for h in lib.search(question).hits}

    with_type = scores("how long is a snapshot retained")
    plain_question = scores("is a snapshot retained")
    monkeypatch.setattr(rerank, "QUANTITY_WEIGHT", 0.0)
    without = scores("how long is a snapshot retained")
    assert with_type["Snapshots"] == pytest.approx(without["Snapshots"] + QUANTITY_WEIGHT, abs=2e-4)
    assert with_type["Snapshot retention"] == without["Snapshot retention"]  # no number in it
    assert plain_question == scores("is a snapshot retained")  # not a quantity question
    lib.close()

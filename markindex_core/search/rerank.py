"""Re-ranking of the best candidates by what a passage-by-passage BM25 cannot see.

BM25 scores each passage on its own. Two things it misses are corrected here, on the best
candidates only, so the cost stays bounded whatever the size of the library:

- Document coherence: a reference line in some other document that repeats two rare names of
  the question can outrank the paragraph that answers, though the answering document holds
  several passages that match well. Among the best RERANK_DEPTH candidates each document's
  evidence is summed (its DOC_EVIDENCE_PASSAGES best scores), and a passage is raised by its
  document's share of the best document's sum.
- Tables of contents: a list of links to a document's own headings names every topic of a
  question and answers none. The best CONTENTS_DEPTH candidates are read and such lists lowered,
  and so is the body of a References / See also section: it names the topics too.
- Section titles: a passage's title path is one BM25 field among its words, so the section that
  merely mentions a question's topic ranks beside the section whose own title *is* that topic.
  Among the best TITLE_MATCH_DEPTH candidates, a passage whose section title is mostly words of
  the question (and names a good part of them) is raised (`by_title`).
- Answer type: a question that asks for a quantity (how many, how long, the maximum, the
  default) is answered by a passage that states one, and BM25 cannot tell a passage with a number
  from one without. Among the best QUANTITY_DEPTH candidates those that state a number are
  raised (`by_quantity`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping

from markindex_core.config import (
    CONTENTS_DEPTH,
    CONTENTS_LINK_SHARE,
    DOC_EVIDENCE_PASSAGES,
    DOC_WEIGHT,
    LINK_PENALTY,
    QUANTITY_DEPTH,
    QUANTITY_WEIGHT,
    RERANK_DEPTH,
    TITLE_MATCH_DEPTH,
    TITLE_MATCH_WEIGHT,
)
from markindex_core.text import segment
from markindex_core.text.stopwords import is_stopword

# A Markdown link to a heading of the same document: `[text](#anchor)`.
_LINK = re.compile(r"\[[^\]\n]*\]\(#[^)\s]*\)")
# Titles of sections that list sources or neighbours rather than say anything themselves.
_REFERENCES = re.compile(
    r"(?:references?|reference materials?|see also|further reading|bibliography|external links"
    r"|related (?:links|resources|documents)|参考(?:文献|资料)?|相关(?:链接|文档|资料)|延伸阅读)",
    re.IGNORECASE,
)
# An English question that asks for a quantity: a count, a duration, a size, a bound, a default.
_ASKS_QUANTITY = re.compile(
    r"\b(?:how (?:many|much|long|often|large|big|small|old|far|soon|frequently)"
    r"|maximum|minimum|max|min|default|limit|timeout|percent(?:age)?|number of|size of"
    r"|at most|at least|up to)\b",
    re.IGNORECASE,
)
# Numbers that state nothing: an ordered list item's or a heading's own number.
_ITEM_NUMBER = re.compile(r"^[ \t]*(?:\d+[.)]|#{1,6}[ \t]+\d+(?:\.\d+)*\.?)[ \t]", re.MULTILINE)


def by_document(
    ranked: list[tuple[float, int]], doc_of: Mapping[int, int]
) -> list[tuple[float, int]]:
    """`ranked` ((score, passage id), best first) again, its head raised by document evidence."""
    head = ranked[:RERANK_DEPTH]
    if len(head) < 2 or DOC_WEIGHT <= 0:
        return ranked
    best = document_evidence(head, doc_of)
    top = max(best.values()) or 1.0
    rescored = [(score + DOC_WEIGHT * best[doc_of[pid]] / top, pid) for score, pid in head]
    rescored.sort(reverse=True)
    return rescored + ranked[RERANK_DEPTH:]


def document_evidence(head: list[tuple[float, int]], doc_of: Mapping[int, int]) -> dict[int, float]:
    """Each document's summed score over its best DOC_EVIDENCE_PASSAGES passages in `head`."""
    scores: dict[int, list[float]] = {}
    for score, pid in head:  # best first: each document's first scores are its best
        kept = scores.setdefault(doc_of[pid], [])
        if len(kept) < DOC_EVIDENCE_PASSAGES:
            kept.append(score)
    return {doc: sum(kept) for doc, kept in scores.items()}


def is_contents(text: str) -> bool:
    """Whether a passage is mostly links to the document's own headings: a table of contents.

    It names the topics of a question without answering it, and BM25 ranks it high exactly
    because it names so many of them.
    """
    if "](#" not in text:  # most passages: no link to a heading at all
        return False
    chars = len("".join(text.split()))
    links = sum(len("".join(m.group().split())) for m in _LINK.finditer(text))
    return chars > 0 and links >= CONTENTS_LINK_SHARE * chars


def is_references(title: str) -> bool:
    """Whether a section title names a list of sources or related pages (References, See also)."""
    return _REFERENCES.fullmatch(title.strip(" #*_:：")) is not None


def demote_contents(
    ranked: list[tuple[float, int]],
    texts: Callable[[list[int]], dict[int, str]],
    titles: Callable[[list[int]], dict[int, str]],
) -> list[tuple[float, int]]:
    """`ranked` again, each of its first CONTENTS_DEPTH passages lowered that is mostly links to
    the document's own headings or lies in a References section (`texts` and `titles`, by
    passage id, are read for those passages only: the one cost of re-ranking).

    Only a passage whose link share reaches CONTENTS_LINK_SHARE counts as a table of contents:
    a definition that links to two other objects of the same document still answers.
    """
    head = ranked[:CONTENTS_DEPTH]
    if not head or LINK_PENALTY <= 0:
        return ranked
    ids = [pid for _, pid in head]
    text_of, title_of = texts(ids), titles(ids)
    rescored = [
        (score - (LINK_PENALTY if _names_without_saying(text_of, title_of, pid) else 0.0), pid)
        for score, pid in head
    ]
    out = rescored + ranked[CONTENTS_DEPTH:]
    out.sort(reverse=True)  # a lowered passage may now fall below ones further down
    return out


def _names_without_saying(text_of: dict[int, str], title_of: dict[int, str], pid: int) -> bool:
    return is_references(title_of.get(pid, "")) or is_contents(text_of.get(pid, ""))


def by_title(
    ranked: list[tuple[float, int]],
    titles: Callable[[list[int]], dict[int, str]],
    asked: Collection[str],
    rarity: Callable[[str], float],
) -> list[tuple[float, int]]:
    """`ranked` again, each of its first TITLE_MATCH_DEPTH passages raised by how well its own
    section title matches the query terms `asked` (`title_match`, times TITLE_MATCH_WEIGHT).

    Measured on the dev questions (eval/tune_rank.py): English hit@1 61.5% -> 64.6%, one more
    question on each half, nothing lower; the answer to a paraphrased question often sits in the
    section titled with a few of its words ("User Stories" for "which user story ...").
    """
    head = ranked[:TITLE_MATCH_DEPTH]
    if not head or not asked or TITLE_MATCH_WEIGHT <= 0:
        return ranked
    title_of = titles([pid for _, pid in head])
    asked_weight = sum(map(rarity, asked))
    matches = [title_match(title_of.get(pid, ""), asked, asked_weight, rarity) for _, pid in head]
    rescored = [
        (score + TITLE_MATCH_WEIGHT * m, pid) for (score, pid), m in zip(head, matches, strict=True)
    ]
    rescored.sort(reverse=True)  # raised only: the head stays above the tail
    return rescored + ranked[TITLE_MATCH_DEPTH:]


def title_match(
    title: str, asked: Collection[str], asked_weight: float, rarity: Callable[[str], float]
) -> float:
    """How much a section title is about the query: the IDF share of its words that the query
    asks (precision) times the square root of the IDF share of the query it names (recall).

    Precision leads: "Priority" under a question about priority values is that topic, while
    "Design Details" names nothing. Only titles without Chinese count: measured with Chinese
    titles too, Chinese hit@1 fell by a question on one half and nothing rose.
    """
    if not title.isascii():
        return 0.0
    words = {t for t in segment.terms(title) if not is_stopword(t)}
    shared = sum(rarity(t) for t in words if t in asked)
    if shared <= 0:
        return 0.0
    total = sum(map(rarity, words))
    return shared / total * math.sqrt(shared / asked_weight) if total and asked_weight else 0.0


def asks_quantity(question: str) -> bool:
    """Whether an English question asks for a quantity. Chinese questions are left out: measured
    with them (多少, 几天, 最长 …), Chinese hit@1 fell by a question on one half, nothing rose;
    nearly every Chinese statute passage states some number (deadlines, articles, amounts)."""
    return question.isascii() and _ASKS_QUANTITY.search(question) is not None


def states_quantity(text: str) -> bool:
    """Whether a passage states a number (a list item's or a heading's own number is none)."""
    return any(ch.isdigit() for ch in _ITEM_NUMBER.sub("", text))


def by_quantity(
    ranked: list[tuple[float, int]],
    texts: Callable[[list[int]], dict[int, str]],
    question: str,
) -> list[tuple[float, int]]:
    """`ranked` again, each of its first QUANTITY_DEPTH passages that states a number raised by
    QUANTITY_WEIGHT when the question asks for a quantity (`asks_quantity`).

    Measured on the dev questions (eval/tune_rank.py): the 101 older ones unchanged at every
    weight from 0.15 to 0.4; the 45 harder English ones (extra2) gain one question on each half
    (odd hit@5 52.2% -> 56.5%, even hit@1 18.2% -> 22.7%), nothing lower. At depth 40 the odd
    half's hit@1 falls by one.
    """
    head = ranked[:QUANTITY_DEPTH]
    if not head or QUANTITY_WEIGHT <= 0 or not asks_quantity(question):
        return ranked
    text_of = texts([pid for _, pid in head])
    rescored = [
        (score + (QUANTITY_WEIGHT if states_quantity(text_of.get(pid, "")) else 0.0), pid)
        for score, pid in head
    ]
    rescored.sort(reverse=True)  # raised only: the head stays above the tail
    return rescored + ranked[QUANTITY_DEPTH:]

"""Keyword search: BM25 over nodes' own text and over passages, with relaxation and a substring pass.

A query is cut into word groups (see `segment.word_groups`). The strict pass requires every group;
when it finds too little, the relaxed pass ORs the groups and BM25's per-term IDF sum ranks by
coverage. Each hit names its node and the passage inside it that best carries the match: the
evidence a reader should read first and the range a citation names.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

from markindex_core.config import (
    EXPAND_MAX_LINES,
    EXPAND_RATIO,
    MAX_QUERY_GROUPS,
    MERGE_GAP_LINES,
    MERGE_MAX_LINES,
    MERGE_WINDOW,
    MIN_RANKED_WORDS,
    NODE_SHARE,
    PASSAGES_PER_NODE,
    POSTINGS_BUDGET,
    RARE_WORD_POSTINGS,
    SEARCH_DEFAULT_LIMIT,
    SEARCH_MAX_LIMIT,
    SNIPPET_CHARS,
    SNIPPET_WORD_SLACK,
    STRICT_ENOUGH,
    TERM_RARITY_CACHE,
)
from markindex_core.search.evidence import is_prose
from markindex_core.search.rerank import by_document, by_quantity, by_title, demote_contents
from markindex_core.store.db import Store, clean_relative, connect
from markindex_core.store.outline import title_path
from markindex_core.store.search_queries import PassageScore, Scope, SearchQueries
from markindex_core.text import segment
from markindex_core.text.stopwords import is_stopword


@dataclass(frozen=True)
class Hit:
    doc_path: str
    node_id: str
    title_path: list[str]
    kind: str
    start_line: int  # the node's own range
    end_line: int
    passage_start: int  # the evidence: what to read first and what to cite
    passage_end: int
    score: float
    snippet: str

    @property
    def citation(self) -> str:
        return f"[{self.doc_path}, L{self.passage_start}-{self.passage_end}]"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["citation"] = self.citation
        return d


@dataclass
class SearchResult:
    query: str
    hits: list[Hit]
    mode: str  # "strict" | "relaxed" | "substring" | "none"
    notice: str = ""
    terms: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0

    @property
    def relaxed(self) -> bool:
        return self.mode in ("relaxed", "substring")

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "relaxed": self.relaxed,
            "notice": self.notice,
            "terms": self.terms,
            "hits": [h.to_json() for h in self.hits],
            "elapsed_ms": round(self.elapsed_ms, 2),
        }


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _group_expr(group: list[str]) -> str:
    whole, *parts = group
    alts = [_quote(whole)]
    if parts and any(not p.isascii() for p in parts):
        alts += [_quote(p) for p in parts]  # Chinese sub-words: any of them
    elif len(parts) > 1:
        alts.append(_quote(" ".join(parts)))  # identifier parts: as a phrase
    return alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")"


def query_groups(query: str) -> list[list[str]]:
    """Word groups of a query, stopwords removed (unless nothing else is left)."""
    text = query[:4096]
    groups = segment.word_groups(text, stop=_is_noise) or segment.word_groups(text)
    seen: set[str] = set()
    uniq = []
    for g in groups:
        if g[0] not in seen:
            seen.add(g[0])
            uniq.append(g)
    return uniq[:MAX_QUERY_GROUPS]


def _is_noise(word: str) -> bool:
    return is_stopword(word) or (len(word) == 1 and word.isascii())


class Searcher:
    """Runs searches against one store connection (one per thread)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conn = store.conn
        self.queries = SearchQueries(store.conn)
        self._pool: ThreadPoolExecutor | None = None
        self._helper_state = threading.local()
        self._rarity = _Rarity(self.queries)

    def search(
        self,
        query: str,
        *,
        folder: str | None = None,
        doc_path: str | None = None,
        limit: int = SEARCH_DEFAULT_LIMIT,
    ) -> SearchResult:
        # One read transaction: while the daemon writes, every query of this search sees the
        # same snapshot, so a hit never points at a node deleted between two statements.
        with self.conn:
            result = self._search(query, folder=folder, doc_path=doc_path, limit=limit)
        return result

    def _search(
        self,
        query: str,
        *,
        folder: str | None,
        doc_path: str | None,
        limit: int,
    ) -> SearchResult:
        t0 = time.perf_counter()
        limit = max(1, min(int(limit), SEARCH_MAX_LIMIT))
        groups = query_groups(query)
        terms = [g[0] for g in groups]
        if not groups:
            return SearchResult(query, [], "none", "the query has no searchable words", [], _ms(t0))
        scope = self._scope(folder, doc_path)
        exprs = [_group_expr(g) for g in groups]
        asked = {t for g in groups for t in g}
        self._rarity.renew()
        ranking = " OR ".join(self._informative(groups, exprs))
        strict_nodes = (
            self.queries.matching_nodes(" AND ".join(exprs), scope) if len(groups) > 1 else None
        )
        if strict_nodes is None or len(strict_nodes) >= min(STRICT_ENOUGH, limit):
            hits = self._rank(query, ranking, strict_nodes, scope, limit, terms, asked)
            mode, notice = "strict", ""
        else:  # sections with every word still come first
            hits = self._rank(query, ranking, None, scope, limit, terms, asked, boost=strict_nodes)
            mode, notice = "relaxed", _relaxed_notice(len(strict_nodes), len(groups))
        if not hits:
            hits, extra = self._substring(query, scope, limit)
            if hits:
                mode = "substring"
                notice = f"no whole-word match; matched word fragments: {', '.join(extra)}"
                terms = terms + extra
            else:
                mode, notice = "none", self._nothing_notice(scope)
        return SearchResult(query, hits, mode, notice, terms, _ms(t0))

    def _nothing_notice(self, scope: Scope) -> str:
        """What to try when nothing matched: a wider scope helps only a scoped search, and no
        words help an index of no documents."""
        if scope.sql:
            return "nothing matched in this scope; try a wider scope or other words"
        if not self.store.count_documents():
            return "nothing matched: the index holds no documents (is it the right library?)"
        return "nothing matched; try other words or the other language"

    def _scope(self, folder: str | None, doc_path: str | None) -> Scope:
        """The scope as the index spells it, named as the tools and the CLI take it: `./specs/`
        is `specs`, and a name typed in the other Unicode normalization is the stored one."""
        if doc_path:
            path = clean_relative(doc_path) or doc_path
            found = self.store.lookup_document(path)
            return Scope.of(None, str(found["path"]) if found else path)
        if folder and (path := clean_relative(folder)):
            return Scope.of(self.store.lookup_folder(path) or path, None)
        return Scope()

    def _informative(self, groups: list[list[str]], exprs: list[str]) -> list[str]:
        """The query words used for ranking: common ones cost time and rank nearly nothing.

        Rarest words first, while the passages they match stay within a budget: the query cost
        then stays bounded however large the library grows. A Chinese word's sub-words widen
        recall but are common: past the budget only the whole word is kept.
        """
        if len(groups) <= MIN_RANKED_WORDS:
            return exprs
        df = self._rarity.frequency
        whole = [df(g[0]) for g in groups]
        full = [w + sum(df(t) for t in g[1:]) for w, g in zip(whole, groups, strict=True)]
        chosen: dict[int, str] = {}
        spent = 0
        for i in sorted(range(len(groups)), key=lambda i: full[i]):
            if len(chosen) < MIN_RANKED_WORDS or spent + full[i] <= POSTINGS_BUDGET:
                chosen[i], spent = exprs[i], spent + full[i]
            elif spent + whole[i] <= POSTINGS_BUDGET or whole[i] <= RARE_WORD_POSTINGS:
                chosen[i], spent = _quote(groups[i][0]), spent + whole[i]
        return [chosen[i] for i in sorted(chosen)]

    def _rank(
        self,
        query: str,
        match: str,
        allowed: set[int] | None,
        scope: Scope,
        limit: int,
        terms: list[str],
        asked: set[str],
        boost: set[int] | None = None,
    ) -> list[Hit]:
        passages, node_scores = self._candidates(match, scope)
        if allowed is not None:
            passages = {pid: p for pid, p in passages.items() if p.node_rowid in allowed}
            node_scores = {n: v for n, v in node_scores.items() if n in allowed}
        if not node_scores and not passages:
            return []
        top_node = max(node_scores.values(), default=1.0) or 1.0
        ranked = _blend(passages, node_scores, top_node, boost or set())
        texts = _ReadOnce(self.queries.passage_texts)  # read once for both uses below
        titles = _ReadOnce(self._titles_of(passages))  # read once for both re-rankings
        ranked = demote_contents(ranked, texts, titles)
        ranked = by_document(ranked, {pid: p.doc_id for pid, p in passages.items()})
        ranked = by_title(ranked, titles, asked, self._rarity)
        ranked = by_quantity(ranked, texts, query)
        prose = _ProseCheck(texts)
        chosen = _choose(ranked, passages, node_scores, top_node, limit, prose)
        hits = (self._hit(pick, terms) for pick in chosen)
        return [h for h in hits if h is not None]

    def _titles_of(
        self, passages: dict[int, PassageScore]
    ) -> Callable[[list[int]], dict[int, str]]:
        """Passage ids -> the titles of their nodes, read in one query."""

        def titles(ids: list[int]) -> dict[int, str]:
            nodes = self.queries.node_titles([passages[pid].node_rowid for pid in ids])
            return {pid: nodes.get(passages[pid].node_rowid, "") for pid in ids}

        return titles

    def _candidates(
        self, match: str, scope: Scope
    ) -> tuple[dict[int, PassageScore], dict[int, float]]:
        """Scored passages (by id) and scored nodes (by rowid) for one FTS expression.

        Node scores come from a second connection on a helper thread while this one scores
        passages: the two FTS queries are the whole cost of a search and run on two cores.
        """
        pending = self._helper().submit(self._node_scores, match, scope)
        passages = {p.id: p for p in self.queries.passage_scores(match, scope)}
        return passages, pending.result()

    def _helper(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="markindex-search")
        return self._pool

    def _node_scores(self, match: str, scope: Scope) -> dict[int, float]:
        """Node scores on the helper thread's own connection (helper thread only)."""
        queries: SearchQueries | None = getattr(self._helper_state, "queries", None)
        if queries is None:
            queries = SearchQueries(connect(self.store.path, readonly=True))
            self._helper_state.queries = queries
        return queries.node_scores(match, scope)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def _hit(self, pick: _Pick, terms: list[str]) -> Hit | None:
        node = self.store.node_by_rowid(pick.node_rowid)
        if node is None:  # rewritten by a writer between the two connections' snapshots
            return None
        start, end = pick.start, pick.end
        if not start:  # matched by its title only: show its first passage
            start, end = self.queries.first_passage(pick.node_rowid) or (
                node.start_line,
                node.end_line,
            )
        lines = self.store.read_lines(node.doc_id, start, end)
        ancestors = {a.node_id: a for a in self.queries.ancestors(pick.node_rowid)}
        return Hit(
            doc_path=str(self.queries.document_path(node.doc_id)),
            node_id=node.node_id,
            title_path=title_path(ancestors, node.node_id),
            kind=node.kind,
            start_line=node.start_line,
            end_line=node.end_line,
            passage_start=start,
            passage_end=end,
            score=round(pick.score, 4),
            snippet=make_snippet("\n".join(lines), terms),
        )

    def _substring(self, query: str, scope: Scope, limit: int) -> tuple[list[Hit], list[str]]:
        """Fragments (partial identifiers, odd CJK cuts): match them inside indexed words.

        Stopwords are no fragments: ranking leaves them out, and inside other words they
        match everywhere (`the` in `other`, `where` in `whereas`)."""
        words = segment.surface_words(query)
        frags = list(islice((f for f in words if len(f) >= 3 and not _is_noise(f)), 4))
        found = [term for frag in frags for term in self.queries.node_vocabulary_like(frag)]
        if not found:
            return [], []
        match = " OR ".join(_quote(t) for t in dict.fromkeys(found))
        return self._rank(query, match, None, scope, limit, found, set(found)), found[:10]


@dataclass(frozen=True)
class _Pick:
    """A chosen result before it becomes a `Hit`: start 0 means "no passage matched"."""

    score: float
    node_rowid: int
    start: int
    end: int
    pid: int = 0  # the passage that ranked it (0: matched by its title)


def _relaxed_notice(found: int, words: int) -> str:
    if not found:
        return (
            f"no section contains all {words} query words; showing the sections "
            "that contain the most (and rarest) of them"
        )
    return (
        f"only {found} section{'s' if found > 1 else ''} contain{'' if found > 1 else 's'} "
        f"all {words} query words; also showing sections with the most (and rarest) of them"
    )


def _choose(
    ranked: list[tuple[float, int]],
    passages: dict[int, PassageScore],
    node_scores: dict[int, float],
    top_node: float,
    limit: int,
    prose: Callable[[int], bool],
) -> list[_Pick]:
    """The best `limit` results: passages (`ranked`, best first), then sections matched only by
    their title."""
    chosen = _pick_passages(ranked, passages, limit, prose)
    if len(chosen) < limit:  # sections matched only by their title or merged headings
        shown = {c.node_rowid for c in chosen}
        for node, nscore in sorted(node_scores.items(), key=lambda kv: -kv[1]):
            if node not in shown:
                chosen.append(_Pick(NODE_SHARE * nscore / top_node, node, 0, 0))
                if len(chosen) >= limit:
                    break
    chosen.sort(key=lambda c: -c.score)
    return chosen


def _blend(
    passages: dict[int, PassageScore],
    node_scores: dict[int, float],
    top_node: float,
    boost: set[int],
) -> list[tuple[float, int]]:
    """(score, passage id), best first: each side normalized by its best, blended by NODE_SHARE.

    Sections holding every query word (`boost`) outrank the rest.
    """
    top_pass = max((p.score for p in passages.values()), default=1.0) or 1.0
    ranked = sorted(
        (
            (1 - NODE_SHARE) * p.score / top_pass
            + NODE_SHARE * node_scores.get(p.node_rowid, 0.0) / top_node
            + (1.0 if p.node_rowid in boost else 0.0),
            pid,
        )
        for pid, p in passages.items()
    )
    ranked.reverse()
    return ranked


def _pick_passages(
    ranked: list[tuple[float, int]],
    passages: dict[int, PassageScore],
    limit: int,
    prose: Callable[[int], bool],
) -> list[_Pick]:
    """Walk the ranking: at most PASSAGES_PER_NODE per node, each grown over good neighbours.

    A passage next to an earlier pick of its node joins that pick's range while the range stays
    within MERGE_MAX_LINES: one citation that covers both reads better than two that each miss
    a few lines of the answer, and it frees a slot for another section. Only passages met before
    the MERGE_WINDOW-th pick join: the first picks cite the same lines whatever the limit, and a
    passage ranked far below does not widen the evidence.
    """
    chosen: list[_Pick] = []
    per_node: dict[int, int] = {}
    used: set[int] = set()
    depth = max(limit, MERGE_WINDOW)  # a limit below the window still sees the same merges
    for score, pid in ranked:
        node = passages[pid].node_rowid
        if pid in used:
            continue
        start, end = _grow(passages, pid, used)
        if len(chosen) < MERGE_WINDOW and _merge(chosen, pid, node, (start, end), prose):
            continue
        if per_node.get(node, 0) >= PASSAGES_PER_NODE:
            continue
        per_node[node] = per_node.get(node, 0) + 1
        chosen.append(_Pick(score, node, start, end, pid))
        if len(chosen) >= depth:
            break
    return chosen[:limit]


def _merge(
    chosen: list[_Pick],
    pid: int,
    node: int,
    span: tuple[int, int],
    prose: Callable[[int], bool],
) -> bool:
    """Widen an earlier pick of `node` over `span` when the two are near, the union stays short
    and both are prose (a law article's neighbour is another article); whether it did."""
    start, end = span
    for i, c in enumerate(chosen):
        if c.node_rowid != node:
            continue
        lo, hi = min(c.start, start), max(c.end, end)
        gap = max(c.start, start) - min(c.end, end) - 1
        if gap > MERGE_GAP_LINES or hi - lo + 1 > MERGE_MAX_LINES:
            continue
        if prose(c.pid) and prose(pid):
            chosen[i] = _Pick(c.score, node, lo, hi, c.pid)
            return True
    return False


class _ReadOnce:
    """Passage texts (or titles) of one search, each read from the store once: the
    table-of-contents check and the citation merge ask for many of the same passages' texts,
    the contents check and the title match for many of the same titles."""

    def __init__(self, read: Callable[[list[int]], dict[int, str]]) -> None:
        self._read = read
        self._texts: dict[int, str] = {}

    def __call__(self, ids: list[int]) -> dict[int, str]:
        missing = [pid for pid in ids if pid not in self._texts]
        if missing:
            found = self._read(missing)
            self._texts.update({pid: found.get(pid, "") for pid in missing})
        return {pid: self._texts[pid] for pid in ids}


class _ProseCheck:
    """Whether a passage is prose (see `evidence.is_prose`), decided once per passage."""

    def __init__(self, texts: _ReadOnce) -> None:
        self._texts = texts
        self._known: dict[int, bool] = {}

    def __call__(self, pid: int) -> bool:
        if pid not in self._known:
            self._known[pid] = is_prose(self._texts([pid]).get(pid, ""))
        return self._known[pid]


class _Rarity:
    """A word's passage count (df) and IDF over passages, log((N + 1) / (df + 0.5)) (0 for a word
    no passage holds), each word looked up once per snapshot of the index. The lookup walks every
    passage that holds the word, so it grows with the library (a common word: ~0.1 ms on the
    corpus, 2-4 ms at 10x), and the same words come back: the choice of ranking words and the
    title match ask for every query word within one search, and section titles and questions
    repeat words from search to search. Forgotten when the index changed (a live index changes
    all the time, and a word new to it must not keep an IDF of 0), and after TERM_RARITY_CACHE
    words."""

    def __init__(self, queries: SearchQueries) -> None:
        self._queries = queries
        self._version: tuple[int, int] | None = None
        self._passages = 0
        self._known: dict[str, int] = {}

    def renew(self) -> None:
        """Start over if the index changed since the last search (inside its read transaction)."""
        version = self._queries.snapshot_version()
        if version != self._version:
            self._version = version
            self._known.clear()
            self._passages = 0

    def frequency(self, term: str) -> int:
        """How many passages hold `term`: what ranking by it costs, and its rarity."""
        known = self._known.get(term)
        if known is None:
            if len(self._known) >= TERM_RARITY_CACHE:
                self._known.clear()
            known = self._known[term] = self._queries.passage_doc_frequency(term)
        return known

    def __call__(self, term: str) -> float:
        df = self.frequency(term)
        if not df:
            return 0.0
        if not self._passages:
            self._passages = self._queries.passage_count()
        return math.log((self._passages + 1) / (df + 0.5))


def _grow(passages: dict[int, PassageScore], pid: int, used: set[int]) -> tuple[int, int]:
    """Grow a passage over its neighbours in the same node that match almost as well.

    Marks the passage and every neighbour taken in as used.
    """
    p = passages[pid]
    start, end = p.start_line, p.end_line
    used.add(pid)
    for step in (-1, 1):
        nb = passages.get(pid + step)
        if (
            nb
            and nb.node_rowid == p.node_rowid
            and nb.score >= EXPAND_RATIO * p.score
            and pid + step not in used
        ):
            lo, hi = min(start, nb.start_line), max(end, nb.end_line)
            if hi - lo + 1 <= EXPAND_MAX_LINES:
                start, end = lo, hi
                used.add(pid + step)
    return start, end


def make_snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """A window of the passage around its first matched term, whitespace collapsed."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    low = segment.normalize(flat)
    positions = [p for p in (low.find(t) for t in terms if t) if p >= 0]
    at = min(positions) if positions else 0
    if len(low) != len(flat):  # folding changed lengths (`ﷺ`, `㍿`): find `at` in `flat`
        at = _original_offset(flat, at)
    start = max(0, at - width // 4)
    end = min(len(flat), start + width)
    # A cut inside a word moves to the space beside it, so no end reads as a typo; text
    # without spaces nearby (Chinese, a long identifier) is cut where it is.
    if start and flat[start - 1] != " ":
        space = flat.find(" ", start, min(at, start + SNIPPET_WORD_SLACK))
        start = space + 1 if space != -1 else start
    if end < len(flat) and flat[end] != " ":
        space = flat.rfind(" ", max(at + 1, end - SNIPPET_WORD_SLACK), end)
        end = space if space != -1 else end
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def _original_offset(text: str, folded_at: int) -> int:
    """The offset in `text` of the character at `folded_at` in `segment.normalize(text)`.

    Only the characters that fold longer are visited (ellipses in Chinese text are common,
    ligatures rare): each one moves the later offsets by the characters it gained.
    """
    grown = {ch: len(segment.normalize(ch)) - 1 for ch in set(text) if not ch.isascii()}
    grown = {ch: n for ch, n in grown.items() if n > 0}
    extra = 0
    if grown:
        for m in re.finditer("|".join(map(re.escape, grown)), text):
            if folded_at < m.start() + extra:
                break
            if folded_at <= m.start() + extra + grown[m.group()]:
                return m.start()
            extra += grown[m.group()]
    return min(folded_at - extra, len(text))


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000

"""Keyword search: BM25 over nodes' own text and over passages, with relaxation and a substring pass.

A query is cut into word groups (see `segment.word_groups`). The strict pass requires every group;
when it finds too little, the relaxed pass ORs the groups and BM25's per-term IDF sum ranks by
coverage. Each hit names its node and the passage inside it that best carries the match: the
evidence a reader should read first and the range a citation names.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from markindex_core.config import (
    EXPAND_MAX_LINES,
    EXPAND_RATIO,
    MAX_QUERY_GROUPS,
    MIN_RANKED_WORDS,
    NODE_CANDIDATES,
    NODE_SHARE,
    PASSAGE_CANDIDATES,
    PASSAGES_PER_NODE,
    POSTINGS_BUDGET,
    SEARCH_DEFAULT_LIMIT,
    SEARCH_MAX_LIMIT,
    SNIPPET_CHARS,
    STRICT_ENOUGH,
    WEIGHT_BODY,
    WEIGHT_CONTEXT,
    WEIGHT_KEY_ITEMS,
    WEIGHT_SUMMARY,
    WEIGHT_TITLE,
)
from markindex_core.store.db import Store, connect
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


@dataclass(frozen=True)
class _Scope:
    sql: str  # extra WHERE clause with a `{t}` placeholder for the table alias carrying doc_id
    args: list[Any]


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
        self._vocab_ready = False
        self._pool: ThreadPoolExecutor | None = None
        self._helper_state = threading.local()

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
        ranking = " OR ".join(self._informative(groups, exprs))
        strict_nodes = self._strict_nodes(" AND ".join(exprs), scope) if len(groups) > 1 else None
        if strict_nodes is None or len(strict_nodes) >= min(STRICT_ENOUGH, limit):
            hits = self._rank(ranking, strict_nodes, scope, limit, terms)
            mode, notice = "strict", ""
        else:  # sections with every word still come first
            hits = self._rank(ranking, None, scope, limit, terms, boost=strict_nodes)
            mode = "relaxed"
            found = len(strict_nodes)
            notice = (
                f"only {found} section{'s' if found > 1 else ''} contain{'' if found > 1 else 's'} "
                f"all {len(groups)} query words; also showing sections with the most (and rarest) of them"
                if found
                else f"no section contains all {len(groups)} query words; showing the sections "
                "that contain the most (and rarest) of them"
            )
        if not hits:
            hits, extra = self._substring(query, scope, limit)
            if hits:
                mode = "substring"
                notice = f"no whole-word match; matched word fragments: {', '.join(extra)}"
                terms = terms + extra
            else:
                mode, notice = "none", "nothing matched; try other words or a wider scope"
        return SearchResult(query, hits, mode, notice, terms, _ms(t0))

    def _scope(self, folder: str | None, doc_path: str | None) -> _Scope:
        """SQL that keeps only in-scope documents' rows (applied inside the FTS query)."""
        if doc_path:
            return _Scope(
                " AND {t}.doc_id IN (SELECT id FROM documents WHERE path = ?)",
                [doc_path.strip("/")],
            )
        if folder and folder.strip("/"):
            f = folder.strip("/")
            return _Scope(
                " AND {t}.doc_id IN (SELECT id FROM documents WHERE path >= ? AND path < ?)",
                [f + "/", f + "0"],
            )
        return _Scope("", [])

    def _informative(self, groups: list[list[str]], exprs: list[str]) -> list[str]:
        """The query words used for ranking: common ones cost time and rank nearly nothing."""
        if len(groups) <= MIN_RANKED_WORDS:
            return exprs
        if not self._vocab_ready:  # a live view of the index's terms: created once per connection
            self.conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.passage_vocab"
                " USING fts5vocab(main, passage_fts, row)"
            )
            self._vocab_ready = True

        # Rarest words first, while the passages they match stay within a budget: the query
        # cost then stays bounded however large the library grows. A Chinese word's sub-words
        # widen recall but are common: past the budget only the whole word is kept.
        def df(term: str) -> int:
            return int(
                self.store.scalar("SELECT doc FROM temp.passage_vocab WHERE term=?", (term,)) or 0
            )

        whole = [df(g[0]) for g in groups]
        full = [w + sum(df(t) for t in g[1:]) for w, g in zip(whole, groups, strict=True)]
        chosen: dict[int, str] = {}
        spent = 0
        for i in sorted(range(len(groups)), key=lambda i: full[i]):
            if len(chosen) < MIN_RANKED_WORDS or spent + full[i] <= POSTINGS_BUDGET:
                chosen[i], spent = exprs[i], spent + full[i]
            elif spent + whole[i] <= POSTINGS_BUDGET:
                chosen[i], spent = _quote(groups[i][0]), spent + whole[i]
        return [chosen[i] for i in sorted(chosen)]

    def _strict_nodes(self, match: str, scope: _Scope) -> set[int]:
        return {
            int(r[0])
            for r in self.conn.execute(
                "SELECT node_fts.rowid FROM node_fts"
                + (" JOIN nodes n ON n.id = node_fts.rowid" if scope.sql else "")
                + f" WHERE node_fts MATCH ?{scope.sql.format(t='n')} LIMIT ?",
                (match, *scope.args, NODE_CANDIDATES),
            )
        }

    def _rank(
        self,
        match: str,
        allowed: set[int] | None,
        scope: _Scope,
        limit: int,
        terms: list[str],
        boost: set[int] | None = None,
    ) -> list[Hit]:
        c = self.conn
        # Node scores come from a second connection on a helper thread while this one scores
        # passages: the two FTS queries are the whole cost of a search and run on two cores.
        pending = self._helper().submit(self._node_scores, match, scope)
        rows: list[tuple[Any, ...]]
        if scope.sql:
            rows = c.execute(
                "SELECT p.id, p.node_rowid, p.start_line, p.end_line,"
                f" -bm25(passage_fts, {WEIGHT_CONTEXT}, {WEIGHT_BODY}) FROM passage_fts"
                " JOIN passages p ON p.id = passage_fts.rowid"
                f" WHERE passage_fts MATCH ?{scope.sql.format(t='p')} ORDER BY 5 DESC LIMIT ?",
                (match, *scope.args, PASSAGE_CANDIDATES),
            ).fetchall()
        else:  # no join before the LIMIT: metadata only for the candidates
            scored: dict[Any, Any] = dict(
                c.execute(  # type: ignore[arg-type]
                    f"SELECT rowid, -bm25(passage_fts, {WEIGHT_CONTEXT}, {WEIGHT_BODY})"
                    " FROM passage_fts WHERE passage_fts MATCH ? ORDER BY 2 DESC LIMIT ?",
                    (match, PASSAGE_CANDIDATES),
                )
            )
            ids = ",".join(str(int(i)) for i in scored)
            rows = (
                [
                    (pid, node, a, b, scored[pid])
                    for pid, node, a, b in c.execute(
                        f"SELECT id, node_rowid, start_line, end_line FROM passages WHERE id IN ({ids})"
                    )
                ]
                if ids
                else []
            )
        node_scores = pending.result()
        passages: dict[int, tuple[int, int, int, float]] = {
            int(pid): (int(node), int(a), int(b), float(score))
            for pid, node, a, b, score in rows
            if allowed is None or int(node) in allowed
        }
        if allowed is not None:
            node_scores = {n: v for n, v in node_scores.items() if n in allowed}
        if not node_scores and not passages:
            return []
        top_node = max(node_scores.values(), default=1.0) or 1.0
        top_pass = max((p[3] for p in passages.values()), default=1.0) or 1.0
        first = boost or set()  # sections holding every query word outrank the rest
        ranked = sorted(
            (
                (1 - NODE_SHARE) * score / top_pass
                + NODE_SHARE * node_scores.get(node, 0.0) / top_node
                + (1.0 if node in first else 0.0),
                pid,
            )
            for pid, (node, _a, _b, score) in passages.items()
        )
        ranked.reverse()
        chosen: list[tuple[float, int, int, int]] = []  # (score, node rowid, start, end)
        per_node: dict[int, int] = {}
        used: set[int] = set()
        for score, pid in ranked:
            node, start, end, pscore = passages[pid]
            if pid in used or per_node.get(node, 0) >= PASSAGES_PER_NODE:
                continue
            used.add(pid)
            for step in (-1, 1):  # grow the evidence over neighbours that match almost as well
                nb = passages.get(pid + step)
                if (
                    nb
                    and nb[0] == node
                    and nb[3] >= EXPAND_RATIO * pscore
                    and pid + step not in used
                ):
                    lo, hi = min(start, nb[1]), max(end, nb[2])
                    if hi - lo + 1 <= EXPAND_MAX_LINES:
                        start, end = lo, hi
                        used.add(pid + step)
            per_node[node] = per_node.get(node, 0) + 1
            chosen.append((score, node, start, end))
            if len(chosen) >= limit:
                break
        if len(chosen) < limit:  # sections matched only by their title or merged headings
            for node, nscore in sorted(node_scores.items(), key=lambda kv: -kv[1]):
                if node not in per_node:
                    chosen.append((NODE_SHARE * nscore / top_node, node, 0, 0))
                    if len(chosen) >= limit:
                        break
        chosen.sort(key=lambda t: -t[0])
        hits = (self._hit(node, score, start, end, terms) for score, node, start, end in chosen)
        return [h for h in hits if h is not None]

    def _helper(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="markindex-search")
        return self._pool

    def _node_scores(self, match: str, scope: _Scope) -> dict[int, float]:
        """BM25 of nodes' own text (title 10, keyItems 5, summary 2, body 1); helper thread only."""
        conn = getattr(self._helper_state, "conn", None)
        if conn is None:
            conn = self._helper_state.conn = connect(self.store.path, readonly=True)
        weights = f"{WEIGHT_TITLE}, {WEIGHT_KEY_ITEMS}, {WEIGHT_SUMMARY}, {WEIGHT_BODY}"
        return {
            int(rowid): float(score)
            for rowid, score in conn.execute(
                f"SELECT node_fts.rowid, -bm25(node_fts, {weights}) FROM node_fts"
                + (" JOIN nodes n ON n.id = node_fts.rowid" if scope.sql else "")
                + f" WHERE node_fts MATCH ?{scope.sql.format(t='n')} ORDER BY 2 DESC LIMIT ?",
                (match, *scope.args, NODE_CANDIDATES),
            )
        }

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def _hit(
        self, node_rowid: int, score: float, start: int, end: int, terms: list[str]
    ) -> Hit | None:
        store = self.store
        node = store.node_by_rowid(node_rowid)
        if node is None:  # rewritten by a writer between the two connections' snapshots
            return None
        doc_path = store.scalar("SELECT path FROM documents WHERE id=?", (node["doc_id"],))
        if not start:
            start, end = self._first_passage(node)
        lines = store.read_lines(node["doc_id"], start, end)
        return Hit(
            doc_path=str(doc_path),
            node_id=node["node_id"],
            title_path=self._title_path(node),
            kind=node["kind"],
            start_line=node["start_line"],
            end_line=node["end_line"],
            passage_start=start,
            passage_end=end,
            score=round(score, 4),
            snippet=make_snippet("\n".join(lines), terms),
        )

    def _title_path(self, node: dict[str, Any]) -> list[str]:
        path = [node["title"] or node["kind"]]
        parent = node["parent_id"]
        while parent:
            row = self.conn.execute(
                "SELECT parent_id, title, kind FROM nodes WHERE doc_id=? AND node_id=?",
                (node["doc_id"], parent),
            ).fetchone()
            if row is None:
                break
            path.append(str(row[1] or row[2]))
            parent = row[0]
        return path[::-1]

    def _first_passage(self, node: dict[str, Any]) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT start_line, end_line FROM passages WHERE node_rowid=? ORDER BY start_line LIMIT 1",
            (node["rowid"],),
        ).fetchone()
        if row:
            return int(row[0]), int(row[1])
        return node["start_line"], node["end_line"]

    def _substring(self, query: str, scope: _Scope, limit: int) -> tuple[list[Hit], list[str]]:
        """Fragments (partial identifiers, odd CJK cuts): match them inside indexed words."""
        frags = [f for f in re.split(r"\s+", segment.normalize(query)) if len(f) >= 3][:4]
        if not frags:
            return [], []
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.node_vocab USING fts5vocab(main, node_fts, row)"
        )
        found: list[str] = []
        for frag in frags:
            pattern = "%" + frag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for (term,) in self.conn.execute(
                "SELECT term FROM temp.node_vocab WHERE term LIKE ? ESCAPE '\\' ORDER BY doc DESC LIMIT 20",
                (pattern,),
            ):
                found.append(str(term))
        if not found:
            return [], []
        match = " OR ".join(_quote(t) for t in dict.fromkeys(found))
        return self._rank(match, None, scope, limit, found), found[:10]


def make_snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """A window of the passage around its first matched term, whitespace collapsed."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    low = segment.normalize(flat)
    positions = [p for p in (low.find(t) for t in terms if t) if p >= 0]
    at = min(positions) if positions else 0
    start = max(0, at - width // 4)
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000

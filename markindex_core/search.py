"""Keyword search: BM25 over nodes' own text and over passages, with relaxation and a substring pass.

A query is cut into word groups (see `segment.word_groups`). The strict pass requires every group;
when it finds too little, the relaxed pass ORs the groups and BM25's per-term IDF sum ranks by
coverage. Each hit names its node and the passage inside it that best carries the match: the
evidence a reader should read first and the range a citation names.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from markindex_core import segment
from markindex_core.config import (
    SEARCH_DEFAULT_LIMIT,
    SEARCH_MAX_LIMIT,
    WEIGHT_BODY,
    WEIGHT_CONTEXT,
    WEIGHT_KEY_ITEMS,
    WEIGHT_SUMMARY,
    WEIGHT_TITLE,
)
from markindex_core.stopwords import is_stopword
from markindex_core.store import Store

NODE_CANDIDATES = 500
PASSAGE_CANDIDATES = 2000  # FTS5 scores every match before sorting: a bigger LIMIT is nearly free
STRICT_ENOUGH = 3  # fewer strict hits than this triggers the relaxed pass
MAX_QUERY_GROUPS = 32
SNIPPET_CHARS = 200
NODE_SHARE = 0.3  # weight of the node's own BM25 (title 10, keyItems 5, …) next to the passage's
PASSAGES_PER_NODE = 3  # a long section may answer with up to this many separate passages
EXPAND_RATIO = 0.7  # a neighbouring passage scoring this close joins the evidence …
EXPAND_MAX_LINES = 10  # … while the evidence stays this short


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

    def search(
        self,
        query: str,
        *,
        folder: str | None = None,
        doc_path: str | None = None,
        limit: int = SEARCH_DEFAULT_LIMIT,
    ) -> SearchResult:
        t0 = time.perf_counter()
        limit = max(1, min(int(limit), SEARCH_MAX_LIMIT))
        groups = query_groups(query)
        terms = [g[0] for g in groups]
        if not groups:
            return SearchResult(query, [], "none", "the query has no searchable words", [], _ms(t0))
        scope_sql, scope_args = self._scope(folder, doc_path)
        exprs = [_group_expr(g) for g in groups]
        strict = " AND ".join(exprs)
        hits = self._rank(strict, scope_sql, scope_args, limit, terms)
        mode, notice = "strict", ""
        if len(hits) < min(STRICT_ENOUGH, limit) and len(groups) > 1:
            relaxed_hits = self._rank(" OR ".join(exprs), scope_sql, scope_args, limit, terms)
            if len(relaxed_hits) > len(hits):
                known = {(h.doc_path, h.node_id) for h in hits}
                hits = hits + [h for h in relaxed_hits if (h.doc_path, h.node_id) not in known]
                hits = hits[:limit]
                mode = "relaxed"
                notice = (
                    f"no section contains all {len(groups)} query words; showing sections that "
                    "contain the most (rarest) of them"
                )
        if not hits:
            hits, extra = self._substring(query, scope_sql, scope_args, limit)
            if hits:
                mode, notice = (
                    "substring",
                    f"no whole-word match; matched word fragments: {', '.join(extra)}",
                )
                terms = terms + extra
            else:
                mode, notice = "none", "nothing matched; try other words or a wider scope"
        return SearchResult(query, hits, mode, notice, terms, _ms(t0))

    def _scope(self, folder: str | None, doc_path: str | None) -> tuple[str, list[Any]]:
        if doc_path:
            return " AND d.path = ?", [doc_path.strip("/")]
        if folder and folder.strip("/"):
            f = folder.strip("/")
            return " AND d.path >= ? AND d.path < ?", [f + "/", f + "0"]
        return "", []

    def _rank(
        self, match: str, scope_sql: str, scope_args: list[Any], limit: int, terms: list[str]
    ) -> list[Hit]:
        c = self.conn
        weights = f"{WEIGHT_TITLE}, {WEIGHT_KEY_ITEMS}, {WEIGHT_SUMMARY}, {WEIGHT_BODY}"
        node_scores: dict[int, float] = {
            int(rowid): float(score)
            for rowid, score in c.execute(
                f"SELECT n.id, -bm25(node_fts, {weights}) FROM node_fts"
                " JOIN nodes n ON n.id = node_fts.rowid JOIN documents d ON d.id = n.doc_id"
                f" WHERE node_fts MATCH ?{scope_sql} ORDER BY 2 DESC LIMIT ?",
                (match, *scope_args, NODE_CANDIDATES),
            )
        }
        passages: dict[int, tuple[int, int, int, float]] = {
            int(pid): (int(node_rowid), int(start), int(end), float(score))
            for pid, node_rowid, start, end, score in c.execute(
                "SELECT p.id, p.node_rowid, p.start_line, p.end_line,"
                f" -bm25(passage_fts, {WEIGHT_CONTEXT}, {WEIGHT_BODY}) FROM passage_fts"
                " JOIN passages p ON p.id = passage_fts.rowid JOIN documents d ON d.id = p.doc_id"
                f" WHERE passage_fts MATCH ?{scope_sql} ORDER BY 5 DESC LIMIT ?",
                (match, *scope_args, PASSAGE_CANDIDATES),
            )
        }
        if not node_scores and not passages:
            return []
        top_node = max(node_scores.values(), default=1.0) or 1.0
        top_pass = max((p[3] for p in passages.values()), default=1.0) or 1.0
        ranked = sorted(
            (
                (1 - NODE_SHARE) * score / top_pass + NODE_SHARE * node_scores.get(node, 0.0) / top_node,
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
                if nb and nb[0] == node and nb[3] >= EXPAND_RATIO * pscore and pid + step not in used:
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
        return [self._hit(node, score, start, end, terms) for score, node, start, end in chosen]

    def _hit(self, node_rowid: int, score: float, start: int, end: int, terms: list[str]) -> Hit:
        store = self.store
        node = store.node_by_rowid(node_rowid)
        assert node is not None
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

    def _substring(
        self, query: str, scope_sql: str, scope_args: list[Any], limit: int
    ) -> tuple[list[Hit], list[str]]:
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
        return self._rank(match, scope_sql, scope_args, limit, found), found[:10]


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

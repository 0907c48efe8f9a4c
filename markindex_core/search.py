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
    WEIGHT_KEY_ITEMS,
    WEIGHT_SUMMARY,
    WEIGHT_TITLE,
)
from markindex_core.outline import title_path
from markindex_core.stopwords import is_stopword
from markindex_core.store import Store

NODE_CANDIDATES = 200
PASSAGE_CANDIDATES = 300
STRICT_ENOUGH = 3  # fewer strict hits than this triggers the relaxed pass
MAX_QUERY_GROUPS = 32
SNIPPET_CHARS = 200
NODE_SHARE = 0.5  # weight of the node's own BM25 next to its passage's BM25


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
    groups = segment.word_groups(query[:4096])
    seen: set[str] = set()
    uniq = []
    for g in groups:
        if g[0] not in seen:
            seen.add(g[0])
            uniq.append(g)
    content = [g for g in uniq if not is_stopword(g[0]) and not (len(g[0]) == 1 and g[0].isascii())]
    return (content or uniq)[:MAX_QUERY_GROUPS]


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
        node_scores: dict[int, float] = {}
        node_doc: dict[int, str] = {}
        for rowid, score, path in c.execute(
            f"SELECT n.id, -bm25(node_fts, {weights}), d.path FROM node_fts"
            " JOIN nodes n ON n.id = node_fts.rowid JOIN documents d ON d.id = n.doc_id"
            f" WHERE node_fts MATCH ?{scope_sql} ORDER BY 2 DESC LIMIT ?",
            (match, *scope_args, NODE_CANDIDATES),
        ):
            node_scores[int(rowid)] = float(score)
            node_doc[int(rowid)] = str(path)
        passages: list[tuple[int, int, int, float]] = []
        for _pid, node_rowid, start, end, score in c.execute(
            "SELECT p.id, p.node_rowid, p.start_line, p.end_line, -bm25(passage_fts) FROM passage_fts"
            " JOIN passages p ON p.id = passage_fts.rowid JOIN documents d ON d.id = p.doc_id"
            f" WHERE passage_fts MATCH ?{scope_sql} ORDER BY 5 DESC LIMIT ?",
            (match, *scope_args, PASSAGE_CANDIDATES),
        ):
            passages.append((int(node_rowid), int(start), int(end), float(score)))
        if not node_scores and not passages:
            return []
        top_node = max(node_scores.values(), default=1.0) or 1.0
        top_pass = max((p[3] for p in passages), default=1.0) or 1.0
        best: dict[int, tuple[float, int, int]] = {}
        for node_rowid, start, end, pscore in passages:
            score = (1 - NODE_SHARE) * pscore / top_pass + NODE_SHARE * node_scores.get(
                node_rowid, 0.0
            ) / top_node
            if node_rowid not in best or score > best[node_rowid][0]:
                best[node_rowid] = (score, start, end)
        for node_rowid, nscore in node_scores.items():
            if node_rowid not in best:
                best[node_rowid] = (NODE_SHARE * nscore / top_node, 0, 0)
        ranked = sorted(best.items(), key=lambda kv: -kv[1][0])[:limit]
        return [self._hit(rowid, score, start, end, terms) for rowid, (score, start, end) in ranked]

    def _hit(self, node_rowid: int, score: float, start: int, end: int, terms: list[str]) -> Hit:
        store = self.store
        node = store.node_by_rowid(node_rowid)
        assert node is not None
        doc_path = store.scalar("SELECT path FROM documents WHERE id=?", (node["doc_id"],))
        nodes = {n["node_id"]: n for n in self._doc_nodes(node["doc_id"])}
        if not start:
            start, end = self._first_passage(node)
        lines = store.read_lines(node["doc_id"], start, end)
        return Hit(
            doc_path=str(doc_path),
            node_id=node["node_id"],
            title_path=title_path(nodes, node["node_id"]),
            kind=node["kind"],
            start_line=node["start_line"],
            end_line=node["end_line"],
            passage_start=start,
            passage_end=end,
            score=round(score, 4),
            snippet=make_snippet("\n".join(lines), terms),
        )

    def _doc_nodes(self, doc_id: int) -> list[dict[str, Any]]:
        return [
            {"node_id": str(a), "parent_id": b, "title": str(t), "kind": str(k)}
            for a, b, t, k in self.conn.execute(
                "SELECT node_id, parent_id, title, kind FROM nodes WHERE doc_id=?", (doc_id,)
            )
        ]

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

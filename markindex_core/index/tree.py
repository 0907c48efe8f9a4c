"""Build a document's optimized section tree: nest headings, merge small subtrees, split huge nodes.

The merge rule ports PageIndex's cost model with tokens instead of pages: a subtree is merged into
its root when reading it whole costs no more than routing through it (see SPEC §2).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

import xxhash

from markindex_core.config import TreeParams
from markindex_core.index.markdown import ParsedMarkdown
from markindex_core.model import Section
from markindex_core.text.tokens import LineTokens, TokenCounter

Span = Callable[[int, int], int]  # tokens of lines [a, b) joined by newlines


@dataclass(slots=True)  # one per heading: slots make them cheaper to create and read
class _Raw:
    kind: str
    title: str
    level: int
    start: int  # 0-based, inclusive
    own_end: int  # 0-based, exclusive
    body_start: int  # 0-based line after the heading
    children: list[_Raw] = field(default_factory=list)
    key_items: list[str] = field(default_factory=list)
    own_tokens: int = 0
    subtree_tokens: int = 0
    tree_cost: int = 0

    def subtree_end(self) -> int:
        return self.children[-1].subtree_end() if self.children else self.own_end


def build_sections(
    lines: list[str],
    parsed: ParsedMarkdown,
    doc_title: str,
    params: TreeParams,
    count_tokens: TokenCounter | None = None,
    line_tokens: LineTokens | None = None,
) -> list[Section]:
    """Return the document's nodes in pre-order; their own ranges partition every line.

    Tokens are counted by `count_tokens` when one is given, else estimated (`estimate_tokens`)
    through `line_tokens`, made here when the caller has none to share."""
    n = len(lines)
    if n == 0:
        return []
    heads = parsed.headings
    fm_end = parsed.front_matter_end
    root = _Raw("document", doc_title, 0, 0, heads[0].line if heads else n, fm_end)
    stack = [root]
    for i, h in enumerate(heads):
        own_end = heads[i + 1].line if i + 1 < len(heads) else n
        node = _Raw("section", h.title, h.level, h.line, own_end, min(h.end, own_end))
        while len(stack) > 1 and stack[-1].level >= h.level:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)

    def text(a: int, b: int) -> str:
        return "\n".join(lines[a:b])

    if count_tokens is None:
        span = (line_tokens or LineTokens(lines)).span
    else:
        counter = count_tokens

        def span(a: int, b: int) -> int:
            return counter(text(a, b))

    def measure(v: _Raw) -> None:
        v.own_tokens = span(max(v.start, fm_end), v.own_end)
        for c in v.children:
            measure(c)

    measure(root)
    _merge(root, params.routing_cost)

    if root.children:
        top: list[_Raw] = []
        if root.own_end > root.start:
            top.append(
                _Raw("preface", "", 0, root.start, root.own_end, fm_end, [], [], root.own_tokens)
            )
        top.extend(root.children)
    else:
        top = [root]
    for v in top:
        _split_large(v, parsed.block_starts, params.max_node_tokens, span)

    out: list[Section] = []
    _emit(top, None, "", 0, out, text)
    return out


def _merge(v: _Raw, routing_cost: int) -> None:
    for c in v.children:
        _merge(c, routing_cost)
    v.subtree_tokens = v.own_tokens + sum(c.subtree_tokens for c in v.children)
    if not v.children:
        v.tree_cost = v.subtree_tokens
        return
    cost = routing_cost + max(v.own_tokens, max(c.tree_cost for c in v.children))
    if v.subtree_tokens <= cost:
        absorbed: list[str] = []
        _collect_titles(v.children, absorbed)
        v.key_items = v.key_items + absorbed
        v.own_end = v.subtree_end()
        v.own_tokens = v.subtree_tokens
        v.children = []
        v.tree_cost = v.subtree_tokens
    else:
        v.tree_cost = cost


def _collect_titles(nodes: list[_Raw], out: list[str]) -> None:
    for c in nodes:
        if c.title:
            out.append(c.title)
        out.extend(c.key_items)
        _collect_titles(c.children, out)


def _split_large(v: _Raw, block_starts: list[int], limit: int, span: Span) -> None:
    for c in v.children:
        _split_large(c, block_starts, limit, span)
    if v.own_tokens <= limit:
        return
    cuts = _block_cuts(v.body_start, v.own_end, block_starts)
    pieces = [(a, b, span(a, b)) for a, b in itertools.pairwise(cuts) if a < b]
    groups: list[tuple[int, int, int]] = []
    cur_a, cur_b, cur_t = v.start, v.body_start, span(v.start, v.body_start)
    for a, b, t in pieces:
        if cur_t + t <= limit:
            cur_b, cur_t = b, cur_t + t
            continue
        if cur_b > cur_a:  # an untitled node may start with nothing of its own yet
            groups.append((cur_a, cur_b, cur_t))
        if t > limit:  # a single block larger than a node: split it by lines
            *whole, (cur_a, cur_b, cur_t) = _split_lines(a, b, limit, span)
            groups.extend(whole)
        else:
            cur_a, cur_b, cur_t = a, b, t
    groups.append((cur_a, cur_b, cur_t))
    if len(groups) == 1:
        return
    first = groups[0]
    v.own_end, v.own_tokens = first[1], first[2]
    total = len(groups) - 1
    chunks = [
        _Raw("chunk", f"part {k}/{total}", 0, a, b, a, [], [], t)
        for k, (a, b, t) in enumerate(groups[1:], start=1)
    ]
    v.children = chunks + v.children


def _block_cuts(a: int, b: int, block_starts: list[int]) -> list[int]:
    lo, hi = bisect_right(block_starts, a), bisect_left(block_starts, b)
    return [a, *block_starts[lo:hi], b]


def _split_lines(a: int, b: int, limit: int, span: Span) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    start, acc = a, 0
    for i in range(a, b):
        t = span(i, i + 1) + 1
        if acc and acc + t > limit:
            out.append((start, i, acc))
            start, acc = i, 0
        acc += t
    out.append((start, b, acc))
    return out


def _emit(
    nodes: list[_Raw],
    parent: Section | None,
    parent_key: str,
    depth: int,
    out: list[Section],
    text: object,
) -> int:
    """Append `nodes` and their subtrees to `out` in pre-order; the tokens of all of them (each
    node's subtree total from its children's, not by summing every descendant again)."""
    assert callable(text)
    total = 0
    seen: dict[tuple[str, str], int] = {}
    for v in nodes:
        ordinal = seen.get((v.kind, v.title), 0)
        seen[(v.kind, v.title)] = ordinal + 1
        key = f"{parent_key}\x1e{v.kind}\x1f{v.title}\x1f{ordinal}"
        node_id = xxhash.xxh3_64_hexdigest(key.encode("utf-8"))[:12]
        content_hash = _content_hash(v, text)
        sec = Section(
            node_id=node_id,
            parent_id=parent.node_id if parent else None,
            kind=v.kind,
            level=v.level,
            title=v.title,
            key_items=v.key_items,
            start_line=v.start + 1,
            end_line=v.own_end,
            subtree_end=v.subtree_end(),
            tokens=v.own_tokens,
            subtree_tokens=v.own_tokens,
            depth=depth,
            content_hash=content_hash,
            body_start=v.body_start + 1,
        )
        out.append(sec)
        sec.subtree_tokens = v.own_tokens + _emit(v.children, sec, key, depth + 1, out, text)
        total += sec.subtree_tokens
    return total


_HASH_LINES = 4096  # a node's text is hashed this many lines at a time …
_HASH_CHARS = 1 << 20  # … and a longer line this many characters at a time


def _content_hash(v: _Raw, text: Callable[[int, int], str]) -> str:
    """xxh3_64 of the UTF-8 of `"\x1f".join([title, *key_items, own text])`, fed in pieces:
    joined and encoded whole, a 50 MB single-line node took two more copies of itself."""
    h = xxhash.xxh3_64("\x1f".join([v.title, *v.key_items, ""]).encode("utf-8"))
    for a in range(v.start, v.own_end, _HASH_LINES):
        if a > v.start:
            h.update(b"\n")
        part = text(a, min(a + _HASH_LINES, v.own_end))
        for i in range(0, len(part), _HASH_CHARS):
            h.update(part[i : i + _HASH_CHARS].encode("utf-8"))
    return h.hexdigest()

"""Check the fast Markdown parse against markdown-it-py (the oracle) and time both.

Usage: python eval/check_parse.py [--corpus DIR] [--generated N] [--seed S] [--rounds R]

Compares `parse_markdown` with `parse_markdown_oracle` on every corpus file and on N generated
documents, with setext headings on and off, prints every mismatch, how much of the corpus the
line scanner left to markdown-it-py (whole documents and lines in delegated regions), and the
best-of-R parse seconds over the corpus for both paths. Exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from markindex_core.index import markdown
from markindex_core.index.blocks import scan_blocks, split_source_lines
from markindex_core.index.decode import decode
from markindex_core.index.markdown import ParsedMarkdown, parse_markdown, parse_markdown_oracle
from tests.core.test_block_scanner import random_document

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"


def mismatches(docs: list[tuple[str, str]], label: str) -> int:
    """Print and count documents where the two parses differ."""
    bad = 0
    for path, text in docs:
        for setext in (True, False):
            fast = parse_markdown(text, path, setext=setext)
            oracle = parse_markdown_oracle(text, path, setext=setext)
            if fast != oracle:
                bad += 1
                print(f"MISMATCH {label} {path} setext={setext}: {first_difference(fast, oracle)}")
    return bad


def first_difference(fast: ParsedMarkdown, oracle: ParsedMarkdown) -> str:
    for name in (
        "headings",
        "block_starts",
        "front_matter",
        "front_matter_end",
        "links",
        "warnings",
    ):
        a, b = getattr(fast, name), getattr(oracle, name)
        if a != b:
            return f"{name}: fast={a!r:.300} oracle={b!r:.300}"
    return "?"


def fallback_rate(docs: list[tuple[str, str]]) -> tuple[int, int, int]:
    """(whole documents left to markdown-it, lines in delegated regions, all lines)."""
    whole = region_lines = total = 0
    for path, text in docs:
        lines = split_source_lines(text)
        total += len(lines)
        sink = _CountingCollector(path, lines, True, "](" in text)
        if not scan_blocks(text, lines, sink, setext=True):
            whole += 1
            region_lines += len(lines)
        region_lines += sink.region_lines
    return whole, region_lines, total


class _CountingCollector(markdown._Collector):
    region_lines = 0

    def region(self, start: int, end: int) -> bool:
        accepted = super().region(start, end)
        if accepted:
            self.region_lines += end - start
        return accepted


def best_seconds(
    docs: list[tuple[str, str]], parse: Callable[..., ParsedMarkdown], rounds: int
) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for path, text in docs:
            parse(text, path, setext=True)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--generated", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    generated = [(f"gen/{i}.md", random_document(rng)) for i in range(args.generated)]
    bad = mismatches(generated, "generated")
    print(f"generated: {len(generated)} documents, {bad} mismatches")
    corpus: list[tuple[str, str]] = []
    if args.corpus.is_dir():
        corpus = [
            (str(p.relative_to(args.corpus)), decode(p.read_bytes()).text)
            for p in sorted(args.corpus.rglob("*.md"))
        ]
        corpus_bad = mismatches(corpus, "corpus")
        bad += corpus_bad
        whole, region, total = fallback_rate(corpus)
        print(f"corpus: {len(corpus)} documents, {corpus_bad} mismatches")
        print(
            f"left to markdown-it: {whole} whole documents, {region}/{total} lines"
            f" ({100 * region / max(total, 1):.1f}%)"
        )
        fast = best_seconds(corpus, parse_markdown, args.rounds)
        oracle = best_seconds(corpus, parse_markdown_oracle, args.rounds)
        print(
            f"corpus parse seconds (best of {args.rounds}): fast {fast:.2f}, markdown-it {oracle:.2f}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

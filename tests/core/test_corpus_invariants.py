"""Every corpus document: node ranges partition its lines, subtrees nest, same bytes same tree."""

from __future__ import annotations

import pytest

from markindex_core.config import MAX_TITLE_CHARS, TreeParams
from markindex_core.index.decode import decode, split_lines
from markindex_core.index.document import build_document
from markindex_core.index.markdown import parse_markdown
from markindex_core.index.scan import IgnoreRules, scan
from markindex_core.index.tree import build_sections
from markindex_core.model import SkippedFile
from tests.paths import CORPUS, needs_corpus

from .helpers import check_tree, tree_shape

pytestmark = needs_corpus


def corpus_files() -> list[str]:
    return sorted(scan(CORPUS, IgnoreRules(CORPUS)).files)


def test_every_corpus_document_partitions_its_lines() -> None:
    files = corpus_files()
    assert len(files) >= 500
    params = TreeParams()
    total_lines = 0
    for i, rel in enumerate(files):
        data = (CORPUS / rel).read_bytes()
        doc = build_document(rel, data, 0, params)
        assert not isinstance(doc, SkippedFile), (rel, doc.reason)
        check_tree(doc.sections, doc.line_count)
        assert doc.line_count == len(decode(data).text.split("\n")) - decode(data).text.endswith(
            "\n"
        )
        assert all(len(s.title) <= MAX_TITLE_CHARS for s in doc.sections)
        for p in doc.passages:
            sec = doc.sections[p.node_index]
            assert sec.start_line <= p.start_line <= p.end_line <= sec.end_line, (rel, p)
        if i % 3 == 0:  # the other setext setting, tree only (parsing dominates the cost)
            text = decode(data).text
            parsed = parse_markdown(text, rel, setext=False)
            parsed.block_starts = sorted(set(parsed.block_starts))
            lines = split_lines(text)
            check_tree(build_sections(lines, parsed, "t", TreeParams(setext=False)), len(lines))
        if i % 25 == 0:  # same bytes, same tree and ids
            again = build_document(rel, data, 0, params)
            assert not isinstance(again, SkippedFile) and tree_shape(again) == tree_shape(doc)
        total_lines += doc.line_count
    assert total_lines > 100_000


@pytest.mark.parametrize("limit", [2000])
def test_corpus_sample_with_a_small_node_limit(limit: int) -> None:
    """Chunk splitting is hit hard with a small limit; ranges must still partition."""
    for rel in corpus_files()[::20]:
        data = (CORPUS / rel).read_bytes()
        doc = build_document(rel, data, 0, TreeParams(max_node_tokens=limit))
        assert not isinstance(doc, SkippedFile)
        check_tree(doc.sections, doc.line_count)

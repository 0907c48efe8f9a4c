"""Where the tests find the repository, the sample library and the evaluation corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "examples" / "library"
CORPUS = REPO.parent / "shared" / "corpus"
EVAL_DIR = REPO.parent / "shared" / "eval"

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="evaluation corpus not present")

"""Shared fixtures: the sample library shipped in examples/, and the evaluation corpus when present."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from markindex_core.library import Library
from tests.paths import CORPUS, SAMPLE

pytest_plugins = ["tests.unprivileged"]  # the `shared_tmp` fixture for permission cases


@pytest.fixture
def sample_library(tmp_path: Path) -> Path:
    """A writable copy of the sample library (without any index the repo copy may have)."""
    dest = tmp_path / "library"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".markindex"))
    return dest


@pytest.fixture
def indexed_sample(sample_library: Path) -> Iterator[Library]:
    lib = Library(sample_library)
    lib.index()
    yield lib
    lib.close()


@pytest.fixture(scope="session")
def corpus_library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    """The evaluation corpus, indexed once per test session into a temporary --db."""
    if not CORPUS.is_dir():
        pytest.skip("evaluation corpus not present")
    db = tmp_path_factory.mktemp("corpus-index") / "index.db"
    lib = Library(CORPUS, db)
    lib.index()
    return lib

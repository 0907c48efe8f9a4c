"""Every default of markindex, in one place."""

from __future__ import annotations

from dataclasses import dataclass

# Bump when the meaning of stored data changes: the next run rebuilds every document.
FORMAT_VERSION = 1
SCHEMA_VERSION = 1

INDEX_DIR_NAME = ".markindex"
DB_FILE_NAME = "index.db"
LOCK_FILE_SUFFIX = ".lock"
IGNORE_FILE_NAME = ".markindexignore"
MARKDOWN_SUFFIXES = (".md", ".markdown")

# Tree optimization (PageIndex merge cost model, in tokens).
ROUTING_COST_TOKENS = 150
MAX_NODE_TOKENS = 8000
MAX_TITLE_CHARS = 300
SETEXT_WARN_CHARS = 120

# Files.
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are skipped with a reason
LINE_BLOCK_SIZE = 64  # original lines are stored in blocks of this many lines

# Indexing.
BATCH_DOCS = 48  # whole documents per transaction on a full build
PARALLEL_MIN_BYTES = 2_000_000  # below this, parse in-process (fork costs more than it saves)

# Search field weights: title, keyItems, summary, body.
WEIGHT_TITLE = 10.0
WEIGHT_KEY_ITEMS = 5.0
WEIGHT_SUMMARY = 2.0
WEIGHT_BODY = 1.0
SEARCH_DEFAULT_LIMIT = 10
SEARCH_MAX_LIMIT = 50

# Agent tools.
READ_STRUCTURE_FIRST_TOKENS = 15_000
RESPONSE_CHAR_BUDGET = 95_000
MAX_STRING_ARG = 1024
MAX_NODE_IDS = 20


@dataclass(frozen=True)
class TreeParams:
    """Parameters that shape the section tree; part of the index fingerprint."""

    routing_cost: int = ROUTING_COST_TOKENS
    max_node_tokens: int = MAX_NODE_TOKENS
    setext: bool = True

    def fingerprint(self) -> str:
        return f"R={self.routing_cost};max={self.max_node_tokens};setext={int(self.setext)}"

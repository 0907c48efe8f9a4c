"""Keyword search over the index: BM25 on nodes and passages, relaxation and a substring pass."""

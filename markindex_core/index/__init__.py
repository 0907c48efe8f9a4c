"""Indexing pipeline: scan the folder, decode and parse each file, build its section tree and passages, write it."""

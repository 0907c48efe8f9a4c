"""Similar-name suggestions for unknown document paths and folders."""

from __future__ import annotations

import difflib
import posixpath
from collections.abc import Callable

from markindex_core.config import SUGGEST_CANDIDATES
from markindex_core.errors import LibraryNotFound
from markindex_core.store.db import Store


def similar_paths(candidates: list[str], wanted: str, n: int = 5) -> list[str]:
    """Closest paths by full path and by file name."""
    wanted = wanted.strip().strip("/")
    scored = difflib.get_close_matches(wanted, candidates, n=n, cutoff=0.5)
    base = posixpath.basename(wanted).lower()
    if base:
        for c in candidates:
            if len(scored) >= n:
                break
            if c not in scored and base in posixpath.basename(c).lower():
                scored.append(c)
    return scored[:n]


def candidate_paths(store: Store, wanted: str) -> list[str]:
    """The document paths a suggestion for `wanted` is chosen among, at most about
    `SUGGEST_CANDIDATES` of each kind (same folder; path holding the file name asked for), so
    an unknown path costs the same in any library."""
    first = store.document_paths(limit=SUGGEST_CANDIDATES + 1)
    if len(first) <= SUGGEST_CANDIDATES:
        return first  # the whole library
    folder, _, name = wanted.strip().strip("/").rpartition("/")
    near = set(store.document_paths(below=folder, limit=SUGGEST_CANDIDATES))
    stem = posixpath.splitext(name)[0]
    if stem:
        near.update(store.document_paths(name_holding=stem, limit=SUGGEST_CANDIDATES))
    return sorted(near)


def unknown_document(store: Store, path: str, command: Callable[[str], str]) -> LibraryNotFound:
    """A document path given on the command line that the index does not hold; `command` names
    a markindex command with the user's own library and --db (`Library.command`)."""
    hits = similar_paths(candidate_paths(store, path), path)
    hint = (
        ("did you mean: " + ", ".join(hits))
        if hits
        else f"find it with `{command('search')} WORDS`, or browse the library with "
        f"`{command('tui')}`"
    )
    return LibraryNotFound(f"no document {path!r} in this library", hint)

"""Similar-name suggestions for unknown document paths and folders."""

from __future__ import annotations

import difflib
import posixpath

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


def unknown_document(store: Store, path: str) -> LibraryNotFound:
    hits = similar_paths(store.document_paths(), path)
    hint = (
        ("did you mean: " + ", ".join(hits))
        if hits
        else "list documents with `browse_documents` / `markindex tree`"
    )
    return LibraryNotFound(f"no document {path!r} in this library", hint)

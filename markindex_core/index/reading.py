"""Reading files found in a library: never following a symlink, never blocking on a FIFO, never
reading without a bound. Documents and ignore files are both read this way."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import xxhash

from markindex_core.config import MAX_FILE_BYTES

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Unreadable(Exception):
    """The path is not a regular file markindex may read; the message is the reason."""


@contextmanager
def open_regular(path: str) -> Iterator[tuple[int, os.stat_result]]:
    """An open descriptor of a regular file and its stat, closed on exit.

    Raises Unreadable for a symbolic link or anything that is not a regular file, and OSError
    (FileNotFoundError when it is gone) when it cannot be opened.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable("is a symbolic link (links are never followed)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file (a FIFO, socket or device)")
        yield fd, st
    finally:
        os.close(fd)


def read_regular(path: str) -> tuple[bytes, os.stat_result]:
    """A document's bytes and stat; Unreadable past MAX_FILE_BYTES (see `open_regular`)."""
    with open_regular(path) as (fd, st):
        if st.st_size > MAX_FILE_BYTES:
            raise Unreadable(_too_large(st.st_size))
        data = read_at_most(fd, MAX_FILE_BYTES + 1, st.st_size + 1)
    if len(data) > MAX_FILE_BYTES:  # it grew since the stat
        raise Unreadable(_too_large(len(data)))
    return data, st


def read_at_most(fd: int, limit: int, expect: int = 0) -> bytes:
    """Up to `limit` bytes from `fd`: the first `expect` at once (a file's size from its stat,
    and one more to see it end), then the rest in chunks. In 1 MB chunks joined, a big file's
    bytes were held twice."""
    chunks: list[bytes] = []
    total = 0
    size = expect or 1 << 20
    while total < limit:
        chunk = os.read(fd, min(limit - total, size))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        size = 1 << 20
    return b"".join(chunks)  # one chunk: that chunk, not a copy


def _too_large(size: int) -> str:
    """In binary megabytes, as the limit is set and documented (64 MB, not 67.1)."""
    mb = 1024 * 1024
    return f"file too large ({size / mb:.1f} MB > {MAX_FILE_BYTES / mb:.0f} MB)"


def content_hash(data: bytes) -> str:
    """A document's content hash, as stored (documents.hash)."""
    return xxhash.xxh3_128_hexdigest(data)

"""The node index's vocabulary in memory, for matching word fragments inside indexed words.

`fts5vocab` can only answer "which terms contain this fragment" by walking every posting of the
index (about 44 ms on the evaluation corpus, more under load), and every search for a word that
is not indexed asks it. One walk per snapshot fills a `Vocabulary` instead: all terms joined into
one string, most widespread first. Finding the terms that contain a fragment is then a C-speed
`str.find` over that string that stops at the `limit`-th term (about 2 MB on the evaluation
corpus for a fragment found nowhere). `VocabularyCache` keeps it current without making a search
wait for a walk.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import apsw

log = logging.getLogger("markindex.search")

_SEP = "\n"  # never inside a term: terms are whitespace-free tokens


@dataclass(frozen=True)
class Vocabulary:
    """Every term of `node_fts`, ordered by the number of nodes holding it (most first; ties in
    the index's term order), joined by newlines with one before the first and after the last."""

    text: str

    @classmethod
    def load(cls, conn: apsw.Connection) -> Vocabulary:
        """Read the vocabulary (one walk of the index; the caller holds a read transaction)."""
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.node_vocab USING fts5vocab(main, node_fts, row)"
        )
        terms = [
            str(t)
            for (t,) in conn.execute("SELECT term FROM temp.node_vocab ORDER BY doc DESC, term")
        ]
        return cls(_SEP + _SEP.join(terms) + _SEP)

    def containing(self, fragment: str, limit: int) -> list[str]:
        """Up to `limit` terms containing `fragment`, the most widespread first: what
        `term LIKE '%fragment%' ORDER BY doc DESC LIMIT limit` returns for lowercase text."""
        if not fragment or _SEP in fragment:
            return []
        text, out = self.text, list[str]()
        at = text.find(fragment)
        while at != -1 and len(out) < limit:
            end = text.index(_SEP, at)
            out.append(text[text.rindex(_SEP, 0, at) + 1 : end])
            at = text.find(fragment, end)  # on from the next term: each term once
        return out


Version = tuple[int, int]


def snapshot_version(conn: apsw.Connection) -> Version:
    """Changes whenever the index does: `data_version` with other connections' commits,
    `total_changes` with this one's."""
    return int(conn.pragma("data_version")), conn.total_changes()


class VocabularyCache:
    """The vocabulary one connection's searches use, renewed in the background after a change.

    The walk grows with the library (~0.3 s on the evaluation corpus, ~1.7 s on ten copies of it),
    and under a daemon the index changes all the time: reloading in the search that noticed a
    change made every fragment search after a save wait that long. The first search loads it; after
    the index changed, searches go on with the vocabulary they have while a thread walks a
    connection of its own, and the searches after it finished use the new one. A search that the
    vocabulary it has cannot answer waits for the new one (`get(wait=True)`): "nothing matched" is
    never said from an old vocabulary. Every hit itself always comes from the live index.
    """

    def __init__(self, conn: apsw.Connection, open_reader: Callable[[], apsw.Connection]) -> None:
        self.conn = conn
        self._open_reader = open_reader
        self._vocab: Vocabulary | None = None
        self._version: Version = (0, 0)
        self._lock = threading.Lock()
        self._loaded: tuple[Vocabulary, Version] | None = None  # by the loader, not yet in use
        self._loader: threading.Thread | None = None

    def get(self, *, wait: bool = False) -> Vocabulary:
        """The vocabulary to search with now (on this connection's thread, in a read transaction);
        with `wait`, the one of the current snapshot, waiting for a renewal under way."""
        version = snapshot_version(self.conn)
        self._take_loaded()
        if self._vocab is None:
            self._vocab, self._version = Vocabulary.load(self.conn), version
        elif version != self._version:
            if not self.renewing():
                self._loader = threading.Thread(
                    target=self._load, args=(version,), name="markindex-vocabulary", daemon=True
                )
                self._loader.start()
            if wait:
                self.wait()
                self._take_loaded()
                if self._version != version:  # the renewal failed: walk this connection
                    self._vocab, self._version = Vocabulary.load(self.conn), version
        return self._vocab

    def renewing(self) -> bool:
        """Whether a newer vocabulary is being loaded or waits to be used."""
        loader = self._loader
        return self._loaded is not None or (loader is not None and loader.is_alive())

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a renewal under way to finish (or `timeout` seconds)."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)

    def _take_loaded(self) -> None:
        with self._lock:
            if self._loaded is not None:
                (self._vocab, self._version), self._loaded = self._loaded, None

    def _load(self, version: Version) -> None:
        """Walk a connection of its own: its snapshot is at least as new as `version`."""
        try:
            conn = self._open_reader()
            try:
                with conn:
                    vocab = Vocabulary.load(conn)
            finally:
                conn.close()
        except Exception as exc:  # keep the old one; the next search that sees a change retries
            log.warning("could not renew the vocabulary of word fragments: %s", exc)
            return
        with self._lock:
            self._loaded = (vocab, version)

"""The node index's vocabulary in memory, for matching word fragments inside indexed words.

`fts5vocab` can only answer "which terms contain this fragment" by walking every posting of the
index (about 44 ms on the evaluation corpus, more under load), and every search for a word that
is not indexed asks it. One walk per snapshot fills a `Vocabulary` instead: all terms joined into
one string, most widespread first. Finding the terms that contain a fragment is then a C-speed
`str.find` over that string that stops at the `limit`-th term (about 2 MB on the evaluation
corpus for a fragment found nowhere). The owner rebuilds it only after the index changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

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

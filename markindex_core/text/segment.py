"""Mixed Chinese / English segmentation, identical for the index and for queries.

Chinese runs go through jieba's dictionary in search mode (rjieba, the Rust port, when it can be
imported; pure-Python jieba otherwise). Other words are NFKC-folded, lowercased and English words
stemmed (Snowball, via PyStemmer); identifiers such
as `C++`, `ISO-27001`, `v2.1`, `tidb_mem_quota_query` and `CamelCase` are kept whole *and* split into
parts, so either spelling finds them.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from itertools import chain

from markindex_core.config import (
    BLOB_WORD_CHARS,
    SEGMENT_CACHE_WORDS,
    SEGMENT_CUT_CHARS,
    SEGMENT_PIECE_CHARS,
)

_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK_CLASS}]+)"
    rf"|(?P<word>[^\W_{_CJK_CLASS}]+(?:[-_.+#/][^\W_{_CJK_CLASS}]+)*[+#]*)"
)
_WORD = re.compile(rf"[^\W_{_CJK_CLASS}]+(?:[-_.+#/][^\W_{_CJK_CLASS}]+)*[+#]*")
# `_WORD` for ASCII-only text: there the class is just letters and digits, which the regex engine
# matches about twice as fast as a negated Unicode class (most passages are ASCII).
_WORD_ASCII = re.compile(r"[A-Za-z0-9]+(?:[-_.+#/][A-Za-z0-9]+)*[+#]*")
_CJK_RUN = re.compile(rf"[{_CJK_CLASS}]+")
# Runs of word and connector characters: each holds whole words, and words never span two.
_RUN = re.compile(rf"(?:[^\W_{_CJK_CLASS}]|[-_.+#/])+")
_CONNECTOR = re.compile(r"[-_.+#/]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")
# Characters FTS5's tokenizer must keep inside a token (our compound identifiers).
FTS_TOKENCHARS = "-_.+#/"

Cutter = Callable[[str], list[str]]


@lru_cache(maxsize=1)
def _cutter() -> tuple[str, Cutter]:
    try:
        import rjieba

        def cut_rjieba(text: str) -> list[str]:
            return rjieba.cut_for_search(text, False)

        return "rjieba", cut_rjieba
    except ImportError:  # pragma: no cover - exercised only where the wheel is missing
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)

        def cut_jieba(text: str) -> list[str]:
            return list(jieba.cut_for_search(text, HMM=False))

        return "jieba", cut_jieba


def engine() -> str:
    """Name of the segmentation engines in use (recorded in the index fingerprint).

    Answered without loading a dictionary (rjieba builds it at import: ~0.15 s, ~40 MB), so
    commands that never segment text don't pay for it.
    """
    import importlib.util

    chinese = "rjieba" if importlib.util.find_spec("rjieba") is not None else "jieba"
    return chinese + "+snowball-en"


def warm() -> None:
    """Load the segmenters now (rjieba builds its dictionary on first use, ~0.2 s): the terminal
    app does it before the first search."""
    _cutter()
    _stemmer()


def _width_forms() -> dict[str, str]:
    """Full-width forms, CJK punctuation and general punctuation that NFKC maps: the characters
    that make most Chinese text not normalized, each with its NFKC form."""
    spans = [(0x2000, 0x2070), (0x3000, 0x3020), (0xFF01, 0xFF5F)]
    table = {}
    for lo, hi in spans:
        for cp in range(lo, hi):
            ch = chr(cp)
            folded = unicodedata.normalize("NFKC", ch)
            if folded != ch:
                table[ch] = folded
    return table


_WIDTH_FORMS = _width_forms()
_WIDTH_FORM = re.compile("([" + "".join(map(re.escape, _WIDTH_FORMS)) + "])")


def nfkc(text: str) -> str:
    """`unicodedata.normalize("NFKC", text)`, about twice as fast on Chinese text.

    NFKC decomposes and recomposes a whole string as soon as one character needs it, and nearly
    every Chinese passage has full-width punctuation. Those characters are replaced by their NFKC
    forms first (same decomposition, so the same result); the full normalization then runs only
    when something else still needs it.
    """
    parts = _WIDTH_FORM.split(text)  # odd items are the width forms: mapped in C, no callback
    if len(parts) > 1:
        parts[1::2] = map(_WIDTH_FORMS.__getitem__, parts[1::2])
        text = "".join(parts)
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


def normalize(text: str) -> str:
    """NFKC and lowercase: what search sees (stored lines stay original)."""
    if not text.isascii():
        text = nfkc(text)
    return text.lower()


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    import Stemmer  # PyStemmer: the Snowball English stemmer in C

    return Stemmer.Stemmer("english").stemWord  # type: ignore[no-any-return]


class _Stems(dict[str, str]):
    """Lowercased word or identifier part -> its Snowball stem (itself when it is not an
    English word), filled on first use: identifiers repeat the same parts (`id`, `name`)."""

    def __missing__(self, part: str) -> str:
        if len(self) >= SEGMENT_CACHE_WORDS:  # bounded, like `_joined`
            self.clear()
        stem = self[part] = _stemmer()(part) if part.isascii() and part.isalpha() else part
        return stem


_stems = _Stems()


def _word_terms_of(word: str) -> tuple[str, ...]:
    """A word or identifier (original case) -> whole lowercased form, then its (stemmed) parts.

    English words are reduced to their Snowball stem (expired, expiration -> expir). Indexing
    calls this once per new word (`_joined` keeps the result); queries go through `_word_terms`."""
    if word.isalpha():  # the common cases: one plain or capitalized word, its stem
        if word.islower():
            return (_stems[word],)
        if word.isascii() and word.istitle():
            return (_stems[word.lower()],)
    lower = word.lower()
    parts: list[str] = []
    for piece in _CONNECTOR.split(word):
        if not piece:
            continue
        if piece.islower() or piece.isupper() or piece.isdecimal():  # `_CAMEL` finds it whole
            parts.append(_stems[piece.lower()])
        else:
            parts.extend([_stems[p.lower()] for p in _CAMEL.findall(piece) if p])
    if len(parts) == 1 and (parts[0] == lower or lower.isalpha()):
        return (parts[0],)
    if len(parts) == 1:
        return (lower, parts[0])
    return (lower, *parts)


# Small: indexing keeps joined terms in `_joined` (no use for a second cache); this serves queries.
_word_terms = lru_cache(maxsize=4096)(_word_terms_of)


def terms(text: str) -> list[str]:
    """All search terms of `text`, for the index (words first, then Chinese words)."""
    if text.isascii():
        return list(
            chain.from_iterable(map(_word_terms, _WORD_ASCII.findall(_without_blobs(text))))
        )
    text = _without_blobs(nfkc(text))
    out = list(chain.from_iterable(map(_word_terms, _WORD.findall(text))))
    runs = _CJK_RUN.findall(text)
    if runs:  # one segmenter call per text: each call has a fixed cost
        out.extend(t for t in _cutter()[1](" ".join(runs)) if t != " ")
    return out


def _without_blobs(text: str) -> str:
    """`text` with each blob (see `is_blob`) made a space."""
    if len(text) <= BLOB_WORD_CHARS:
        return text
    return _RUN.sub(lambda m: " " if is_blob(m.group()) else m.group(), text)


class _JoinedTerms(dict[str, str]):
    """Word, or run of word and connector characters (`v2.1,` gives `v2.1`; `--` gives none) ->
    the terms of its words joined by spaces, filled on first use.

    `" ".join(map(cache.__getitem__, runs))` looks every known run up in C: no call, tuple or
    chain per word. That is most of the cost of segmenting English text, which is most words.
    """

    def __missing__(self, run: str) -> str:
        joined = self._terms_of(run)
        # A blob is not kept: it has no terms and never comes again. Bounded, too: a library
        # of random tokens can't grow it.
        if not is_blob(run):
            if len(self) >= SEGMENT_CACHE_WORDS:
                self.clear()
            self[run] = joined
        return joined

    def _terms_of(self, run: str) -> str:
        if is_blob(run):
            return ""
        if run.isascii():
            if run.isalpha() and run.islower():  # a plain English word: its stem
                return _stems[run]
            # Letters and digits only: one word. Else the ASCII class: same words, faster.
            words = [run] if run.isalnum() else _WORD_ASCII.findall(run)
        else:
            words = _WORD.findall(run)
        if words == [run]:
            return " ".join(_word_terms_of(run))
        return " ".join(map(self.__getitem__, words))


def is_blob(run: str) -> bool:
    """A run of word and connector characters longer than BLOB_WORD_CHARS is data (base64, a
    data URI, a key), not words anyone types: neither indexed nor searched. Split at its `+`
    and `/` into thousands of random parts, a 5 MB image took 11 s to index and 2.5x its size
    in terms."""
    return len(run) > BLOB_WORD_CHARS


_joined = _JoinedTerms()

# Every byte that can never be part of a word (all but ASCII letters, digits and connectors), as
# a space: what remains between spaces are runs that hold whole words, and nothing else.
_ASCII_GAPS = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or chr(c) in FTS_TOKENCHARS) else 0x20
    for c in range(256)
)


def terms_text(text: str) -> str:
    """Terms joined by spaces: what is inserted into the FTS5 tables (`" ".join(terms(text))`).

    A text longer than SEGMENT_PIECE_CHARS is segmented piece by piece, each cut before a
    whitespace character (where no word or Chinese run can continue): the same terms, with a
    piece's Chinese words after its own words rather than after all the text's."""
    if len(text) <= SEGMENT_PIECE_CHARS:
        return _terms_text(text)
    return " ".join(filter(None, map(_terms_text, _pieces(text))))


def terms_bytes(text: str) -> bytes:
    """`terms_text(text).encode()`: the terms as the store binds them (see `model.Passage`). A
    long text's pieces are encoded one by one into one buffer: joined first and then encoded,
    a big file's terms were held three times over (pieces, joined, encoded)."""
    if len(text) <= SEGMENT_PIECE_CHARS:
        return _terms_text(text).encode()
    out = io.BytesIO()
    for terms in filter(None, map(_terms_text, _pieces(text))):
        if out.tell():
            out.write(b" ")
        out.write(terms.encode())
    return out.getvalue()  # the buffer itself, not a copy


def _pieces(text: str) -> Iterator[str]:
    start, end = 0, len(text)
    while end - start > SEGMENT_PIECE_CHARS:
        limit = start + SEGMENT_PIECE_CHARS
        cut = max(text.rfind(" ", start + 1, limit), text.rfind("\n", start + 1, limit))
        if cut <= start:  # no whitespace in a whole piece (base64, unspaced Chinese): cut anyway
            cut = limit
        yield text[start:cut]
        start = cut
    yield text[start:]


def _terms_text(text: str) -> str:
    if text.isascii():
        # `_WORD_ASCII.findall` made a match object per word: most of the cost of English text.
        # A byte table and `split` cut the text into runs in C instead; words never span two
        # runs, so the terms of the runs, in order, are the terms of the text.
        runs = text.encode("ascii").translate(_ASCII_GAPS).decode("ascii").split()
        return " ".join(filter(None, map(_joined.__getitem__, runs)))
    text = nfkc(text)
    # By runs, as above (their words in order are the text's words), so a blob is one run.
    words = " ".join(filter(None, map(_joined.__getitem__, _RUN.findall(text))))
    runs = _CJK_RUN.findall(text)
    if not runs:
        return words
    if len(text) <= SEGMENT_CUT_CHARS:
        chinese = _cut_runs(runs)
    else:
        chinese = " ".join(filter(None, map(_cut_runs, _batches(runs, SEGMENT_CUT_CHARS))))
    return f"{words} {chinese}" if words and chinese else words or chinese


def _cut_runs(runs: list[str]) -> str:
    """The Chinese words of `runs`, joined by spaces. The runs are cut in one call (each call has
    a fixed cost), joined by single spaces that come back as " " words: "a   b" once joined,
    folded back to one space in C, not filtered in Python. jieba cuts each run on its own, so
    runs cut in several calls give the same words."""
    return " ".join(_cutter()[1](" ".join(runs))).replace("   ", " ")


def _batches(runs: list[str], chars: int) -> Iterator[list[str]]:
    """`runs` in consecutive batches of about `chars` characters: the words of a piece's runs cut
    at once, a string each, were ~30x the piece's size (65 MB for 1 M characters of Chinese)."""
    batch: list[str] = []
    size = 0
    for run in runs:
        batch.append(run)
        size += len(run)
        if size >= chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def heading_terms(title: str, key_items: Sequence[str], *, chunk: bool) -> tuple[str, str]:
    """A node's title and keyItems terms, as its FTS row holds them. A chunk's title repeats its
    parent's, so it is not searched a second time."""
    title_terms = "" if chunk else terms_text(title)
    key_terms = terms_text(" \n ".join(key_items)) if key_items else ""
    return title_terms, key_terms


def word_groups(text: str, stop: Callable[[str], bool] | None = None) -> list[list[str]]:
    """Query-side view: one group per word the user typed, each with its alternative terms.

    For an identifier the group is `[whole, part, part, …]`; for a Chinese word it is the
    search-mode cut of that word (the word itself plus its dictionary sub-words). Words for which
    `stop` (given the lowercased surface form) is true are left out.
    """
    text = _without_blobs(text if text.isascii() else nfkc(text))
    groups: list[list[str]] = []
    cut = None
    for m in _TOKEN.finditer(text):
        word = m.group("word")
        if word is not None:
            if not (stop and stop(word.lower())):
                groups.append(list(_word_terms(word)))
            continue
        cut = cut or _cutter()[1]
        run = m.group("cjk")
        for w in _precise()(run):
            if stop and stop(w):
                continue
            sub = [t for t in cut(w) if t != " "]
            groups.append([w, *[t for t in sub if t != w]])
    return groups


def surface_words(text: str) -> Iterator[str]:
    """The words of `text` as typed (NFKC, lowercased; an identifier whole, a Chinese run whole),
    without the punctuation around them: a fragment written `quota_que`, in backticks or
    followed by `?` is the same fragment."""
    return (m.group() for m in _TOKEN.finditer(normalize(text)))


@lru_cache(maxsize=1)
def _precise() -> Cutter:
    """jieba's precise mode (no HMM): how a query's Chinese is split into words."""
    if _cutter()[0] == "rjieba":
        import rjieba

        return lambda s: rjieba.cut(s, False)
    import jieba  # pragma: no cover

    return lambda s: list(jieba.cut(s, HMM=False))  # pragma: no cover

"""Segmentation: the index and queries cut mixed Chinese/English text the same way."""

from __future__ import annotations

import pytest

from markindex_core.text import segment


def test_identifiers_are_kept_whole_and_split() -> None:
    terms = segment.terms("C++ ISO-27001 v2.1 tidb_mem_quota_query CamelCase")
    for whole in ("c++", "iso-27001", "v2.1", "tidb_mem_quota_query", "camelcase"):
        assert whole in terms
    for part in ("iso", "27001", "tidb", "mem", "quota", "camel", "case"):
        assert part in terms


def test_chinese_words_and_sub_words() -> None:
    terms = segment.terms("中华人民共和国刑事诉讼法")
    assert "中华人民共和国" in terms
    assert "刑事诉讼法" in terms
    assert "诉讼" in terms  # search mode also emits dictionary sub-words


def test_mixed_text_token_by_token() -> None:
    terms = segment.terms("TiDB 的 tidb_mem_quota_query 默认值是 1 GiB")
    assert "tidb_mem_quota_query" in terms
    assert "默认值" in terms
    assert "gib" in terms


def test_nfkc_and_case_folding() -> None:
    assert segment.terms("ＴｉＤＢ Ｖ２") == segment.terms("TiDB V2")
    assert "tidb" in segment.terms("TIDB")


def test_english_words_are_stemmed_alike() -> None:
    assert segment.terms("expired") == segment.terms("expiration")
    assert segment.terms("Containers") == segment.terms("container")


def test_query_groups_use_the_same_terms_as_the_index() -> None:
    text = "看守所里有在押人员非正常死亡 ISO-27001 and C++"
    indexed = set(segment.terms(text))
    for group in segment.word_groups(text):
        assert set(group) <= indexed, group


def test_stopwords_are_dropped_from_queries_only() -> None:
    groups = segment.word_groups(
        "what is the default of listen_port", stop=lambda w: w in {"what", "is", "the", "of"}
    )
    assert [g[0] for g in groups] == ["default", "listen_port"]
    assert "the" in segment.terms("the default")


def test_index_terms_are_the_terms_of_the_text_whatever_the_punctuation() -> None:
    """`terms_text` cuts ASCII text into runs in C and looks each run up; it must insert exactly
    the terms `terms` finds word by word, for connectors at every place a word can have them."""
    import random
    import string

    tricky = [
        "v2.1, v2..1 --flag -x C++ C# a/b/ /a .NET end. (foo) [bar]:baz",
        "tidb_mem_quota_query=1; __init__ a.b.c... x+y+ ++ ## a#b#",
        "",
        "--- ... ///",
        "Expired EXPIRATION expires\tHTTPServer2 iOS\x1c\x1fx",
    ]
    rng = random.Random(7)
    alphabet = string.printable + "-_.+#/" * 3
    tricky += ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(20_000)]
    for text in tricky:
        assert segment.terms_text(text) == " ".join(segment.terms(text)), repr(text)


def test_a_text_longer_than_a_piece_has_the_terms_of_the_whole() -> None:
    """A huge passage (a single-line file) is segmented in pieces cut at whitespace, to bound
    the memory it takes: the same terms as at once, and identifiers and Chinese runs whole."""
    from markindex_core.config import SEGMENT_PIECE_CHARS

    unit = "Set `tidb_mem_quota_query` to v2.1 for ISO-27001 当事人应当全面履行义务 CamelCaseName "
    text = unit * (3 * SEGMENT_PIECE_CHARS // len(unit))
    text += "\n" + "没有空格的中文" * (SEGMENT_PIECE_CHARS // 5)  # a run longer than a piece
    pieced = segment.terms_text(text).split()
    assert sorted(pieced) == sorted(t for t in segment.terms(text) if t != " ")
    assert pieced.count("tidb_mem_quota_query") == text.count("tidb_mem_quota_query")
    assert pieced.count("当事人") == text.count("当事人") > 0


def _chinese_line(chars: int, seed: int = 7) -> str:
    """Unspaced Chinese prose of about `chars` characters (one line: a dump, a converted book)."""
    import random

    rng = random.Random(seed)
    phrases = ["当事人应当全面履行义务", "为了保护人民", "中华人民共和国刑法", "依照本法规定"]
    marks = ["，", "。", "；", "、", "“", "”"]
    text = ""
    while len(text) < chars:
        text += "".join(rng.choice(phrases) + rng.choice(marks) for _ in range(1000))
    return text[:chars]


def test_a_pieces_chinese_cut_in_batches_gives_the_words_cut_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A piece's Chinese runs are cut SEGMENT_CUT_CHARS at a time (jieba cuts each run on its
    own): the same terms, in the same order, as all of them in one call."""
    texts = [
        _chinese_line(20_000),
        "没有标点的中文" * 3000,  # one run longer than a batch
        "第一条 abc_def 为了惩罚犯罪，保护人民，𠀀 Hello World v2.1. " * 400,
    ]
    monkeypatch.setattr(segment, "SEGMENT_CUT_CHARS", 10**9)
    at_once = [segment.terms_text(t) for t in texts]
    for batch in (1, 50, 4096):
        monkeypatch.setattr(segment, "SEGMENT_CUT_CHARS", batch)
        assert [segment.terms_text(t) for t in texts] == at_once, batch
    assert list(segment._batches(["ab", "c", "def", "g"], 3)) == [["ab", "c"], ["def"], ["g"]]


def test_segmenting_a_long_chinese_line_takes_a_bounded_multiple_of_its_size() -> None:
    """200 000 characters of unspaced Chinese (one piece) allocate less than 45 bytes a character
    at their peak (~30; ~69 when a piece's runs were cut in one call, a string per word)."""
    import tracemalloc

    text = _chinese_line(200_000)
    segment.warm()
    tracemalloc.start()
    try:
        segment.terms_bytes(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 45 * len(text), peak / len(text)


def test_a_blob_is_neither_indexed_nor_searched() -> None:
    """A run of word and connector characters over BLOB_WORD_CHARS (base64, a data URI) is data:
    split at its `+` and `/`, a 5 MB image made 12 MB of random terms and took 11 s to index.
    Its neighbours are indexed as before, and a run of that length no longer is."""
    import base64

    from markindex_core.config import BLOB_WORD_CHARS

    blob = base64.b64encode(bytes(range(256)) * 40).decode()
    assert len(blob) > BLOB_WORD_CHARS
    for text in (f"before ![x](data:image/png;base64,{blob}) after", f"数据 {blob} 安全 v2.1"):
        terms = segment.terms_text(text).split()
        assert terms == [t for t in segment.terms(text) if t != " "], text[:20]
        assert max(map(len, terms)) < 20 and len(terms) < 10, terms
    assert segment.terms_text(f"before {blob} after").split() == ["befor", "after"]
    edge = "a" * BLOB_WORD_CHARS
    assert segment.terms_text(f"{edge} {edge}b") == edge  # the limit itself is still a word
    assert segment.word_groups(f"find {blob}") == [["find"]]

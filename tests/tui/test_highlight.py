"""Search results highlight whole words: a stemmed term marks the word it matched."""

from __future__ import annotations

from rich.text import Text

from markindex_core.library import Library
from markindex_tui.widgets.hit_list import hit_option, whole_words


def highlighted(text: Text) -> list[str]:
    return [text.plain[s.start : s.end] for s in text.spans if "underline" in str(s.style)]


def test_stemmed_term_highlights_the_whole_word(indexed_sample: Library) -> None:
    result = indexed_sample.search("upgraded")
    assert result.terms == ["upgrad"] and result.hits  # the index stems: a part of a word
    prompt = hit_option(result.hits[0], result.terms).prompt
    assert isinstance(prompt, Text)
    words = highlighted(prompt)
    assert words and all(w.lower().startswith("upgrad") for w in words)
    assert "upgrade" in [w.lower() for w in words]  # not "upgrad"


def test_whole_words_rule() -> None:
    pattern = whole_words(["interpol", "string", "个人信息", "x"])
    assert pattern is not None
    text = "Interpolated regular string_expressions; 处理个人信息的规则 x strings"
    assert [m.group() for m in pattern.finditer(text)] == [
        "Interpolated",
        "string_expressions",
        "个人信息",  # CJK has no spaces: the term itself, not the whole run
        "strings",
    ]
    assert whole_words(["x"]) is None  # one-letter terms are not highlighted

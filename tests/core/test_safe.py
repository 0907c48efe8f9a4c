"""`printable`: every control character a terminal could act on becomes a visible escape."""

from __future__ import annotations

from markindex_core.text.safe import is_printable, printable


def test_escape_sequences_become_visible() -> None:
    osc52 = "zqosc \x1b]52;c;ZWNobyBwd25lZA==\x1b\\ end"
    assert printable(osc52) == "zqosc \\x1b]52;c;ZWNobyBwd25lZA==\\x1b\\ end"
    assert printable("\x1b]0;title\x07") == "\\x1b]0;title\\x07"
    assert printable("\x9b2J clear") == "\\x9b2J clear"  # C1 CSI
    assert printable("a\x7fb\x00c") == "a\\x7fb\\x00c"


def test_single_line_escapes_newline_and_tab_multiline_keeps_newline() -> None:
    assert printable("a\tb\nc\rd") == "a\\tb\\nc\\rd"
    assert printable("a\tb\nc\rd", multiline=True) == "a\\tb\nc\\rd"


def test_no_control_character_survives() -> None:
    every = "".join(map(chr, range(0x00, 0xA0)))
    out = printable(every)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in out)
    multi = printable(every, multiline=True)
    assert [c for c in multi if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0] == ["\n"]


def test_ordinary_text_is_unchanged() -> None:
    text = "Install › 安装指南 — naïve \\path [x]"
    assert printable(text) == text and is_printable(text)
    assert not is_printable("x\x1b")

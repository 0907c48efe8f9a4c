"""Make document text safe to print on a terminal: control characters become visible escapes.

Document text, titles and file names are untrusted. Printed raw, an ESC or C1 byte lets a file
write the clipboard (OSC 52), set the window title or clear the screen. Every human-facing output
(CLI tables, trees, log lines, the terminal app) passes text through `printable`; JSON output does
not need it, because JSON escapes control characters itself.
"""

from __future__ import annotations

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(cp: int) -> str:
    ch = chr(cp)
    return _NAMED.get(ch, f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}")


# C0 (U+0000-U+001F), DEL (U+007F) and C1 (U+0080-U+009F): every code a terminal may act on.
# Then the bidirectional controls (marks, embeddings, overrides, isolates): printed raw they
# reorder what is shown, so `Invoice \u202efdp.exe` reads as `Invoice exe.pdf`.
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
# And the line and paragraph separators: editors, log viewers and `str.splitlines` break lines
# there, so a one-line message or a citation printed with one would come out in two.
_SEPARATORS = [0x2028, 0x2029]
_CONTROL = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, *_SEPARATORS]
_ONE_LINE = str.maketrans({cp: _escape(cp) for cp in _CONTROL})
_MULTI_LINE = str.maketrans({cp: _escape(cp) for cp in _CONTROL if cp != 0x0A})


def printable(text: str, *, multiline: bool = False) -> str:
    r"""Return `text` with every control character (and bidi control) shown as a visible escape.

    ESC becomes the four characters `\x1b`, BEL `\x07`, a C1 CSI `\x9b`; tab, newline and
    carriage return become `\t`, `\n`, `\r`. With `multiline=True` a newline is kept as a line
    break (for previews and snippets that span lines); everything else is still escaped.

    Args:
        text: untrusted text (a title, a path, a snippet, an error message).
        multiline: keep `\n` as a real line break.

    Returns:
        The text, safe to write to a terminal. Printable text (CJK included) is unchanged.
    """
    return text.translate(_MULTI_LINE if multiline else _ONE_LINE)


# JSON escapes C0 itself, but `json.dumps(..., ensure_ascii=False)` leaves DEL, C1 and the
# bidi controls raw, and lone surrogates (a non-UTF-8 byte of an argument, kept by Python as
# U+DC80..U+DCFF) would reach stdout as that raw byte: invalid UTF-8 in the JSON.
_JSON_ESCAPED = (0x7F, *range(0x80, 0xA0), *_BIDI, *range(0xD800, 0xE000))
_JSON_CONTROL = str.maketrans({cp: f"\\u{cp:04x}" for cp in _JSON_ESCAPED})


def json_controls_escaped(json_text: str) -> str:
    """JSON text (from `json.dumps`) with DEL, C1, bidi controls and lone surrogates written as
    `\\u` escapes.

    They can only occur inside JSON strings, so the parsed values stay exactly the same, while a
    terminal showing the JSON never receives a raw C1 control such as CSI (U+009B).
    """
    return json_text.translate(_JSON_CONTROL)


def is_printable(text: str, *, multiline: bool = False) -> bool:
    """True when `printable` would leave `text` unchanged (no control character in it)."""
    return printable(text, multiline=multiline) == text


def utf8_encodable(text: str) -> bool:
    """Whether `text` can be stored or sent as UTF-8: names and arguments may carry lone
    surrogates (a file name's invalid bytes, a Python caller's string)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

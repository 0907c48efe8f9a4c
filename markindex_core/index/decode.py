"""Turn a file's bytes into text and lines, with a clear policy for encodings.

Policy: UTF-8 (BOM optional); UTF-16 only with a BOM; GB18030 when strict UTF-8 fails and the
bytes decode as GB18030 into mostly CJK text; anything else (binary, other legacy encodings)
is skipped with a reason rather than indexed as garbage.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_NEWLINE = re.compile(r"\r\n|\r|\n")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
# Every byte but those `_CONTROL` matches: deleted, what is left of UTF-8 text is its control
# characters (single bytes there, never part of another character's encoding).
_NOT_CONTROL = bytes(b for b in range(256) if not _CONTROL.match(chr(b)))


def _gb2312_symbols() -> frozenset[str]:
    """The characters of GB2312's symbol rows (bytes A1-A9 A1-FE): the punctuation Chinese text
    is written with (“” ‘’ —— …… ·), numbered items (① ⑴ Ⅰ), ×÷≤℃, box drawing, kana, Greek.
    Latin-1 text decodes into them only where two of its rarest bytes (¡¢£¤¥¦§¨©) meet."""
    chars: set[str] = set()
    for lead in range(0xA1, 0xAA):
        for trail in range(0xA1, 0xFF):
            try:
                chars.add(bytes((lead, trail)).decode("gb18030"))
            except UnicodeDecodeError:
                continue
    return frozenset(chars)


_GB2312_SYMBOLS = _gb2312_symbols()


class Undecodable(Exception):
    """The file is not text markindex can index; the message is the reason."""


@dataclass(frozen=True)
class DecodedText:
    text: str  # newlines normalized to "\n", BOM removed
    encoding: str

    @property
    def lines(self) -> list[str]:
        return split_lines(self.text)


def split_lines(text: str) -> list[str]:
    """Split on LF only (text is already normalized); a trailing newline adds no line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def decode(data: bytes) -> DecodedText:
    """Decode file bytes; raise Undecodable with a reason for binary or unknown encodings."""
    if data.startswith(codecs.BOM_UTF8):
        return _finish(_strict(data[3:], "utf-8"), "utf-8-sig")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _finish(_strict(data, "utf-16"), "utf-16")
    if b"\x00" in data[:8192]:
        raise Undecodable("binary file (NUL bytes)")
    try:
        return _finish(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        text = ""
    if text and _looks_like_cjk_text(text):
        return _finish(text, "gb18030")
    raise Undecodable(
        f"not valid UTF-8 (byte {utf8_error.start}) and not GB18030 text; convert it to UTF-8"
    )


def _strict(data: bytes, encoding: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise Undecodable(f"invalid {encoding} at byte {exc.start}") from None


def _finish(text: str, encoding: str) -> DecodedText:
    if "\x00" in text:
        raise Undecodable("binary file (NUL characters)")
    sample = text[:65536]
    if sample and _control_count(sample) > max(8, len(sample) // 100):
        raise Undecodable("binary file (control characters)")
    if "\r" in text:
        text = _NEWLINE.sub("\n", text)
    return DecodedText(text, encoding)


def _control_count(text: str) -> int:
    """`len(_CONTROL.findall(text))`, counted in C on the UTF-8 bytes: the regex scan of every
    document's first 64K characters was ~60% of decoding."""
    return len(text.encode("utf-8", "surrogatepass").translate(None, _NOT_CONTROL))


def _looks_like_cjk_text(text: str) -> bool:
    """GB18030 decodes almost any bytes; accept only text that is mostly CJK or ASCII."""
    sample = text[:65536]
    non_ascii = [c for c in sample if ord(c) > 0x7F]
    if not non_ascii:
        return False
    cjk = sum(
        1
        for c in non_ascii
        if "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" or c in _GB2312_SYMBOLS
    )
    return cjk / len(non_ascii) >= 0.9 and not _CONTROL.search(sample)

"""Turn a file's bytes into text and lines, with a clear policy for encodings.

Policy: UTF-8 (BOM optional); UTF-16 only with a BOM; GB18030 when strict UTF-8 fails and the
bytes decode as GB18030 into mostly CJK text; anything else (binary, other legacy encodings)
is skipped with a reason rather than indexed as garbage.
"""

from __future__ import annotations

import codecs
import functools
import re
from dataclasses import dataclass

from markindex_core.config import (
    GB18030_HANGUL_MIN_HANZI,
    GB18030_MAX_HANGUL_ROWS,
    GB18030_MAX_KANA,
    GB18030_MIN_COMMON_HANZI,
)

_NEWLINE = re.compile(r"\r\n|\r|\n")
_SAMPLE_CHARS = 65536  # the first characters looked at for control characters
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
# Every byte but those `_CONTROL` matches: deleted, what is left of UTF-8 text is its control
# characters (single bytes there, never part of another character's encoding).
_NOT_CONTROL = bytes(b for b in range(256) if not _CONTROL.match(chr(b)))


# GB2312's symbol rows: the punctuation Chinese text is written with (“” ‘’ —— …… ·), numbered
# items (① ⑴ Ⅰ), ×÷≤℃, box drawing, kana, Greek. Latin-1 text decodes into them only where two
# of its rarest bytes (¡¢£¤¥¦§¨©) meet.
_SYMBOL_ROWS = (0xA1, 0xA9)
# GB2312's hanzi (6 763), nearly every character of simplified Chinese. Other text read as GB18030
# pairs a high byte with the ASCII byte after it, which lands outside them (GBK's rare additions).
_HANZI_ROWS = (0xB0, 0xF7)
# The first 25 of them, where EUC-KR puts its hangul syllables (see GB18030_MAX_HANGUL_ROWS).
_HANGUL_ROWS = (0xB0, 0xC8)


@functools.cache
def _gb2312_rows(first_lead: int, last_lead: int) -> frozenset[str]:
    """The characters of GB2312's rows `first_lead`..`last_lead` (trail bytes A1-FE). Built on
    first use: only a file that is not UTF-8 needs them."""
    pairs = bytes(
        byte
        for lead in range(first_lead, last_lead + 1)
        for trail in range(0xA1, 0xFF)
        for byte in (lead, trail)
    )
    return frozenset(pairs.decode("gb18030"))  # every such pair is one GB18030 character


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


def _nul_reason(head: bytes) -> str:
    """Why NUL bytes make a file unreadable: binary, or UTF-16 saved without a byte order mark
    (Windows tools write it; then every other byte of ASCII text is NUL), which a user can fix."""
    even, odd = head[0::2], head[1::2]
    for nuls, other in ((odd, even), (even, odd)):
        if nuls.count(0) >= 0.9 * len(nuls) and other.count(0) <= 0.1 * len(other):
            return "UTF-16 text without a byte order mark: convert it to UTF-8"
    return "binary file (NUL bytes)"


def decode(data: bytes) -> DecodedText:
    """Decode file bytes; raise Undecodable with a reason for binary or unknown encodings."""
    if data.startswith(codecs.BOM_UTF8):
        try:
            return _decode_utf8(data[3:], "utf-8-sig")
        except UnicodeDecodeError as exc:
            raise Undecodable(f"invalid utf-8 at byte {exc.start}") from None
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _finish(_strict(data, "utf-16"), "utf-16")
    if b"\x00" in data[:8192]:
        raise Undecodable(_nul_reason(data[:8192]))
    try:
        return _decode_utf8(data, "utf-8")
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


def _decode_utf8(data: bytes, encoding: str) -> DecodedText:
    """`_finish(data.decode("utf-8"), encoding)` with newlines normalized in the bytes, where a
    CR byte is always a CR character: in the text, a document with one character beyond U+FFFF
    (4 bytes a character) took two more copies of it, the pieces `sub` joins and their join.
    Raises the UnicodeDecodeError of `data` itself."""
    if b"\r" not in data:
        return _finish(data.decode("utf-8"), encoding)
    # The sample `_finish` checks, as it was before the newlines changed (a valid prefix of 4
    # bytes a character holds at least _SAMPLE_CHARS of them).
    sample = data[: 4 * _SAMPLE_CHARS].decode("utf-8", "ignore")[:_SAMPLE_CHARS]
    lf = data.replace(b"\r\n", b"\n")
    if b"\r" in lf:
        lf = lf.replace(b"\r", b"\n")
    try:
        text = lf.decode("utf-8")
    except UnicodeDecodeError:
        data.decode("utf-8")  # the same bytes are invalid in `data`: raise its error, offsets
        raise
    return _finish(text, encoding, sample)


def _finish(text: str, encoding: str, sample: str | None = None) -> DecodedText:
    """`sample`: the first _SAMPLE_CHARS characters of the text as read (its newlines as
    written), when `text` has been normalized already."""
    if "\x00" in text:
        raise Undecodable("binary file (NUL characters)")
    if sample is None:
        sample = text[:_SAMPLE_CHARS]
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
    """GB18030 decodes almost any bytes; accept only text that is mostly CJK or ASCII, and whose
    ideographs are mostly common ones, and not Japanese or Korean (EUC-JP, EUC-KR) read so."""
    sample = text[:65536]
    non_ascii = [c for c in sample if ord(c) > 0x7F]
    if not non_ascii:
        return False
    symbols, hanzi = _gb2312_rows(*_SYMBOL_ROWS), _gb2312_rows(*_HANZI_ROWS)
    cjk = sum(
        1
        for c in non_ascii
        if "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" or c in symbols
    )
    if cjk / len(non_ascii) < 0.9:  # control characters: `_finish` applies UTF-8's tolerance
        return False
    if sum(1 for c in non_ascii if "\u3040" <= c <= "\u30ff") > len(non_ascii) * GB18030_MAX_KANA:
        return False
    ideographs = [c for c in non_ascii if "\u3400" <= c <= "\u9fff"]
    common = [c for c in ideographs if c in hanzi]
    hangul_rows = _gb2312_rows(*_HANGUL_ROWS)
    in_hangul_rows = sum(1 for c in common if c in hangul_rows)
    if (
        len(common) >= GB18030_HANGUL_MIN_HANZI
        and in_hangul_rows > len(common) * GB18030_MAX_HANGUL_ROWS
    ):
        return False
    return not ideographs or len(common) >= len(ideographs) * GB18030_MIN_COMMON_HANZI

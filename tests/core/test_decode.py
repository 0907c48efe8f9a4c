"""Encoding policy: UTF-8 (BOM optional), UTF-16 with a BOM, GB18030 CJK text; the rest skipped."""

from __future__ import annotations

import codecs

import pytest

from markindex_core.index.decode import Undecodable, decode, split_lines

TEXT = "# 标题 Title\n\n正文第一行。\r\nsecond line é\rthird\n"
LINES = ["# 标题 Title", "", "正文第一行。", "second line é", "third"]


def test_utf8_with_and_without_bom() -> None:
    plain = decode(TEXT.encode())
    assert (plain.encoding, plain.lines) == ("utf-8", LINES)
    bom = decode(codecs.BOM_UTF8 + TEXT.encode())
    assert (bom.encoding, bom.lines) == ("utf-8-sig", LINES)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom(codec: str) -> None:
    data = ("\ufeff" + TEXT).encode(codec)
    got = decode(data)
    assert got.encoding == "utf-16" and got.lines == LINES


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom_is_refused_as_such(codec: str) -> None:
    """It was called a 'binary file (NUL bytes)', which tells no one to convert it."""
    english = "# Setup\n\nRun `make install`, then edit config.toml.\n" * 20
    with pytest.raises(Undecodable, match="UTF-16 text without a byte order mark: convert"):
        decode(english.encode(codec))
    with pytest.raises(Undecodable, match="binary file"):  # much CJK: no clear NUL pattern
        decode(TEXT.encode(codec))


def test_gb18030_chinese_text() -> None:
    text = "# 数据安全管理办法\n\n第一条 为了规范数据处理活动，保障数据安全。\n第二条 本办法适用于境内。\n"
    got = decode(text.encode("gb18030"))
    assert got.encoding == "gb18030" and got.lines == split_lines(text)


@pytest.mark.parametrize("codec", ["gbk", "gb18030"])
def test_gbk_chinese_with_quotes_dashes_and_numbered_items_is_decoded(codec: str) -> None:
    """GB2312's own punctuation and symbols (“”, ——, ……, ①, ×, box drawing) are Chinese text:
    counted as foreign, they got a short GBK law refused as 'not GB18030 text'."""
    text = (
        "# 第三条\n\n本法所称“数据”，是指任何以电子或者其他方式对信息的记录——包括……\n"
        "① 收集；② 存储；③ 使用，单价×数量，温度≤30℃。\n\n```\n├── 目录\n└── 文件\n```\n"
    )
    got = decode(text.encode(codec))
    assert got.encoding == "gb18030" and got.lines == split_lines(text)


def test_a_few_control_characters_are_tolerated_in_gb18030_too() -> None:
    """One stray DEL (a Chinese Wikipedia export has one) refused a GBK file as 'not GB18030
    text', while UTF-8 text tolerates 1% of control characters."""
    text = (
        "# 孔子\n\n孔丘，字仲尼，春秋末期鲁国的教育家与哲学家。\x7f\n\n## 名号\n\n后世尊为至圣。\n"
    )
    got = decode(text.encode("gbk"))
    assert got.encoding == "gb18030" and got.lines == split_lines(text)


def test_english_cp1252_with_smart_quotes_is_not_taken_for_gb18030() -> None:
    """Each cp1252 quote or dash before a letter decodes as one rare ideograph ("It抯 the
    server抯 job梔on抰"): text that was all CJK among its few non-ASCII characters."""
    text = "# Setup\n\nIt’s the server’s job—don’t set the limit yourself.\n\nSee the README’s notes.\n"
    with pytest.raises(Undecodable, match="UTF-8"):
        decode(text.encode("cp1252"))


def test_traditional_chinese_in_gbk_is_decoded() -> None:
    text = "# 中華人民共和國憲法\n\n第一條 中華人民共和國是工人階級領導的、以工農聯盟為基礎的人民民主專政的社會主義國家。\n"
    got = decode(text.encode("gbk"))
    assert got.encoding == "gb18030" and got.lines == split_lines(text)


@pytest.mark.parametrize(
    "data",
    [
        "café naïve résumé".encode("latin-1"),
        ("Les données « sensibles » — voilà, déjà, où ça ? " * 20).encode("cp1252"),
        b"# ok\n\xff\xfe\xfa\n",
        "Привет мир".encode("cp1251"),
    ],
)
def test_other_legacy_encodings_are_skipped_with_a_reason(data: bytes) -> None:
    with pytest.raises(Undecodable, match="UTF-8"):
        decode(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4,
        b"%PDF-1.4\n" + bytes(range(1, 32)) * 50,
        b"\x7fELF\x02\x01\x01" + b"\x00" * 100,
        codecs.BOM_UTF8 + b"text\x00more",
    ],
)
def test_binary_is_skipped(data: bytes) -> None:
    with pytest.raises(Undecodable, match=r"binary|UTF-8"):
        decode(data)


def test_invalid_utf8_after_bom_is_skipped() -> None:
    with pytest.raises(Undecodable, match="invalid utf-8"):
        decode(codecs.BOM_UTF8 + b"ok \xff bad")


def test_newlines_normalized_and_trailing_newline_adds_no_line() -> None:
    assert decode(b"a\r\nb\rc\n").lines == ["a", "b", "c"]
    assert decode(b"a\n\n").lines == ["a", ""]
    assert decode(b"").lines == []
    assert decode(b"\n").lines == [""]
    assert decode(b"\r\r\n").lines == ["", ""]


def test_a_few_control_characters_are_tolerated() -> None:
    got = decode(b"form\x0cfeed and \x1b[1mansi\x1b[0m in a long enough text " * 4)
    assert got.encoding == "utf-8"


KOREAN = (
    "# 개인정보 보호법\n\n이 법은 개인정보의 처리 및 보호에 관한 사항을 정함으로써 개인의 자유와"
    " 권리를 보호하고, 나아가 개인의 존엄과 가치를 구현함을 목적으로 한다.\n\n## 제2조 정의\n\n"
    "이 법에서 사용하는 용어의 뜻은 다음과 같다.\n"
)
JAPANESE = (
    "# 個人情報の保護に関する法律\n\nこの法律は、デジタル社会の進展に伴い個人情報の利用が著しく"
    "拡大していることに鑑み、個人情報の適正な取扱いに関し、基本理念を定める。\n"
)


@pytest.mark.parametrize(
    ("codec", "text"), [("euc-kr", KOREAN), ("euc-jp", JAPANESE)], ids=["euc-kr", "euc-jp"]
)
def test_korean_and_japanese_legacy_text_is_not_taken_for_gb18030(codec: str, text: str) -> None:
    """EUC-KR's hangul lie exactly in GB2312's first hanzi rows, EUC-JP's kana in GB2312's
    kana rows: such files decoded as GB18030 into common-looking ideographs ("개인정보" read
    "俺牢沥焊") and were indexed as that Chinese, so search and the text read by line range
    gave what the file does not say. They are skipped with the reason, as other legacy
    encodings are, and real Chinese text in GBK is still read."""
    with pytest.raises(Undecodable, match="not GB18030 text"):
        decode(text.encode(codec))
    chinese = "# 个人信息保护法\n\n为了保护个人信息权益，规范个人信息处理活动，促进个人信息合理利用，制定本法。\n"
    assert decode(chinese.encode("gbk")).encoding == "gb18030"

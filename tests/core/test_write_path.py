"""The fast write path: what workers send and what the store writes equals the plain path."""

from __future__ import annotations

import errno
import os
import pickle
import re
import socket
import subprocess
import threading
import time
import tracemalloc
import unicodedata
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from markindex_core.config import WORKER_NICE, TreeParams
from markindex_core.index import workers
from markindex_core.index.document import build_document
from markindex_core.index.indexer import Indexer, open_for_writing
from markindex_core.index.workers import Job, WorkerPool, load, pack
from markindex_core.index.writer import RunWriter
from markindex_core.model import DocumentRows, ParsedDocument, SkippedFile
from markindex_core.store.db import Store
from markindex_core.text import segment
from markindex_core.text.tokens import LineTokens, estimate_tokens

from .helpers import make_library, write

SAMPLES = {
    "empty.md": b"",
    "one-empty-line.md": b"\n",
    "blank-tail.md": b"# A\n\ntext\n\n\n",
    "front.md": b"---\ntitle: T\ntags: [a, b]\n---\n# Head\n\nbody [x](other.md#s)\n",
    "cjk.md": "# 第一章 总则\n\n第一条 为了规范 TiDB 的 tidb_mem_quota_query 设置。\n\n## 小节\n\n- 列表\n".encode(),
    "crlf.md": b"# T\r\n\r\nline one\r\nline two\r\n",
}


def _docs() -> list[ParsedDocument]:
    out = []
    for name, data in SAMPLES.items():
        doc = build_document(name, data, 1, TreeParams(setext=True))
        assert isinstance(doc, ParsedDocument)
        out.append(doc)
    return out


def test_packed_documents_arrive_equal() -> None:
    for doc in _docs():
        assert pickle.loads(pickle.dumps(pack(doc))) == doc.rows()
    skipped = SkippedFile("x.md", "binary")
    assert pickle.loads(pickle.dumps(pack(skipped))) == skipped


def test_worker_results_equal_in_process_results(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    for name, data in SAMPLES.items():
        (root / name).write_bytes(data)
    rels = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
    jobs = [Job(str(root), rel, TreeParams(setext=True)) for rel in rels]
    pool = WorkerPool(2, 60.0)
    pool.start()
    by_rel = {getattr(r, "path", ""): r for r in pool.results(jobs)}
    assert len(by_rel) == len(jobs)
    for job in jobs:
        assert by_rel[job.rel] == pack(load(job))


def test_a_workers_start_up_is_not_counted_against_its_first_documents_deadline(
    tmp_path: Path,
) -> None:
    """Starting a worker (a fresh interpreter, ~0.5 s) takes longer than this parse deadline;
    parsing a short document does not: it is parsed, not skipped as timed out."""
    root = make_library(tmp_path / "lib")
    jobs = [Job(str(root), "intro.md", TreeParams(setext=True))]
    (root / "intro.md").write_text("# Intro\n\nShort.\n", encoding="utf-8")
    pool = WorkerPool(1, 0.05)
    pool.start()
    results = list(pool.results(jobs))
    assert [type(r).__name__ for r in results] == ["DocumentRows"], results


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_word_pattern_matches_unicode_pattern(text: str) -> None:
    assert segment._WORD_ASCII.findall(text) == segment._WORD.findall(text)


def _ids(conn: apsw.Connection, sql: str) -> list[int]:
    return sorted(int(r[0]) for r in conn.execute(sql))


def test_given_row_ids_link_nodes_passages_and_search_rows(tmp_path: Path) -> None:
    """After writes, deletes and rewrites every FTS row sits on its node or passage id."""
    store = Store(tmp_path / "index.db")
    docs = _docs()
    store.write_documents(docs)
    store.delete_documents([docs[2].path])
    store.write_documents([docs[4], docs[2]])  # replaced and re-added: fresh ids past the old
    c = store.conn
    assert _ids(c, "SELECT rowid FROM node_fts") == _ids(c, "SELECT id FROM nodes")
    assert _ids(c, "SELECT rowid FROM passage_fts") == _ids(c, "SELECT id FROM passages")
    wrong = "SELECT count(*) FROM passages p JOIN nodes n ON n.id = p.node_rowid"
    assert store.scalar(wrong + " WHERE n.doc_id != p.doc_id") == 0
    assert store.scalar("SELECT count(*) FROM passages") == sum(len(d.passages) for d in docs)
    store.close()


_MIXED = st.text(
    alphabet=st.one_of(
        st.characters(max_codepoint=0x2FF),  # ASCII, Latin letters, combining marks
        st.characters(min_codepoint=0x2000, max_codepoint=0x206F),  # general punctuation
        st.characters(min_codepoint=0x3000, max_codepoint=0x303F),  # CJK punctuation
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40),  # ideographs
        st.characters(min_codepoint=0xF900, max_codepoint=0xF920),  # compatibility ideographs
        st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),  # full-width forms
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(_MIXED)
def test_fast_nfkc_equals_unicodedata(text: str) -> None:
    assert segment.nfkc(text) == unicodedata.normalize("NFKC", text)


def test_fast_nfkc_on_every_replaced_character_and_its_neighbours() -> None:
    for ch in segment._WIDTH_FORMS:
        for text in (ch, f"a{ch}\u0301", f"中{ch}文", f"\u0041{ch}\u030a", f"{ch}{ch}"):
            assert segment.nfkc(text) == unicodedata.normalize("NFKC", text), repr(text)


def _reference_word_terms(word: str) -> tuple[str, ...]:
    """The rule in its plainest form: the whole lowercased word, then each part (split at
    connectors and case changes) lowercased and stemmed when it is an English word; a word
    with one part is just that part."""
    stem = segment._stemmer()
    parts = [
        stem(p.lower()) if p.isascii() and p.isalpha() else p.lower()
        for piece in re.split(r"[-_.+#/]+", word)
        if piece
        for p in ([piece] if piece.islower() or piece.isupper() else segment._CAMEL.findall(piece))
        if p
    ]
    lower = word.lower()
    if len(parts) == 1 and (parts[0] == lower or lower.isalpha()):
        return (parts[0],)
    return (lower, parts[0]) if len(parts) == 1 else (lower, *parts)


_WORDISH = st.text(
    alphabet=st.one_of(
        st.sampled_from("abcXYZ09-_.+#/"), st.characters(max_codepoint=0x2FF, categories=["L"])
    ),
    min_size=1,
    max_size=16,
)


@settings(max_examples=400, deadline=None)
@given(_WORDISH)
@example("Kubernetes")
@example("Über")
@example("XMLHttpRequest")
@example("tidb_mem_quota_query")
@example("İstanbul")
@example("ǅemal")
def test_word_terms_follow_the_plain_rule(word: str) -> None:
    segment._word_terms.cache_clear()
    assert segment._word_terms(word) == _reference_word_terms(word)


@settings(max_examples=300, deadline=None)
@given(_MIXED)
def test_terms_text_is_the_terms_joined(text: str) -> None:
    assert segment.terms_text(text) == " ".join(segment.terms(text))


def test_terms_text_stays_right_when_its_word_cache_starts_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(segment, "SEGMENT_CACHE_WORDS", 50)
    segment._joined.clear()
    for i in range(6):  # 6 texts of 20 new words each: the cache starts over twice
        words = [f"Word{i}x{k}_part{k % 7} v{k}.{i}" for k in range(10)]
        text = " ".join(words) + " 中文 TiDB"
        assert segment.terms_text(text) == " ".join(segment.terms(text))
        assert 0 < len(segment._joined) <= 50
    segment._joined.clear()


@settings(max_examples=300, deadline=None)
@given(_MIXED)
@example("第一条 为了规范 TiDB 的设置。")
@example("ひらがな한국어漢字")
def test_token_estimate_counts_each_cjk_character_once(text: str) -> None:
    cjk = sum(1 for ch in text if _TOKEN_CJK.match(ch))
    assert estimate_tokens(text) == cjk + (len(text) - cjk + 3) // 4


_TOKEN_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def test_run_writer_runs_calls_in_order_on_its_own_thread() -> None:
    seen: list[tuple[int, str]] = []
    with RunWriter(threaded=True) as writer:
        for i in range(200):
            writer.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert [i for i, _ in seen] == list(range(200))
    assert {name for _, name in seen} == {"markindex-writer"}


def test_run_writer_raises_a_failed_call_and_drops_the_rest() -> None:
    ran: list[int] = []

    def fail() -> None:
        raise apsw.FullError("database or disk is full")

    with pytest.raises(apsw.FullError), RunWriter(threaded=True) as writer:
        writer.submit(ran.append, 1)
        writer.submit(fail)
        for i in range(2, 50):
            writer.submit(ran.append, i)
    assert ran[0] == 1
    assert len(ran) < 49  # what came after the failure was not all written


def test_run_writer_left_on_an_error_finishes_the_running_call_only() -> None:
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def slow() -> None:
        started.set()
        assert release.wait(10)
        done.append("slow")

    with pytest.raises(KeyboardInterrupt), RunWriter(threaded=True, depth=4) as writer:
        writer.submit(slow)
        writer.submit(done.append, "queued")
        assert started.wait(10)
        threading.Timer(0.2, release.set).start()
        raise KeyboardInterrupt
    assert done == ["slow"]


def test_full_build_with_a_writer_thread_equals_one_without(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    for k in range(60):  # more than one batch, so the threaded path is taken
        (root / f"gen{k}.md").write_text(
            f"# Doc {k}\n\n## Part\n\n第{k}条 规定 TiDB tidb_mem_quota_query {k}。\n\n- item {k}\n",
            encoding="utf-8",
        )
    dumps = []
    for threaded in (True, False):
        store, lock = open_for_writing(tmp_path / f"{threaded}.db")
        indexer = Indexer(root, store, workers=2 if threaded else 1)
        report = indexer.run()
        assert not report.skipped and len(report.added) >= 60
        dumps.append(_content(store.conn))
        store.close()
        lock.release()
    assert dumps[0] == dumps[1]


def test_workers_running_other_code_are_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """markindex upgraded in place under a running daemon: the workers it starts now run other
    code than it does. The run still indexes every document (in this process) and says why."""
    root = make_library(tmp_path / "lib")
    para = "Workers and the process reading their results must run the same code.\n\n"
    for k in range(5):  # > PARALLEL_MIN_BYTES in more than 4 documents: the workers are used
        (root / f"big{k}.md").write_text(f"# Big {k}\n\n" + para * 6000, encoding="utf-8")
    monkeypatch.setattr(workers, "CODE_TOKEN", "the code before an upgrade")
    store, lock = open_for_writing(tmp_path / "index.db")
    with caplog.at_level("WARNING", logger="markindex.index"):
        report = Indexer(root, store, workers=2).run()
    store.close()
    lock.release()
    assert not report.skipped and not report.errors
    assert {f"big{k}.md" for k in range(5)} <= set(report.added)
    assert "changed since this process started" in caplog.text


@pytest.mark.parametrize("starts", [0, 2])
def test_when_no_worker_can_be_started_this_process_parses_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, starts: int
) -> None:
    """No process can be started (out of memory, out of process slots, no interpreter), from the
    start or when a worker must be replaced: the documents still to do are parsed in this process
    and the run says why. A document that hung a worker is skipped, never parsed here."""
    root = tmp_path / "lib"
    for i in range(4):  # English only: a worker's first Chinese text loads the segmenter's
        # dictionary (~0.2 s of CPU), within the deadline of a loaded machine's slowest worker
        write(root, f"part{i}/doc{i}.md", f"# Document {i}\n\nA short note, number {i}.\n")
    # ~16 MB, seconds of parsing, when a worker gets it: far past the deadline, which in turn is
    # far past the small documents' parse on a machine so loaded that workers get 10% of a core.
    # Parsed here when no worker starts: ~3 MB, just enough for the run to want workers at all.
    parts = 240_000 if starts else 40_000
    big = "## Part\n\nA long section that takes this worker a while to parse.\n\n" * parts
    (root / "big.md").write_text("# Big\n\n" + big, encoding="utf-8")
    real_popen = subprocess.Popen
    started: list[int] = []

    def popen_limited(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        if len(started) >= starts:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        started.append(1)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen_limited)
    store, lock = open_for_writing(tmp_path / "index.db")
    with caplog.at_level("WARNING", logger="markindex.index"):
        # Parsed here, the big document has the deadline too: a long one when it must be parsed.
        timeout = 1.0 if starts else 120.0
        report = Indexer(root, store, workers=2, parse_timeout=timeout).run()
    docs = {str(p.relative_to(root)) for p in root.rglob("*.md")}
    store.close()
    lock.release()
    hung = {"big.md"} if starts else set()  # parsed by a worker, which times out on it
    assert report.skipped == [(rel, "timed out: not parsed within 1 s") for rel in hung]
    assert set(report.added) == docs - hung and not report.errors
    assert "cannot start a parse worker: Resource temporarily unavailable" in caplog.text


def _content(conn: apsw.Connection) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for sql in (
        "SELECT path, title, hash, line_count FROM documents ORDER BY path",
        "SELECT d.path, n.ordinal, n.title, n.start_line, n.end_line FROM nodes n"
        " JOIN documents d ON d.id = n.doc_id ORDER BY d.path, n.ordinal",
        "SELECT d.path, p.start_line, p.end_line FROM passages p"
        " JOIN documents d ON d.id = p.doc_id ORDER BY d.path, p.start_line",
        "SELECT d.path, count(*) FROM passage_fts f JOIN passages p ON p.id = f.rowid"
        " JOIN documents d ON d.id = p.doc_id WHERE passage_fts MATCH 'tidb' GROUP BY d.path"
        " ORDER BY d.path",
    ):
        rows.extend(tuple(r) for r in conn.execute(sql))
    return rows


def test_parse_workers_yield_the_cpu_to_the_writing_process() -> None:
    pool = WorkerPool(1, 60.0)
    pool.start()
    try:
        worker = pool.workers[0].process
        assert worker.pid is not None
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        deadline = time.monotonic() + 10  # the worker lowers its priority as it starts
        while os.getpriority(os.PRIO_PROCESS, worker.pid) < min(19, mine + WORKER_NICE):
            assert time.monotonic() < deadline, "the parse worker kept its priority"
            time.sleep(0.02)
    finally:
        pool.stop()


@settings(max_examples=300, deadline=None)
@given(st.lists(_MIXED.map(lambda s: s.replace("\n", " ")), max_size=6))
def test_line_tokens_equal_estimate_tokens(lines: list[str]) -> None:
    spans = LineTokens(lines)
    for a in range(len(lines) + 1):
        for b in range(a, len(lines) + 1):
            assert spans.span(a, b) == estimate_tokens("\n".join(lines[a:b]))


def test_line_tokens_of_a_line_longer_than_a_counting_piece() -> None:
    """A long line's CJK characters are counted a piece at a time (its runs, found at once, were
    ~5x a 50 MB line's size): runs cut at a piece's end count the same characters."""
    from markindex_core.text import tokens

    line = ("中文字符" * 7 + "ab, ") * (3 * tokens._COUNT_PIECE_CHARS // 32) + "尾"
    assert len(line) > 2 * tokens._COUNT_PIECE_CHARS
    cjk = sum(map(len, tokens._CJK_RUN.findall(line)))
    assert LineTokens([line, "x"]).span(0, 1) == estimate_tokens(line)
    assert estimate_tokens(line) == cjk + (len(line) - cjk + 3) // 4


class _Sink:
    """A socket that keeps what is sent to it."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def sendall(self, data: bytes) -> None:
        self.sent += data


class _Discard:
    """A socket that drops what is sent to it."""

    def sendall(self, data: bytes) -> None:
        pass


@pytest.mark.parametrize("streamed", [False, True])
def test_a_big_line_travels_beside_the_pickle_and_arrives_equal(
    streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value past OUT_OF_BAND_BYTES (a long line's block and terms) is sent as a buffer of its
    own; the indexing process reads it into a value equal to what was parsed.
    So too when the pickle is streamed into the socket (a document past STREAM_PICKLE_BYTES)."""
    if streamed:
        monkeypatch.setattr(workers, "STREAM_PICKLE_BYTES", 0)
    line = " ".join(f"word{i}" for i in range(40_000))
    doc = build_document("long.md", f"# Long\n\n{line}\n".encode(), 1, TreeParams(setext=True))
    assert isinstance(doc, ParsedDocument)
    sink = _Sink()
    workers._send(sink, pack(doc))  # type: ignore[arg-type]
    workers._send(sink, SkippedFile("x.md", "binary"))  # type: ignore[arg-type]
    parent, child = socket.socketpair()
    try:
        worker = workers._Worker(None, parent, ready=True)  # type: ignore[arg-type]
        received = []
        for at in range(0, len(sink.sent), 9973):  # arriving in pieces, read as they come
            worker.inbox.add(bytes(sink.sent[at : at + 9973]))
            received += worker.read_available()
    finally:
        parent.close()
        child.close()
    assert received == [doc.rows(), SkippedFile("x.md", "binary")]
    rows = received[0]
    assert isinstance(rows, DocumentRows)
    assert {type(b) for b in rows.line_blocks} == {type(t) for t in rows.passage_terms} == {bytes}


def test_parsing_and_sending_a_big_single_line_takes_a_bounded_multiple_of_its_size() -> None:
    """An 8 MB one-line document: its parse and its message to the indexing process allocate
    less than 5x its size at their peak (~3.6x; 6.2x when the terms were joined twice and the
    message was a pickle of every value, sent as one more copy)."""
    words = [f"{w}{n}" for n in range(500) for w in ("alpha", "ledger", "quota", "Zeta")]
    data = " ".join(words[i % len(words)] for i in range(1_100_000)).encode()
    segment.warm()
    tracemalloc.start()
    try:
        doc = build_document("big.md", data, 1, TreeParams(setext=True))
        workers._send(_Discard(), pack(doc))  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(data), peak / len(data)


def test_a_big_chinese_heading_line_parses_and_sends_in_a_bounded_multiple_of_its_size() -> None:
    """A 0.4 MB one-line document of Chinese that is a heading holding links: its parse and its
    message allocate less than 16x its size at their peak (~12x at this size, where a batch of
    segmentation weighs; ~23x when a piece's words were all made at once)."""
    phrases = [
        "当事人应当全面履行义务，",
        "为了保护人民。",
        "依照本法规定；",
        "中华人民共和国刑法、",
    ]
    body = "".join(phrases[i % 7 % 4] for i in range(24_000))
    line = f"# [开头](a.md) {body[:100_000]} a &amp; b <br> `代码` [链接](b.md#x) {body[100_000:]}"
    data = line.encode()
    segment.warm()
    tracemalloc.start()
    try:
        doc = build_document("big.md", data, 1, TreeParams(setext=True))
        workers._send(_Discard(), pack(doc))  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(doc, ParsedDocument)
    assert doc.links == [(1, "a.md", ""), (1, "b.md", "x")]
    assert peak < 16 * len(data), peak / len(data)


def test_a_large_value_is_read_from_the_inbox_chunk_by_chunk() -> None:
    """A value larger than the chunks it arrived in is copied out as they are consumed, each
    freed once copied: the inbox and the value never hold it twice (~2x when joined at the end)."""
    value = bytes(range(256)) * 40_000  # 10 MB
    inbox = workers._Inbox()
    tracemalloc.start()
    try:
        for at in range(0, len(value), 1 << 20):
            inbox.add(value[at : at + (1 << 20)])  # chunks as received: new bytes
        inbox.add(b"tail")
        read = inbox.read(len(value))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == value and type(read) is bytes
    assert inbox.read(10) == b"tail" and inbox.size == 0
    assert peak < 1.5 * len(value), peak / len(value)


def test_a_workers_first_message_is_framed_as_every_version_frames_it() -> None:
    """Its length, then a plain pickle: a process running older or newer markindex code reads a
    worker's `_Ready` and says that the code changed, rather than failing to decode it."""
    sink = _Sink()
    workers._send_plain(sink, workers._Ready("token"))  # type: ignore[arg-type]
    (size,) = workers._HEADER.unpack_from(sink.sent)
    assert pickle.loads(sink.sent[workers._HEADER.size :]) == workers._Ready("token")
    assert size == len(sink.sent) - workers._HEADER.size

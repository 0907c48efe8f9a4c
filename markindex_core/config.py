"""Every default of markindex, in one place."""

from __future__ import annotations

from dataclasses import dataclass

# Bump when the meaning of stored data changes: the next run rebuilds every document.
FORMAT_VERSION = 8  # 8: words over BLOB_WORD_CHARS not indexed (7: FTS5 ascii tokenizer over
#                    the pre-tokenized terms; 6: links as markdown-it)
SCHEMA_VERSION = 3  # 3: the summary cache table (added in place to a version 2 index)

INDEX_DIR_NAME = ".markindex"
DB_FILE_NAME = "index.db"
LOCK_FILE_SUFFIX = ".lock"
REBUILD_FILE_SUFFIX = ".rebuild"  # a full rebuild is written beside the live index, then swapped in
SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")  # files SQLite keeps beside a database
DISK_FULL_MARGIN_BYTES = 1_000_000  # an I/O error with less free space than this means "disk full"
IGNORE_FILE_NAME = ".markindexignore"
MAX_IGNORE_FILE_BYTES = 1_000_000  # an ignore file is read up to this size
MAX_QUESTIONS_BYTES = 64_000_000  # an eval questions file larger than this is refused
MARKDOWN_SUFFIXES = (".md", ".markdown")

# Tree optimization (PageIndex merge cost model, in tokens).
ROUTING_COST_TOKENS = 150
MAX_NODE_TOKENS = 8000
MAX_TITLE_CHARS = 300
SETEXT_WARN_CHARS = 120

# Files.
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are skipped with a reason
# A file read as GB18030 whose ideographs are rarer than this share of GB2312's common ones is
# other text decoded wrongly (cp1252 "It’s" reads "It抯"): simplified Chinese scores ~0.99,
# traditional in GBK ~0.7, such mojibake 0.
GB18030_MIN_COMMON_HANZI = 0.3
# EUC-KR's hangul are GB2312's first 25 hanzi rows (B0-C8): Korean read as GB18030 is hanzi from
# them alone, where Chinese puts ~40% beyond (是 一 在 这 中). Above this share, of at least
# GB18030_HANGUL_MIN_HANZI common ideographs, the text is Korean.
GB18030_MAX_HANGUL_ROWS = 0.9
GB18030_HANGUL_MIN_HANZI = 30
# EUC-JP's kana are GB2312's kana rows: Japanese read as GB18030 keeps its kana (~half of its
# characters), where Chinese text has at most a few (~2% in the corpus).
GB18030_MAX_KANA = 0.1
READER_CACHE_KB = 32_768  # SQLite page cache of a reading connection …
WRITER_CACHE_KB = 8_192  # … and of the writer's
LINE_BLOCK_SIZE = 64  # original lines are stored in blocks of this many lines
UNCACHED_STATEMENT_BYTES = 4_000_000  # a document this large is written by statements of its own

# Indexing.
BATCH_DOCS = 48  # whole documents per transaction on a full build …
BATCH_BYTES = 2_000_000  # … or this many bytes of Markdown, whichever comes first
# Below this many bytes to parse, parse in-process: starting workers costs more than it saves.
# At or above it, even one file goes to a worker: a stopping daemon need not wait for its parse,
# and a parse stuck in native code can be killed (list-heavy Markdown parses at ~4 s/MB). Both
# have the parse deadline (in-process: see index/deadline.py).
PARALLEL_MIN_BYTES = 2_000_000
POOL_WAIT_SLICE_S = 0.5  # a run that can be interrupted looks whether to stop this often
# An index run holding the lock whose last progress (a document parsed, see `store.runs.stamp`)
# is older than this is said to make none: a parse is killed after PARSE_TIMEOUT_S, so a working
# run stamps far more often, while a run that hangs would keep the index behind without a word.
RUN_STALL_SECONDS = 600.0
PARSE_TIMEOUT_S = 120.0  # a parse worker that has not finished a document by then is killed …
#                        … and the document skipped as timed out (64 MB of Markdown parses in ~30 s)
# A timeout raised in an in-process parse is lost when it lands in a garbage-collector or weakref
# callback (CPython prints "Exception ignored" and goes on): it is raised again this often.
PARSE_RESHOOT_S = 0.25
PARSE_STUCK_REPORT_S = 30.0  # an in-process parse still running this long after its deadline is
#                              logged as an error (stuck in native code), and again as often
WORKER_DEPTH = (
    2  # documents handed to a parse worker at once: it parses on while results are written
)
WRITER_QUEUE_DEPTH = 1  # batches waiting for the writer thread while it writes one (memory)
WORKER_START_S = 60.0  # a new parse worker's time to start (imports, dictionaries) before its
#                       first document's deadline starts (~0.5 s on an idle machine)
WORKER_NICE = 10  # parse workers run at this lower priority than the process that writes
WORKER_STOP_GRACE_S = 2.0  # idle parse workers get this long to exit before they are killed
# A word (letters, digits and connectors) longer than this is data, not text: not indexed nor
# searched (see `segment.is_blob`). The evaluation corpus holds 12 runs over 200 characters, all
# base64 or tokens; 851 of 100-199 characters, mostly URLs and anchors, which stay words.
BLOB_WORD_CHARS = 256
SEGMENT_CACHE_WORDS = 200_000  # words whose joined terms a process keeps (then starts over)
# Longer texts (a 60 MB single-line file is one passage) are segmented in pieces of about this many
# characters, cut at whitespace: every word of a piece at once made ~1 GB of temporary strings.
SEGMENT_PIECE_CHARS = 1_000_000
# A piece's Chinese runs are cut this many characters at a time (the same words: jieba cuts each
# run on its own); the words of a whole piece at once were ~65 MB of strings.
SEGMENT_CUT_CHARS = 65_536
FTS_OPTIMIZE_AFTER_WRITES = 8  # merge FTS segments after this many small writes (or docs/50)
BULK_WRITE_DOCS = 200  # a run writing this many documents merges FTS segments once, at its end

# Search field weights: title, keyItems, summary, body.
WEIGHT_TITLE = 10.0
WEIGHT_KEY_ITEMS = 5.0
WEIGHT_SUMMARY = 2.0
WEIGHT_BODY = 1.0
WEIGHT_CONTEXT = 2.0  # a passage's title path, next to its body (passage-level BM25)
SEARCH_DEFAULT_LIMIT = 10
SEARCH_MAX_LIMIT = 50

# Agent tools.
READ_STRUCTURE_FIRST_TOKENS = 15_000
RESPONSE_CHAR_BUDGET = 94_000  # the spec says under 95 000: room for a `warning` (below)
WARNING_CHARS = 600  # a live index's warning in a tool envelope is cut to this
DRIFT_PATHS_SHOWN = 3  # documents named when an answer cites files changed since indexed …
DRIFT_GRACE_S = 5.0  # … longer ago than this (a daemon indexes a save within a second or two)
DRIFT_HASH_BYTES = (
    64 * 1024 * 1024
)  # status reads this much at most to tell a new mtime from an edit
DRIFT_HASH_CACHE = 256  # hashes of cited files kept (by inode, size, mtime, ctime) between answers
MAX_STRING_ARG = 1024
MAX_NODE_IDS = 20


# ----- Search ranking (search.py) ----------------------------------------------------------------
NODE_CANDIDATES = 500
PASSAGE_CANDIDATES = 600
POSTINGS_BUDGET = 20_000  # ranking uses the rarest query words whose passages add up to this …
MIN_RANKED_WORDS = 3  # … but always at least this many words
RARE_WORD_POSTINGS = 200  # … and every word (whole) in at most this many passages
STRICT_ENOUGH = 3  # fewer strict hits than this triggers the relaxed pass
MAX_QUERY_GROUPS = 32
SNIPPET_CHARS = 200
SNIPPET_WORD_SLACK = 20  # a snippet cut inside a word moves this far at most, to a space
NODE_SHARE = 0.3  # weight of the node's own BM25 (title 10, keyItems 5, …) next to the passage's
PASSAGES_PER_NODE = 3  # a long section may answer with up to this many separate passages
EXPAND_RATIO = 0.85  # a neighbouring passage scoring this close joins the evidence …
EXPAND_MAX_LINES = 10  # … while the evidence stays this short
MERGE_GAP_LINES = 1  # a pick this close to an earlier pick of its section joins that pick …
MERGE_MAX_LINES = 15  # … while the joined citation stays this short
MERGE_WINDOW = 5  # … and it was met before this many picks were made
PROSE_MAX_CJK_SHARE = 0.3  # a passage with more Chinese characters than this is cited as cut
RERANK_DEPTH = 40  # only the best candidates are re-scored by their document's evidence …
CONTENTS_DEPTH = 20  # … and the best of them read to find tables of contents
DOC_EVIDENCE_PASSAGES = 3  # a document's evidence: its best this many candidates' scores summed …
DOC_WEIGHT = 0.2  # … its share of the best document's evidence, at this weight, is added
LINK_PENALTY = 0.3  # a candidate that is a table of contents loses this much: …
CONTENTS_LINK_SHARE = 0.6  # … a share of its characters this large links to its own headings
TITLE_MATCH_DEPTH = 20  # the best candidates whose own section title is compared with the query …
TITLE_MATCH_WEIGHT = 0.12  # … each raised by this × (title precision × √recall), IDF-weighted
QUANTITY_DEPTH = 20  # for an English question asking for a quantity, the best candidates …
QUANTITY_WEIGHT = 0.15  # … that state a number are raised by this much
TERM_RARITY_CACHE = 50_000  # words whose passage count a searcher keeps (then starts over)

# ----- Passages: the evidence units (passages.py) ------------------------------------------------
PASSAGE_MIN_TOKENS = 12  # shorter blocks (a bold label, a heading) join the next block
PASSAGE_MAX_TOKENS = 320  # longer groups are cut by lines
GROUP_MAX_TOKENS = 480  # an article or lead-in group may grow to this before it is closed

# ----- Documents ---------------------------------------------------------------------------------
# Titles and descriptions (index/describe.py).
DESCRIPTION_TOKENS = 120  # a document's description: whole sentences within this many tokens …
DESCRIPTION_MAX_CHARS = 400  # … and characters; a folder listing shows DESCRIPTION_PREVIEW_CHARS
DESCRIPTION_TEXT_SHARE = 0.6  # … the opening text's share of it; main section names fill the rest
DESCRIPTION_PURPOSE_LINES = 400  # a law's purpose clause (第一条) is looked for this far in
DESCRIPTION_EARLY_HEADINGS = 6  # a Summary section counts among the first this many headings …
DESCRIPTION_EARLY_SHARE = 0.3  # … or within this share of the lines (a late one is a conclusion)
DESCRIPTION_LEAD_MAX_LINES = 40  # a generic first heading this near the top: no lead text
DESCRIPTION_META_VALUE_CHARS = 100  # `Key: value` items with longer values are prose, not metadata
DESCRIPTION_SCAN_LINES = 2000  # lines read from where the describing text starts, at most


@dataclass(frozen=True)
class TreeParams:
    """Parameters that shape the section tree; part of the index fingerprint."""

    routing_cost: int = ROUTING_COST_TOKENS
    max_node_tokens: int = MAX_NODE_TOKENS
    setext: bool = True

    def fingerprint(self) -> str:
        return f"R={self.routing_cost};max={self.max_node_tokens};setext={int(self.setext)}"


# ----- Agent tools and MCP server (tools.py, mcp_server.py) ------------------------------------
# JSON characters of listed items / text per page (the whole envelope stays under 95 000).
TOOL_PAGE_CHARS = 80_000
TOOL_MAX_PART = 100_000  # largest `part` the schemas accept
BROWSE_PAGE_ENTRIES = 200  # folders + documents per browse page
DESCRIPTION_PREVIEW_CHARS = 400  # description shown per document in a folder listing
STRUCTURE_DEFAULT_DEPTH = 2
STRUCTURE_MAX_DEPTH = 32
STRUCTURE_KEY_ITEMS_SHOWN = 30  # merged headings listed per outline entry
DOC_LINKS_SHOWN = 100  # outgoing links and backlinks listed by get_document (totals always given)
FRONT_MATTER_MAX_CHARS = 20_000  # larger front matter is replaced by its keys (and says so)
TOOL_TITLE_CHARS = 300  # a title, warning or link target in a tool answer is cut to this
TOOL_TITLE_PATH_CHARS = 200  # each entry of a title path, and each merged heading listed
TOOL_ANCHOR_CHARS = 100  # a link's #anchor
TOOL_SNIPPET_CHARS = 400  # a search result's snippet
TOOL_SUMMARY_CHARS = 2000  # a node summary
TOOL_WARNINGS_SHOWN = 20  # parse warnings listed by get_document
TOOL_SUGGESTIONS_SHOWN = 3  # ready-made next calls offered (near matches, leaves to read)
# An unknown document path is compared with at most this many paths: all of a library up to this
# size; in a larger one, those of the same folder and those whose file name holds the name asked
# for (difflib costs ~0.1 ms a path: 5 440 paths took half a second).
SUGGEST_CANDIDATES = 2000
TOOL_TERMS_SHOWN = 32  # query terms echoed by search_documents
TOOL_NOTICE_CHARS = 1000  # a search notice (it may list indexed words, which can be 32 768 long)
TOOL_ECHO_CHARS = 64  # unknown names (tools, fields) are echoed back at most this long
TOOL_UNKNOWN_FIELDS_SHOWN = 10  # unknown fields named in an INVALID_INPUT error (and counted)
TOOL_ERROR_DETAIL_CHARS = 300  # exception text quoted in an INTERNAL_ERROR envelope
MCP_TOOL_THREADS = 8  # worker threads (each with its own read connection) serving tool calls
MCP_TOOL_QUEUE = 64  # tool calls waiting for a worker thread; one more is answered SERVER_BUSY
MCP_BACKGROUND_GRACE_SECONDS = 2.0  # background jobs wait for the first answer at most this long
MCP_HTTP_HOST = "127.0.0.1"
# `mcp` refuses a ROOT with no index and no Markdown file; the check reads at most this many entries.
EMPTY_ROOT_SCAN_ENTRIES = 50_000
MCP_HTTP_PORT = 8765
MCP_HTTP_HEAD_SECONDS = 10.0  # a connection whose request head is not complete by then is closed
MCP_HTTP_BODY_SECONDS = 10.0  # an HTTP request body not complete by then is answered 408
MCP_HTTP_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")  # accepted as Host when bound to one
MCP_HTTP_WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # every interface: only loopback names by default
MCP_LOG_EXCERPT_CHARS = 200  # characters of a refused JSON-RPC line quoted in the log
MCP_ID_SCAN_TOKENS = 10_000  # strings and brackets read looking for a refused request's id

# ----- Live index (daemon, watch) -----------------------------------------------------------
DAEMON_QUIET_MS = 40  # a batch is reconciled once file events pause this long…
DAEMON_SETTLED_QUIET_MS = 8  # …or this long when the latest event finished a write (close, rename)
DAEMON_MAX_WAIT_MS = 1000  # …or this long after its first event, even if events keep coming
DAEMON_LOCK_POLL_S = 0.5  # a read-only daemon retries the writer lock this often
DAEMON_CHECK_IDLE_S = 10.0  # after this long without writes, read the whole index for damage …
DAEMON_CHECK_EVERY_S = 86_400.0  # … and again a day later (2 s per 100 MB, on a thread of its own)
DAEMON_TIDY_IDLE_S = 5.0  # after this long without writes, merge FTS segments (see Indexer.tidy)
DAEMON_TIDY_DEFER_WRITES = 64  # …which saves defer, up to this many writes, off their latency path
FTS_MERGE_STEP_PAGES = 500  # the daemon merges FTS segments this many leaf pages at a time (~0.1 s)
BUSY_TIMEOUT_MS = 5_000  # a connection waits this long for a lock before SQLITE_BUSY
DAEMON_CHECKPOINT_BUSY_MS = 100  # the idle WAL truncation waits at most this long for readers
DAEMON_HEARTBEAT_S = 2.0  # status file refresh; a daemon silent for 3 beats counts as gone
DAEMON_WAIT_WARN_S = 60.0  # a daemon waiting this long for a writer that is no daemon says so
DAEMON_SLOW_RECONCILE_S = 5.0  # a reconcile running longer is said in tool envelopes (catching up)
DAEMON_WARNING_TTL_S = 1.0  # `mcp` reads another process's daemon state at most this often
DAEMON_GUARD_S = 0.5  # how often the daemon checks that root, index file and lock are still its own
DAEMON_LINKED_POLL_FILES = 1_000  # files with several names stat-ed per guard tick, in turn
STATUS_UNREADABLE_SHOWN = 20  # unreadable folders a daemon's status lists (all are counted)
DAEMON_ROOT_WAIT_S = 10.0  # a vanished library folder may come back this long, then the daemon ends
DAEMON_SHUTDOWN_S = 20.0  # at stop, at most this long for an in-flight reconcile to end and commit
STATUS_FILE_MAX_BYTES = 1 << 20  # a status file or daemon record bigger than this is not read
STATUS_FILE_BLOCK = 4096  # the status file is padded to whole blocks (rewritable on a full disk)
DAEMON_POLL_INTERVAL_S = 2.0  # polling observer interval (--poll, or inotify limits reached)
DAEMON_OBSERVER_RETRY_S = 60.0  # an observer that stops again this soon is replaced by polling
DAEMON_FULL_SCAN_PATHS = 2000  # more dirty paths than this: one full reconcile is cheaper
DAEMON_RETRY_S = (1.0, 30.0)  # back-off after a failed reconcile: first, maximum
DAEMON_ERRORS_KEPT = 20  # recent errors kept in the status file
STATUS_FILE_SUFFIX = ".daemon.json"  # beside the index: ROOT/.markindex/index.db.daemon.json
STATUS_FALLBACK_SUFFIX = ".daemon-fallback.json"  # written when that one can't be replaced
DAEMON_RECORD_KEEP_S = 7 * 86_400  # a dead daemon's record of another index is kept this long
DAEMON_QUIET_MS_MAX = 60_000  # largest --quiet-ms accepted
# When idle, the daemon compares every file's size and mtime with the index this often: a safety
# net for a change no file event reported (a write through a shared mmap, say). Its cost is a stat
# of every file: 43 ms on the evaluation corpus, 174 ms on the 10x library. 0 turns it off.
DAEMON_SWEEP_S = 600
DAEMON_SWEEP_S_MAX = 7 * 86_400  # largest --sweep-s accepted

# ----- Summaries and descriptions written by a model (llm/summaries.py, the `llm` extra) ----------
SUMMARY_PROMPT_VERSION = "1"  # part of every cache key: a new prompt pays for new summaries
SUMMARY_MIN_TOKENS = 400  # a node whose whole subtree has fewer tokens is read, not summarized
SUMMARY_INPUT_TOKENS = 3000  # a node's own text sent for its summary, at most (cut at a line)
SUMMARY_CHILD_TITLES = 30  # sub-section titles listed in a node's request, at most
DESCRIPTION_INPUT_TOKENS = 2000  # a document's opening text sent for its description, at most
DESCRIPTION_OUTLINE_TITLES = 40  # top-level section titles listed in a description request
SUMMARY_MAX_OUTPUT_TOKENS = 200  # the answer's limit sent with each request
SUMMARY_OUTPUT_TOKENS_ESTIMATE = 90  # expected answer, for --estimate (60 words or 120 字)
SUMMARY_MAX_CHARS = 1000  # a longer answer is cut (at a sentence end where one is near)
SUMMARY_CONCURRENCY = 8  # requests in flight at once
SUMMARY_COMMIT_EVERY = 16  # finished summaries written per transaction (a killed run keeps them)
SUMMARY_COMMIT_SECONDS = 5.0  # … or this often, whichever comes first
SUMMARY_ERRORS_SHOWN = 5  # distinct failure messages kept in the index report
DAEMON_SUMMARY_SLICE_S = 10.0  # the daemon asks for summaries this long at a time, then writes on

# ----- Command line (cli/) -----------------------------------------------------------------------
CLI_PROGRESS_PATH_CHARS = 60  # tail of the current file's path shown beside the progress bar
STATUS_SKIPPED_SHOWN = 20  # skipped files listed by `markindex status` (all of them with --json)
STATUS_ERRORS_SHOWN = 5  # latest daemon errors listed by `markindex status`

# ----- Models (llm/: the optional `markindex[llm]` extra) ----------------------------------------
LLM_WINDOW_S = 60.0  # rpm and tpm count over any sliding window this long
LLM_CHARS_PER_TOKEN = 4  # estimated tokens: a CJK character is 1, other characters 1 per this many
LLM_RETRY_ATTEMPTS = 4  # retries after a 429/5xx or a dropped connection (then the error stands)
LLM_RETRY_MAX_WAIT_S = 60.0  # longest retry-after honoured; a longer one fails the call at once
LLM_RETRY_BACKOFF_S = (
    1.0,
    16.0,
)  # wait before a retry without retry-after: first, doubling to this
LLM_HTTP_TIMEOUT_S = 120.0  # one model request (a slow local model takes a while)
RETRIEVE_MAX_STEPS = 12  # model requests per retrieve() run
RETRIEVE_TOOL_RETRIES = 3  # rejected calls (unknown tool, unparseable arguments) per tool
RETRIEVE_OUTPUT_RETRIES = 2  # rejected final citations (unknown document, lines out of range)
RETRIEVE_MAX_EVIDENCE = 20  # citations kept from one answer
RETRIEVE_MAX_EVIDENCE_LINES = 200  # lines one citation may cover; longer ones are cut to this
EVAL_AGENT_CONCURRENCY = 4  # questions the agent-mode eval runs at once

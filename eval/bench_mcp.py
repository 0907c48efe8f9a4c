"""MCP server benchmark: start-up to `initialize` answered, and tool round trips over stdio.

Usage: python eval/bench_mcp.py [--root DIR] [--db FILE] [--questions FILE ...] [--runs N]

Start-up is compared with the floor of a bare `python -c 'import mcp.server'`; the difference is
our own start-up work. Round trips send `search_documents` for every dev question over a raw
JSON-RPC stdio pipe (no client library overhead) and report p50/p95/p99, then the server's peak RSS.
Without --db the library is indexed once into a temporary file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = sorted((REPO.parent / "shared" / "eval").glob("questions-dev-*.jsonl"))
PROTOCOL = "2025-11-25"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write((json.dumps(message) + "\n").encode("utf-8"))
    stdin.flush()


def receive(stdout: IO[bytes], want_id: int) -> dict[str, Any]:
    while True:
        line = stdout.readline()
        if not line:
            raise RuntimeError("server closed stdout")
        msg: dict[str, Any] = json.loads(line)
        if msg.get("id") == want_id:
            return msg


def spawn(root: Path, db: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "markindex_core", "mcp", str(root), "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def initialize(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin and proc.stdout
    send(
        proc.stdin,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        },
    )
    reply = receive(proc.stdout, 1)
    if "result" not in reply:
        raise RuntimeError(f"initialize failed: {reply}")
    send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def stop(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def floor_seconds() -> float:
    """Spawn -> `import mcp.server` done (measured at a line on stdout, like initialize; the
    interpreter's exit is not counted on either side)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, mcp.server; print('ready', flush=True)"],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout
    proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.wait()
    return elapsed


def startup_seconds(root: Path, db: Path) -> float:
    t0 = time.perf_counter()
    proc = spawn(root, db)
    initialize(proc)
    elapsed = time.perf_counter() - t0
    stop(proc)
    return elapsed


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def round_trips(root: Path, db: Path, questions: list[str]) -> tuple[list[float], float, int]:
    proc = spawn(root, db)
    assert proc.stdin and proc.stdout
    initialize(proc)
    latencies: list[float] = []
    largest = 0
    for i, q in enumerate(questions, start=2):
        t0 = time.perf_counter()
        send(
            proc.stdin,
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "search_documents", "arguments": {"query": q}},
            },
        )
        reply = receive(proc.stdout, i)
        latencies.append((time.perf_counter() - t0) * 1000)
        text = reply["result"]["content"][0]["text"]
        largest = max(largest, len(text))
        if reply["result"].get("isError"):
            print(f"  error for {q[:60]!r}: {text[:200]}", file=sys.stderr)
    rss = peak_rss_mb(proc.pid)
    stop(proc)
    return latencies, rss, largest


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument(
        "--db", type=Path, help="existing index of ROOT (default: index into a temp file)"
    )
    ap.add_argument("--questions", type=Path, nargs="*", default=DEFAULT_QUESTIONS)
    ap.add_argument("--runs", type=int, default=7, help="start-up runs (median reported)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "index.db"
            print(f"indexing {args.root} …", file=sys.stderr)
            subprocess.run(
                [sys.executable, "-m", "markindex_core", "index", str(args.root), "--db", str(db)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        questions = [
            json.loads(line)["question"]
            for path in args.questions
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        startup_seconds(args.root, db)  # warm the page cache once
        floors: list[float] = []
        starts: list[float] = []
        for _ in range(args.runs):  # interleaved, so background load hits both alike
            floors.append(floor_seconds())
            starts.append(startup_seconds(args.root, db))
        latencies, rss, largest = round_trips(args.root, db, questions)

    floor, start = statistics.median(floors), statistics.median(starts)
    print(
        f"python -c 'import mcp.server'      median {floor * 1000:7.0f} ms  (floor, {args.runs} runs)"
    )
    print(f"spawn -> initialize answered      median {start * 1000:7.0f} ms")
    print(
        f"our start-up work on top          median {(start - floor) * 1000:7.0f} ms  (target <= 250)"
    )
    if latencies:
        print(
            f"search_documents round trip       p50 {pct(latencies, 50):6.1f} ms   "
            f"p95 {pct(latencies, 95):6.1f} ms   p99 {pct(latencies, 99):6.1f} ms   "
            f"max {max(latencies):6.1f} ms  ({len(latencies)} questions; target p50 <= 20, p95 <= 50)"
        )
        print(f"largest response                  {largest} characters (budget 95 000)")
    print(f"server peak RSS                   {rss:7.1f} MB")
    print(f"cpu count                         {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the live index: save→searchable latency, a 500-file checkout burst, RSS, idle CPU.

Runs a real `markindex daemon --no-mcp` subprocess on a copy of the evaluation corpus (the corpus
itself is never written) with the index in a temp folder, and measures from this process:

* latency: write one ~50 KB file with a fresh word, poll a read connection until search finds it;
* burst: write 500 changed files at once (`git checkout` style: unlink + write), time until every
  one of them is in the index with its new content hash;
* memory: the daemon's RSS after the initial build, peak RSS (VmHWM), and RSS at the end;
* idle CPU: the daemon's CPU time over a quiet period;
* latency under load: the daemon serving MCP over stdio, an MCP client searching through it for
  the fresh word (one query every 10 ms until it hits: words not in the index yet, each miss a
  full substring pass), write one ~50 KB file, time until the client's search finds it.

Usage: python eval/bench_daemon.py [--library DIR] [--runs 40] [--burst 500] [--keep]
       python eval/bench_daemon.py --only-load [--load-runs 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from markindex_core.index.reading import content_hash  # noqa: E402
from markindex_core.library import Library  # noqa: E402
from markindex_core.serve.status import read_status_file  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
EN = (
    "the index keeps every section of a long document searchable while an editor saves the file "
    "watcher reconcile batch quiet window writer lock snapshot reader passage citation heading"
).split()
ZH = "索引 文档 章节 检索 编辑 保存 文件 监视 批次 写入 读取 快照 引用 标题 段落".split()


def text_of(size: int, rng: random.Random, marker: str) -> str:
    """Markdown of about `size` bytes: headings every ~40 lines, mixed English and Chinese."""
    lines = [f"# Bench document {marker}", ""]
    n = 0
    while sum(len(x.encode()) + 1 for x in lines) < size:
        n += 1
        if n % 40 == 0:
            lines += ["", f"## Part {n // 40}", ""]
        words = [rng.choice(EN if rng.random() < 0.7 else ZH) for _ in range(14)]
        if n == 20:
            words.append(marker)
        lines.append(" ".join(words))
    return "\n".join(lines) + "\n"


def rss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_percent(pid: int, seconds: float) -> float:
    """CPU used by `pid` over the next `seconds`, after a one-second settle."""
    time.sleep(1.0)
    c0 = cpu_s(pid)
    time.sleep(seconds)
    return (cpu_s(pid) - c0) / seconds * 100


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def wait_status(
    db: Path, pred: Callable[[dict[str, Any]], object], timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = read_status_file(db) or {}
        if pred(st):
            return st
        time.sleep(0.02)
    raise SystemExit(f"daemon status not reached in {timeout} s: {read_status_file(db)}")


async def _under_load(cmd: list[str], root: Path, db: Path, runs: int) -> list[float]:
    """write → found by an MCP client that searches for the new word every 10 ms."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=cmd[0], args=cmd[1:], cwd=str(REPO))
    rng = random.Random(7)
    lat: list[float] = []
    async with Client(params, read_timeout_seconds=120) as client:
        await asyncio.to_thread(wait_status, db, lambda s: s.get("reconciles"), 900)
        await client.call_tool("search_documents", {"query": "warm up"})
        for i in range(runs):
            marker = f"zqload{i}x{rng.randrange(10**6)}"
            body = text_of(50_000, rng, marker)
            path = root / "bench" / (f"load{i}.md" if i % 2 else "load-edited.md")
            await asyncio.sleep(0.15)
            start = time.perf_counter()
            path.write_text(body, encoding="utf-8")
            while True:
                res = await client.call_tool("search_documents", {"query": marker})
                data = json.loads(res.content[0].text).get("data") or {}  # type: ignore[union-attr]
                if data.get("results"):
                    break
                if time.perf_counter() - start > 20:
                    raise SystemExit(f"{marker} never became searchable under load")
                await asyncio.sleep(0.01)
            lat.append((time.perf_counter() - start) * 1000)
    return lat


def load_section(cmd: list[str], root: Path, db: Path, runs: int) -> None:
    mcp_cmd = [c for c in cmd if c != "--no-mcp"]
    lat = asyncio.run(_under_load(mcp_cmd, root, db, runs))
    print(
        f"save→searchable under MCP search load (query every 10 ms, {runs} runs): "
        f"p50 {pct(lat, 0.5):.0f} ms, p95 {pct(lat, 0.95):.0f} ms, max {max(lat):.0f} ms"
    )


def save_latency(root: Path, lib: Library, runs: int, rng: random.Random) -> None:
    """Save a 50 KB file, then search until it is found: the daemon's write → searchable."""
    searcher, store = lib.searcher(), lib.store
    # ----- save → searchable ----------------------------------------------------------------
    lat: list[float] = []
    for i in range(runs):
        marker = f"zqmark{i}x{rng.randrange(10**6)}"
        body = text_of(50_000, rng, marker)
        path = root / "bench" / (f"new{i}.md" if i % 2 else "edited.md")
        time.sleep(0.15)  # start each sample from a quiet daemon
        start = time.perf_counter()
        path.write_text(body, encoding="utf-8")
        # Search again whenever the index changed (a miss costs a full substring pass, so
        # searching blindly in a loop would measure the search, not the daemon).
        seen = -1
        while True:
            version = store.data_version()
            if version != seen:
                seen = version
                if searcher.search(marker, limit=1).hits:
                    break
            if time.perf_counter() - start > 10:
                raise SystemExit(f"{marker} never became searchable")
            time.sleep(0.001)
        lat.append((time.perf_counter() - start) * 1000)
    print(
        f"save→searchable (50 KB file, {runs} runs): p50 {pct(lat, 0.5):.0f} ms, "
        f"p95 {pct(lat, 0.95):.0f} ms, max {max(lat):.0f} ms"
    )


def checkout_burst(root: Path, lib: Library, n: int, kb: int, rng: random.Random) -> None:
    """Write n files at once (a checkout), then wait until every one is indexed."""
    store = lib.store
    # ----- checkout burst -------------------------------------------------------------------
    for label in ("create", "switch"):
        data_by_rel = {
            f"checkout/part{i % 10}/f{i}.md": text_of(kb * 1000, rng, f"{label}{i}").encode()
            for i in range(n)
        }
        wanted = {rel: content_hash(data) for rel, data in data_by_rel.items()}
        start = time.perf_counter()
        for rel, data in data_by_rel.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if p.exists():
                p.unlink()
            p.write_bytes(data)
        written = time.perf_counter() - start

        def done(wanted: dict[str, str] = wanted) -> bool:
            with store.conn:
                for rel, h in wanted.items():
                    doc = store.document(rel)
                    if doc is None or doc["hash"] != h:
                        return False
            return True

        while not done():
            if time.perf_counter() - start > 120:
                raise SystemExit("burst never absorbed")
            time.sleep(0.02)
        print(
            f"burst {label}: {n} files × {kb} KB written in {written:.2f} s, "
            f"all indexed {time.perf_counter() - start:.2f} s after the first write"
        )


def restart_with_mcp(cmd: list[str], db: Path, log: IO[bytes], idle_s: float) -> None:
    """Start the daemon again on the built index, serving MCP over stdio."""
    # ----- a restart on the built index, serving MCP over stdio -----------------------------
    mcp_cmd = [c for c in cmd if c != "--no-mcp"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        mcp_cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
    )
    wait_status(db, lambda s: s.get("pid") == proc.pid and s.get("reconciles"), 300)
    print(f"restart with MCP: up to date {time.perf_counter() - t0:.2f} s after launch")
    idle = idle_cpu_percent(proc.pid, idle_s)
    mem = rss_kb(proc.pid)
    print(
        f"daemon + MCP RSS: {mem['VmRSS'] / 1024:.0f} MB (peak {mem['VmHWM'] / 1024:.0f} MB), idle CPU {idle:.2f} %"
    )
    proc.send_signal(signal.SIGTERM)
    print(f"daemon exit code {proc.wait(30)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--library", type=Path, default=CORPUS, help="library to copy (default: corpus)"
    )
    ap.add_argument("--runs", type=int, default=40, help="latency samples")
    ap.add_argument("--burst", type=int, default=500, help="files in the checkout burst")
    ap.add_argument("--burst-kb", type=int, default=8, help="size of each burst file")
    ap.add_argument("--idle-s", type=float, default=10.0, help="idle CPU window")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    ap.add_argument("--load-runs", type=int, default=40, help="latency samples under MCP load")
    ap.add_argument("--only-load", action="store_true", help="only the latency under load")
    ap.add_argument(
        "--work", type=Path, help="reuse this folder's library copy and index (kept afterwards)"
    )
    args = ap.parse_args()

    tmp = args.work or Path(tempfile.mkdtemp(prefix="bench-daemon-"))
    root, db = tmp / "lib", tmp / "idx" / "index.db"
    t0 = time.perf_counter()
    if not root.is_dir():
        shutil.copytree(args.library, root, ignore=shutil.ignore_patterns(".markindex"))
        (root / "bench").mkdir()
    n_files = sum(1 for _ in root.rglob("*.md"))
    size_mb = sum(p.stat().st_size for p in root.rglob("*.md")) / 1e6
    print(
        f"library: {n_files} files, {size_mb:.1f} MB (copied in {time.perf_counter() - t0:.1f} s)"
    )

    log = open(tmp / "daemon.log", "wb")  # noqa: SIM115
    cmd = [sys.executable, "-m", "markindex_core", "daemon", str(root), "--db", str(db), "--no-mcp"]
    if args.only_load:
        try:
            load_section(cmd, root, db, args.load_runs)
        finally:
            log.close()
            if not args.work:
                shutil.rmtree(tmp, ignore_errors=True)
        return
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stderr=log)
    try:
        wait_status(db, lambda s: s.get("pid") == proc.pid and s.get("reconciles"), 900)
        print(f"initial full build by the daemon: {time.perf_counter() - t0:.1f} s")
        mem_built = rss_kb(proc.pid)
        lib = Library(root, db)
        searcher = lib.searcher()
        searcher.search("warm up")

        rng = random.Random(1)
        save_latency(root, lib, args.runs, rng)
        checkout_burst(root, lib, args.burst, args.burst_kb, rng)
        # ----- memory and idle CPU --------------------------------------------------------------
        wait_status(db, lambda s: not s.get("busy") and s.get("queue") == 0, 120)
        idle = idle_cpu_percent(proc.pid, args.idle_s)
        mem = rss_kb(proc.pid)
        print(
            f"daemon RSS: {mem_built['VmRSS'] / 1024:.0f} MB after the initial build, "
            f"{mem['VmRSS'] / 1024:.0f} MB at the end, peak {mem['VmHWM'] / 1024:.0f} MB"
        )
        print(f"idle CPU over {args.idle_s:.0f} s: {idle:.2f} %")
        st = read_status_file(db) or {}
        print(
            "status:", json.dumps({k: st.get(k) for k in ("reconciles", "error_count", "observer")})
        )
        proc.send_signal(signal.SIGTERM)
        print(f"daemon exit code {proc.wait(30)}")

        restart_with_mcp(cmd, db, log, args.idle_s)

        # ----- save → searchable while an MCP client searches -----------------------------------
        load_section(cmd, root, db, args.load_runs)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            print(f"daemon exit code {proc.wait(30)}")
        log.close()
        if args.keep or args.work:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

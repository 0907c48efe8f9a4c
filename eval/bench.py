"""Scale benchmark: index throughput, incremental update latency, query latency, memory.

Usage: python eval/bench.py [--corpus DIR] [--questions FILE ...] [--scale N] [--json OUT]
                            [--rounds N] [--qmd PATH] [--node PATH] [--compare-only]

Runs against a temporary copy of the corpus (the original stays untouched) and prints a table.
`--scale N` also builds a synthetic library of N copies of the corpus (each copy's files get a
unique line, so every file is new content) and measures the same numbers there.

It first times full indexes side by side, in alternating rounds, each from scratch and as whole
processes (wall, CPU of the whole process tree, peak RSS of all processes together): markindex,
plain FTS5 over whole files (stdlib sqlite3, the floor any indexer pays) and, when it is installed
(`--qmd PATH` or `qmd` on PATH), qmd's `collection add`. A shared machine is noisy: the minimum
of the rounds is the figure to compare, and the ratios are taken from it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markindex_core.library import Library

REPO = Path(__file__).resolve().parent.parent
_PR_SET_CHILD_SUBREAPER = 36
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = sorted((REPO.parent / "shared" / "eval").glob("questions-dev-*.jsonl"))


def _tree(pid: int) -> list[int]:
    """A process and all its descendants (those still running)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children", encoding="utf-8") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return found


def _sum_kb(path: str, field: str) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            return sum(int(line.split()[1]) for line in fh if line.startswith(field))
    except OSError:  # the process ended meanwhile
        return 0


def tree_pss_mb(pid: int) -> float:
    """Proportional memory of a process and its descendants, in MB: shared pages (the Python
    runtime and libraries every process maps) counted once, unlike a sum of RSS."""
    return sum(_sum_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in _tree(pid)) / 1024


def adopt_orphans() -> None:
    """Become the subreaper of every process started from here (Linux), so the CPU time of
    grandchildren whose parent exits without waiting for them (multiprocessing's fork server
    and the parse workers it forks) is counted once they are reaped here."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1)


def reap_orphans(limit_s: float = 10.0) -> None:
    """Wait (bounded) for adopted processes to end, adding their CPU time to RUSAGE_CHILDREN."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


# PSS is read every PSS_EVERY samples (200 ms): reading /proc/PID/smaps_rollup of every process
# each 20 ms took CPU and page-table locks from the processes being timed, more so for a tool
# with five processes than for one with one (the side-by-side wall times were ~15% high).
PSS_EVERY = 10


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run one whole process to its end: wall time, CPU seconds of it and every descendant it
    reaped, and the peak RSS of all its processes together (sampled every 20 ms; PSS every
    200 ms) and of the largest one."""
    return measure_process(cmd, env)[0]


def measure_process(
    cmd: list[str], env: dict[str, str] | None = None
) -> tuple[dict[str, float], bytes]:
    """`run_measured`'s figures and the process's standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = {"tree": 0.0, "single": 0.0, "pss": 0.0}
    stop = threading.Event()

    def sample() -> None:
        tick = 0
        while not stop.is_set():
            each = [_sum_kb(f"/proc/{p}/status", "VmRSS:") / 1024 for p in _tree(proc.pid)]
            peak["tree"] = max(peak["tree"], sum(each))
            peak["single"] = max(peak["single"], *each, 0.0)
            if tick % PSS_EVERY == 0:  # smaps_rollup walks page tables: costly for the measured
                peak["pss"] = max(peak["pss"], tree_pss_mb(proc.pid))
            tick += 1
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{Path(cmd[0]).name} failed: {err.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures = {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_tree_mb": peak["tree"],
        "peak_rss_max_process_mb": peak["single"],
        "peak_pss_tree_mb": peak["pss"],
    }
    return figures, out


FTS5_REFERENCE = """
import os, sqlite3, sys
root, db = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(db)
conn.execute("PRAGMA journal_mode=wal")
conn.execute("CREATE VIRTUAL TABLE docs USING fts5(path, body)")
def files():
    for d, _, names in os.walk(root):
        for n in sorted(names):
            if n.lower().endswith((".md", ".markdown")):
                p = os.path.join(d, n)
                with open(p, encoding="utf-8", errors="replace") as fh:
                    yield os.path.relpath(p, root), fh.read()
with conn:
    conn.executemany("INSERT INTO docs(path, body) VALUES(?, ?)", files())
conn.close()
"""


def find_qmd(given: Path | None) -> Path | None:
    """qmd from `--qmd`, else from PATH; None when it is not installed."""
    if given is not None:
        return given if given.exists() else None
    found = shutil.which("qmd")
    return Path(found) if found else None


def qmd_env(home: Path, node: Path | None) -> dict[str, str]:
    """A fresh HOME and XDG folders, so every qmd round builds its index from scratch."""
    env = dict(os.environ)
    for key, sub in (
        ("HOME", "home"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
    ):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[key] = str(home / sub)
    if node is not None:  # qmd starts with `#!/usr/bin/env node`
        env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def side_by_side(
    root: Path, tmpdir: Path, rounds: int, qmd: Path | None, node: Path | None
) -> dict[str, list[dict[str, float]]]:
    """Full indexes of `root`, the tools taking turns within each round, each from scratch."""
    runs: dict[str, list[dict[str, float]]] = {"markindex": [], "fts5": []}
    if qmd is not None:
        runs["qmd"] = []
    for r in range(rounds):
        work = tmpdir / f"round{r}"
        work.mkdir()
        mark = [sys.executable, "-m", "markindex_core", "index", str(root), "--db"]
        runs["markindex"].append(run_measured([*mark, str(work / "markindex.db"), "--json"]))
        fts = [sys.executable, "-c", FTS5_REFERENCE, str(root), str(work / "fts5.db")]
        runs["fts5"].append(run_measured(fts))
        if qmd is not None:
            cmd = [str(qmd), "collection", "add", str(root), "--name", "corpus"]
            env = qmd_env(work / "qmd", node)
            runs["qmd"].append(run_measured([*cmd, "--mask", "**/*.md"], env))
        shutil.rmtree(work)
    return runs


def print_side_by_side(runs: dict[str, list[dict[str, float]]], size_mb: float) -> None:
    """One line per tool (min of rounds, and the spread), then markindex's ratios."""
    best = {name: min(r["wall_s"] for r in rs) for name, rs in runs.items()}
    for name, rs in runs.items():
        walls = ", ".join(f"{r['wall_s']:.2f}" for r in rs)
        cpu = min(r["cpu_s"] for r in rs)
        rss = max(r["peak_rss_tree_mb"] for r in rs)
        pss = max(r["peak_pss_tree_mb"] for r in rs)
        print(
            f"full index {size_mb:.1f} MB, {name}: wall min {best[name]:.2f} s (rounds {walls}), "
            f"CPU min {cpu:.2f} s, peak memory all processes: RSS sum {rss:.0f} MB, "
            f"PSS sum {pss:.0f} MB (shared pages once)"
        )
    ratios = [f"{best['markindex'] / best[n]:.2f}x {n}" for n in runs if n != "markindex"]
    print("markindex wall time = " + ", ".join(ratios) + " (lower is faster)")
    if "qmd" not in runs:
        print("qmd not found (pass --qmd PATH or put it on PATH): compared with FTS5 only")


def run_index(root: Path, db: Path, *extra: str) -> dict[str, float]:
    """Run `markindex index` in a subprocess: `run_measured`'s figures and what it indexed."""
    cmd = [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--json"]
    figures, out = measure_process([*cmd, *extra])
    report = json.loads(out)
    return {
        **figures,
        "added": len(report["added"]),
        "updated": len(report["updated"]),
        "unchanged": report["unchanged"],
    }


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def merge(root: Path, db: Path) -> float:
    """Merge the index's FTS segments now (what `tidy` does after enough writes); seconds taken."""
    from markindex_core.index.indexer import Indexer, open_for_writing

    store, lock = open_for_writing(db)
    try:
        t = time.perf_counter()
        Indexer(root, store).tidy(force=True)
        return time.perf_counter() - t
    finally:
        store.close()
        lock.release()


def query_latency(root: Path, db: Path, questions: list[str], rounds: int = 3) -> dict[str, float]:
    from markindex_core.library import Library

    lib = Library(root, db)
    try:
        return search_latency(lib, questions, rounds)
    finally:
        lib.close()


def search_latency(lib: Library, questions: list[str], rounds: int = 3) -> dict[str, float]:
    """p50/p95/max milliseconds of `lib.search` over the questions, after a warm-up of both ends
    of the list (both languages: it loads the segmenter)."""
    for q in [*questions[:10], *questions[-10:]]:
        lib.search(q)
    times = []
    for _ in range(rounds):
        for q in questions:
            t = time.perf_counter()
            lib.search(q)
            times.append((time.perf_counter() - t) * 1000)
    return {
        "p50_ms": statistics.median(times),
        "p95_ms": percentile(times, 0.95),
        "max_ms": max(times),
    }


def first_query(root: Path, db: Path, question: str) -> float:
    code = (
        "import time,sys; t=time.perf_counter();"
        "from markindex_core.library import Library;"
        f"Library({str(root)!r}, {str(db)!r}).search({question!r});"
        "print(time.perf_counter()-t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip()) * 1000


def incremental(root: Path, db: Path) -> dict[str, float]:
    """Re-index after one ~50 KB file changed (median of 5 edits)."""
    files = sorted(root.rglob("*.md"), key=lambda p: abs(p.stat().st_size - 50_000))
    target = files[0]
    original = target.read_bytes()
    times = []
    for i in range(5):
        target.write_bytes(original + f"\n\nbenchmark edit {i}\n".encode())
        t = run_index(root, db)
        assert t["updated"] == 1, t
        times.append(t["wall_s"])
    target.write_bytes(original)
    run_index(root, db)
    from markindex_core.index.indexer import Indexer, open_for_writing
    from markindex_core.library import Library

    # In-process costs (without interpreter start-up): a whole reconcile (stat every file), and
    # what the daemon pays for a file event (the indexer told which path changed).
    lib = Library(root, db)
    inproc = []
    for i in range(5):
        target.write_bytes(original + f"\n\nin-process edit {i}\n".encode())
        t0 = time.perf_counter()
        report = lib.index()
        inproc.append(time.perf_counter() - t0)
        assert len(report.updated) == 1
    store, lock = open_for_writing(db)
    try:
        indexer, rel = Indexer(root, store), target.relative_to(root).as_posix()
        event = []
        for i in range(5):
            target.write_bytes(original + f"\n\nfile event {i}\n".encode())
            t0 = time.perf_counter()
            report = indexer.run(paths=[rel])
            event.append(time.perf_counter() - t0)
            assert report.updated == [rel]
    finally:
        store.close()
        lock.release()
    target.write_bytes(original)
    lib.index()
    return {
        "file_kb": len(original) / 1000,
        "cli_median_s": statistics.median(times),
        "in_process_median_ms": statistics.median(inproc) * 1000,
        "file_event_median_ms": statistics.median(event) * 1000,
    }


def make_synthetic(corpus: Path, dest: Path, copies: int) -> int:
    n = 0
    for k in range(copies):
        for src in corpus.rglob("*"):
            if src.is_file() and src.suffix.lower() in (".md", ".markdown"):
                rel = src.relative_to(corpus)
                out = dest / f"copy{k:02d}" / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(src.read_bytes() + f"\n\nsynthetic copy {k}\n".encode())
                n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--questions", type=Path, nargs="*", default=DEFAULT_QUESTIONS)
    ap.add_argument("--scale", type=int, default=0, help="also benchmark N copies of the corpus")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    ap.add_argument("--rounds", type=int, default=3, help="side-by-side full-index rounds")
    ap.add_argument("--qmd", type=Path, help="qmd executable (default: qmd on PATH)")
    ap.add_argument("--node", type=Path, help="node executable for qmd (default: node on PATH)")
    ap.add_argument(
        "--compare-only", action="store_true", help="only the side-by-side full-index rounds"
    )
    args = ap.parse_args()
    adopt_orphans()
    questions = [
        json.loads(line)["question"]
        for f in args.questions
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="markindex-bench-") as tmp:
        tmpdir = Path(tmp)
        lib_dir = tmpdir / "corpus"
        shutil.copytree(args.corpus, lib_dir)
        size_mb = sum(p.stat().st_size for p in lib_dir.rglob("*.md")) / 1e6
        qmd = find_qmd(args.qmd)
        runs = side_by_side(lib_dir, tmpdir, args.rounds, qmd, args.node)
        print_side_by_side(runs, size_mb)
        results["side_by_side"] = runs
        if args.compare_only:
            _write_json(args.json, results)
            return
        results["corpus"] = measure("corpus", lib_dir, tmpdir / "corpus.db", questions, first=True)
        if args.scale:
            big = tmpdir / "synthetic"
            make_synthetic(lib_dir, big, args.scale)
            name = f"synthetic x{args.scale}"
            results[name] = measure(name, big, tmpdir / "synthetic.db", questions, first=False)
    _write_json(args.json, results)


def _write_json(path: Path | None, results: dict[str, object]) -> None:
    if path is not None:
        path.write_text(json.dumps(results, indent=2), encoding="utf-8")


def measure(
    name: str, root: Path, db: Path, questions: list[str], *, first: bool
) -> dict[str, object]:
    """Full index, no-op re-run, one-file update and query latency of one library; prints a summary."""
    out: dict[str, object] = {}
    size_mb = sum(p.stat().st_size for p in root.rglob("*.md")) / 1e6
    full = run_index(root, db)
    full.update(mb_per_s=size_mb / full["wall_s"], corpus_mb=size_mb, db_mb=db.stat().st_size / 1e6)
    out["full_index"] = full
    print(
        f"{name}: full index of {full['added']} docs, {size_mb:.1f} MB in {full['wall_s']:.2f} s "
        f"({full['mb_per_s']:.2f} MB/s), peak RSS {full['peak_rss_max_process_mb']:.0f} MB (largest "
        f"process) / {full['peak_rss_tree_mb']:.0f} MB (all processes), db {full['db_mb']:.0f} MB"
    )
    noop = run_index(root, db)
    out["noop_reindex_s"] = noop["wall_s"]
    inc = incremental(root, db)
    out["incremental"] = inc
    print(
        f"{name}: no-op re-run {noop['wall_s']:.2f} s (CLI, interpreter start-up included); one "
        f"{inc['file_kb']:.0f} KB file changed: CLI {inc['cli_median_s']:.2f} s, in-process "
        f"{inc['in_process_median_ms']:.0f} ms (whole reconcile), "
        f"{inc['file_event_median_ms']:.0f} ms (the daemon's path: told which file; median of 5)"
    )
    if questions:
        # The edits above left small FTS segments that every query visits until they are merged
        # (after enough writes, or when the daemon is idle): what a user sees meanwhile, then after.
        before = query_latency(root, db, questions, rounds=1)
        out["query_before_merge"] = before
        out["merge_s"] = merge(root, db)
        lat = query_latency(root, db, questions)
        out["query"] = lat
        print(
            f"{name}: search before the merge p50 {before['p50_ms']:.1f} ms, p95 "
            f"{before['p95_ms']:.1f} ms; merge {out['merge_s']:.2f} s"
        )
        line = (
            f"{name}: search over {len(questions)} questions x3 (merged): p50 {lat['p50_ms']:.1f} ms, "
            f"p95 {lat['p95_ms']:.1f} ms, max {lat['max_ms']:.1f} ms"
        )
        if first:
            out["first_query_ms"] = first_query(root, db, questions[0])
            line += f"; fresh process import + first query {out['first_query_ms']:.0f} ms"
        print(line)
    return out


if __name__ == "__main__":
    main()

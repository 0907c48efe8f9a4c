"""Scale benchmark: index throughput, incremental update latency, query latency, memory.

Usage: python eval/bench.py [--corpus DIR] [--questions FILE ...] [--scale N] [--json OUT]

Runs against a temporary copy of the corpus (the original stays untouched) and prints a table.
`--scale N` also builds a synthetic library of N copies of the corpus (each copy's files get a
unique line, so every file is new content) and measures the same numbers there.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_QUESTIONS = sorted((REPO.parent / "shared" / "eval").glob("questions-dev-*.jsonl"))


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            with open(f"/proc/{p}/status", encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            with open(f"/proc/{p}/task/{p}/children", encoding="utf-8") as fh:
                pids.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return total / 1024


def run_index(root: Path, db: Path, *extra: str) -> dict[str, float]:
    """Run `markindex index` in a subprocess; wall time, peak RSS (largest process, whole tree)."""
    cmd = [
        sys.executable,
        "-m",
        "markindex_core",
        "index",
        str(root),
        "--db",
        str(db),
        "--json",
        *extra,
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_tree = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not stop.is_set():
            peak_tree = max(peak_tree, tree_rss_mb(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"index failed: {err.decode(errors='replace')}")
    import resource

    max_single = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report = json.loads(out)
    return {
        "wall_s": wall,
        "peak_rss_tree_mb": peak_tree,
        "peak_rss_max_process_mb": max_single,
        "added": len(report["added"]),
        "updated": len(report["updated"]),
        "unchanged": report["unchanged"],
    }


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def query_latency(root: Path, db: Path, questions: list[str]) -> dict[str, float]:
    from markindex_core.library import Library

    lib = Library(root, db)
    for q in [*questions[:10], *questions[-10:]]:  # both languages: loads the segmenter
        lib.search(q)
    times = []
    for _ in range(3):
        for q in questions:
            t = time.perf_counter()
            lib.search(q)
            times.append((time.perf_counter() - t) * 1000)
    lib.close()
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
    from markindex_core.library import Library

    # In-process cost (without interpreter start-up), which is what the daemon pays.
    lib = Library(root, db)
    inproc = []
    for i in range(5):
        target.write_bytes(original + f"\n\nin-process edit {i}\n".encode())
        t0 = time.perf_counter()
        report = lib.index()
        inproc.append(time.perf_counter() - t0)
        assert len(report.updated) == 1
    target.write_bytes(original)
    lib.index()
    return {
        "file_kb": len(original) / 1000,
        "cli_median_s": statistics.median(times),
        "in_process_median_ms": statistics.median(inproc) * 1000,
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
    args = ap.parse_args()
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
        results["corpus"] = measure("corpus", lib_dir, tmpdir / "corpus.db", questions, first=True)
        if args.scale:
            big = tmpdir / "synthetic"
            make_synthetic(lib_dir, big, args.scale)
            name = f"synthetic x{args.scale}"
            results[name] = measure(name, big, tmpdir / "synthetic.db", questions, first=False)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


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
        f"{inc['in_process_median_ms']:.0f} ms (median of 5)"
    )
    if questions:
        lat = query_latency(root, db, questions)
        out["query"] = lat
        line = (
            f"{name}: search over {len(questions)} questions x3: p50 {lat['p50_ms']:.1f} ms, "
            f"p95 {lat['p95_ms']:.1f} ms, max {lat['max_ms']:.1f} ms"
        )
        if first:
            out["first_query_ms"] = first_query(root, db, questions[0])
            line += f"; fresh process import + first query {out['first_query_ms']:.0f} ms"
        print(line)
    return out


if __name__ == "__main__":
    main()

"""Terminal app latency: first paint, node selection, live search (headless Textual, real index).

Usage: python eval/bench_tui.py [--corpus DIR] [--docs 10000] [--skip-synthetic] [--json OUT]

* first paint: from process start (interpreter, imports, index open) to the first frame that shows
  the library tree's top entries; measured in a child process, on the corpus and on a synthetic
  library of `--docs` documents (5 000 in the root folder, the rest in 50 sub-folders).
* select: from moving the tree cursor onto a section of the 1.66 MB C# standard to its lines
  being in the preview (every top-level chapter, the whole document, and random sections).
* folder view: from moving the tree cursor onto a folder to its documents (title, description,
  size, tokens; the first page) being listed, on the synthetic library's root of 5 000 documents
  and on its sub-folders.
* search: from the end of the typing pause to the results being on screen, English and Chinese
  questions from the evaluation set (or built-in queries).
The corpus is indexed into a temporary folder; nothing is written into it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
QUESTIONS = sorted((REPO.parent / "shared" / "eval").glob("questions-dev-*.jsonl"))
CSHARP = "dotnet-csharpstandard/standard/csharp-language-standard-draft-v8.combined.md"
SIZE = (120, 40)
FALLBACK_QUERIES = [
    "interpolated string",
    "个人信息 保护",
    "pod resources",
    "数据 安全",
    "nullable",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p95": round(pct(values, 0.95), 1),
        "max": round(max(values), 1),
    }


# ----- first paint (child process) -----------------------------------------------------------
CHILD = """
import asyncio, sys, time
t_spawn = float(sys.argv[3])
from markindex_tui.app import MarkindexApp
from markindex_core.library import Library
from markindex_tui.widgets.library_tree import LibraryTree

async def main():
    app = MarkindexApp(Library(sys.argv[1], sys.argv[2]), cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        while True:
            try:
                tree = app.screen.query_one(LibraryTree)
            except Exception:
                tree = None
            if tree is not None and len(tree.root.children) > 1:
                break
            await asyncio.sleep(0.001)
        painted = asyncio.Event()
        app.call_after_refresh(painted.set)  # the frame with the entries is composed
        await painted.wait()
        painted = time.time() - t_spawn
        print(f"{painted:.4f} {len(tree.root.children)}")

asyncio.run(main())
"""


def first_paint(root: Path, db: Path, runs: int = 5) -> dict[str, Any]:
    times: list[float] = []
    entries = 0
    for _ in range(runs):
        t = time.time()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), str(db), repr(t)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        ).stdout.split()
        times.append(float(out[0]) * 1000)
        entries = int(out[1])
    return {**summary(times), "entries": entries}


def synthetic(root: Path, n: int) -> None:
    """`n` small documents: half in the root folder, the rest in 50 sub-folders."""
    rng = random.Random(7)
    words = "index tree section search passage token cursor library preview watcher".split()
    flat = n // 2
    for i in range(n):
        folder = root if i < flat else root / f"dept-{i % 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(
            f"## Part {k}\n\n" + " ".join(rng.choice(words) for _ in range(60)) for k in range(3)
        )
        (folder / f"doc-{i:05d}.md").write_text(f"# Document {i}\n\n{body}\n", encoding="utf-8")


# ----- select and search (in-process, headless) ----------------------------------------------
async def until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(0.0005)


async def measure_app(root: Path, db: Path, queries: list[str]) -> dict[str, Any]:
    from markindex_core.library import Library
    from markindex_tui.app import MarkindexApp
    from markindex_tui.screens.search import SearchScreen
    from markindex_tui.testing import settle
    from markindex_tui.widgets.library_tree import LibraryTree
    from markindex_tui.widgets.lines_view import LinesView

    lib = Library(root, db)
    app = MarkindexApp(lib, cursor_blink=False)
    out: dict[str, Any] = {}
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: len(app.screen.query(LibraryTree)) == 1)
        screen = app.screen
        tree = screen.query_one(LibraryTree)
        lines = screen.query_one(LinesView)
        await settle(pilot)
        doc_node = await tree.reveal(CSHARP)
        assert doc_node is not None
        await settle(pilot)
        doc = lib.store.document(CSHARP)
        assert doc is not None
        nodes = lib.store.nodes(doc["id"])
        rng = random.Random(3)
        picks = [n for n in nodes if n["parent_id"] is None]
        picks += rng.sample([n for n in nodes if n["parent_id"] is not None], 40)

        async def painted() -> None:
            done = asyncio.Event()
            app.call_after_refresh(done.set)
            await done.wait()

        async def select(key: tuple[str, str, str]) -> float:
            node = tree.node_for(key)
            if node is None:
                target = await tree.reveal(CSHARP, key[2])
                await settle(pilot)
                node = target
            assert node is not None and node.data is not None
            other = doc_node if node is not doc_node else tree.root
            tree.move_cursor(other)
            await settle(pilot)  # (a replaced preview worker is not an error here)
            t0 = time.perf_counter()
            tree.move_cursor(node)
            await until(lambda: lines.shown is not None and lines.shown.ref == node.data.ref)
            state.append((time.perf_counter() - t0) * 1000)
            await painted()
            worker.append(screen.last_preview_ms)  # type: ignore[attr-defined]
            shown_lines.append(len(lines.shown.lines) if lines.shown else 0)
            return (time.perf_counter() - t0) * 1000

        worker: list[float] = []
        state: list[float] = []
        shown_lines: list[int] = []
        times = [await select(("document", CSHARP, ""))]
        for n in picks:
            times.append(await select(("node", CSHARP, n["node_id"])))
        out["select_ms"] = {**summary(times), "max_lines_shown": max(shown_lines)}
        out["select_worker_ms"] = summary(worker)
        out["select_state_ms"] = summary(state)
        slow = sorted(zip(times, state, shown_lines, worker, strict=True), reverse=True)[:5]
        print("slowest selections (ms, lines, worker ms):", slow, file=sys.stderr)

        await pilot.press("slash")
        await until(lambda: isinstance(app.screen, SearchScreen))
        search = app.screen
        assert isinstance(search, SearchScreen)
        from textual.widgets import Input

        box = search.query_one("#query", Input)
        latencies: list[float] = []
        counts: list[int] = []
        for q in queries:
            box.value = q
            await until(lambda q=q: search.result is not None and search.result.query == q, 20)
            await painted()
            latencies.append(search.last_latency_ms)
            counts.append(len(search.result.hits) if search.result else 0)
        out["search_ms"] = {**summary(latencies), "mean_hits": round(statistics.mean(counts), 1)}
    return out


async def measure_folders(root: Path, db: Path, rounds: int = 10) -> dict[str, Any]:
    """Highlight folders of the synthetic library alternately; time until their page is listed."""
    from markindex_core.library import Library
    from markindex_tui.app import MarkindexApp
    from markindex_tui.testing import settle
    from markindex_tui.widgets.folder_view import FolderView
    from markindex_tui.widgets.library_tree import LibraryTree

    app = MarkindexApp(Library(root, db), cursor_blink=False)
    big: list[float] = []
    small: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: len(app.screen.query(LibraryTree)) == 1)
        await settle(pilot)
        tree = app.screen.query_one(LibraryTree)
        view = app.screen.query_one(FolderView)
        subs = [n for n in tree.root.children if n.data is not None and n.data.ref.kind == "folder"]
        for i in range(rounds):
            for node, times in ((subs[i % len(subs)], small), (tree.root, big)):
                assert node.data is not None
                path = node.data.ref.path
                t0 = time.perf_counter()
                tree.move_cursor(node)
                await until(lambda p=path: view.display and view.folder == p and bool(view.docs))
                times.append((time.perf_counter() - t0) * 1000)
                await settle(pilot)
        listed = len(view.docs)
    return {
        "folder_view_5000_docs_ms": {**summary(big), "listed": listed},
        "folder_view_subfolder_ms": summary(small),
    }


def load_queries(limit: int) -> list[str]:
    qs: list[str] = []
    for path in QUESTIONS:
        with path.open(encoding="utf-8") as fh:
            qs += [json.loads(line)["question"] for line in fh if line.strip()][: limit // 2]
    return qs or FALLBACK_QUERIES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from markindex_core.library import Library

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="markindex-bench-tui-") as tmp:
        db = Path(tmp) / "corpus.db"
        t = time.perf_counter()
        Library(args.corpus, db).index()
        print(f"indexed corpus in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        results["first_paint_corpus_ms"] = first_paint(args.corpus, db)
        print("first paint, corpus:", results["first_paint_corpus_ms"], file=sys.stderr)
        results.update(asyncio.run(measure_app(args.corpus, db, load_queries(args.queries))))
        if not args.skip_synthetic:
            syn = Path(tmp) / "synthetic"
            synthetic(syn, args.docs)
            sdb = Path(tmp) / "synthetic.db"
            t = time.perf_counter()
            Library(syn, sdb).index()
            print(
                f"indexed {args.docs} synthetic docs in {time.perf_counter() - t:.1f} s",
                file=sys.stderr,
            )
            results[f"first_paint_{args.docs}_docs_ms"] = first_paint(syn, sdb)
            results.update(asyncio.run(measure_folders(syn, sdb)))
    results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    results["peak_rss_children_mb"] = round(
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1
    )
    print(f"{'measure':34} {'n':>4} {'p50':>8} {'p95':>8} {'max':>8}  extra")
    for name, r in results.items():
        if isinstance(r, dict):
            extra = {k: v for k, v in r.items() if k not in ("n", "p50", "p95", "max")}
            print(f"{name:34} {r['n']:>4} {r['p50']:>8} {r['p95']:>8} {r['max']:>8}  {extra or ''}")
        else:
            print(f"{name:34} {r}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Incremental indexing: compare the folder with the index by stat and content hash, rebuild what changed.

Each document is written whole inside a transaction (a batch of whole documents on a full build), so
a crash at any moment leaves an index that opens, and the next run completes the work.

Who owns what: an `Indexer` and its `Store` belong to the one thread that calls `run` (the CLI's
main thread, the daemon's writer thread, a terminal app worker). A full build hands its writes to a
thread of its own for the run (see writer.py); the store is used by that thread alone meanwhile.
Parsing runs in child processes owned by one `WorkerPool` per run (see workers.py), all stopped
and reaped before `run` returns or raises. Workers are fresh interpreters, not forks, so
starting them is safe in a process that runs other threads (the daemon, a terminal app).

Files are never trusted to stay what the scan saw: see reading.read_regular. A skipped file is
tried again on every run, since what made it unreadable (permissions) can change without
changing its size or mtime.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from markindex_core.config import (
    BATCH_BYTES,
    BATCH_DOCS,
    BULK_WRITE_DOCS,
    FORMAT_VERSION,
    FTS_OPTIMIZE_AFTER_WRITES,
    GROUP_MAX_TOKENS,
    MARKDOWN_SUFFIXES,
    PARALLEL_MIN_BYTES,
    PARSE_TIMEOUT_S,
    PASSAGE_MAX_TOKENS,
    PASSAGE_MIN_TOKENS,
    TreeParams,
)
from markindex_core.errors import LibraryNotFound, LibraryUnreadable
from markindex_core.index.deadline import ParseDeadline, ParseTimedOut, timed_out
from markindex_core.index.reading import Unreadable, content_hash, read_regular
from markindex_core.index.scan import (
    IGNORE_META,
    FileStat,
    IgnoreRules,
    PathRules,
    below_any,
    display_path,
    path_problem,
    remembered_ignore,
    scan,
)
from markindex_core.index.workers import (
    Job,
    Result,
    Vanished,
    WorkerPool,
    WorkersUnavailable,
    load,
)
from markindex_core.index.writer import RunWriter
from markindex_core.model import DocumentRows, ParsedDocument, SkippedFile
from markindex_core.store import runs
from markindex_core.store.db import DocState, Store
from markindex_core.store.files import file_id, out_of_descriptors
from markindex_core.store.lock import WriterLock
from markindex_core.store.rebuild import build_afresh, discard_leftover, rebuild_beside
from markindex_core.text import segment

Progress = Callable[[int, int, str], None]
# Runs after every run's documents are written (e.g. model summaries, see llm/summaries.py), with
# the writer store, the run's report (which it may add to) and the run's progress callback.
AfterWrite = Callable[[Store, "IndexReport", Progress | None], None]

log = logging.getLogger("markindex.index")


@dataclass
class IndexReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    full_rebuild: str | None = None
    seconds: float = 0.0
    summaries: dict[str, Any] | None = None  # set by a summary hook (llm/summaries.py)
    # What the run looked at (library-relative paths; None = the whole library), and the files
    # it found there with more than one name (see `FileStat.links`).
    scope: list[str] | None = None
    linked: dict[str, FileStat] = field(default_factory=dict)
    # Paths it could not examine (unreadable folders): what the index held there was kept.
    unreadable: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def to_json(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "warnings": [{"path": p, "warning": w} for p, w in self.warnings],
            "errors": [{"path": p, "error": e} for p, e in self.errors],
            "full_rebuild": self.full_rebuild,
            "seconds": round(self.seconds, 3),
            **self._summary_json(),
        }

    def _summary_json(self) -> dict[str, object]:
        """Only runs that asked for summaries report them (the model-free report is unchanged)."""
        if self.summaries is None:
            return {}
        return {"summaries": self.summaries, "summary_errors": self.summaries.get("errors", 0)}


def fingerprint(params: TreeParams) -> str:
    """Everything that shapes stored rows: a change rebuilds every document."""
    passages = f"{PASSAGE_MIN_TOKENS}/{PASSAGE_MAX_TOKENS}/{GROUP_MAX_TOKENS}"
    return (
        f"format={FORMAT_VERSION};{params.fingerprint()};passages={passages};"
        f"segmenter={segment.engine()}"
    )


def pending_rebuild(meta: dict[str, str]) -> str | None:
    """Why the next run will rebuild every document of an index with this meta (the index was
    built by another version of markindex, or with another segmenter), or None."""
    old = meta.get("fingerprint")
    if not old:
        return None
    new = fingerprint(TreeParams(setext=meta.get("setext") != "0"))
    return None if old == new else _why(old, new)


class Indexer:
    """Brings one library's index in line with its folder. Holds the writer lock while it works."""

    def __init__(
        self,
        root: Path,
        store: Store,
        *,
        ignore: list[str] | None = None,
        setext: bool | None = None,
        workers: int | None = None,
        parse_timeout: float = PARSE_TIMEOUT_S,
        after_write: AfterWrite | None = None,
        rehash: bool = False,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self.root = root
        # Raises to end a run while workers parse (see WorkerPool): a daemon that stops.
        self.interrupt = interrupt
        # Compare every file's content hash, not only size and mtime: an edit that kept both
        # (`cp -p`, `rsync -t`, `touch -r`) is otherwise taken for no change.
        self.rehash = rehash
        self.after_write = after_write
        self.store = store
        # Given patterns replace those the index remembers (`remembered_ignore`); None keeps them.
        self.ignore = list(ignore) if ignore is not None else remembered_ignore(store)
        stored = store.get_meta("setext")
        self.params = TreeParams(setext=setext if setext is not None else stored != "0")
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        self.parse_timeout = parse_timeout
        self.rules = IgnoreRules(root, self.ignore)
        # A mark the writer keeps between runs (a daemon's, see `store.runs.live_mark`): a
        # whole-library run puts it back in place of its own rather than clear it.
        self.standing: dict[str, str] | None = None

    def reload_rules(self) -> None:
        self.rules = IgnoreRules(self.root, self.ignore)

    def run(
        self, progress: Progress | None = None, paths: Iterable[str] | None = None
    ) -> IndexReport:
        """Reconcile the whole library, or only `paths` (files or folders, library-relative).

        A changed fingerprint rebuilds everything into a new file beside the live index, swapped in
        when whole (see `rebuild.py`), so readers never see a half-built index."""
        fp = fingerprint(self.params)
        old_fp = self.store.get_meta("fingerprint")
        if paths is not None and remembered_ignore(self.store) != self.ignore:
            paths = None  # other patterns: what they leave out or let in is anywhere
        if old_fp is None or old_fp == fp:
            report = self._run(fp, old_fp, progress, paths, set())
        else:
            rebuilt = set(self.store.doc_states())  # reported as updated, not added
            with rebuild_beside(self.store):
                report = self._run(fp, old_fp, progress, None, rebuilt)
            report.full_rebuild = _why(old_fp, fp)
        if self.after_write is not None:  # the trees are committed: a failure here loses none
            self.after_write(self.store, report, progress)
        return report

    def _run(
        self,
        fp: str,
        old_fp: str | None,
        progress: Progress | None,
        paths: Iterable[str] | None,
        rebuilt: set[str],
    ) -> IndexReport:
        t0 = time.perf_counter()
        report = IndexReport()
        if old_fp != fp:
            paths = None
            self.store.set_meta({"fingerprint": fp, "setext": str(int(self.params.setext))})
        if paths is None and self.store.get_meta("root") != str(self.root):
            self.store.set_meta({"root": str(self.root)})  # whose index this is: check_target
        if paths is None and remembered_ignore(self.store) != self.ignore:
            self.store.set_meta({IGNORE_META: json.dumps(self.ignore, ensure_ascii=False)})
        named: dict[str, str] = {}  # display path -> reason, for names that are never indexed
        wanted = None if paths is None else self._wanted(paths)
        # What the index knows of the scope only: an update of a few files reads a few rows.
        known_under = None if wanted is None else [*wanted, *map(display_path, wanted)]
        states = self.store.doc_states(known_under)
        skipped = self.store.skipped_states(known_under)
        in_scope = set(states) | set(skipped)
        unreadable: list[str] = []  # what the index holds below these is kept, not removed
        if wanted is None:
            root_id = file_id(self.root)
            disk = scan(self.root, self.rules)
            self._check_root(root_id)  # its folders not listed yet are not deleted folders
            if "" in disk.unreadable:  # no descriptor left is not a permission matter
                raise out_of_descriptors() or LibraryUnreadable(
                    f"cannot list the library folder {self.root}: {disk.errors[0][1]}",
                    "give this user read and search permission on it (chmod u+rx);"
                    " the index was left as it was",
                )
            report.errors.extend(disk.errors)
            files, named, unreadable = disk.files, dict(disk.skipped), disk.unreadable
        else:
            files = self._scope(wanted, report, named, unreadable)
        removed = sorted(
            p
            for p in in_scope
            if p not in files and p not in named and not below_any(p, unreadable)
        )
        if removed:
            self.store.delete_documents(removed)
            report.removed = [p for p in removed if p in states]
        self._skip_names(named, skipped, report)
        report.warnings.extend(sorted(self.rules.problems.items()))
        todo: list[str] = []
        for rel, st in sorted(files.items()):
            old = states.get(rel)
            same_stat = old is not None and old.size == st.size and old.mtime_ns == st.mtime_ns
            if old is not None and old.hash and same_stat and not self.rehash:
                report.unchanged += 1
                continue
            # A skipped file is always tried again: chmod changes neither its size nor its mtime.
            if old is not None and old.hash and self._same_content(rel, old):
                report.unchanged += 1
                continue
            todo.append(rel)
        marked = bool(todo) and wanted is None
        if marked:  # said by status and every answer if it never gets to its end
            self.store.set_meta(runs.mark(len(todo)))
            runs.stamp(self.store.path)
        self._build(todo, files, states, report, progress, rebuilt, skipped, marked)
        report.scope = wanted
        report.unreadable = sorted(unreadable)
        report.linked = {rel: st for rel, st in files.items() if st.links > 1}
        report.seconds = time.perf_counter() - t0
        whole = wanted is None
        self.store.set_meta(
            {
                "last_index_at": f"{time.time():.3f}",
                "last_index_seconds": f"{report.seconds:.3f}",
                **((self.standing or {}) if whole else {}),
            },
            # A whole-library run leaves nothing of an earlier unfinished one to do (a daemon's
            # standing mark is put back: see `store.runs`). Runs of a few paths (the daemon's)
            # neither mark nor clear: a failed one is retried, and the daemon's own status says
            # what it has left undone.
            drop=[runs.UNFINISHED_RUN] if whole and not self.standing else [],
        )
        return report

    def _skip_names(
        self, named: dict[str, str], skipped: dict[str, tuple[int, int, str]], report: IndexReport
    ) -> None:
        """Files whose names can't be stored or served: reported (and listed) on every run."""
        for path, reason in sorted(named.items()):
            report.skipped.append((path, reason))
            if path not in skipped or skipped[path][2] != reason:
                self.store.record_skipped(path, reason, 0, 0)

    def _same_content(self, rel: str, old: DocState) -> bool:
        try:
            data, st = read_regular(os.path.join(self.root, rel))
        except (OSError, Unreadable):
            return False
        if st.st_size != old.size:
            return False
        same = content_hash(data) == old.hash
        if same and (st.st_size, st.st_mtime_ns) != (old.size, old.mtime_ns):
            self.store.touch(rel, st.st_size, st.st_mtime_ns)
        return same

    def _wanted(self, paths: Iterable[str]) -> list[str] | None:
        """Library-relative paths to reconcile, sorted (outside ones dropped); None when one of
        them is the root itself, which means everything."""
        wanted = {self._library_relative(p) for p in paths}
        if "" in wanted:
            return None
        return sorted(r for r in wanted if r is not None)

    def _scope(
        self, wanted: list[str], report: IndexReport, named: dict[str, str], unreadable: list[str]
    ) -> dict[str, FileStat]:
        """The files on disk under the `wanted` paths; bad names go to `named`, paths that could
        not be examined to `unreadable`."""
        files: dict[str, FileStat] = {}
        for rel in wanted:
            try:
                self._scope_one(rel, files, report, named, unreadable)
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone since it was looked at (moved away, deleted): not on disk
            except OSError as exc:
                report.errors.append((display_path(rel), exc.strerror or str(exc)))
                unreadable.append(rel)
        return files

    def _scope_one(
        self,
        rel: str,
        files: dict[str, FileStat],
        report: IndexReport,
        named: dict[str, str],
        unreadable: list[str],
    ) -> None:
        full = self.root / rel
        if self.rules.excluded_by_path(rel) and not full.is_dir():
            return
        if any((self.root / a).is_symlink() for a in _ancestors(rel)):
            return  # symlinks are never followed, wherever they are on the path
        if full.is_dir():
            if self.rules.folder_excluded(rel):
                return
            problem = path_problem(rel)
            if problem:
                named[display_path(rel)] = problem
                return
            sub = scan(full, _Subrules(self.rules, rel), part=True)
            report.errors.extend((f"{display_path(rel)}/{p}", e) for p, e in sub.errors)
            unreadable.extend(f"{rel}/{p}" if p else rel for p in sub.unreadable)
            named.update({f"{display_path(rel)}/{p}": r for p, r in sub.skipped.items()})
            files.update({f"{rel}/{p}": s for p, s in sub.files.items()})
        elif full.is_file() and full.name.lower().endswith(MARKDOWN_SUFFIXES):
            problem = path_problem(rel)
            if problem:
                named[display_path(rel)] = problem
                return
            st = full.stat(follow_symlinks=False)
            files[rel] = FileStat(st.st_size, st.st_mtime_ns, st.st_nlink)

    def _library_relative(self, path: str) -> str | None:
        """A posix path relative to the root ('' = the root), or None if it is outside."""
        p = path.replace(os.sep, "/")
        if os.path.isabs(p):
            try:
                p = os.path.relpath(p, self.root).replace(os.sep, "/")
            except ValueError:
                return None
        p = posixpath.normpath(p.lstrip("/"))
        if p == ".":
            return ""
        if p == ".." or p.startswith("../"):
            return None
        return p

    def _build(
        self,
        todo: list[str],
        files: dict[str, FileStat],
        states: dict[str, DocState],
        report: IndexReport,
        progress: Progress | None,
        rebuilt: set[str],
        skipped: dict[str, tuple[int, int, str]],
        marked: bool = False,
    ) -> None:
        """Parse `todo` in the workers and write the results in batches. A `marked` run stamps
        each result as progress, so one that hangs is told from one that works (`store.runs`)."""
        if not todo:
            return
        jobs = [Job(str(self.root), rel, self.params) for rel in todo]
        batch: list[ParsedDocument | DocumentRows] = []
        batch_bytes = 0
        limit = BATCH_DOCS if len(todo) > BATCH_DOCS else 1
        # A thread writes while the workers' results are read.
        threaded = limit > 1 and self.workers > 1
        sizes = {rel: files[rel].size for rel in todo}
        store = self.store
        bulk = len(todo) >= BULK_WRITE_DOCS  # ends with `optimize`: no FTS merging before it
        merging = store.bulk_writes() if bulk else nullcontext()
        root_id = file_id(self.root)
        with merging, RunWriter(threaded=threaded) as writer:
            for done, result in enumerate(self._results(jobs, sizes), start=1):
                if isinstance(result, Vanished):
                    self._check_root(root_id)
                    writer.submit(store.delete_documents, [result.rel])  # forgets a recorded skip
                    if result.rel in states:
                        report.removed.append(result.rel)
                elif isinstance(result, SkippedFile):
                    st = files[result.path]
                    if skipped.get(result.path) != (st.size, st.mtime_ns, result.reason):
                        writer.submit(
                            store.record_skipped, result.path, result.reason, st.size, st.mtime_ns
                        )
                    report.skipped.append((result.path, result.reason))
                    if result.path in states:
                        report.removed.append(result.path)
                else:
                    known = result.path in states or result.path in rebuilt
                    (report.updated if known else report.added).append(result.path)
                    report.warnings.extend((result.path, w) for w in result.warnings)
                    batch.append(result)
                    batch_bytes += result.size
                    if len(batch) >= limit or batch_bytes >= BATCH_BYTES:
                        writer.submit(store.write_documents, batch)
                        batch, batch_bytes = [], 0
                if marked:
                    runs.stamp(store.path)
                if progress:
                    progress(done, len(jobs), getattr(result, "path", getattr(result, "rel", "")))
            if batch:
                writer.submit(store.write_documents, batch)
        self.tidy(writes=len(todo), force=bulk)
        self.store.checkpoint()

    def _check_root(self, root_id: tuple[int, int] | None) -> None:
        """Raise when the library folder itself went away (moved, deleted, a share unmounted):
        its files are not deleted one by one, and forgetting them all would empty the index."""
        now = file_id(self.root)
        if now is None or now != root_id:
            raise LibraryNotFound(
                f"the library folder {self.root} went away while it was indexed (moved, deleted"
                " or unmounted); the documents of the index were kept",
                "bring the folder back, then run the same `markindex index` command again",
            )

    def tidy(self, *, writes: int = 0, force: bool = False) -> bool:
        """Merge the FTS segments that small commits leave behind, once enough have piled up.

        Each incremental commit adds index segments that every query must visit (5 one-file
        updates slow a search by ~50%); `optimize` folds them back into one. Returns True when
        it ran. The daemon calls this with `force=True` when it has been idle for a while.
        """
        pending = int(self.store.get_meta("fts_pending_writes") or 0) + writes
        # optimize rewrites the whole index: wait for more writes in a bigger library, so its
        # cost per written document stays about the same at any size.
        threshold = max(FTS_OPTIMIZE_AFTER_WRITES, self.store.count_documents() // 50)
        if pending and (force or pending >= threshold):
            self.store.optimize()
            pending = 0
            ran = True
        else:
            ran = False
        if writes or ran:
            self.store.set_meta({"fts_pending_writes": str(pending)})
        return ran

    def merge_step(self) -> bool:
        """One bounded step of the merge `tidy` makes at once (see `Store.merge_step`), when
        writes are pending; whether more is left. The step that finds nothing left clears the
        count of pending writes."""
        if not int(self.store.get_meta("fts_pending_writes") or 0):
            return False
        if self.store.merge_step():
            return True
        self.store.set_meta({"fts_pending_writes": "0"})
        return False

    def _results(self, jobs: list[Job], sizes: dict[str, int]) -> Iterator[Result]:
        if sum(sizes.values()) < PARALLEL_MIN_BYTES:
            yield from self._parse_here(jobs)
            return
        # Largest first (sizes from the scan), so one big file does not finish last on its own.
        jobs = sorted(jobs, key=lambda j: -sizes[j.rel])
        size = max(1, min(self.workers, len(jobs)))
        pool = WorkerPool(size, self.parse_timeout, interrupt=self.interrupt)
        done: set[str] = set()
        try:
            pool.start()
            for result in pool.results(jobs):
                done.add(result.rel if isinstance(result, Vanished) else result.path)
                yield result
        except WorkersUnavailable as exc:  # the index stays live; the user learns why it is slower
            pool.stop()
            log.warning("%s; parsing in this process meanwhile", exc)
            yield from self._parse_here([job for job in jobs if job.rel not in done])
        finally:
            pool.stop()  # however the run ends (stopping twice is harmless)

    def _parse_here(self, jobs: list[Job]) -> Iterator[Result]:
        """Parse in this process, each document within the parse deadline, as in a worker."""
        with ParseDeadline(self.parse_timeout, self.interrupt) as deadline:
            for job in jobs:
                try:
                    result = deadline.run(job.rel, partial(load, job))
                except ParseTimedOut:
                    result = SkippedFile(job.rel, timed_out(self.parse_timeout))
                yield result


class _Subrules:
    """Ignore rules of the library, applied to a scan rooted at a sub-folder."""

    def __init__(self, base: PathRules, prefix: str) -> None:
        self.base = base
        self.prefix = prefix

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        return self.base.ignored(f"{self.prefix}/{rel}", is_dir)


def _ancestors(rel: str) -> list[str]:
    """'a/b/c.md' -> ['a', 'a/b', 'a/b/c.md']."""
    parts = rel.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _why(old: str, new: str) -> str:
    a = dict(p.split("=", 1) for p in old.split(";") if "=" in p)
    b = dict(p.split("=", 1) for p in new.split(";") if "=" in p)
    diffs = [
        f"{k} {a.get(k, '?')} -> {b.get(k, '?')}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]
    return ", ".join(diffs) or "index format changed"


def open_for_writing(db_path: Path) -> tuple[Store, WriterLock]:
    """Take the writer lock (fail fast), then open the store for writing."""
    lock = WriterLock(db_path)
    lock.acquire()
    try:
        discard_leftover(db_path)
        return Store(db_path), lock
    except Exception:
        lock.release()
        raise


def rebuild_from_folder(
    root: Path,
    db_path: Path,
    *,
    reason: str,
    ignore: list[str] | None = None,
    setext: bool | None = None,
    workers: int | None = None,
    after_write: AfterWrite | None = None,
    progress: Progress | None = None,
    on_fresh: Callable[[Path], None] | None = None,
    interrupt: Callable[[], None] | None = None,
) -> IndexReport:
    """Index `root` into a new file beside `db_path` and swap it in whole (see
    `rebuild.build_afresh`): the way out of a damaged index, which is never needed. The caller
    holds the writer lock. `on_fresh` is told the new file before the swap."""
    with build_afresh(db_path) as (store, cache_note):
        if on_fresh is not None:
            on_fresh(Path(store.conn.filename))
        indexer = Indexer(
            root,
            store,
            ignore=ignore,
            setext=setext,
            workers=workers,
            after_write=after_write,
            interrupt=interrupt,
        )
        report = indexer.run(progress)
    report.full_rebuild = reason
    if cache_note:
        report.warnings.append(("", cache_note))
    return report

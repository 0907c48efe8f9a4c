"""Find a library's Markdown files: .gitignore at every level, .markindexignore, --ignore.

Dot-directories and dot-files are skipped, symlinks are never followed, and ignore rules only
ever add exclusions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pathspec

from markindex_core.config import IGNORE_FILE_NAME, MARKDOWN_SUFFIXES
from markindex_core.errors import InvalidArgument


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: dict[str, FileStat]  # library-relative posix path -> stat
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def normalize_ignore_pattern(pattern: str, root: Path | None = None) -> str:
    """Validate one --ignore pattern (gitignore syntax, relative to the library root).

    A leading `/` anchors the pattern at the root; but when, given `root`, the pattern is really
    an absolute path of this machine, it is made relative if it lies inside the root and
    rejected otherwise.
    """
    p = pattern.strip()
    if root is not None and p.startswith("/") and not p.startswith("//") and len(p) > 1:
        p = _absolute_to_anchored(p, pattern, root)
    if not p:
        raise InvalidArgument(
            "empty --ignore pattern", "pass a gitignore-style pattern, e.g. 'drafts/'"
        )
    while p.startswith("./"):
        p = p[2:]
    if p.startswith(("~", "\\")) or (len(p) > 1 and p[1] == ":") or p.startswith("//"):
        raise InvalidArgument(
            f"--ignore {pattern!r} is an absolute path", "use a path relative to the library root"
        )
    if ".." in PurePosixPath(p.lstrip("!/")).parts:
        raise InvalidArgument(
            f"--ignore {pattern!r} leaves the library", "patterns may not contain '..'"
        )
    return p


def _absolute_to_anchored(p: str, pattern: str, root: Path) -> str:
    absolute = Path(p.rstrip("/"))
    if (root / p.strip("/")).exists() or not absolute.exists():
        return p  # an anchored pattern
    try:
        rel = absolute.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InvalidArgument(
            f"--ignore {pattern!r} is an absolute path outside the library",
            "use a path relative to the library root",
        ) from None
    if rel == ".":
        raise InvalidArgument(f"--ignore {pattern!r} is the library itself", "name a part of it")
    return "/" + rel + ("/" if p.endswith("/") else "")


class IgnoreRules:
    """Decides whether a library-relative path is excluded."""

    def __init__(self, root: Path, extra_patterns: list[str] | None = None) -> None:
        self.root = root
        lines: list[str] = []
        ignore_file = root / IGNORE_FILE_NAME
        try:
            lines += ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            pass
        lines += [normalize_ignore_pattern(p, root) for p in extra_patterns or []]
        self.root_spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}

    def _gitignore(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        if rel_dir not in self._gitignores:
            path = self.root / rel_dir / ".gitignore" if rel_dir else self.root / ".gitignore"
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
                self._gitignores[rel_dir] = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
            except OSError:
                self._gitignores[rel_dir] = None
        return self._gitignores[rel_dir]

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        """True when any rule excludes `rel`; the deepest .gitignore with an opinion wins."""
        probe = rel + "/" if is_dir else rel
        if self.root_spec is not None and self.root_spec.match_file(probe):
            return True
        parts = rel.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            base = "/".join(parts[:depth])
            spec = self._gitignore(base)
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            verdict = spec.check_file(sub).include
            if verdict is not None:
                return bool(verdict)
        return False

    def excluded_by_path(self, rel: str) -> bool:
        """A file is excluded when it or any ancestor folder is hidden or ignored."""
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts):
            return True
        for i in range(1, len(parts)):
            if self.ignored("/".join(parts[:i]), is_dir=True):
                return True
        return self.ignored(rel)


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES) and not name.startswith(".")


def scan(root: Path, rules: IgnoreRules) -> ScanResult:
    """Walk the library once: every Markdown file that is not excluded, with size and mtime."""
    result = ScanResult({})
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        abs_dir = root / rel_dir if rel_dir else root
        try:
            entries = list(os.scandir(abs_dir))
        except OSError as exc:
            result.errors.append((rel_dir or ".", exc.strerror or str(exc)))
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if not rules.ignored(rel, is_dir=True):
                        stack.append(rel)
                    continue
                if not is_markdown(name) or not entry.is_file(follow_symlinks=False):
                    continue
                if rules.ignored(rel):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                result.errors.append((rel, exc.strerror or str(exc)))
                continue
            result.files[rel] = FileStat(st.st_size, st.st_mtime_ns)
    return result

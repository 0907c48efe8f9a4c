"""Find a library's Markdown files: .gitignore at every level, .markindexignore, --ignore.

Dot-directories and dot-files are skipped, symlinks are never followed, and ignore rules only
ever add exclusions. A name that is not valid UTF-8 or holds control characters is skipped with
a reason: it could not be stored, printed or asked for by an agent.

Gitignore patterns are matched in linear time: pathspec translates each `*` to `[^/]*`, and
Python's backtracking regex engine takes exponential time on a pattern like `*a*a*a…*b` against
a long name that does not match, so the translation is rewritten (see `_linear_regex`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from markindex_core.config import (
    EMPTY_ROOT_SCAN_ENTRIES,
    IGNORE_FILE_NAME,
    MARKDOWN_SUFFIXES,
    MAX_IGNORE_FILE_BYTES,
)
from markindex_core.errors import InvalidArgument
from markindex_core.index.reading import Unreadable, open_regular, read_at_most

if TYPE_CHECKING:
    from markindex_core.store.db import Store


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int
    # How many names the file has. Above 1 it can be written through a name outside the library,
    # which no file event here reports (the daemon polls such files, see `Daemon._poll_linked`).
    links: int = 1


@dataclass
class ScanResult:
    files: dict[str, FileStat]  # library-relative posix path -> stat
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    skipped: dict[str, str] = field(default_factory=dict)  # display path -> reason (bad names)
    # Paths that could not be listed or examined ('' = the root): what the index holds below them
    # is unknown, not gone.
    unreadable: list[str] = field(default_factory=list)


class PathRules(Protocol):
    """Anything that can say whether a path is excluded (IgnoreRules, or a view of them)."""

    def ignored(self, rel: str, is_dir: bool = False) -> bool: ...


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def name_problem(name: str) -> str | None:
    """Why a file or folder name can't be indexed, or None when it is fine."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8: rename it"
    if _CONTROL_CHARS.search(name):
        return "file name contains control characters (newline, tab, escape…): rename it"
    if "\\" in name:
        return "file name contains a backslash (library paths use '/'): rename it"
    return None


def path_problem(rel: str) -> str | None:
    """`name_problem` of the first part of a library-relative path that has one."""
    for part in rel.split("/"):
        problem = name_problem(part)
        if problem:
            return problem
    return None


def display_path(rel: str) -> str:
    """A printable, storable form of a path whose name may be bad: undecodable bytes and control
    characters become backslash escapes (b'bad\\xff.md' -> 'bad\\\\xff.md')."""
    text = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


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
    # `\#notes.md`, `\!x.md`: gitignore's escapes for a name that starts with # or !, not a
    # Windows path.
    windows = p.startswith("\\") and not p.startswith(("\\#", "\\!"))
    if p.startswith("~") or windows or (len(p) > 1 and p[1] == ":") or p.startswith("//"):
        raise InvalidArgument(
            f"--ignore {pattern!r} is an absolute path", "use a path relative to the library root"
        )
    if ".." in PurePosixPath(p.lstrip("!/")).parts:
        raise InvalidArgument(
            f"--ignore {pattern!r} leaves the library", "patterns may not contain '..'"
        )
    bad: list[str] = []
    _spec([p], bad)
    if bad:
        raise InvalidArgument(
            f"--ignore {pattern!r} is not a valid gitignore pattern",
            "check its brackets and escapes, e.g. 'drafts/' or '*.tmp.md'",
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


# The --ignore patterns of the last run of the whole library, a JSON list in the index's meta: a
# later run, the daemon and `status` apply them too, as they keep the setext choice.
IGNORE_META = "ignore"


def ignore_from_meta(raw: str | None) -> list[str]:
    """The --ignore patterns an index remembers, from its IGNORE_META value ([] when it has none,
    or when the value is damaged). A pattern that --ignore would refuse now (damaged, or a later
    version's stricter rules) is left out: applied, it would fail every run and `status` over an
    option nobody gave to them."""
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [p for p in value if isinstance(p, str) and _valid_pattern(p)]


def _valid_pattern(pattern: str) -> bool:
    try:
        normalize_ignore_pattern(pattern)
    except InvalidArgument:
        return False
    return True


def remembered_ignore(store: Store) -> list[str]:
    """The --ignore patterns `store` remembers."""
    return ignore_from_meta(store.get_meta(IGNORE_META))


class IgnoreRules:
    """Decides whether a library-relative path is excluded. `extra_patterns` are relative to
    the library (a leading `/` anchors): an absolute path the user typed is made relative where
    it is given (`normalize_ignore_pattern` with the root), not on every run that applies the
    remembered pattern, when the folder it named may be gone or the library moved."""

    def __init__(self, root: Path, extra_patterns: list[str] | None = None) -> None:
        self.root = root
        # What is wrong with an ignore file, by file (lines left out, not a regular file): each
        # run warns about it.
        self.problems: dict[str, str] = {}
        extra = [normalize_ignore_pattern(p) for p in extra_patterns or []]
        lines = self._lines(IGNORE_FILE_NAME)
        self.root_spec = _spec(lines + extra) if lines or extra else None
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}

    def _lines(self, rel: str) -> list[str]:
        """The valid pattern lines of one ignore file ([] when it does not exist)."""
        text = _read_rules_file(self.root / rel)
        if text is None:
            self.problems[rel] = "not a regular file (a FIFO, a device?): left out"
            return []
        if isinstance(text, OSError):  # its rules left out: what they keep out is indexed
            self.problems[rel] = f"cannot be read ({text.strerror or text}): its rules are left out"
            return []
        bad: list[str] = []
        _spec(text.splitlines(), bad)
        if bad:
            shown = ", ".join(repr(line) for line in bad[:3]) + (", …" if len(bad) > 3 else "")
            self.problems[rel] = f"not a valid ignore pattern, left out: {shown}"
        return [line for line in text.splitlines() if line not in bad]

    def _gitignore(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        if rel_dir not in self._gitignores:
            lines = self._lines(f"{rel_dir}/.gitignore" if rel_dir else ".gitignore")
            self._gitignores[rel_dir] = _spec(lines) if lines else None
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

    def folder_excluded(self, rel: str) -> bool:
        """A folder is excluded when it or any ancestor is hidden or ignored as a folder. (What
        rules say of the files inside it is asked file by file: `*.md` then `!README.md` keeps
        every folder's README.)"""
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts):
            return True
        return any(self.ignored("/".join(parts[:i]), is_dir=True) for i in range(1, len(parts) + 1))

    def excluded_by_path(self, rel: str) -> bool:
        """A file is excluded when it or any ancestor folder is hidden or ignored."""
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts):
            return True
        for i in range(1, len(parts)):
            if self.ignored("/".join(parts[:i]), is_dir=True):
                return True
        return self.ignored(rel)


def _read_rules_file(path: Path) -> str | OSError | None:
    """An ignore file's text (its first MAX_IGNORE_FILE_BYTES): '' when there is none, None when
    it is not a regular file, the error when it cannot be read (permission denied). A FIFO named
    `.gitignore` must not hang a run (see `reading`)."""
    try:
        with open_regular(str(path)) as (fd, _):
            data = read_at_most(fd, MAX_IGNORE_FILE_BYTES)
    except Unreadable:
        return None
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError as exc:
        return exc
    return data.decode("utf-8", errors="replace")


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES) and not name.startswith(".")


def holds_markdown(root: Path, budget: int = EMPTY_ROOT_SCAN_ENTRIES) -> bool:
    """True when a Markdown file lies somewhere under `root` (dot-folders and symlinks skipped).

    A quick check, not a scan: it stops at the first Markdown file, and after `budget` directory
    entries it answers True (a folder that big is not the empty one this check is for).
    """
    pending = [root]
    seen = 0
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > budget:
                        return True
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    elif is_markdown(entry.name) and entry.is_file(follow_symlinks=False):
                        return True
        except OSError:
            continue
    return False


def below_any(path: str, folders: list[str]) -> bool:
    """Whether `path` is one of `folders` or lies below one."""
    return any(path == f or path.startswith(f + "/") for f in folders)


def scan(root: Path, rules: PathRules, *, part: bool = False) -> ScanResult:
    """Walk the library once: every Markdown file that is not excluded, with size and mtime.

    `part`: `root` is a folder of the library (a daemon's dirty folder), which may be gone by the
    time it is listed, like any folder below it; the library folder itself gone is an error.
    """
    result = ScanResult({})
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        abs_dir = root / rel_dir if rel_dir else root
        try:
            entries = list(os.scandir(abs_dir))
        except OSError as exc:
            if (rel_dir or part) and isinstance(exc, (FileNotFoundError, NotADirectoryError)):
                continue  # gone since its parent was listed (a checkout): its files are gone
            result.errors.append((display_path(rel_dir) or ".", exc.strerror or str(exc)))
            result.unreadable.append(rel_dir)
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                _visit(entry, rel, rules, stack, result)
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone since its folder was listed: not on disk, not unreadable
            except OSError as exc:
                result.errors.append((display_path(rel), exc.strerror or str(exc)))
                result.unreadable.append(rel)
    return result


def _visit(
    entry: os.DirEntry[str], rel: str, rules: PathRules, stack: list[str], result: ScanResult
) -> None:
    """Scan one directory entry: descend into a folder, record a Markdown file, or skip it."""
    if entry.is_symlink():
        return
    is_dir = entry.is_dir(follow_symlinks=False)
    if not is_dir and (not is_markdown(entry.name) or not entry.is_file(follow_symlinks=False)):
        return
    if rules.ignored(rel, is_dir=is_dir):
        return
    problem = name_problem(entry.name)
    if problem:
        result.skipped[display_path(rel)] = problem
    elif is_dir:
        stack.append(rel)
    else:
        st = entry.stat(follow_symlinks=False)
        result.files[rel] = FileStat(st.st_size, st.st_mtime_ns, st.st_nlink)


# ----- linear-time gitignore patterns ----------------------------------------------------------
_STAR = "[^/]*"
# One fixed-width regex atom of pathspec's translation: an escaped character, a character class
# (`?` becomes `[^/]`, `[abc]` stays), or a plain character.
_ATOM = re.compile(r"\\.|\[\^?\]?[^\]]*\]|[^\\\[\]()?*+.{}|^$/]")


def _linear_regex(regex: str) -> str:
    """Rewrite `[^/]*P1[^/]*P2…[^/]*` so each star before a fixed-width piece matches lazily and
    atomically: it takes the piece's first occurrence and never retries. For stars within one path
    segment that first occurrence is always as good as any later one, so the match is the same,
    and the work is linear in the name's length instead of exponential in the number of stars.
    """
    while _STAR + _STAR in regex:
        regex = regex.replace(_STAR + _STAR, _STAR)
    out: list[str] = []
    rest = regex
    while _STAR in rest:
        head, _, rest = rest.partition(_STAR)
        out.append(head)
        piece, tail = _fixed_piece(rest)
        if piece and tail.startswith(_STAR):
            out.append(f"(?>{_STAR}?{piece})")
            rest = tail
        else:
            out.append(_STAR)
    out.append(rest)
    return "".join(out)


def _fixed_piece(text: str) -> tuple[str, str]:
    """The longest prefix of `text` made of fixed-width atoms (no negated class but `[^/]`)."""
    pos = 0
    while pos < len(text) and not text.startswith(_STAR, pos):
        m = _ATOM.match(text, pos)
        if m is None or (m.group().startswith("[^") and m.group() != "[^/]"):
            break
        pos = m.end()
    return text[:pos], text[pos:]


class _LinearPattern(GitIgnoreSpecPattern):
    """Gitignore pattern whose regex can't backtrack exponentially (see `_linear_regex`)."""

    @classmethod
    def pattern_to_regex(cls, pattern: str) -> tuple[str | None, bool | None]:  # type: ignore[override]
        regex, include = super().pattern_to_regex(pattern)
        return (_linear_regex(regex) if isinstance(regex, str) else regex), include


def _spec(lines: list[str], bad: list[str] | None = None) -> pathspec.GitIgnoreSpec:
    """The patterns of `lines`; a line that is no valid pattern (`[z-a]`, a lone `!`) is left
    out and appended to `bad`, as git itself ignores it, instead of failing every run."""
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines, _LinearPattern, backend="simple")
    except (ValueError, re.error):
        good = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line], _LinearPattern, backend="simple")
            except (ValueError, re.error):
                if bad is not None:
                    bad.append(line)
            else:
                good.append(line)
        return pathspec.GitIgnoreSpec.from_lines(good, _LinearPattern, backend="simple")

"""A seeded random file-system workload over a small Markdown library, the way editors and git touch it.

Every document carries a stamp (`s<id>v<version>`) in its title, every heading and every paragraph,
so a reader can tell a whole document from a mixture of two versions.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
    "river mountain library index section chapter reader writer watcher daemon "
    "数据 安全 管理 配置 文档 索引 检索 章节"
).split()
STAMP = re.compile(r"\bs(\d+)v(\d+)\b")
FOLDERS = ["notes", "notes/deep", "guides", "specs", "archive/old"]
CHECKOUT_FILES = 200


@dataclass
class Workload:
    root: Path
    seed: int
    rng: random.Random = field(init=False)
    serial: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    version: int = 0
    branch: str = "a"

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # ----- content ----------------------------------------------------------------------------
    def doc(self, size: int | None = None) -> str:
        """A document whose every heading and paragraph carries one fresh stamp."""
        self.serial += 1
        stamp = f"s{self.serial}v{self.rng.randrange(1000)}"
        rng = self.rng
        out = [f"# {rng.choice(WORDS).title()} {rng.choice(WORDS)} {stamp}", ""]
        n_sections = size if size is not None else rng.randint(1, 6)
        for i in range(n_sections):
            level = rng.choice([2, 2, 3])
            out += [f"{'#' * level} {rng.choice(WORDS)} part {i} {stamp}", ""]
            for _ in range(rng.randint(1, 3)):
                words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
                out += [f"{words} {stamp}.", ""]
            if rng.random() < 0.3:
                target = rng.choice(["../guides/a1.md", "notes/n2.md", "missing.md", "b3.md"])
                out += [f"See [{rng.choice(WORDS)}]({target}) {stamp}.", ""]
        return "\n".join(out)

    # ----- helpers ----------------------------------------------------------------------------
    def _md_files(self) -> list[Path]:
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "repo"]
            out += [Path(dirpath, f) for f in filenames if f.endswith(".md")]
        return sorted(out)

    def _dirs(self) -> list[Path]:
        out = []
        for dirpath, dirnames, _ in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "repo"]
            out += [Path(dirpath, d) for d in dirnames]
        return sorted(out)

    def _new_path(self) -> Path:
        folder = self.rng.choice(
            ["", *FOLDERS, *[str(d.relative_to(self.root)) for d in self._dirs()]]
        )
        self.serial += 1
        ext = ".markdown" if self.rng.random() < 0.1 else ".md"
        return self.root / folder / f"f{self.serial}{ext}"

    def _pick(self) -> Path | None:
        files = self._md_files()
        return self.rng.choice(files) if files else None

    # ----- operations -------------------------------------------------------------------------
    def setup(self) -> None:
        for folder in FOLDERS:
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        for _ in range(40):
            self.create()
        self.checkout("a")
        self.ops.clear()

    def create(self) -> None:
        path = self._new_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.doc(), encoding="utf-8")

    def edit(self) -> None:
        if (p := self._pick()) is not None:
            p.write_text(self.doc(), encoding="utf-8")

    def atomic_save(self) -> None:
        """Editor style: write `.name.tmp` beside the file, then rename it over the file."""
        if (p := self._pick()) is not None:
            tmp = p.with_name(f".{p.name}.{self.serial}.tmp")
            tmp.write_text(self.doc(), encoding="utf-8")
            os.replace(tmp, p)

    def same_size_rewrite(self) -> None:
        """Two quick same-size writes: the second may keep the first's mtime (racy clean)."""
        if (p := self._pick()) is not None:
            text = self.doc()
            p.write_text(text, encoding="utf-8")
            p.write_text(text.replace(" part 0 ", " PART 0 ", 1), encoding="utf-8")

    def rename(self) -> None:
        if (p := self._pick()) is not None:
            dest = self._new_path()
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(p, dest)

    def delete(self) -> None:
        if (p := self._pick()) is not None:
            p.unlink()

    def move_folder(self) -> None:
        dirs = self._dirs()
        if dirs:
            src = self.rng.choice(dirs)
            self.serial += 1
            parent = self.rng.choice([self.root, *[d for d in dirs if src not in (d, *d.parents)]])
            dest = parent / f"moved{self.serial}"
            os.rename(src, dest)

    def delete_folder(self) -> None:
        dirs = [d for d in self._dirs() if d.name not in ("notes", "guides")]
        if dirs:
            shutil.rmtree(self.rng.choice(dirs))

    def new_folder(self) -> None:
        """mkdir and fill it at once (files may land before the watch on the folder does)."""
        self.serial += 1
        d = self.root / self.rng.choice(["", "notes"]) / f"new{self.serial}" / "sub"
        d.mkdir(parents=True)
        for i in range(self.rng.randint(1, 5)):
            (d / f"x{i}.md").write_text(self.doc(), encoding="utf-8")
            (d.parent / f"y{i}.md").write_text(self.doc(), encoding="utf-8")

    def gitignore(self) -> None:
        """Add or drop a rule in the root or a folder's .gitignore (atomic save half the time)."""
        folder = self.rng.choice([self.root, self.root / "notes", self.root / "guides"])
        folder.mkdir(parents=True, exist_ok=True)
        gi = folder / ".gitignore"
        rules = gi.read_text(encoding="utf-8").splitlines() if gi.exists() else []
        candidates = ["deep/", "f1*.md", "*.markdown", "moved*/", "!f17.md", "new*/", "a1*.md"]
        if rules and self.rng.random() < 0.5:
            rules.remove(self.rng.choice(rules))
        else:
            rules.append(self.rng.choice(candidates))
        text = "\n".join(rules) + "\n"
        if self.rng.random() < 0.5:
            tmp = folder / ".gitignore.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, gi)
        else:
            gi.write_text(text, encoding="utf-8")

    def noise(self) -> None:
        """Files the daemon must ignore: dot-folders, non-Markdown, editor swap files."""
        self.serial += 1
        where = self.rng.choice([".git/objects", ".cache", "notes/.hidden"])
        (self.root / where).mkdir(parents=True, exist_ok=True)
        (self.root / where / f"n{self.serial}.md").write_text(self.doc(1), encoding="utf-8")
        (self.root / "notes").mkdir(exist_ok=True)
        (self.root / f"notes/.f{self.serial}.md.swp").write_text("swap", encoding="utf-8")
        (self.root / f"t{self.serial}.txt").write_text("text", encoding="utf-8")

    def checkout(self, branch: str | None = None) -> None:
        """Switch `repo/` between two checkouts of 200 files, the way git does: unlink, write."""
        self.branch = branch or ("b" if self.branch == "a" else "a")
        repo = self.root / "repo"
        wanted: dict[str, str] = {}
        rng = random.Random(f"{self.seed}-{self.branch}")  # each branch is always the same tree
        for i in range(CHECKOUT_FILES):
            if (i % 10 == 0) != (self.branch == "b"):  # 20 files exist on one branch only
                continue
            folder = f"part{i % 7}" if i % 3 else f"part{i % 7}/sub{i % 2}"
            same = i % 4 == 0  # a quarter of the files are equal on both branches
            body_rng = random.Random(f"{self.seed}-{i}") if same else rng
            words = " ".join(body_rng.choice(WORDS) for _ in range(body_rng.randint(30, 200)))
            tag = "common" if same else self.branch
            wanted[f"{folder}/c{i}.md"] = (
                f"# Checkout file {i} {tag}\n\n## Body s{9000 + i}v{0 if same else ord(self.branch)}\n\n{words} s{9000 + i}v{0 if same else ord(self.branch)}.\n"
            )
        existing = (
            {str(p.relative_to(repo)): p for p in repo.rglob("*.md")} if repo.exists() else {}
        )
        for rel, p in existing.items():
            if rel not in wanted:
                p.unlink()
        for rel, text in wanted.items():
            p = repo / rel
            if rel in existing:
                if p.read_text(encoding="utf-8") == text:
                    continue
                p.unlink()
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        for d in sorted(repo.rglob("*"), reverse=True):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()

    OPS = (
        ("create", 16),
        ("edit", 18),
        ("atomic_save", 16),
        ("same_size_rewrite", 4),
        ("rename", 10),
        ("delete", 8),
        ("move_folder", 3),
        ("delete_folder", 1),
        ("new_folder", 3),
        ("gitignore", 4),
        ("noise", 3),
    )

    def step(self) -> str:
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        name = self.rng.choices(names, weights)[0]
        getattr(self, name)()
        self.ops[name] = self.ops.get(name, 0) + 1
        return name

    def run(self, n_ops: int, *, checkouts_every: int = 150) -> None:
        """`n_ops` operations with checkout switches in between and bursts separated by pauses."""
        for i in range(n_ops):
            if i and i % checkouts_every == 0:
                self.checkout()
                self.ops["checkout"] = self.ops.get("checkout", 0) + 1
            else:
                self.step()
            pause = self.rng.random()
            if pause < 0.05:
                time.sleep(0.06)  # let a quiet window pass now and then: batches of every size
            elif pause < 0.2:
                time.sleep(0.002)

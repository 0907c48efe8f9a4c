"""Sub-commands beyond index and tree; registered here so cli.py stays small."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def register(sub: Any, common: Callable[..., None], indexing: Callable[..., None]) -> None:
    pass

"""A worker that failed becomes an error notification, wherever the worker ran.

Textual posts `Worker.StateChanged` to the node that started the worker and does not bubble it,
so the app's handler only sees the app's own workers: each screen or widget that starts workers
forwards its own failures here, or they vanish without a word.
"""

from __future__ import annotations

from textual.dom import DOMNode
from textual.worker import Worker, WorkerState

from markindex_core.errors import MarkindexError
from markindex_core.text.safe import printable


def failure(event: Worker.StateChanged) -> BaseException | None:
    """The error a worker ended with, or None when it did not fail."""
    if event.state != WorkerState.ERROR:
        return None
    return event.worker.error


def describe(error: BaseException) -> str:
    """One line for a person: the core's message and hint, or the error's type and text."""
    if isinstance(error, MarkindexError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def report_failure(node: DOMNode, event: Worker.StateChanged) -> BaseException | None:
    """Notify the user of a failed worker (escaped, no markup); returns the error."""
    error = failure(event)
    if error is not None:
        node.app.notify(
            printable(describe(error)),
            title=(event.worker.name or "error").replace("_", " "),
            severity="error",
            markup=False,
        )
    return error

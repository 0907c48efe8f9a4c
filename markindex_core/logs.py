"""Logging for every command, set up once on the `markindex` logger: stderr, text or JSON lines.

Modules log to children of `markindex` (`markindex.daemon`, `markindex.watch`, `markindex.mcp`,
`markindex.tools`, …), so one handler on the parent formats all of them, including loggers
added later. Warnings of the libraries underneath (the MCP SDK, uvicorn, watchdog) go through
the same handler on the root logger. stdout is never used: for `mcp` and `daemon` it is the wire.
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
from typing import TextIO

from markindex_core.text.safe import json_controls_escaped, printable

LOGGER_NAME = "markindex"
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"
TEXT_DATE_FORMAT = "%H:%M:%S"


class JsonLines(logging.Formatter):
    """One JSON object per record: at, level, logger, message (and the traceback, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "at": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json_controls_escaped(jsonlib.dumps(line, ensure_ascii=False))


class TextLines(logging.Formatter):
    """Readable lines; text from documents (paths, titles, refused requests) may carry control
    characters, which are shown as escapes rather than sent to the terminal."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT, TEXT_DATE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), multiline=True)


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time of the record (test capture, a terminal
    app's redirect), not to the stream that was current at set-up."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler.__init__ assigns it
        pass


def _ours(record: logging.LogRecord) -> bool:
    return record.name == LOGGER_NAME or record.name.startswith(LOGGER_NAME + ".")


def _handler(formatter: logging.Formatter) -> logging.Handler:
    handler = _CurrentStderr()
    handler.setFormatter(formatter)
    handler.set_name(LOGGER_NAME)
    return handler


def _replace(logger: logging.Logger, handler: logging.Handler) -> None:
    for old in [h for h in logger.handlers if h.get_name() == LOGGER_NAME]:
        logger.removeHandler(old)
    logger.addHandler(handler)


def setup_logging(json: bool = False, verbose: bool = False) -> logging.Logger:
    """Send every `markindex.*` record at INFO (DEBUG with `verbose`) to stderr, as JSON lines
    with `json`; other libraries' warnings go the same way. Calling it again replaces the
    previous set-up rather than adding a second handler.

    Records still propagate to the root logger (where test capture listens); the root handler
    added here skips them, so each line is written once.

    Returns:
        The `markindex` logger.
    """
    formatter: logging.Formatter = JsonLines() if json else TextLines()
    logger = logging.getLogger(LOGGER_NAME)
    _replace(logger, _handler(formatter))
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    libraries = _handler(formatter)
    libraries.addFilter(lambda record: not _ours(record))
    _replace(logging.getLogger(), libraries)
    return logger

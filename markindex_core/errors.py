"""Errors raised by the core; each carries a hint that says what to do next."""

from __future__ import annotations


class MarkindexError(Exception):
    """Base error: a message for humans plus a hint for the next step."""

    code = "ERROR"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class LibraryNotFound(MarkindexError):
    code = "NOT_FOUND"


class IndexMissing(MarkindexError):
    code = "INDEX_MISSING"


class WriterBusy(MarkindexError):
    code = "WRITER_BUSY"


class ReadOnlyLibrary(MarkindexError):
    code = "READ_ONLY"


class InvalidArgument(MarkindexError):
    code = "INVALID_INPUT"


class UsageError(InvalidArgument):
    """Options that cannot go together, or a value out of its range: a usage error (exit 2),
    like those argparse finds, only found after parsing."""

    code = "USAGE"


class OtherLibrary(MarkindexError):
    """The index file holds another library: writing this one into it would remove that one's."""

    code = "OTHER_LIBRARY"


class IndexReplaced(MarkindexError):
    """The index file was deleted or replaced while a run wrote it: what it wrote is lost."""

    code = "INDEX_REPLACED"


class DiskFull(MarkindexError):
    """The disk (or a file size limit) left no room to write the index."""

    code = "DISK_FULL"


class OutOfDescriptors(MarkindexError):
    """This process (or the system) has no file descriptor left: it says nothing of any file."""


class LibraryUnreadable(MarkindexError):
    """The library folder exists but cannot be listed: nothing in it can be reconciled."""

    code = "LIBRARY_UNREADABLE"


class PermissionDenied(MarkindexError):
    """The index exists but this user may not read (or write) it: not a missing index."""

    code = "PERMISSION_DENIED"


class OutputClosed(MarkindexError):
    """Standard output is closed (`>&-`): what the command found cannot be printed."""

    code = "OUTPUT_CLOSED"


class IndexUnusable(MarkindexError):
    """The index file opened but is damaged, or is not a markindex database at all."""

    code = "INDEX_UNUSABLE"


class ModelUnavailable(MarkindexError):
    """A model was asked for but cannot be used: the extra, its SDK or a key is missing."""

    code = "MODEL_UNAVAILABLE"


class ModelCallFailed(MarkindexError):
    """A model request failed after its retries (HTTP error, refused request, broken response)."""

    code = "MODEL_FAILED"

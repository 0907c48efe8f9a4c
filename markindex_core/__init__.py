"""markindex core: parse, index, search and serve libraries of long Markdown documents."""

from markindex_core.errors import MarkindexError
from markindex_core.library import Library

__all__ = ["Library", "MarkindexError"]
__version__ = "0.1.0"

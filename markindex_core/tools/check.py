"""Argument checks for the agent tools: a small JSON-schema validator and library-path safety.

The validator reads the same schema dicts the MCP server publishes, so there is one source of truth.
It knows only the subset the contract uses: object, string, integer, boolean, array, null and type
lists; required, additionalProperties, minimum/maximum, minLength/maxLength, minItems/maxItems,
items, default.
"""

from __future__ import annotations

import re
from typing import Any

from markindex_core.config import MAX_STRING_ARG, TOOL_ECHO_CHARS, TOOL_UNKNOWN_FIELDS_SHOWN
from markindex_core.errors import MarkindexError
from markindex_core.store.db import clean_relative
from markindex_core.text.safe import utf8_encodable


class BadInput(MarkindexError):
    """Arguments that do not fit the schema or are unsafe; becomes an INVALID_INPUT envelope."""

    code = "INVALID_INPUT"

    def __init__(self, message: str, field: str = "", **details: Any) -> None:
        super().__init__(message)
        self.details: dict[str, Any] = {"field": field, **details} if field else dict(details)


_JSON_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _type_ok(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        # bool is an int subclass in Python, but not an integer in JSON.
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    return name == "null" and value is None


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _check_string(schema: dict[str, Any], value: str, where: str) -> None:
    limit = min(int(schema.get("maxLength", MAX_STRING_ARG)), MAX_STRING_ARG)
    if len(value) > limit:
        raise BadInput(
            f"`{where}` is {len(value)} characters long; the limit is {limit}",
            where,
            limit=limit,
        )
    if len(value) < int(schema.get("minLength", 0)):
        raise BadInput(f"`{where}` must not be empty", where)
    if not value.isascii() and not utf8_encodable(value):
        raise BadInput(  # JSON over stdio can't carry them; a Python caller can pass them
            f"`{where}` holds lone surrogates (\\ud800-\\udfff), which are not text", where
        )
    fmt = schema.get("format")
    if fmt == "library-path":
        library_path(value, where, folder=True)
    elif fmt == "node-id":
        node_id(value, where)


def _shown(value: int) -> str:
    """An integer as an error quotes it. JSON numbers have no size limit: one of thousands of
    digits is not echoed back (nor written out: Python refuses past 4 300 digits)."""
    if value.bit_length() <= 64:
        return str(value)
    return "a negative number too large to show" if value < 0 else "a number too large to show"


def _check_integer(schema: dict[str, Any], value: int, where: str) -> None:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise BadInput(
            f"`{where}` must be between {lo} and {hi}, got {_shown(value)}",
            where,
            minimum=lo,
            maximum=hi,
        )


def _check_array(schema: dict[str, Any], value: list[Any], where: str) -> list[Any]:
    lo, hi = schema.get("minItems", 0), schema.get("maxItems")
    if len(value) < lo or (hi is not None and len(value) > hi):
        raise BadInput(
            f"`{where}` must hold {lo} to {hi} items, got {len(value)}",
            where,
            min_items=lo,
            max_items=hi,
        )
    items = schema.get("items")
    if items:
        return [_check_value(items, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _check_value(schema: dict[str, Any], value: Any, where: str) -> Any:
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    if isinstance(value, float) and "integer" in names and value.is_integer():
        value = int(value)  # 2.0 is an integer in JSON
    if names and not any(_type_ok(value, n) for n in names):
        want = " or ".join(_JSON_TYPES.get(n, n) for n in names)
        raise BadInput(f"`{where}` must be {want}, got {describe(value)}", where)
    if isinstance(value, str):
        _check_string(schema, value, where)
    elif isinstance(value, int) and not isinstance(value, bool):
        _check_integer(schema, value, where)
    elif isinstance(value, list):
        value = _check_array(schema, value, where)
    elif isinstance(value, dict):
        value = validate(schema, value)
    return value


def _unknown_fields(unknown: list[str], allowed: list[str]) -> BadInput:
    """The error for fields the schema does not know: the first few named (an object can hold
    any number of them, and the error must stay small), with their count."""
    shown = unknown[:TOOL_UNKNOWN_FIELDS_SHOWN]
    names = ", ".join(shown)
    if len(unknown) > len(shown):
        names += f", … ({len(unknown)} in all)"
    return BadInput(
        f"unknown field(s): {names}",
        unknown[0],
        unknown=shown,
        unknown_total=len(unknown),
        allowed=allowed,
    )


def validate(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """Check `args` against an object schema; return a copy with defaults filled in.

    Raises:
        BadInput: with a message that names the field and says what it must be.
    """
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise BadInput(f"arguments must be a JSON object, got {describe(args)}")
    props: dict[str, Any] = schema.get("properties", {})
    if schema.get("additionalProperties") is False:
        unknown = sorted(str(k)[:TOOL_ECHO_CHARS] for k in args if k not in props)
        if unknown:
            raise _unknown_fields(unknown, sorted(props))
    missing = [k for k in schema.get("required", []) if k not in args]
    if missing:
        raise BadInput(f"missing required field(s): {', '.join(missing)}", missing[0])
    out: dict[str, Any] = {}
    for key, sub in props.items():
        if key in args:
            out[key] = _check_value(sub, args[key], key)
        elif "default" in sub:
            default = sub["default"]
            out[key] = list(default) if isinstance(default, list) else default
    return out


# ----- library paths -----------------------------------------------------------------------------
_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1, as the scanner refuses in names


def library_path(value: str, field: str, *, folder: bool = False) -> str:
    """A library-relative path as the index stores it, or BadInput for anything that could escape.

    Paths are only ever looked up in the index, never opened; this rejects what has no business in
    a library-relative path at all (`..`, absolute and drive paths, backslash tricks, NUL/controls)
    so such a call fails loudly instead of coming back as "not found".
    """
    if _CONTROL.search(value):
        raise BadInput(f"`{field}` contains control characters (NUL, newline, …)", field)
    if value.startswith(("/", "\\")) or _DRIVE.match(value):
        raise BadInput(
            f"`{field}` must be relative to the library root, not an absolute path", field
        )
    parts = re.split(r"[/\\]", value)
    if any(p == ".." for p in parts):
        raise BadInput(f"`{field}` must not contain `..`: paths stay inside the library", field)
    if "\\" in value:
        raise BadInput(f"`{field}` uses backslashes; library paths use `/`", field)
    clean = clean_relative(value)
    if not clean and not folder:
        raise BadInput(f"`{field}` is empty; pass a document path such as `guides/setup.md`", field)
    return clean


_NODE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def node_id(value: str, field: str) -> str:
    """Node ids are short tokens; anything else cannot be one (and is not echoed back whole)."""
    if not _NODE_ID.match(value):
        raise BadInput(
            f"`{field}` is not a node id (ids look like `34932829d6c2`; "
            "get them from get_document_structure)",
            field,
        )
    return value


class ToolFailure(MarkindexError):
    """A tool call that cannot be answered; becomes `{success: false, error, code, details, next_steps}`.

    Outside a tool call (the CLI, the terminal app) it reads as any `MarkindexError`: the message,
    with the `next_steps` message as the hint.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        next_steps: dict[str, Any] | None = None,
    ) -> None:
        steps_ = next_steps or {}
        super().__init__(message, str(steps_.get("message", "")))
        self.code = code
        self.details = details or {}
        self.next_steps = steps_


def steps(message: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The `next_steps` object: what to do next, in words and as ready-made calls. Arguments
    that are null are left out: the published schemas have no null (see `public_schema`), and
    a missing optional argument means the same."""
    out: dict[str, Any] = {"message": message}
    if calls:
        out["calls"] = [
            {"tool": name, "arguments": {k: v for k, v in args.items() if v is not None}}
            for name, args in calls
        ]
    return out

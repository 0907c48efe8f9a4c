"""Published tool schemas stay in the subset OpenAI, Anthropic and Gemini all accept."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from markindex_core.serve.mcp_server import PUBLISHED_KEYWORDS, mcp_tools, public_schema
from markindex_core.tools.check import validate
from markindex_core.tools.contract import TOOLS

GEMINI_TYPES = {"string", "integer", "number", "boolean", "array", "object"}


def _walk(schema: dict[str, Any], where: str) -> list[str]:
    problems = [f"{where}: keyword {k!r}" for k in schema if k not in PUBLISHED_KEYWORDS]
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in GEMINI_TYPES:
        problems.append(f"{where}: type {kind!r} is not one single type")
    if "default" in schema and schema["default"] is None:
        problems.append(f"{where}: null default")
    if kind != "object" and ("properties" in schema or "required" in schema):
        problems.append(f"{where}: properties on a non-object")
    for name, sub in schema.get("properties", {}).items():
        problems += _walk(sub, f"{where}.{name}")
    if "items" in schema:
        problems += _walk(schema["items"], f"{where}[]")
    return problems


def test_every_published_schema_is_single_typed_and_in_the_common_subset() -> None:
    tools = mcp_tools()
    assert len(tools) == 5
    problems: list[str] = []
    for tool in tools:
        schema = tool.input_schema
        Draft202012Validator.check_schema(schema)  # still valid JSON Schema
        assert schema["type"] == "object"
        assert set(schema.get("required", [])) <= set(schema["properties"])
        problems += _walk(schema, tool.name)
    assert problems == []


def test_optional_nullable_arguments_are_published_as_plain_strings() -> None:
    published = {t.name: t.input_schema for t in mcp_tools()}
    search = published["search_documents"]["properties"]
    assert search["folder"]["type"] == "string" and "default" not in search["folder"]
    assert search["doc_path"]["type"] == "string"
    assert published["get_document_structure"]["properties"]["node_id"]["type"] == "string"


def test_the_server_still_accepts_null_for_optional_arguments() -> None:
    """Agents that learned the old schema may still send null; the contract keeps accepting it."""
    spec = TOOLS["search_documents"].input_schema
    args = validate(spec, {"query": "x", "folder": None, "doc_path": None})
    assert args["query"] == "x" and args["folder"] is None
    assert public_schema(spec) != spec  # the published form differs, the contract doesn't

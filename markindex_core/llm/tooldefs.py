"""The five tools for agents outside markindex: instructions, a pydantic-ai toolset, and the
definitions in OpenAI and Anthropic tool formats, all built from the one tool contract.

    from markindex_core import Library
    from markindex_core.llm.tooldefs import AGENT_INSTRUCTIONS, openai_tools, anthropic_tools

    lib = Library("docs")
    tools = openai_tools()  # pass to chat.completions.create(tools=...)
    # for each tool call the model makes: lib.call_tool(call.function.name, json.loads(args))

Tool output is a JSON envelope string and document text inside it is untrusted data: hand it to
the model as a tool result, never as instructions. Only `toolset()` needs pydantic-ai.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from markindex_core.tools.contract import AGENT_INSTRUCTIONS, tool_specs

if TYPE_CHECKING:
    from markindex_core.llm.toolset import MarkindexToolset
    from markindex_core.tools.access import IndexAccess

__all__ = [
    "AGENT_INSTRUCTIONS",
    "anthropic_tools",
    "openai_tools",
    "portable_schema",
    "tool_names",
    "toolset",
]

_OUR_FORMATS = frozenset({"library-path", "node-id"})  # checked by the contract, unknown elsewhere


def portable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of an input schema without our own `format` names, which other validators reject."""
    out = copy.deepcopy(schema)
    stack: list[Any] = [out]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("format") in _OUR_FORMATS:
                del node["format"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def tool_names() -> list[str]:
    return [spec.name for spec in tool_specs()]


def openai_tools() -> list[dict[str, Any]]:
    """The five tools as OpenAI chat-completions `tools` entries (`type: function`)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": portable_schema(spec.input_schema),
            },
        }
        for spec in tool_specs()
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    """The five tools as Anthropic Messages API `tools` entries (`input_schema`)."""
    return [
        {
            "name": spec.name,
            "description": spec.description,
            "input_schema": portable_schema(spec.input_schema),
        }
        for spec in tool_specs()
    ]


def toolset(lib: IndexAccess) -> MarkindexToolset:
    """A ready pydantic-ai toolset running the five tools on `lib`: `Agent(..., toolsets=[...])`."""
    from markindex_core.llm.models import require_llm_extra

    require_llm_extra()
    from markindex_core.llm.toolset import MarkindexToolset

    return MarkindexToolset(lib)

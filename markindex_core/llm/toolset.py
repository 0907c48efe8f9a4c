"""The five tools as a pydantic-ai toolset: every call goes through the tool contract's
`call_tool_result`, so the model sees the same JSON envelopes as an MCP client.

Arguments are not validated by pydantic-ai: the raw arguments reach the contract, which answers
a bad call with an INVALID_INPUT envelope, so the model reads what to fix and the run goes on.
Arguments that are not even JSON get the same kind of envelope here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets.abstract import AbstractToolset, ToolsetTool

from markindex_core.config import RETRIEVE_TOOL_RETRIES, TOOL_ECHO_CHARS
from markindex_core.llm.tooldefs import portable_schema
from markindex_core.tools.access import IndexAccess
from markindex_core.tools.check import steps
from markindex_core.tools.contract import call_tool_result, tool_specs

_UNPARSEABLE = "\x00unparseable-arguments"  # key carrying arguments that were not JSON

# (tool name, arguments, envelope text, succeeded)
CallObserver = Callable[[str, Any, str, bool], None]


class _RawArguments:
    """A stand-in for pydantic-core's validator: pass arguments through, JSON-decoded when we can."""

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> Any:
        try:
            value = json.loads(input or "{}")
        except ValueError:
            text = (
                input.decode("utf-8", "replace") if isinstance(input, bytes | bytearray) else input
            )
            return {_UNPARSEABLE: text}
        return value if isinstance(value, dict) else {_UNPARSEABLE: str(input)}

    def validate_python(self, input: Any, **_: Any) -> Any:
        return input if isinstance(input, dict) else {_UNPARSEABLE: repr(input)}


@dataclass(frozen=True)
class _Definition:
    name: str
    description: str
    schema: dict[str, Any]


def _unparseable(name: str, text: str) -> str:
    return json.dumps(
        {
            "success": False,
            "error": f"the arguments of {name} are not a JSON object: {text[:TOOL_ECHO_CHARS]!r}",
            "code": "INVALID_INPUT",
            "details": {},
            "next_steps": steps(
                f"send the arguments as one JSON object matching the input schema of {name}"
            ),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


class MarkindexToolset(AbstractToolset[Any]):
    """browse_documents, get_document, get_document_structure, get_node_content, search_documents.

    `observe` sees every call with its envelope (retrieve uses it to count calls).
    """

    def __init__(
        self,
        lib: IndexAccess,
        *,
        max_retries: int = RETRIEVE_TOOL_RETRIES,
        observe: CallObserver | None = None,
        toolset_id: str = "markindex",
    ) -> None:
        self.lib = lib
        self.max_retries = max_retries
        self.observe = observe
        self._id = toolset_id
        self._definitions = [
            _Definition(s.name, s.description, portable_schema(s.input_schema))
            for s in tool_specs()
        ]

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            d.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=d.name, description=d.description, parameters_json_schema=d.schema
                ),
                max_retries=self.max_retries,
                args_validator=_RawArguments(),
            )
            for d in self._definitions
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> str:
        if _UNPARSEABLE in tool_args:
            text, ok = _unparseable(name, str(tool_args[_UNPARSEABLE])), False
        else:
            text, ok = call_tool_result(self.lib, name, tool_args)
        if self.observe is not None:
            self.observe(name, tool_args, text, ok)
        return text

"""Start the installed `markindex mcp` the way a JSON-config MCP host does (command + args from an
`mcpServers` entry, absolute paths, started from `/`) and use it with the official SDK client."""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def host_config(markindex: str, library: str, db: str) -> dict[str, object]:
    """What a user pastes into claude_desktop_config.json / .cursor/mcp.json (see README)."""
    return {
        "mcpServers": {"markindex": {"command": markindex, "args": ["mcp", library, "--db", db]}}
    }


async def main(markindex: str, library: str, db: str) -> None:
    entry = json.loads(json.dumps(host_config(markindex, library, db)))["mcpServers"]["markindex"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], cwd="/")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await asyncio.wait_for(session.initialize(), 30)
        assert init.instructions and "cite" in init.instructions.lower()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {
            "browse_documents",
            "get_document",
            "get_document_structure",
            "get_node_content",
            "search_documents",
        }, tools
        result = await session.call_tool("search_documents", {"query": "数据泄露"})
        envelope = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert envelope["success"] and envelope["data"]["results"], envelope
        print(f"mcp host: {len(tools)} tools, search ok ({len(envelope['data']['results'])} hits)")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

"""Long-running services over one library: the MCP server, the live-index daemon, its watcher and status."""

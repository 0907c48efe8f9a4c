"""server.json (MCP registry) stays in step with the package and the `mcp` command line."""

from __future__ import annotations

import json
import tomllib

import markindex_core
from markindex_core.cli.main import build_parser
from tests.paths import REPO


def test_server_json_matches_package_and_cli() -> None:
    server = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    package = server["packages"][0]
    assert (
        server["version"] == package["version"] == project["version"] == markindex_core.__version__
    )
    assert package["identifier"] == project["name"] and package["registryType"] == "pypi"
    assert len(server["description"]) <= 100
    argv = []
    for arg in package["packageArguments"]:
        assert arg["type"] == "positional", "ROOT is positional, never --root"
        argv.append(arg.get("value", "/abs/library"))
    args = build_parser().parse_args(argv)
    assert args.command == "mcp" and args.root == "/abs/library" and args.reindex_on_start

"""A small MCP client on the official Python SDK (`mcp` 1.30.0), talking to the
gateway of `mcp-supervisor serve` over streamable HTTP.

Run with the venv that `scripts/install-test-deps.sh` creates:

    .tools/venv/bin/python tests/interop/python_client.py URL [TOOL ARGS_JSON]...

It initializes a session with URL (e.g. http://127.0.0.1:7300/mcp), lists every
tool (following pagination), calls each TOOL with its JSON object ARGS_JSON in
order, and prints one JSON document on stdout:

    {"server": {"name": ..., "version": ...},
     "protocol_version": "...",
     "tools": ["demo__echo", ...],
     "calls": [{"tool": "demo__echo", "arguments": {...}, "is_error": false,
                "text": ["..."], "content": [...], "structured_content": null}]}

Exit codes: 0 the session worked (a call answered with `isError: true` is still
0: it is reported in the output), 1 connecting, listing or a call failed at the
protocol level (message on stderr), 2 bad command line. Used by
`tests/e2e/python_client.rs` and `scripts/smoke-make-run.sh`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

USAGE = "usage: python_client.py URL [TOOL ARGS_JSON]..."
# Every request is bounded: a gateway that never answers fails the run, never hangs it.
TIMEOUT_SECONDS = 60.0


def parse_calls(pairs: list[str]) -> list[tuple[str, dict[str, Any]]]:
    if len(pairs) % 2:
        raise ValueError("every TOOL needs an ARGS_JSON (use {} for none)")
    calls = []
    for tool, raw in zip(pairs[::2], pairs[1::2]):
        arguments = json.loads(raw)
        if not isinstance(arguments, dict):
            raise ValueError(f"arguments for {tool} must be a JSON object, got {raw}")
        calls.append((tool, arguments))
    return calls


async def run(url: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    http = httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_SECONDS))
    async with http, streamable_http_client(url, http_client=http) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools: list[str] = []
            cursor = None
            while True:
                page = await session.list_tools(cursor=cursor)
                tools.extend(tool.name for tool in page.tools)
                cursor = page.nextCursor
                if not cursor:
                    break
            results = []
            for tool, arguments in calls:
                result = await session.call_tool(tool, arguments)
                content = [item.model_dump(mode="json", exclude_none=True) for item in result.content]
                results.append(
                    {
                        "tool": tool,
                        "arguments": arguments,
                        "is_error": bool(result.isError),
                        "text": [item["text"] for item in content if item.get("type") == "text"],
                        "content": content,
                        "structured_content": result.structuredContent,
                    }
                )
            return {
                "server": {"name": init.serverInfo.name, "version": init.serverInfo.version},
                "protocol_version": str(init.protocolVersion),
                "tools": tools,
                "calls": results,
            }


def leaves(error: BaseException) -> list[BaseException]:
    """The real errors inside (nested) exception groups from anyio's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        calls = parse_calls(argv[2:])
    except ValueError as error:
        print(f"python_client: {error}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        output = asyncio.run(asyncio.wait_for(run(argv[1], calls), timeout=4 * TIMEOUT_SECONDS))
    except Exception as error:  # noqa: BLE001 - report anything, including task-group errors
        for leaf in leaves(error):
            print(f"python_client: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1
    print(json.dumps(output, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

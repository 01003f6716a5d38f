"""A small MCP client on the official Python SDK 2.x (`mcp` 2.3.0), talking to the
gateway of `mcp-supervisor serve` over streamable HTTP through the SDK's
high-level `Client`, the way current Python agents use it.

Run with the venv that `scripts/install-test-deps.sh` creates:

    .tools/venv2/bin/python tests/interop/python_client_v2.py [--mode MODE] URL [TOOL ARGS_JSON]...

MODE is the SDK's own: `auto` (the default, as in `Client(url)`: `server/discover`
first, which picks protocol 2026-07-28 when the server offers it) or `legacy`
(the `initialize` handshake). The script connects, lists every tool (following
pagination), calls each TOOL with its JSON object ARGS_JSON in order, and prints
one JSON document on stdout, the same shape as `python_client.py`:

    {"server": {"name": ..., "version": ...},
     "protocol_version": "...",
     "tools": ["demo__echo", ...],
     "calls": [{"tool": "demo__echo", "arguments": {...}, "is_error": false,
                "text": ["..."], "content": [...], "structured_content": null}]}

Exit codes: 0 the session worked (a call answered with `isError: true` is still
0: it is reported in the output), 1 connecting, listing or a call failed at the
protocol level (message on stderr; a result the SDK refuses to validate is such
a failure), 2 bad command line. Used by `tests/e2e/python_client.rs`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from mcp import Client

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


async def run(url: str, mode: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    async with Client(url, mode=mode, read_timeout_seconds=TIMEOUT_SECONDS) as client:
        tools: list[str] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(tool.name for tool in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        results = []
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments)
            content = [item.model_dump(mode="json", exclude_none=True) for item in result.content]
            results.append(
                {
                    "tool": tool,
                    "arguments": arguments,
                    "is_error": bool(result.is_error),
                    "text": [item["text"] for item in content if item.get("type") == "text"],
                    "content": content,
                    "structured_content": result.structured_content,
                }
            )
        info = client.server_info
        return {
            "server": {"name": info.name, "version": info.version} if info else None,
            "protocol_version": client.protocol_version,
            "tools": tools,
            "calls": results,
        }


def leaves(error: BaseException) -> list[BaseException]:
    """The real errors inside (nested) exception groups from anyio's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python_client_v2.py")
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto")
    parser.add_argument("url")
    parser.add_argument("calls", nargs="*", metavar="TOOL ARGS_JSON")
    args = parser.parse_args(argv[1:])
    try:
        calls = parse_calls(args.calls)
    except ValueError as error:
        parser.error(str(error))
    try:
        output = asyncio.run(asyncio.wait_for(run(args.url, args.mode, calls), timeout=4 * TIMEOUT_SECONDS))
    except Exception as error:  # noqa: BLE001 - report anything, including task-group errors
        for leaf in leaves(error):
            print(f"python_client_v2: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1
    print(json.dumps(output, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

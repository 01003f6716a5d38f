"""A Python SDK 2.x (`mcp` 2.3.0) client watching a tool's contract through the
gateway of `mcp-supervisor serve` (docs/CONTRACTS.md): it connects with
`Client(url)` (protocol 2026-07-28), opens `subscriptions/listen` for tool list
changes, and prints one JSON line per stage as it gets there:

    {"stage": "listed", "protocol_version": "...", "tools": [...]}
    {"stage": "held", "tools": [...], "is_error": true, "text": ["..."]}
    {"stage": "back", "tools": [...], "is_error": false, "text": ["..."]}

`listed` once connected; `held` once told the tools changed and TOOL is no
longer listed (then TOOL is called, and its answer printed); `back` once told
again and TOOL is listed again (called again). Each wait for a change is
bounded (60 s). Run with the venv that `scripts/install-test-deps.sh` creates:

    .tools/venv2/bin/python tests/interop/python_contracts_v2.py URL TOOL

Exit codes: 0 every stage reached; 1 a wait ran out or a request failed (on
stderr). Used by `tests/e2e/python_client.rs`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client

WAIT_SECONDS = 60


def say(**record: Any) -> None:
    print(json.dumps(record), flush=True)


async def names(client: Client) -> list[str]:
    listed: list[str] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        listed.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return listed


async def call(client: Client, tool: str) -> dict[str, Any]:
    result = await client.call_tool(tool, {"text": "hi"})
    texts = [block.text for block in result.content if getattr(block, "text", None) is not None]
    return {"is_error": bool(result.is_error), "text": texts}


async def until_told(client: Client, events: Any, tool: str, listed: bool) -> list[str]:
    """Waits for change events until TOOL is (or is not) listed."""
    while True:
        await asyncio.wait_for(events.__anext__(), WAIT_SECONDS)
        tools = await names(client)
        if (tool in tools) == listed:
            return tools


async def main(url: str, tool: str) -> None:
    async with Client(url, read_timeout_seconds=WAIT_SECONDS) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            events = subscription.__aiter__()
            say(stage="listed", protocol_version=client.protocol_version, tools=await names(client))
            tools = await until_told(client, events, tool, listed=False)
            say(stage="held", tools=tools, **await call(client, tool))
            tools = await until_told(client, events, tool, listed=True)
            say(stage="back", tools=tools, **await call(client, tool))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except Exception as error:  # noqa: BLE001 - any failure is the run's
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)

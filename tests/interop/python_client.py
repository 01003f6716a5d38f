"""A small MCP client on the official Python SDK (`mcp` 1.30.0), talking to the
gateway of `mcp-supervisor serve` over streamable HTTP.

Run with the venv that `scripts/install-test-deps.sh` creates:

    .tools/venv/bin/python tests/interop/python_client.py [--plan JSON|@FILE] URL [TOOL ARGS_JSON]...

It initializes a session with URL (e.g. http://127.0.0.1:7300/mcp), lists every
tool (following pagination), runs the steps of the plan in order, calls each
TOOL with its JSON object ARGS_JSON in order, and prints one JSON document on
stdout:

    {"server": {"name": ..., "version": ...},
     "protocol_version": "...",
     "tools": ["demo__echo", ...],
     "steps": [{"id": 0, "op": "read_resource", "ok": true, "result": {...}, "texts": ["..."]},
               {"id": 1, "op": "get_prompt", "ok": false,
                "error": {"type": "McpError", "code": -32602, "message": "...", "data": ...}}],
     "calls": [{"tool": "demo__echo", "arguments": {...}, "is_error": false,
                "text": ["..."], "content": [...], "structured_content": null}]}

The plan is a JSON array of steps, the same format as `python_client_v2.py`'s
(a subset of its ops): `{"op": "read_resource", "uri": "..."}`,
`{"op": "get_prompt", "name": "...", "arguments": {"arg1": "..."}}`,
`{"op": "call_tool", "name": "...", "arguments": {...}}`, and
`{"op": "list_prompts" | "list_resources" | "list_resource_templates"}` (every
page, items in `items`); each may have an `id` (echoed in its record; default:
its index) and `"expect_error": true` (failing with an error is then what the
step is for, and a result fails the run). A step's `result` is the result as it
came on the wire (camelCase, only the fields that were set); `texts` are the
text contents of a resource or the text messages of a prompt.

Exit codes: 0 the session worked (a call answered with `isError: true` is still
0: it is reported in the output, and so is a step that expected its error), 1
connecting, listing, a step or a call failed at the protocol level (message on
stderr; a failed step is reported with `ok: false` and the run goes on, a
failed TOOL ARGS_JSON call ends it), 2 bad command line. Used by `tests/e2e/python_client.rs` and
`scripts/smoke-make-run.sh`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, McpError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent, TextResourceContents
from pydantic import AnyUrl

USAGE = "usage: python_client.py [--plan JSON|@FILE] URL [TOOL ARGS_JSON]..."
# Every request is bounded: a gateway that never answers fails the run, never hangs it.
TIMEOUT_SECONDS = 60.0

# op -> (ClientSession method, the result's list field)
LIST_OPS = {
    "list_prompts": ("list_prompts", "prompts"),
    "list_resources": ("list_resources", "resources"),
    "list_resource_templates": ("list_resource_templates", "resourceTemplates"),
}
OPS = set(LIST_OPS) | {"read_resource", "get_prompt", "call_tool"}


def wire(model: Any) -> Any:
    """A pydantic model as the JSON it came as (only the fields that were set)."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


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


def parse_plan(raw: str) -> list[dict[str, Any]]:
    text = Path(raw[1:]).read_text() if raw.startswith("@") else raw
    plan = json.loads(text)
    if not isinstance(plan, list) or not all(isinstance(step, dict) and "op" in step for step in plan):
        raise ValueError("the plan must be a JSON array of objects, each with an `op`")
    for step in plan:
        if step["op"] not in OPS:
            raise ValueError(f"unknown op {step['op']!r} (known: {', '.join(sorted(OPS))})")
    return plan


def tool_outcome(result: Any) -> dict[str, Any]:
    content = [item.model_dump(mode="json", exclude_none=True) for item in result.content]
    return {
        "is_error": bool(result.isError),
        "text": [item["text"] for item in content if item.get("type") == "text"],
        "content": content,
        "structured_content": result.structuredContent,
    }


async def run_step(session: ClientSession, step: dict[str, Any]) -> dict[str, Any]:
    op = step["op"]
    if op in LIST_OPS:
        method, field = LIST_OPS[op]
        items: list[Any] = []
        cursor = None
        while True:
            page = await getattr(session, method)(cursor=cursor)
            items.extend(wire(item) for item in getattr(page, field))
            cursor = page.nextCursor
            if not cursor:
                return {"items": items}
    if op == "read_resource":
        result = await session.read_resource(AnyUrl(step["uri"]))
        texts = [item.text for item in result.contents if isinstance(item, TextResourceContents)]
        return {"result": wire(result), "texts": texts}
    if op == "get_prompt":
        result = await session.get_prompt(step["name"], step.get("arguments"))
        texts = [m.content.text for m in result.messages if isinstance(m.content, TextContent)]
        return {"result": wire(result), "texts": texts}
    # call_tool
    result = await session.call_tool(step["name"], step.get("arguments") or {})
    return {"result": wire(result), **tool_outcome(result)}


def error_record(error: BaseException) -> dict[str, Any]:
    record: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, McpError):
        record["code"] = error.error.code
        if error.error.data is not None:
            record["data"] = error.error.data
    return record


async def run(
    url: str, plan: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, Any], list[str]]:
    failures: list[str] = []
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
            steps = []
            for index, step in enumerate(plan):
                name = f"step {step.get('id', index)} ({step['op']})"
                head = {"id": step.get("id", index), "op": step["op"]}
                try:
                    record = {**head, "ok": True, **await run_step(session, step)}
                    if step.get("expect_error"):
                        failures.append(f"{name}: expected an error, got a result")
                except Exception as error:  # noqa: BLE001 - a failed step is reported, the run goes on
                    if not step.get("expect_error"):
                        failures.append(f"{name}: {type(error).__name__}: {error}")
                    record = {**head, "ok": False, "error": error_record(error)}
                steps.append(record)
            results = []
            for tool, arguments in calls:
                result = await session.call_tool(tool, arguments)
                results.append({"tool": tool, "arguments": arguments, **tool_outcome(result)})
            output = {
                "server": {"name": init.serverInfo.name, "version": init.serverInfo.version},
                "protocol_version": str(init.protocolVersion),
                "tools": tools,
                "steps": steps,
                "calls": results,
            }
            return output, failures


def leaves(error: BaseException) -> list[BaseException]:
    """The real errors inside (nested) exception groups from anyio's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main(argv: list[str]) -> int:
    args = argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        plan: list[dict[str, Any]] = []
        if args[0] == "--plan":
            if len(args) < 3:
                raise ValueError("--plan needs a plan and a URL")
            plan = parse_plan(args[1])
            args = args[2:]
        calls = parse_calls(args[1:])
    except (ValueError, OSError) as error:
        print(f"python_client: {error}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        output, failures = asyncio.run(
            asyncio.wait_for(run(args[0], plan, calls), timeout=4 * TIMEOUT_SECONDS)
        )
    except Exception as error:  # noqa: BLE001 - report anything, including task-group errors
        for leaf in leaves(error):
            print(f"python_client: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1
    print(json.dumps(output, indent=2))
    for failure in failures:
        print(f"python_client: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""A small MCP client on the official Python SDK 2.x (`mcp` 2.3.0), talking to the
gateway of `mcp-supervisor serve` over streamable HTTP through the SDK's
high-level `Client`, the way current Python agents use it.

Run with the venv that `scripts/install-test-deps.sh` creates:

    .tools/venv2/bin/python tests/interop/python_client_v2.py [OPTIONS] URL [TOOL ARGS_JSON]...

MODE (`--mode`) is the SDK's own: `auto` (the default, as in `Client(url)`:
`server/discover` first, which picks protocol 2026-07-28 when the server offers
it) or `legacy` (the `initialize` handshake).

The script connects, lists every tool (following pagination; not with `--no-list`,
which leaves `tools` empty), runs the steps of
the `--plan` in order, then calls each TOOL with its JSON object ARGS_JSON, and
prints one JSON document on stdout.

The plan (`--plan JSON`, or `--plan @FILE`) is a JSON array of steps, each an
object with an `op` and that op's fields:

    {"op": "list_tools"} | {"op": "list_prompts"} | {"op": "list_resources"}
    {"op": "list_resource_templates"}                every page, items in `items`
    {"op": "read_resource", "uri": "test://static-text"}
    {"op": "get_prompt", "name": "p", "arguments": {"arg1": "x"}}
    {"op": "call_tool", "name": "t", "arguments": {...}, "progress": true}
    {"op": "complete", "ref": {"type": "ref/prompt", "name": "p"},
                       "argument": {"name": "arg1", "value": "te"}, "context": {...}}
    {"op": "set_logging_level", "level": "debug"}    the deprecated logging/setLevel
    {"op": "subscribe_resource", "uri": "..."} | {"op": "unsubscribe_resource", "uri": "..."}

Every step may also have an `id` (echoed in its record; default: its index) and
`"expect_error": true` (the step is meant to fail with an error: that is not a
failure of the run, a result is). `"progress": true` passes a progress callback
(so the request carries a progress token) and records each notification.

The client always answers what the server asks of it, and records each request:

- sampling (`sampling/createMessage`, or an input_required sampling): an
  assistant text message, `--sampling-text` (default "Paris"), model
  `python-client-v2`;
- elicitation: `accept` with the JSON object `--elicitation-content`
  (default {"username": "python-client", "email": "client@example.com"});
- roots: one root, `--root URI` (default file:///tmp/python-client-root).

`--log-level LEVEL` sets the SDK's `log_level`: on a 2026-07-28 connection
every request opts in to log messages at LEVEL and above (no effect on a
legacy connection, where a `set_logging_level` step does it). Every
`notifications/message` received is recorded.

Output:

    {"server": {"name": ..., "version": ...} | null,
     "protocol_version": "...",
     "capabilities": {...},                     as the server declared them (wire names)
     "tools": ["demo__echo", ...],
     "steps": [{"id": ..., "op": ..., "ok": true, "result": {...wire result...},
                "logs": [...],                  log messages received during the step
                "progress": [[progress, total, message], ...],     call_tool with progress
                "is_error": ..., "text": [...], "content": [...],  call_tool
                "structured_content": ...,
                "items": [...],                 list_* (every page)
                "texts": [...],                 read_resource (text contents), get_prompt (text messages)
                "values": [...]},               complete
               {"id": ..., "op": ..., "ok": false,
                "error": {"type": "MCPError", "code": -32602, "message": "...", "data": ...}}],
     "calls": [{"tool": "demo__echo", "arguments": {...}, "is_error": false,
                "text": ["..."], "content": [...], "structured_content": null}],
     "logs": [{"level": "info", "logger": "...", "data": ...}],
     "sampling_requests": [...], "elicitation_requests": [...], "roots_requests": 0}

Exit codes: 0 every step and call worked (a call answered with `isError: true`
still worked: it is reported in the output; so did a step that expected its
error); 1 connecting or listing failed, or a step or call failed at the
protocol level (a result the SDK refuses to validate is such a failure): the
message is on stderr, and once connected the document still goes to stdout
with `ok: false` on the failed steps (a failed TOOL ARGS_JSON call ends the
run); 2 bad command line. Used by
`tests/e2e/python_client.rs`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import warnings
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

# The plan may use what 2026-07-28 deprecates (logging/setLevel, resources/subscribe) on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

# Every request is bounded: a gateway that never answers fails the run, never hangs it.
TIMEOUT_SECONDS = 60.0
# The whole run (the e2e tests stop the interpreter after 300 s).
RUN_TIMEOUT_SECONDS = 4 * TIMEOUT_SECONDS

LIST_OPS = {
    "list_tools": ("list_tools", "tools"),
    "list_prompts": ("list_prompts", "prompts"),
    "list_resources": ("list_resources", "resources"),
    "list_resource_templates": ("list_resource_templates", "resource_templates"),
}


def wire(model: Any) -> Any:
    """A pydantic model as the JSON it came as (camelCase, only the fields that were set)."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def error_record(error: BaseException) -> dict[str, Any]:
    record: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    code = getattr(error, "code", None)
    if isinstance(code, int):
        record["code"] = code
    data = getattr(getattr(error, "error", None), "data", None)
    if data is not None:
        record["data"] = data
    return record


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


def parse_plan(raw: str | None) -> list[dict[str, Any]]:
    if raw is None:
        return []
    text = Path(raw[1:]).read_text() if raw.startswith("@") else raw
    plan = json.loads(text)
    if not isinstance(plan, list) or not all(isinstance(step, dict) and "op" in step for step in plan):
        raise ValueError("the plan must be a JSON array of objects, each with an `op`")
    known = set(LIST_OPS) | {
        "read_resource",
        "get_prompt",
        "call_tool",
        "complete",
        "set_logging_level",
        "subscribe_resource",
        "unsubscribe_resource",
    }
    for step in plan:
        if step["op"] not in known:
            raise ValueError(f"unknown op {step['op']!r} (known: {', '.join(sorted(known))})")
    return plan


def tool_outcome(result: types.CallToolResult) -> dict[str, Any]:
    content = [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in result.content]
    return {
        "is_error": bool(result.is_error),
        "text": [item["text"] for item in content if item.get("type") == "text"],
        "content": content,
        "structured_content": result.structured_content,
    }


class Recorder:
    """What the server sent besides results: logs and its requests to the client."""

    def __init__(self, sampling_text: str, elicitation_content: dict[str, Any], root: str) -> None:
        self.sampling_text = sampling_text
        self.elicitation_content = elicitation_content
        self.root = root
        self.logs: list[Any] = []
        self.sampling_requests: list[Any] = []
        self.elicitation_requests: list[Any] = []
        self.roots_requests = 0

    async def sampling(self, _context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampling_requests.append(wire(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.sampling_text),
            model="python-client-v2",
        )

    async def elicitation(self, _context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitation_requests.append(wire(params))
        return types.ElicitResult(action="accept", content=self.elicitation_content)

    async def list_roots(self, _context: Any) -> types.ListRootsResult:
        self.roots_requests += 1
        return types.ListRootsResult(roots=[types.Root(uri=self.root, name="python-client-root")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(wire(params))


async def list_all(client: Client, method: str, field: str) -> tuple[list[Any], Any]:
    items: list[Any] = []
    cursor = None
    first = None
    while True:
        page = await getattr(client, method)(cursor=cursor)
        if first is None:
            # The first page without its items: what else the result carries.
            first = wire(page)
            first.pop(type(page).model_fields[field].alias or field, None)
        items.extend(wire(item) for item in getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            return items, first


async def run_step(client: Client, step: dict[str, Any]) -> dict[str, Any]:
    """Runs one plan step; returns its record (without `op`, `ok`, `logs`)."""
    op = step["op"]
    if op in LIST_OPS:
        items, first = await list_all(client, *LIST_OPS[op])
        return {"items": items, "result": first}
    if op == "read_resource":
        result = await client.read_resource(step["uri"])
        texts = [item.text for item in result.contents if isinstance(item, types.TextResourceContents)]
        return {"result": wire(result), "texts": texts}
    if op == "get_prompt":
        result = await client.get_prompt(step["name"], step.get("arguments"))
        texts = [m.content.text for m in result.messages if isinstance(m.content, types.TextContent)]
        return {"result": wire(result), "texts": texts}
    if op == "call_tool":
        progress: list[list[Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append([value, total, message])

        callback = on_progress if step.get("progress") else None
        result = await client.call_tool(step["name"], step.get("arguments") or {}, progress_callback=callback)
        record = {"result": wire(result), **tool_outcome(result)}
        if callback:
            record["progress"] = progress
        return record
    if op == "complete":
        ref_data = step["ref"]
        ref: types.PromptReference | types.ResourceTemplateReference
        if ref_data.get("type") == "ref/resource":
            ref = types.ResourceTemplateReference.model_validate(ref_data)
        else:
            ref = types.PromptReference.model_validate(ref_data)
        result = await client.complete(ref, step["argument"], step.get("context"))
        return {"result": wire(result), "values": list(result.completion.values)}
    if op == "set_logging_level":
        return {"result": wire(await client.set_logging_level(step["level"]))}
    if op == "subscribe_resource":
        return {"result": wire(await client.subscribe_resource(step["uri"]))}
    if op == "unsubscribe_resource":
        return {"result": wire(await client.unsubscribe_resource(step["uri"]))}
    raise ValueError(f"unknown op {op!r}")  # parse_plan rejects these first


async def timed(awaitable: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(awaitable, timeout=TIMEOUT_SECONDS)


async def run(args: argparse.Namespace, plan: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], list[str]]:
    recorder = Recorder(args.sampling_text, args.elicitation_content, args.root)
    failures: list[str] = []
    async with Client(
        args.url,
        mode=args.mode,
        read_timeout_seconds=TIMEOUT_SECONDS,
        sampling_callback=recorder.sampling,
        elicitation_callback=recorder.elicitation,
        list_roots_callback=recorder.list_roots,
        logging_callback=recorder.log,
        log_level=args.log_level,
    ) as client:
        tools = [] if args.no_list else (await timed(list_all(client, "list_tools", "tools")))[0]
        steps = []
        for index, step in enumerate(plan):
            logs_before = len(recorder.logs)
            name = f"step {step.get('id', index)} ({step['op']})"
            head = {"id": step.get("id", index), "op": step["op"]}
            try:
                record: dict[str, Any] = {**head, "ok": True, **await timed(run_step(client, step))}
                if step.get("expect_error"):
                    failures.append(f"{name}: expected an error, got a result")
            except Exception as error:  # noqa: BLE001 - a failed step is reported, the run goes on
                if not step.get("expect_error"):
                    failures.append(f"{name}: {type(error).__name__}: {error}")
                record = {**head, "ok": False, "error": error_record(error)}
            record["logs"] = recorder.logs[logs_before:]
            steps.append(record)
        results = []
        for tool, arguments in calls:
            with otel_parent():
                result = await timed(client.call_tool(tool, arguments))
            results.append({"tool": tool, "arguments": arguments, **tool_outcome(result)})
        info = client.server_info
        output = {
            "server": {"name": info.name, "version": info.version} if info else None,
            "protocol_version": client.protocol_version,
            "capabilities": wire(client.server_capabilities),
            "tools": [tool["name"] for tool in tools],
            "steps": steps,
            "calls": results,
            "logs": recorder.logs,
            "sampling_requests": recorder.sampling_requests,
            "elicitation_requests": recorder.elicitation_requests,
            "roots_requests": recorder.roots_requests,
        }
        return output, failures


# --otel: the SDK's own OpenTelemetry spans (SEP-414: it writes their context
# into each request's `_meta`), recorded in memory and printed as "otel_spans".
OTEL_EXPORTER: Any = None


def start_otel() -> None:
    global OTEL_EXPORTER
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    OTEL_EXPORTER = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTEL_EXPORTER))
    trace.set_tracer_provider(provider)


def otel_parent() -> Any:
    """An `agent` span around a call when --otel is on; nothing otherwise."""
    if OTEL_EXPORTER is None:
        return contextlib.nullcontext()
    from opentelemetry import trace

    return trace.get_tracer("python_client_v2").start_as_current_span("agent")


def otel_spans() -> list[dict[str, Any]]:
    if OTEL_EXPORTER is None:
        return []
    return [
        {
            "name": span.name,
            "kind": span.kind.name,
            "trace_id": f"{span.context.trace_id:032x}",
            "span_id": f"{span.context.span_id:016x}",
            "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else "",
        }
        for span in OTEL_EXPORTER.get_finished_spans()
    ]


def leaves(error: BaseException) -> list[BaseException]:
    """The real errors inside (nested) exception groups from anyio's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def json_object(raw: str) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {raw}")
    return value


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python_client_v2.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto")
    parser.add_argument("--plan", metavar="JSON|@FILE", help="steps to run after listing the tools")
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"],
        help="opt in to log messages on every request (2026-07-28)",
    )
    parser.add_argument("--sampling-text", default="Paris", help="the text every sampling answer carries")
    parser.add_argument(
        "--elicitation-content",
        type=json_object,
        default={"username": "python-client", "email": "client@example.com"},
        metavar="JSON",
        help="the content every elicitation is accepted with",
    )
    parser.add_argument("--root", default="file:///tmp/python-client-root", help="the one root the client lists")
    parser.add_argument(
        "--no-list",
        action="store_true",
        help="do not list the tools first (the SDK then lists them itself after a call, to check its result)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="record the SDK's OpenTelemetry spans (each call inside an `agent` span) and print them",
    )
    parser.add_argument("url")
    parser.add_argument("calls", nargs="*", metavar="TOOL ARGS_JSON")
    args = parser.parse_args(argv[1:])
    if args.otel:
        start_otel()
    try:
        calls = parse_calls(args.calls)
        plan = parse_plan(args.plan)
    except (ValueError, OSError) as error:
        parser.error(str(error))
    try:
        output, failures = asyncio.run(asyncio.wait_for(run(args, plan, calls), timeout=RUN_TIMEOUT_SECONDS))
    except Exception as error:  # noqa: BLE001 - report anything, including task-group errors
        for leaf in leaves(error):
            print(f"python_client_v2: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1
    output["otel_spans"] = otel_spans()
    print(json.dumps(output, indent=2))
    for failure in failures:
        print(f"python_client_v2: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

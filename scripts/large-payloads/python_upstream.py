"""A large-payload upstream on the official Python SDK (`mcp` 1.x, FastMCP),
streamable HTTP, for scripts/large-payloads.sh (docs/BENCHMARKS.md, "Large
payloads").

    .tools/venv/bin/python scripts/large-payloads/python_upstream.py [--json]

`--json` answers as JSON (`json_response=True`), else as event streams (the
SDK's default). Prints "listening on http://127.0.0.1:PORT/mcp" once bound.
Tools, written as a tool author writes them with FastMCP's typed tools (so an
answer carries text and structured content):

- `echo` {text, pad}: says how many `pad` items came (a short answer);
- `echo_back` {text, pad}: returns its arguments (an answer as large as the
  call: the SDK sends the dict as JSON text and as structured content);
- `add` {a, b}.
"""

import argparse
import socket
from typing import Any

from mcp.server.fastmcp import FastMCP

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--json", action="store_true", help="answer as JSON, not event streams")
options = parser.parse_args()
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()

server = FastMCP(
    "large-payloads-python", host="127.0.0.1", port=port, json_response=options.json, log_level="WARNING"
)


@server.tool(description="Echoes text and says how many pad items came.")
def echo(text: str, pad: list[dict[str, Any]] | None = None) -> str:
    return f"{text} ({len(pad or [])} pad items)"


@server.tool(description="Returns all its arguments back.")
def echo_back(text: str, pad: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"text": text, "pad": pad or []}


@server.tool(description="a + b")
def add(a: int, b: int) -> int:
    return a + b


print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
server.run(transport="streamable-http")

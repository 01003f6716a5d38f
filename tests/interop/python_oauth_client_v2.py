"""An MCP client on the official Python SDK 2.x (`mcp` 2.3.0) that logs in with
the SDK's OWN OAuth support (`mcp.client.auth.OAuthClientProvider`), the way a
Python agent meets a gateway that asks for an access token.

Run with the venv that `scripts/install-test-deps.sh` creates:

    .tools/venv2/bin/python tests/interop/python_oauth_client_v2.py [OPTIONS] URL [TOOL ARGS_JSON]...

Without `--token`, the script connects to URL with no credential and leaves
the rest to the SDK: it meets the gateway's 401, reads the protected-resource
metadata (RFC 9728) the challenge names, discovers the authorization server's
metadata, registers a client there dynamically (RFC 7591), and runs the
authorization code flow with PKCE. The browser's part is done headlessly: the
redirect handler follows the authorization URL with an HTTP client that keeps
the cookies the authorization server sets and follows its redirects, through
its login (which must not need a person: the test IdP, tests/interop/idp.mjs,
logs its default user in at once), until the Location is the client's
redirect URI; the callback handler hands the SDK the `code`, `state` and
`iss` of that URI. With `--token TOKEN` it sends `Authorization: Bearer TOKEN`
instead (a machine client that got its token elsewhere) and no OAuth flow runs.

Then it lists every tool (following pagination) and calls each TOOL with its
JSON object ARGS_JSON, and prints one JSON document on stdout:

    {"protocol_version": "...",
     "tools": ["name", ...],
     "calls": [{"tool": "t", "arguments": {...}, "ok": true,
                "is_error": false, "text": ["..."], "structured_content": ...},
               {"tool": "t", "arguments": {...}, "ok": false,
                "error": {"type": "MCPError", "code": -32602, "message": "..."}}],
     "oauth": {"flow": "authorization_code" | "token",
               "authorizations": 1,            times the browser's part ran
               "authorization_url": "...",     the last one (no secret in it)
               "redirects": 3,                 redirects followed in it
               "client_id": "...",             the registered client
               "scope": "...",                 what the token response granted
               "token_type": "Bearer"}}

The access token is never printed; `--token-out FILE` writes it to FILE (mode
0600), for a test that checks it appears nowhere else.

A call that fails (an error answer: a tool the caller may not use, say) is
recorded with `ok: false` and does not fail the run. Exit codes: 0 connected,
listed and every call answered (with a result or an error); 1 the OAuth flow,
connecting, listing or a call failed otherwise (the message on stderr); 2 bad
command line. Every request and the whole run are bounded by timeouts. Used by
`tests/e2e/access.rs`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError

# Every request is bounded: a gateway or IdP that never answers fails the run, never hangs it.
TIMEOUT_SECONDS = 30.0
# The whole run (the e2e tests stop the interpreter after a little more).
RUN_TIMEOUT_SECONDS = 90.0
# Redirects the browser's part follows before it gives up.
MAX_REDIRECTS = 20

DEFAULT_REDIRECT_URI = "http://127.0.0.1:9/callback"


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory: every run starts logged out and unregistered."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """The user agent's part of the authorization code flow, without a person.

    `redirect` (the SDK's `redirect_handler`) follows the authorization URL the
    way a browser would, cookies kept, until the authorization server sends it
    to the client's redirect URI; `callback` (the SDK's `callback_handler`)
    returns what that URI carries.
    """

    def __init__(self, redirect_uri: str) -> None:
        self.redirect_uri = redirect_uri
        self.authorizations = 0
        self.redirects = 0
        self.authorization_url: str | None = None
        self._landed: str | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.authorizations += 1
        self.authorization_url = authorization_url
        self.redirects = 0
        self._landed = None
        timeout = httpx2.Timeout(TIMEOUT_SECONDS)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=timeout) as http:
            url = authorization_url
            for _ in range(MAX_REDIRECTS):
                response = await http.get(url)
                location = response.headers.get("location")
                if not response.is_redirect or not location:
                    body = response.text[:500]
                    raise OAuthFlowError(
                        f"the authorization server answered GET {url} with {response.status_code}, "
                        f"not a redirect: {body}"
                    )
                url = urljoin(url, location)
                self.redirects += 1
                if self._is_redirect_uri(url):
                    self._landed = url
                    return
            raise OAuthFlowError(f"the authorization did not reach {self.redirect_uri} in {MAX_REDIRECTS} redirects")

    async def callback(self) -> AuthorizationCodeResult:
        if self._landed is None:
            raise OAuthFlowError("the authorization never reached the redirect URI")
        query = {name: values[0] for name, values in parse_qs(urlsplit(self._landed).query).items()}
        if "error" in query:
            raise OAuthFlowError(
                f"the authorization server refused: {query['error']}: {query.get('error_description', '')}"
            )
        if "code" not in query:
            raise OAuthFlowError(f"the redirect carries no code: {self._landed}")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    def _is_redirect_uri(self, url: str) -> bool:
        there, wanted = urlsplit(url), urlsplit(self.redirect_uri)
        return (there.scheme, there.netloc, there.path) == (wanted.scheme, wanted.netloc, wanted.path)


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


def call_record(result: types.CallToolResult) -> dict[str, Any]:
    content = [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in result.content]
    return {
        "ok": True,
        "is_error": bool(result.is_error),
        "text": [item["text"] for item in content if item.get("type") == "text"],
        "structured_content": result.structured_content,
    }


async def list_tools(client: Client) -> list[str]:
    names: list[str] = []
    cursor = None
    for _ in range(100):
        page = await asyncio.wait_for(client.list_tools(cursor=cursor), timeout=TIMEOUT_SECONDS)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return names
    raise RuntimeError("tools/list did not end in 100 pages")


async def run(args: argparse.Namespace, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    timeout = httpx2.Timeout(TIMEOUT_SECONDS)
    storage = MemoryStorage()
    browser = HeadlessBrowser(args.redirect_uri)
    if args.token:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.token}"}, timeout=timeout)
    else:
        provider = OAuthClientProvider(
            server_url=args.url,
            client_metadata=OAuthClientMetadata(
                client_name=args.client_name,
                redirect_uris=[args.redirect_uri],
            ),
            storage=storage,
            redirect_handler=browser.redirect,
            callback_handler=browser.callback,
        )
        http = httpx2.AsyncClient(auth=provider, timeout=timeout)
    async with http:
        transport = streamable_http_client(args.url, http_client=http)
        async with Client(transport, mode=args.mode, read_timeout_seconds=TIMEOUT_SECONDS) as client:
            tools = await list_tools(client)
            results = []
            for tool, arguments in calls:
                record: dict[str, Any] = {"tool": tool, "arguments": arguments}
                try:
                    result = await asyncio.wait_for(client.call_tool(tool, arguments), timeout=TIMEOUT_SECONDS)
                    record.update(call_record(result))
                except MCPError as error:  # an error answer is an outcome, reported
                    record.update({"ok": False, "error": error_record(error)})
                results.append(record)
            protocol_version = client.protocol_version
    tokens = storage.tokens
    if args.token_out:
        token = args.token if args.token else (tokens.access_token if tokens else "")
        descriptor = os.open(args.token_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(token)
    oauth: dict[str, Any] = {"flow": "token" if args.token else "authorization_code"}
    if not args.token:
        oauth.update(
            {
                "authorizations": browser.authorizations,
                "authorization_url": browser.authorization_url,
                "redirects": browser.redirects,
                "client_id": storage.client_info.client_id if storage.client_info else None,
                "scope": tokens.scope if tokens else None,
                "token_type": tokens.token_type if tokens else None,
            }
        )
    return {"protocol_version": protocol_version, "tools": tools, "calls": results, "oauth": oauth}


def leaves(error: BaseException) -> list[BaseException]:
    """The real errors inside (nested) exception groups from anyio's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python_oauth_client_v2.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto", help="the SDK's connection mode")
    parser.add_argument("--token", help="send this bearer token; no OAuth flow")
    parser.add_argument("--token-out", metavar="FILE", help="write the access token used to FILE (0600)")
    parser.add_argument("--client-name", default="python-oauth-client-v2", help="client_name to register")
    parser.add_argument(
        "--redirect-uri",
        default=DEFAULT_REDIRECT_URI,
        help="the redirect URI to register (never contacted: the headless browser stops there)",
    )
    parser.add_argument("url")
    parser.add_argument("calls", nargs="*", metavar="TOOL ARGS_JSON")
    args = parser.parse_args(argv[1:])
    try:
        calls = parse_calls(args.calls)
    except ValueError as error:
        parser.error(str(error))
    try:
        output = asyncio.run(asyncio.wait_for(run(args, calls), timeout=RUN_TIMEOUT_SECONDS))
    except Exception as error:  # noqa: BLE001 - report anything, including task-group errors
        for leaf in leaves(error):
            print(f"python_oauth_client_v2: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1
    print(json.dumps(output, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

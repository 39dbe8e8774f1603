"""A scripted MCP client on the official Python SDK, driven by test/e2e/mcp_test.go.

Usage: client.py URL [--elicitation] [--mode=auto|legacy|2026-07-28]

The bearer token is read from MCP_BEARER_TOKEN (never argv, never printed).
--elicitation declares the URL-mode elicitation capability at initialize;
--mode is the SDK's protocol negotiation (default auto: server/discover,
then initialize on a server that offers no 2026-07-28).
Operations are JSON lines on stdin:

    {"op": "list"}
    {"op": "call", "name": "whoami", "args": {}}

and each gets one JSON line on stdout (after a first "connect" line):
the tools, a call's isError, text and structuredContent, or a JSON-RPC
error's code, message and data (with the URL elicitations of a -32042),
plus the last HTTP status seen and the SDK call's time in "ms". The
client makes no judgement: the assertions are the Go test's.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL_ELICITATION_REQUIRED = -32042


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Statuses:
    """The HTTP statuses of the transport's responses, newest last."""

    def __init__(self) -> None:
        self.last: int | None = None
        self.challenge: str | None = None

    async def record(self, response: httpx2.Response) -> None:
        self.last = response.status_code
        self.challenge = response.headers.get("www-authenticate")


def error_line(op: str, exc: BaseException, statuses: Statuses, started: float) -> dict[str, Any]:
    line: dict[str, Any] = {"op": op, "ok": False, "ms": (time.perf_counter() - started) * 1000,
                            "httpStatus": statuses.last, "wwwAuthenticate": statuses.challenge}
    err = find_mcp_error(exc)
    if err is None:
        line["error"] = {"type": type(exc).__name__, "message": str(exc)}
        return line
    line["error"] = {"code": err.code, "message": err.message, "data": err.data}
    if err.code == URL_ELICITATION_REQUIRED and isinstance(err.data, dict):
        line["elicitations"] = [
            {"mode": e.get("mode"), "url": e.get("url"), "id": e.get("elicitationId"), "message": e.get("message")}
            for e in err.data.get("elicitations", [])
        ]
    return line


def find_mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError in exc, also inside an exception group (anyio task groups)."""
    if isinstance(exc, MCPError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = find_mcp_error(inner)
        if found is not None:
            return found
    if exc.__cause__ is not None:
        return find_mcp_error(exc.__cause__)
    return None


async def decline(_context: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    # Declaring the callback declares the elicitation capability (form and
    # url); the server answers with -32042 instead of asking through it.
    return types.ElicitResult(action="decline")


async def run(url: str, elicitation: bool, mode: str) -> int:
    token = os.environ.get("MCP_BEARER_TOKEN", "")
    statuses = Statuses()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"} if token else None)
    http.event_hooks["response"].append(statuses.record)
    started = time.perf_counter()
    client = Client(
        streamable_http_client(url, http_client=http),
        client_info=types.Implementation(name="agentauth-e2e-python", version="0"),
        elicitation_callback=decline if elicitation else None,
        # Every list must reach the server: the test times them.
        cache=None,
        read_timeout_seconds=30,
        mode=mode,
    )
    async with http:
        try:
            await client.__aenter__()
        except BaseException as exc:  # noqa: BLE001 — reported, the test decides
            emit(error_line("connect", exc, statuses, started))
            return 0
        try:
            info = client.server_info
            emit({"op": "connect", "ok": True, "ms": (time.perf_counter() - started) * 1000,
                  "protocolVersion": client.protocol_version, "httpStatus": statuses.last,
                  "server": {"name": info.name, "version": info.version} if info else None})
            for raw in sys.stdin:
                if not raw.strip():
                    continue
                req = json.loads(raw)
                await do(client, req, statuses)
        finally:
            await client.__aexit__(None, None, None)
    return 0


async def do(client: Client, req: dict[str, Any], statuses: Statuses) -> None:
    op = req.get("op")
    started = time.perf_counter()
    try:
        if op == "list":
            res = await client.list_tools()
            emit({"op": op, "ok": True, "ms": (time.perf_counter() - started) * 1000, "httpStatus": statuses.last,
                  "tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                            for t in res.tools]})
        elif op == "call":
            res = await client.call_tool(req["name"], req.get("args"))
            text = "".join(c.text for c in res.content if isinstance(c, types.TextContent))
            emit({"op": op, "ok": True, "ms": (time.perf_counter() - started) * 1000, "httpStatus": statuses.last,
                  "isError": bool(res.is_error), "text": text, "structuredContent": res.structured_content})
        else:
            emit({"op": op, "ok": False, "error": {"type": "usage", "message": "unknown op"}})
    except Exception as exc:  # noqa: BLE001 — reported, the test decides
        emit(error_line(op or "", exc, statuses, started))


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print("usage: client.py URL [--elicitation] [--mode=auto|legacy|2026-07-28] (token in MCP_BEARER_TOKEN, ops on stdin)",
              file=sys.stderr)
        return 2
    mode = next((a.split("=", 1)[1] for a in args[1:] if a.startswith("--mode=")), "auto")
    return asyncio.run(run(args[0], "--elicitation" in args[1:], mode))


if __name__ == "__main__":
    sys.exit(main())

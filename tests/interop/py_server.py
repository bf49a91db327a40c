#!/usr/bin/env python3
"""A small, benign MCP server on the Python `mcp` SDK (2.x, `MCPServer`), for interop tests.

Tools: `echo {text}`, `weather {city}` (deterministic, no network); resource
`info://server`; resource template `city://{name}`; prompt `trip_plan {city}`.

    .interop/venv/bin/python tests/interop/py_server.py            # stdio
    .interop/venv/bin/python tests/interop/py_server.py --http 8765 # Streamable HTTP at http://127.0.0.1:8765/mcp

Logs go to stderr only: on stdio, stdout is the protocol.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

from mcp.server.mcpserver import MCPServer

CONDITIONS = ["sunny", "cloudy", "light rain", "windy", "foggy", "snow showers"]

mcp = MCPServer(
    name="portcullis-py-server",
    instructions="A small benign test server: echo, a deterministic weather tool, one resource and one prompt.",
    version="1.0.0",
    log_level="WARNING",
)


def _forecast(city: str) -> dict:
    digest = hashlib.sha256(city.strip().lower().encode("utf-8")).digest()
    return {
        "city": city,
        "temperature_c": digest[0] % 35 - 5,
        "conditions": CONDITIONS[digest[1] % len(CONDITIONS)],
    }


@mcp.tool()
def echo(text: str) -> str:
    """Returns the given text unchanged."""
    return text


@mcp.tool()
def weather(city: str) -> str:
    """Returns a deterministic (made-up) forecast for a city."""
    f = _forecast(city)
    return f"{f['city']}: {f['temperature_c']} °C, {f['conditions']}"


@mcp.resource("info://server", name="server-info", description="About this server", mime_type="text/plain")
def server_info() -> str:
    return "portcullis-py-server: a benign MCP server used by the Portcullis interop tests."


@mcp.resource("city://{name}", name="city", description="Forecast of a city as a resource", mime_type="text/plain")
def city(name: str) -> str:
    return weather(name)


@mcp.prompt()
def trip_plan(city: str) -> str:
    """Asks for a one-day plan for a trip to a city."""
    return f"Please suggest a relaxed one-day plan for a visit to {city}."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    if args.http is not None:
        print(f"listening on http://{args.host}:{args.http}/mcp", file=sys.stderr, flush=True)
        mcp.run("streamable-http", host=args.host, port=args.http)
    else:
        mcp.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())

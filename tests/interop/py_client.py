#!/usr/bin/env python3
"""MCP client driver on the Python `mcp` SDK (2.x), for the gateway's interop tests.

Connects to one server, lists what it offers, runs the requested calls, reads and
prompts, and prints ONE JSON object on stdout summarizing everything it received.
Exit status: 0 when the session ran to the end (tool results with isError and JSON-RPC
error answers to single requests are recorded in the JSON, not failures); 1 when
connecting, initializing or listing fails ("fatal" is set) or the connection is lost
midway ("connection_lost": true; error code -32000); 2 on a usage error. The JSON is
printed in every case but a usage error.

    py_client.py [OPTIONS] --stdio -- CMD ARGS...
    py_client.py [OPTIONS] --http http://127.0.0.1:PORT/mcp

Options:
    --call TOOL [--args JSON]   call a tool (repeatable; each --args belongs to the --call before it)
    --calls JSON                a JSON list of calls: [{"tool": "echo", "args": {"text": "hi"}}, ...]
    --read URI                  read a resource (repeatable)
    --prompt NAME [--prompt-args JSON]   get a prompt (repeatable)
    --mode legacy|auto|VERSION  connection mode of the SDK (default auto: server/discover,
                                falling back to the initialize handshake)
    --timeout SECONDS           per-request read timeout (default 30)
    --header NAME:VALUE         an HTTP header sent with every request (repeatable; --http only),
                                e.g. "Authorization: Bearer TOKEN"
    --progress                  ask for progress notifications on tool calls
    --sampling-reply TEXT       the fixed reply to sampling/createMessage
    --no-sampling               do not declare sampling (no sampling callback)
    --no-elicitation            do not declare elicitation (no elicitation callback)

Sampling requests are answered with a fixed reply and logged; elicitation requests are
declined and logged; every server notification is logged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from typing import Any, NoReturn

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types.jsonrpc import CONNECTION_CLOSED

DEFAULT_SAMPLING_REPLY = "This is the fixed sampling reply of the portcullis test client."


def dump(model: Any) -> Any:
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", action="store_true", help="launch the command after `--` and talk over its stdio")
    target.add_argument("--http", metavar="URL", help="Streamable HTTP endpoint URL")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                   help="an HTTP header sent with every request (e.g. 'Authorization: Bearer T')")
    p.add_argument("--call", action="append", default=[], metavar="TOOL")
    p.add_argument("--args", action="append", default=[], metavar="JSON")
    p.add_argument("--calls", metavar="JSON")
    p.add_argument("--read", action="append", default=[], metavar="URI")
    p.add_argument("--prompt", action="append", default=[], metavar="NAME")
    p.add_argument("--prompt-args", action="append", default=[], metavar="JSON")
    p.add_argument("--mode", default="auto")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--sampling-reply", default=DEFAULT_SAMPLING_REPLY)
    p.add_argument("--no-sampling", action="store_true")
    p.add_argument("--no-elicitation", action="store_true")
    ns = p.parse_args(argv)
    if ns.stdio and not command:
        p.error("--stdio needs a command after `--`")
    if ns.calls:
        try:
            ns.calls = json.loads(ns.calls)
        except json.JSONDecodeError as e:
            usage_error(f"--calls: invalid JSON: {e}")
        if not isinstance(ns.calls, list) or not all(isinstance(c, dict) and isinstance(c.get("tool"), str) for c in ns.calls):
            usage_error('--calls must be a JSON list of {"tool": NAME, "args": {...}}')
    return ns, command


def usage_error(message: str) -> NoReturn:
    print(f"py_client.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def pair_options(names: list[str], values: list[str], raw: list[str], name_flag: str, value_flag: str) -> list[tuple[str, dict]]:
    """Pairs each --call/--prompt with the --args/--prompt-args that follows it on the command line."""
    out: list[tuple[str, dict]] = []
    current: list[Any] | None = None
    # Normalize `--flag=value` to `--flag value` so both spellings pair the same way.
    tokens: list[str] = []
    for tok in raw:
        if tok.startswith((name_flag + "=", value_flag + "=")):
            tokens.extend(tok.split("=", 1))
        else:
            tokens.append(tok)
    for i, tok in enumerate(tokens):
        if tok == name_flag and i + 1 < len(tokens):
            current = [tokens[i + 1], {}]
            out.append(current)  # type: ignore[arg-type]
        elif tok == value_flag and i + 1 < len(tokens):
            if current is None:
                usage_error(f"{value_flag} must follow a {name_flag}")
            try:
                value = json.loads(tokens[i + 1])
            except json.JSONDecodeError as e:
                usage_error(f"{value_flag}: invalid JSON: {e}")
            if not isinstance(value, dict):
                usage_error(f"{value_flag} must be a JSON object")
            current[1] = value
    if len(out) != len(names):
        usage_error(f"could not pair {name_flag} with {value_flag}")
    return [(n, a) for n, a in out]


async def run(ns: argparse.Namespace, command: list[str], raw: list[str]) -> tuple[dict, int]:
    out: dict[str, Any] = {
        "client": "python-mcp",
        "transport": "stdio" if ns.stdio else "http",
        "protocol_version": None,
        "server_info": None,
        "capabilities": None,
        "instructions": None,
        "tools": [],
        "prompts": [],
        "resources": [],
        "templates": [],
        "calls": [],
        "reads": [],
        "prompt_results": [],
        "sampling_requests": [],
        "elicitation_requests": [],
        "notifications": [],
        "errors": [],
        "connection_lost": False,
    }

    def record_error(entry: dict[str, Any], e: Exception) -> None:
        entry["error"] = f"{type(e).__name__}: {e}"
        code = getattr(e, "code", None)
        entry["error_code"] = code if isinstance(code, int) else None
        if entry["error_code"] == CONNECTION_CLOSED:
            out["connection_lost"] = True

    calls = pair_options(ns.call, ns.args, raw, "--call", "--args")
    if ns.calls:
        for c in ns.calls:
            calls.append((c["tool"], c.get("args") or c.get("arguments") or {}))
    prompts = pair_options(ns.prompt, ns.prompt_args, raw, "--prompt", "--prompt-args")

    async def on_sampling(context, params):
        out["sampling_requests"].append(dump(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=ns.sampling_reply),
            model="portcullis-fixed-reply",
            stop_reason="endTurn",
        )

    async def on_elicitation(context, params):
        out["elicitation_requests"].append(dump(params))
        return types.ElicitResult(action="decline")

    async def on_message(message):
        if isinstance(message, Exception):
            out["errors"].append(f"transport: {message!r}")
        else:
            out["notifications"].append(dump(message))

    if ns.stdio:
        server: Any = StdioServerParameters(command=command[0], args=command[1:])
    elif ns.header:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = {}
        for h in ns.header:
            name, sep, value = h.partition(":")
            if not sep:
                raise SystemExit(f"--header {h!r}: expected NAME:VALUE")
            headers[name.strip()] = value.strip()
        server = streamable_http_client(ns.http, http_client=create_mcp_http_client(headers=headers))
    else:
        server = ns.http

    status = 0
    try:
        async with Client(
            server,
            mode=ns.mode,
            read_timeout_seconds=ns.timeout,
            sampling_callback=None if ns.no_sampling else on_sampling,
            elicitation_callback=None if ns.no_elicitation else on_elicitation,
            message_handler=on_message,
            cache=None,
        ) as client:
            out["protocol_version"] = client.protocol_version
            out["server_info"] = dump(client.server_info)
            caps = client.server_capabilities
            out["capabilities"] = dump(caps)
            out["instructions"] = client.instructions
            if caps.tools is not None:
                out["tools"] = [dump(t) for t in (await client.list_tools()).tools]
            if caps.prompts is not None:
                out["prompts"] = [dump(p) for p in (await client.list_prompts()).prompts]
            if caps.resources is not None:
                out["resources"] = [dump(r) for r in (await client.list_resources()).resources]
                out["templates"] = [dump(t) for t in (await client.list_resource_templates()).resource_templates]

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                # Passing a callback is what makes the SDK send a progress token; the
                # notifications themselves reach on_message and are logged there.
                return None

            for tool, arguments in calls:
                entry: dict[str, Any] = {"tool": tool, "args": arguments, "result": None, "error": None, "error_code": None}
                try:
                    result = await client.call_tool(
                        tool, arguments, progress_callback=on_progress if ns.progress else None
                    )
                    entry["result"] = dump(result)
                except Exception as e:  # a JSON-RPC error answer is recorded, not fatal
                    record_error(entry, e)
                out["calls"].append(entry)
            for uri in ns.read:
                entry = {"uri": uri, "result": None, "error": None, "error_code": None}
                try:
                    entry["result"] = dump(await client.read_resource(uri))
                except Exception as e:
                    record_error(entry, e)
                out["reads"].append(entry)
            for name, arguments in prompts:
                entry = {"name": name, "args": arguments, "result": None, "error": None, "error_code": None}
                try:
                    entry["result"] = dump(await client.get_prompt(name, {k: str(v) for k, v in arguments.items()}))
                except Exception as e:
                    record_error(entry, e)
                out["prompt_results"].append(entry)
            # Give late notifications (e.g. tools/list_changed after a call) a moment to arrive.
            await asyncio.sleep(0.2)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a non-zero exit with the JSON printed
        if isinstance(e, KeyboardInterrupt):
            raise
        out["fatal"] = f"{type(e).__name__}: {e}"
        out["errors"].append("".join(traceback.format_exception(e))[-4000:])
        status = 1
    if out["connection_lost"]:
        status = 1
    return out, status


def main() -> int:
    raw = sys.argv[1:]
    ns, command = parse_args(raw)
    if "--" in raw:
        raw = raw[: raw.index("--")]
    out, status = asyncio.run(run(ns, command, raw))
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())

"""A real MCP server for the MCP tests: the official `mcp` package's MCPServer (FastMCP's
successor in mcp 2) over streamable HTTP on 127.0.0.1.

    python mcp_server.py open PORT     # tools `echo`, `ping`, `fail`, `sleepy`, `hidden` and `grow`, no authentication
    python mcp_server.py secure PORT [TOKEN_FILE]
        # tool `whoami`; every request needs `Authorization: Bearer secret-token` (else 401),
        # or, given TOKEN_FILE, the token that file holds at the time of the request (so a
        # test can rotate it). `whoami` names the token it was called with by a fingerprint
        # (sha256, 12 hex digits), never the token itself.
"""

import hashlib
import sys
from pathlib import Path

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

TOKEN = "secret-token"
TOKEN_FILE = None
# The token of the last request let through (the calls of one test run one at a time).
LAST_TOKEN = ""


def accepted() -> str:
    return Path(TOKEN_FILE).read_text().strip() if TOKEN_FILE else TOKEN


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def open_server() -> MCPServer:
    mcp = MCPServer("open")

    @mcp.tool(description="Echoes its text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @mcp.tool(description="Always fails.")
    def fail() -> str:
        raise ToolError("the fail tool failed on purpose")

    @mcp.tool(description="Answers pong.")
    def ping() -> str:
        return "pong"

    @mcp.tool(description="Never finishes in time.")
    async def sleepy() -> str:
        await anyio.sleep(60)
        return "woke up"

    @mcp.tool(description="A tool the agent disables.")
    def hidden() -> str:
        return "should never run"

    @mcp.tool(description="Adds the tool `grown` and says the tool list changed.")
    async def grow(ctx: Context) -> str:
        def grown() -> str:
            return "I am new"

        mcp.add_tool(grown, name="grown", description="Added by grow.")
        await ctx.session.send_tool_list_changed()
        return "grew"

    return mcp


def secure_server() -> MCPServer:
    mcp = MCPServer("secure")

    @mcp.tool(description="Says who the caller is.")
    def whoami() -> str:
        return f"an authenticated caller ({fingerprint(LAST_TOKEN)})"

    return mcp


class BearerOnly:
    """Refuses any request without the token, as an OAuth-protected server does."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        global LAST_TOKEN
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            token = accepted()
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", b'Bearer realm="mcp"'), (b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            LAST_TOKEN = token
        await self.app(scope, receive, send)


def main():
    global TOKEN_FILE
    kind, port = sys.argv[1], int(sys.argv[2])
    TOKEN_FILE = sys.argv[3] if len(sys.argv) > 3 else None
    server = open_server() if kind == "open" else secure_server()
    app = server.streamable_http_app()
    if kind == "secure":
        app = BearerOnly(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

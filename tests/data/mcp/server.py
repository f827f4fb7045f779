"""A small MCP server for the tests, written with the SDK: `server.py stdio`, `server.py http PORT`,
or `server.py crash` (exits at once, saying why on stderr). It has tools, resources and a prompt."""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals, with the server's process id."""
    return f"{text.upper()}! (from pid {os.getpid()})"


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    import time

    time.sleep(seconds)
    return "done"


@server.resource("notes://today", mime_type="text/plain", description="Today's notes")
def today() -> str:
    return "buy milk; call Ada"


@server.resource("notes://logo.png", mime_type="image/png", description="The logo")
def logo() -> bytes:
    return b"\x89PNG" + bytes(60)


@server.prompt()
def review(topic: str, style: str = "short") -> str:
    """Ask for a review of a topic."""
    return f"Review {topic} in a {style} style. (rendered by pid {os.getpid()})"


if __name__ == "__main__":
    if sys.argv[1] == "crash":
        print("the notes database is missing", file=sys.stderr)
        sys.exit(3)
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")

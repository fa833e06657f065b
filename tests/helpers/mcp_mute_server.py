"""A stdio MCP server that goes mute without exiting: it answers the handshake and the tool
list, and on the first call closes its stdout and waits (ignoring the end of its stdin), so
the client sees the server stop responding while its process still runs. It writes its pid
to the file named by its first argument once it has started."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TOOL = {
    "name": "get_current_time",
    "description": "Never answers",
    "inputSchema": {"type": "object", "properties": {}},
}


def answer(request: dict[str, object], result: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    Path(sys.argv[1]).write_text(str(os.getpid()), encoding="utf-8")
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if method == "initialize":
            params = request["params"]
            assert isinstance(params, dict)
            answer(
                request,
                {
                    "protocolVersion": params["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "mute", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(request, {"tools": [TOOL]})
        elif method == "tools/call":
            os.close(sys.stdout.fileno())  # mute from now on, and still running
            time.sleep(300)
            return


if __name__ == "__main__":
    main()

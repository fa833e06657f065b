"""MCP servers run from synchronous code: one background thread, one event loop, the SDK.

`McpHub` owns a daemon thread running an asyncio loop; each server is one task there that
starts it (stdio or streamable HTTP), lists its tools and waits to be stopped, and calls are
submitted from the tool runner's thread with a timeout. The invariant: a server's failure never
raises (`start` records `state` and `error`, `call` returns a `CallOutcome`), and a stopped
server leaves no process of its group behind. `mcp` is imported only inside the loop's tasks
and `start`. docs/design/tools.md says more.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from countbot_cli import __version__
from countbot_cli.config.mcp_server import McpServer
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.tools import proctree
from countbot_cli.tools.mcp_task import LoopTask

STATE_NEW = "not started"
STATE_RUNNING = "running"
STATE_FAILED = "failed to start"
STATE_CRASHED = "stopped responding"
STATE_STOPPED = "stopped"
STOP_WAIT = 8.0  # the SDK's stop: close stdin, 2 s, SIGTERM to the group, 2 s, SIGKILL
STDERR_TAIL = 300  # characters of a failed server's stderr shown in its error
HTTP_TIMEOUT, HTTP_READ_TIMEOUT = 30.0, 300.0  # the SDK's defaults (a stream may stay open)


@dataclass
class ListedTool:
    name: str
    description: str
    schema: dict[str, Any]


@dataclass
class CallOutcome:
    """A finished call: the SDK's CallToolResult, or why there is none."""

    result: Any = None
    error: str | None = None
    timed_out: bool = False
    interrupted: bool = False


@dataclass
class ServerConn:
    config: McpServer
    state: str = STATE_NEW
    error: str = ""
    tools: list[ListedTool] = field(default_factory=list)
    session: Any = None
    stop_event: asyncio.Event | None = None
    task: LoopTask | None = None
    stderr: IO[str] | None = None
    restarted: bool = False  # a crashed server is started again once, no more
    pid: int | None = None  # a stdio server's process (its descendants are ended with it)
    leader: proctree.Proc | None = None  # that process as its group's leader, to end the group
    generation: int = 0  # which start this is: an old one unwinding leaves the new one be

    @property
    def name(self) -> str:
        return self.config.name

    def stderr_tail(self) -> str:
        """The last words the server wrote to stderr (why it failed, usually)."""
        if self.stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self.stderr.seek(0)
            text = self.stderr.read()[-4000:]
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            return lines[-1][-STDERR_TAIL:] if lines else ""
        return ""


class McpHub:
    """The configured servers of one countbot process, started together on first use."""

    def __init__(self, servers: tuple[McpServer, ...]) -> None:
        self.conns = {s.name: ServerConn(s) for s in servers}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.started = False

    # ---- life cycle ----

    def start(self, cancel: threading.Event | None = None) -> list[ServerConn]:
        """Start every server, in parallel, once; each waits at most its `start_timeout`.
        Returns the servers that failed to start (an error, a timeout): they stay failed.

        Ctrl-C (KeyboardInterrupt) or a termination while they start goes on up, to interrupt
        what waited for them (a turn, `mcp list`), and first stops every server of this start,
        which the next call starts again (`_abandon`)."""
        with self._lock:
            if self.started:
                return []
            self.started = True
            loop = self._ensure_loop()
        try:
            _import_sdk()  # here, so its import time does not count against a server's start
            with sigint_deferred():  # every task launched is known, to be stopped
                pending = [(conn, self._launch(conn, loop)) for conn in self.conns.values()]
            return [conn for conn, ready in pending if not self._started(conn, ready, cancel)]
        except KeyboardInterrupt:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """A start that was interrupted: its servers stopped (their transports stop the
        processes, in the loop's thread; `_launch` waits for that before a new start) and
        not started, as if never asked for."""
        with sigint_deferred(), self._lock:
            for conn in self.conns.values():
                self._stop_one(conn)
                conn.state, conn.error, conn.tools = STATE_NEW, "", []
            self.started = False

    def restart(self, server: str, cancel: threading.Event | None = None) -> bool | None:
        """Start a server that stopped responding again, once in its life: True when it runs
        again, False when it could not start (`error` says why), None when it is not due (not
        crashed, or restarted before)."""
        conn, loop = self.conns[server], self._loop
        if loop is None or conn.state != STATE_CRASHED or conn.restarted:
            return None
        conn.restarted = True
        if conn.task is not None:  # what is left of the old one (a call saw it die first)
            conn.task.cancel()
        return self._started(conn, self._launch(conn, loop), cancel)

    def _launch(
        self, conn: ServerConn, loop: asyncio.AbstractEventLoop
    ) -> concurrent.futures.Future[None]:
        """Start `conn` once what is left of its previous start (crashed, or an interrupted
        start) has unwound: that process stopped and reaped, its state no longer written."""
        if conn.task is not None:
            conn.task.ended.wait(STOP_WAIT)
        conn.state, conn.error, conn.tools = STATE_NEW, "", []
        conn.stop_event = None
        conn.generation += 1
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        conn.task = LoopTask(loop, lambda task: self._serve(conn, ready, task))
        return ready

    def _started(
        self,
        conn: ServerConn,
        ready: concurrent.futures.Future[None],
        cancel: threading.Event | None,
    ) -> bool:
        error = _wait(ready, conn.config.start_timeout + 1.0, cancel)
        if error is not None:
            conn.state, conn.error = STATE_FAILED, conn.error or error
            self._stop_one(conn)
        return error is None

    def close(self) -> None:
        """Stop every server (and its process group), then the loop. Safe to call twice."""
        loop = self._loop
        if loop is None:
            return
        for conn in self.conns.values():
            self._stop_one(conn)
        deadline = time.monotonic() + STOP_WAIT
        for conn in self.conns.values():
            if conn.task is not None:  # stopped by now, or crashed: its stop sequence ends
                conn.task.ended.wait(max(0.0, deadline - time.monotonic()))
            if conn.state == STATE_RUNNING:
                conn.state = STATE_STOPPED
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(1.0)
        self._loop = None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="mcp-loop", daemon=True
            )
            self._thread.start()
            atexit.register(self.close)  # servers never outlive countbot
        return self._loop

    def _stop_one(self, conn: ServerConn) -> None:
        loop, event = self._loop, conn.stop_event
        if loop is None:
            return
        if conn.state == STATE_RUNNING and event is not None:
            loop.call_soon_threadsafe(event.set)
        elif conn.task is not None:
            conn.task.cancel()  # starting or crashed: its transport stops the process

    async def _serve(
        self, conn: ServerConn, ready: concurrent.futures.Future[None], task: LoopTask
    ) -> None:
        """One server's whole life, inside its transport's and session's contexts."""
        conn.stop_event = stop = asyncio.Event()
        start, generation = conn.config.start_timeout, conn.generation
        conn.pid = conn.leader = None  # this start's process, once spawned (_transport)
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    read, write = await stack.enter_async_context(_transport(conn))
                    conn.session = await _open_session(stack, read, write, start)
                    conn.tools = await _list_tools(conn.session, start)
                except BaseException as exc:  # said at once; the transport stops after
                    task.stopping = True
                    conn.error = conn.error or _with_stderr(conn, _start_failure(exc))
                    ready.set_exception(RuntimeError(conn.error))
                    raise
                conn.state = STATE_RUNNING
                ready.set_result(None)
                await stop.wait()
                task.stopping = True
                # read before the SDK stops it: a child that left its group (setsid) is
                # still linked to it now, and would be reparented to init after
                left: list[proctree.Proc] = proctree.descendants(conn.pid) if conn.pid else []
            await asyncio.to_thread(proctree.end, left)
        except BaseException as exc:  # noqa: BLE001 - every failure is the server's state
            current = conn.generation == generation
            if current and conn.state == STATE_RUNNING and not stop.is_set():
                conn.state, conn.error = STATE_CRASHED, _with_stderr(conn, _describe(exc))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            if conn.generation == generation:
                # the SDK stops the group only when the server did not exit: what a crashed
                # one left in its group (it leads one: started in a new session) ends here
                if conn.leader is not None:
                    proctree.end(proctree.group(conn.leader))
                conn.session = None
                if conn.state == STATE_RUNNING:
                    conn.state = STATE_STOPPED

    # ---- calls ----

    def call(
        self,
        server: str,
        tool: str,
        args: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> CallOutcome:
        """Call one tool and wait for it: at most the server's timeout, less on `cancel`."""
        conn = self.conns[server]
        loop, session = self._loop, conn.session
        if loop is None or session is None or conn.state != STATE_RUNNING:
            return CallOutcome(error=f"{conn.state}: {conn.error or 'no session'}")
        timeout = conn.config.timeout
        fut = asyncio.run_coroutine_threadsafe(_call(session, tool, args, timeout), loop)
        deadline = time.monotonic() + timeout + 1.0
        while not fut.done():
            if cancel is not None and cancel.is_set():
                fut.cancel()
                return CallOutcome(error="the call was stopped", interrupted=True)
            if time.monotonic() > deadline:
                fut.cancel()
                return _timed_out(timeout)
            concurrent.futures.wait([fut], 0.05)
        if fut.cancelled():
            return CallOutcome(error="the call was cancelled", interrupted=True)
        exc = fut.exception()
        if exc is None:
            return CallOutcome(result=fut.result())
        if isinstance(exc, TimeoutError):
            return _timed_out(timeout)
        if _is_protocol_error(exc):  # the server answered with an error: it is still there
            return CallOutcome(error=f"the server refused the call: {exc}")
        conn.state, conn.error = STATE_CRASHED, _describe(exc)
        return CallOutcome(error=f"the server stopped responding ({conn.error})")


def _is_protocol_error(exc: BaseException) -> bool:
    """An MCP error answer, other than the SDK's own "Connection closed"."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


def _import_sdk() -> None:
    import mcp.client.session  # noqa: F401
    import mcp.client.stdio  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401


def _timed_out(timeout: float) -> CallOutcome:
    return CallOutcome(error=f"no answer within {timeout:g} s (timed out)", timed_out=True)


def _wait(
    fut: concurrent.futures.Future[None], timeout: float, cancel: threading.Event | None
) -> str | None:
    """None once `fut` succeeded, else why not (its error, a timeout, `cancel` set). Ctrl-C,
    SIGTERM and SIGHUP (KeyboardInterrupt, errors.Terminated) go on up: they are not the
    server's failure (`McpHub.start`)."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fut.result(0.05)
                return None
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    return "interrupted by the user"
                if time.monotonic() > deadline:
                    return f"no answer within {timeout - 1.0:g} s (timed out)"
    except Exception as exc:
        return str(exc) or type(exc).__name__


@contextlib.asynccontextmanager
async def _transport(conn: ServerConn) -> Any:
    """The SDK's stdio or streamable-HTTP transport for `conn` (stderr kept for errors)."""
    cfg = conn.config
    if cfg.url:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        # the SDK documents passing a client of one's own to set headers; its default timeouts
        timeout = httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
        client = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=timeout)
        async with client, streamable_http_client(cfg.url, http_client=client) as streams:
            yield streams
        return
    from mcp.client.stdio import StdioServerParameters, stdio_client

    mark = f"{os.getpid()}-{conn.name}-{conn.generation}"  # how its process is found
    params = StdioServerParameters(
        command=cfg.command or "",
        args=list(cfg.args),
        env=dict(cfg.env) | {proctree.MARK: mark},
        cwd=cfg.cwd,
    )
    conn.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
    async with stdio_client(params, errlog=conn.stderr) as streams:
        # the SDK started it (the leader of its own group) and keeps its process to itself
        conn.pid = proctree.child_marked(mark)
        conn.leader = proctree.identity(conn.pid) if conn.pid is not None else None
        yield streams


async def _open_session(
    stack: contextlib.AsyncExitStack, read: Any, write: Any, timeout: float
) -> Any:
    import anyio
    from mcp import ClientSession
    from mcp_types import Implementation

    info = Implementation(name="countbot", version=__version__)
    session = await stack.enter_async_context(ClientSession(read, write, client_info=info))
    with anyio.fail_after(timeout):
        await session.initialize()
    return session


async def _list_tools(session: Any, timeout: float) -> list[ListedTool]:
    """Every tool, all pages, in the server's order."""
    import anyio
    from mcp_types import PaginatedRequestParams

    tools: list[ListedTool] = []
    cursor = None
    with anyio.fail_after(timeout):
        for _ in range(100):  # a server paging forever is not worth waiting for
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(
                ListedTool(t.name, t.description or "", dict(t.input_schema or {}))
                for t in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
    return tools


async def _call(session: Any, tool: str, args: dict[str, Any], timeout: float) -> Any:
    import anyio

    with anyio.fail_after(timeout):
        return await session.call_tool(tool, args)


def _with_stderr(conn: ServerConn, why: str) -> str:
    tail = conn.stderr_tail()
    return f"{why} (its stderr: {tail})" if tail else why


def _start_failure(exc: BaseException) -> str:
    """Why a server did not start, in the words a user needs."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if "Connection closed" in str(exc):
        return "it exited before answering"
    return _describe(exc)


def _describe(exc: BaseException) -> str:
    """One line for a server's failure (exception groups unwrapped to their first cause)."""
    while getattr(exc, "exceptions", None):  # an ExceptionGroup from a task group
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, TimeoutError):
        return "no answer in time (timed out)"
    if isinstance(exc, FileNotFoundError):
        return f"cannot run it: {exc.strerror or exc} ({exc.filename})"
    if isinstance(exc, asyncio.CancelledError):
        return "stopped"
    text = str(exc).strip().splitlines()
    detail = text[0] if text else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__

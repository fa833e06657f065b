"""Tools are data: a `ToolSpec` names a tool, its JSON schema, how to run it and what it touches.

A tool's `run(args, ctx, cancel)` gets arguments that already passed the schema, and either
returns a `ToolResult` or raises `ToolError` with a message the model can act on; the registry
turns every failure into `ToolResult(ok=False)`, so nothing a tool does can crash a turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from countbot_cli.config.own_files import OwnFiles
from countbot_cli.messages import ToolCall

KIND_READ = "read"
KIND_WRITE = "write"
KIND_EXEC = "exec"
KIND_MEMORY = "memory"
KIND_MCP = "mcp"  # a tool of an MCP server (tools.mcp): asks like exec, `a` allowed
KINDS = (KIND_READ, KIND_WRITE, KIND_EXEC, KIND_MEMORY, KIND_MCP)

Progress = Callable[[str], None]  # a running tool's output as it arrives (see ToolContext)


class ToolError(Exception):
    """An expected tool failure; `str(err)` goes to the model as `Error: …`."""


@dataclass(frozen=True)
class ToolContext:
    """What every tool may rely on. Paths are confined to `workspace` (see `paths`)."""

    workspace: Path
    max_output_chars: int = 10000  # exec output cap (CountBot's max_output_length)
    shell_timeout: float = 60.0  # exec default timeout, seconds
    # True: a path outside the workspace does not by itself need approval (still reported)
    allow_outside_workspace: bool = False
    max_read_bytes: int = 1_000_000  # read_file/edit_file refuse bigger files (ranges still work)
    # values never passed to a command's environment, whatever the variable is called (API keys)
    secret_values: tuple[str, ...] = field(default=(), repr=False)
    # countbot's own files and folders (config/own_files.py): always asked about
    protected: OwnFiles = OwnFiles()
    # folders read-only tools may read without asking, outside the workspace or hidden: the
    # user's own skills (config/skills.py); countbot's own files still ask
    readable: tuple[Path, ...] = ()
    # True: the user approved this exact call, so appending through a file with several hard
    # links is allowed (set by the registry for a call asked about for a sensitive path)
    multi_link_ok: bool = False
    # gets a running command's output as it arrives, from reader threads (a view's live tail;
    # the tool round sets it per call to its view's `tool_output`); None: nobody watches
    progress: Progress | None = field(default=None, compare=False, repr=False)


@dataclass
class ToolResult:
    """The outcome of one call. `content` is what the model sees (errors start with `Error:`)."""

    content: str
    ok: bool = True
    error: str | None = None
    interrupted: bool = False
    timed_out: bool = False
    full: str | None = None  # the whole output as captured when `content` was cut (/last-tool)

    @classmethod
    def failure(
        cls, error: str, *, interrupted: bool = False, timed_out: bool = False
    ) -> ToolResult:
        return cls(
            content=f"Error: {error}",
            ok=False,
            error=error,
            interrupted=interrupted,
            timed_out=timed_out,
        )


RunFn = Callable[[dict[str, Any], ToolContext, threading.Event], ToolResult]
# preview(args, ctx, may_read) -> text shown in the approval prompt. `may_read` is False when a
# path lies outside the workspace: the preview must then not open it. Raising ToolError means the
# call cannot succeed (e.g. an edit whose old_text is missing): prepare() reports it as an error.
PreviewFn = Callable[[dict[str, Any], ToolContext, bool], str]
# reasons(args) -> why this call needs approval ([] = it does not); overrides the kind default
ReasonsFn = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    run: RunFn
    kind: str  # "read" | "write" | "exec" | "memory" | "mcp"
    path_args: tuple[str, ...] = ()  # arguments holding paths (confined by the registry)
    preview: PreviewFn | None = None
    reasons: ReasonsFn | None = None

    def schema(self) -> dict[str, Any]:
        """The OpenAI tool definition sent in ChatRequest.tools."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class PreparedCall:
    """A parsed, validated, classified tool call: everything the approval step needs.

    `error` set means the call must not run (invalid JSON, unknown tool, schema violation, a
    deny rule, an edit that cannot apply); `ToolRegistry.run` then returns it as a failed result.
    """

    call: ToolCall
    spec: ToolSpec | None
    args: dict[str, Any] | None
    error: str | None = None
    needs_approval: bool = False
    reasons: list[str] = field(default_factory=list)
    outside_paths: list[Path] = field(default_factory=list)
    # why some path is sensitive (paths.sensitive_reason): asked even under --yes or auto mode
    sensitive: list[str] = field(default_factory=list)
    # every path argument as resolved when the call was approved; run() refuses a change
    paths: list[Path] = field(default_factory=list)
    preview: str = ""
    rule: str | None = None  # the allow rule that auto-approved an exec call

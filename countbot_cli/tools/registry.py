"""The tool registry: schemas for the request, argument checks, approval facts, dispatch.

`prepare(call)` parses and validates a model's tool call and says what approving it means (a
diff, the exact command, the paths outside the workspace or sensitive); it never writes and
never opens a path outside the workspace. `run(prepared)` never raises for a tool failure: the
model gets an `Error: …` result. The invariant: a call runs only as it was approved (one whose
paths now resolve differently is not run). `exec`'s allow and deny rules are matched here;
the rules and why: docs/design/tools.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from countbot_cli.jsonsafe import JSONLimitError, loads_bounded
from countbot_cli.messages import ToolCall
from countbot_cli.tools import schema as jsonschema
from countbot_cli.tools.base import (
    KIND_EXEC,
    KIND_READ,
    KIND_WRITE,
    PreparedCall,
    Progress,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
)
from countbot_cli.tools.files import file_tools
from countbot_cli.tools.paths import (
    display_path,
    hard_link_reason,
    resolve_in_workspace,
    sensitive_reason,
)
from countbot_cli.tools.shell import exec_tool

__all__ = [
    "PreparedCall",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "default_tools",
    "match_allow_rule",
    "match_deny_rule",
    "resolve_in_workspace",
]

_META = ";&|`$<>\n\r"
_META_CLASS = "[^" + re.escape(_META) + "]"
_SEGMENT_SPLIT = re.compile(r"[;&|\n\r`]|\$\(|\)")
_KIND_REASONS = {KIND_WRITE: "writes a file", KIND_EXEC: "runs a shell command"}


def default_tools(ctx: ToolContext) -> list[ToolSpec]:
    """read_file, write_file, edit_file, list_dir and exec (the memory tool is added apart)."""
    return [*file_tools(), exec_tool()]


def _glob_regex(rule: str, wildcard: str) -> re.Pattern[str]:
    parts = [wildcard + "*" if c == "*" else wildcard if c == "?" else re.escape(c) for c in rule]
    return re.compile("".join(parts), re.DOTALL)


def match_allow_rule(command: str, rules: Sequence[str]) -> str | None:
    """The first allow rule that auto-approves `command` (see the module docstring), or None."""
    command = command.strip()
    for rule in rules:
        if rule.strip() and _glob_regex(rule.strip(), _META_CLASS).fullmatch(command):
            return rule
    return None


def match_deny_rule(command: str, rules: Sequence[str]) -> str | None:
    """The first deny rule matching the whole command or one of its segments, or None."""
    candidates = [command.strip(), *(s.strip() for s in _SEGMENT_SPLIT.split(command))]
    for rule in rules:
        pattern = _glob_regex(rule.strip(), ".") if rule.strip() else None
        if pattern and any(pattern.fullmatch(c) for c in candidates if c):
            return rule
    return None


def parse_arguments(text: str, spec: ToolSpec) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None) or (None, error for the model). An empty string means {}."""
    if not text.strip():
        return {}, None
    try:
        value = loads_bounded(text)
    except JSONLimitError as e:
        return None, f"arguments rejected: {e}; send a JSON object matching the schema"
    except json.JSONDecodeError as e:
        hint = ""
        if spec.kind == KIND_WRITE:
            hint = " (for long content write chunks of at most 800 characters, mode append)"
        return None, (
            f"arguments are not valid JSON: {e.msg} at line {e.lineno} column "
            f"{e.colno}; send a JSON object matching the schema{hint}"
        )
    if not isinstance(value, dict):
        return None, (
            f"arguments must be a JSON object, not {type(value).__name__}; "
            "send a JSON object matching the schema"
        )
    return value, None


class ToolRegistry:
    def __init__(self, specs: Iterable[ToolSpec], ctx: ToolContext) -> None:
        self.ctx = ctx
        # sorted by name, so the tools part of the prompt is stable (good for prompt caching)
        self._specs = {s.name: s for s in sorted(specs, key=lambda s: s.name)}
        self._sources: list[Callable[[], Iterable[ToolSpec]]] = []
        self.mcp: Any = None  # the MCP servers' tools.mcp.McpTools, when servers are configured

    def close(self) -> None:
        """Stop what the tools started (MCP servers and their process groups); at the end of a
        command, not only at interpreter exit. Safe to call twice."""
        if self.mcp is not None:
            self.mcp.close()

    def add_source(self, source: Callable[[], Iterable[ToolSpec]]) -> None:
        """Tools known only once asked for (MCP servers start then): `source()` runs the first
        time the tools are needed (`schemas`, `names`, `get`: a turn's request), not for a
        count (`schemas(start=False)`). Until it returns it is asked again: a KeyboardInterrupt
        from it (Ctrl-C while MCP servers start) goes on up to what asked, and the next turn
        asks again."""
        self._sources.append(source)

    def _load_sources(self) -> None:
        while self._sources:
            added = list(self._sources[0]())
            self._sources.pop(0)
            merged = {**{s.name: s for s in added}, **self._specs}  # built-ins keep their names
            self._specs = dict(sorted(merged.items()))

    def schemas(self, *, start: bool = True) -> list[dict[str, Any]]:
        """Every tool's schema. `start=False`: the tools known now, no source asked (the
        toolbar's count does not start MCP servers)."""
        if start:
            self._load_sources()
        return [s.schema() for s in self._specs.values()]

    def names(self) -> list[str]:
        self._load_sources()
        return list(self._specs)

    def get(self, name: str) -> ToolSpec | None:
        self._load_sources()
        return self._specs.get(name)

    def prepare(
        self,
        call: ToolCall,
        *,
        allow_rules: Sequence[str] = (),
        deny_rules: Sequence[str] = (),
        exact_rules: Sequence[str] = (),
    ) -> PreparedCall:
        spec = self.get(call.name)
        if spec is None:
            known = ", ".join(self.names()) or "none"
            return PreparedCall(call, None, None, f"unknown tool '{call.name}'; available: {known}")
        args, error = parse_arguments(call.arguments, spec)
        if args is None:
            return PreparedCall(call, spec, None, error)
        args = jsonschema.coerce(spec.parameters, args)
        problems = jsonschema.validate(spec.parameters, args)
        if problems:
            return PreparedCall(
                call, spec, args, f"invalid arguments for {spec.name}: " + "; ".join(problems)
            )
        try:
            resolved = self._resolve_paths(spec, args)
        except ValueError as e:
            return PreparedCall(call, spec, args, f"invalid arguments for {spec.name}: {e}")
        except OSError as e:  # e.g. the workspace itself became a symlink loop
            return PreparedCall(call, spec, args, f"{spec.name}: {e.strerror or e}")
        prepared = PreparedCall(
            call,
            spec,
            args,
            outside_paths=[p for p, inside in resolved if not (inside or self._readable(spec, p))],
            paths=[p for p, _ in resolved],
        )
        if spec.kind != KIND_EXEC:  # exec asks anyway; its working_dir is only where it runs
            for path, _ in resolved:
                if self._readable(spec, path):
                    continue
                why = sensitive_reason(path, self.ctx.workspace, self.ctx.protected)
                if why is None and spec.kind == KIND_WRITE:
                    why = hard_link_reason(path)
                if why is not None:
                    shown = display_path(path, self.ctx.workspace)
                    prepared.sensitive.append(f"{shown}: {why}")
        return self._classify(prepared, allow_rules, deny_rules, exact_rules)

    def _readable(self, spec: ToolSpec, path: Path) -> bool:
        """A read of a folder in `ctx.readable` (the user's skills), not one of countbot's own."""
        if spec.kind != KIND_READ or self.ctx.protected.reason(path) is not None:
            return False
        return any(path.is_relative_to(folder.resolve()) for folder in self.ctx.readable)

    def _resolve_paths(self, spec: ToolSpec, args: dict[str, Any]) -> list[tuple[Path, bool]]:
        """(resolved path, inside the workspace) for every path argument given."""
        out = []
        for key in spec.path_args:
            if isinstance(args.get(key), str) and args[key]:
                out.append(resolve_in_workspace(args[key], self.ctx.workspace))
        return out

    def _classify(
        self,
        prepared: PreparedCall,
        allow_rules: Sequence[str],
        deny_rules: Sequence[str],
        exact_rules: Sequence[str] = (),
    ) -> PreparedCall:
        spec, args = prepared.spec, prepared.args
        assert spec is not None and args is not None
        if spec.reasons is not None:
            reasons = list(spec.reasons(args))
        else:
            reasons = [_KIND_REASONS[spec.kind]] if spec.kind in _KIND_REASONS else []
        if spec.kind == KIND_EXEC:
            command = str(args.get("command", ""))
            denied = match_deny_rule(command, deny_rules)
            if denied is not None:
                prepared.error = (
                    f"denied by rule '{denied}': the user does not allow this "
                    "command; do not retry it, find another way or ask the user"
                )
                return prepared
            prepared.rule = match_allow_rule(command, allow_rules)
            if prepared.rule is None and command.strip() and command.strip() in exact_rules:
                prepared.rule = command.strip()  # saved with `A` (config/saved_allow.py)
            if prepared.rule is not None:
                reasons = []
        outside = prepared.outside_paths
        prepared.needs_approval = (
            bool(reasons)
            or bool(prepared.sensitive)
            or (bool(outside) and not self.ctx.allow_outside_workspace)
        )
        prepared.reasons = (
            reasons
            + [f"path outside the workspace: {p}" for p in outside]
            + [f"sensitive path {s}" for s in prepared.sensitive]
        )
        if spec.preview is not None:
            try:
                prepared.preview = spec.preview(args, self.ctx, not outside)
            except ToolError as e:
                prepared.error = str(e)
            except (OSError, ValueError) as e:
                prepared.preview = f"(no preview: {e})"
        if prepared.rule is not None:
            prepared.preview += f"\n(auto-approved by allow rule '{prepared.rule}')"
        return prepared

    def run(
        self,
        prepared: PreparedCall,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
    ) -> ToolResult:
        """Run an approved call. Never raises for tool failures (see the module docstring).
        `progress` gets a command's output as it arrives (ToolContext.progress)."""
        spec, args = prepared.spec, prepared.args
        if prepared.error is not None or spec is None or args is None:
            return ToolResult.failure(prepared.error or "the call could not be prepared")
        ctx = self.ctx
        try:
            now = [p for p, _ in self._resolve_paths(spec, args)]
            if now != prepared.paths:  # e.g. a symlink swapped in after approval
                moved = [p for p, q in zip(now, prepared.paths, strict=False) if p != q] or now
                return ToolResult.failure(
                    f"the path now resolves to {moved[0]}, which was not approved (a symlink "
                    "changed after the call was checked); not run"
                )
            if prepared.outside_paths or any(self._readable(spec, p) for p in now):
                ctx = dataclasses.replace(ctx, allow_outside_workspace=True)  # approved or readable
            if prepared.sensitive:  # only ever approved by asking about exactly this call
                ctx = dataclasses.replace(ctx, multi_link_ok=True)
            if progress is not None:
                ctx = dataclasses.replace(ctx, progress=progress)
            return spec.run(args, ctx, cancel or threading.Event())
        except ToolError as e:
            return ToolResult.failure(str(e))
        except OSError as e:
            detail = e.strerror or str(e)
            where = f" ({_short(str(e.filename))})" if e.filename else ""
            return ToolResult.failure(f"{spec.name} failed: {detail}{where}")
        except Exception as e:  # a bug in a tool must not end the turn
            return ToolResult.failure(f"{spec.name} failed unexpectedly: {type(e).__name__}: {e}")


def _short(text: str, limit: int = 200) -> str:
    """A path for an error message: long ones keep their start and end."""
    return text if len(text) <= limit else f"{text[: limit // 2]}…{text[-limit // 2 :]}"

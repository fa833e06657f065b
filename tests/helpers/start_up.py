"""What a plain `countbot ask` must not load (issue 25 point 2): countbot's own modules that
only some runs use, each imported inside the function that needs it.

`NOT_AT_START_UP` is the one list: tests/cli/test_ask.py fails when `ask --plain` (tools off,
nothing attached, no MEMORY.md lines) or `--help` loads one of them, and
tests/test_architecture.py lets a module of any layer import one of them inside a function
(as it lets the heavy libraries be), since importing it at the top would load it at start-up.
A module leaves the list only with the lazy import that kept it out.
"""

from __future__ import annotations

NOT_AT_START_UP = frozenset(
    {
        # the tools: only when tools are enabled (app._tool_registry), a tool round when the
        # model calls one (conversation/engine.py)
        "countbot_cli.tools.registry",
        "countbot_cli.tools.base",
        "countbot_cli.conversation.tool_round",
        "countbot_cli.conversation.round_fit",
        "countbot_cli.tools.files",
        "countbot_cli.tools.shell",
        "countbot_cli.memory.tool",
        # MCP servers: only when the config names one (config/mcp.py)
        "countbot_cli.config.mcp_server",
        # -f/-a: only with something attached (commands/ask.py)
        "countbot_cli.conversation.input.attachments",
        "countbot_cli.conversation.input.fetch",
        # the transcript's lines: tool calls (ui/turnview.py), ask's usage line on a terminal
        "countbot_cli.ui.transcript",
        # the memory upkeep's parts (memory/keeper.py): after a saved turn with summaries on
        "countbot_cli.memory.overflow_region",
        "countbot_cli.memory.quality",
        "countbot_cli.memory.rolling",
        # which newer lines replace a recalled one (memory/recall.py): only once lines are sent
        "countbot_cli.memory.versions",
        "countbot_cli.memory.distilled",
        "countbot_cli.memory.auto",
        "countbot_cli.memory.grounding",
        "countbot_cli.memory.statements",
    }
)

# the command groups' declarations (cli/groups.py): only for a command of theirs, or the whole
# app (the root's --help lists them, the chat, shell completion); never for `ask`
GROUP_MODULES = frozenset(
    {
        "countbot_cli.cli.sessions",
        "countbot_cli.cli.memory",
        "countbot_cli.cli.config",
        "countbot_cli.cli.mcp",
        "countbot_cli.cli.models",
    }
)

# the dataclasses countbot defines while a plain `ask --no-save` starts and answers (tools off,
# nothing attached): each costs 2-10 M instructions to define, a NamedTuple far less
# (DEVELOPING.md). tests/cli/test_ask.py fails when one not listed here is defined on that path;
# one that becomes a NamedTuple, a plain class or lazy leaves the list.
DATACLASSES_AT_START_UP = frozenset(
    {
        "countbot_cli.config.fallback.Chain",
        "countbot_cli.config.provider_entry.ProviderEntry",
        "countbot_cli.config.providers.ProviderConfig",
        "countbot_cli.config.settings.Settings",
        "countbot_cli.conversation.cache_report.CacheReport",
        "countbot_cli.conversation.context.TurnContext",
        "countbot_cli.conversation.sessions.session.Session",
        "countbot_cli.conversation.sessions.store._Snapshot",
        "countbot_cli.conversation.structured.Structured",
        "countbot_cli.conversation.tuning.Tuning",
        "countbot_cli.conversation.turn_record.TurnRecord",
        "countbot_cli.conversation.turn_record.TurnResult",
        "countbot_cli.memory.coverage.Share",
        "countbot_cli.memory.digest.Batch",
        "countbot_cli.memory.marks.Marks",
        "countbot_cli.memory.report.Probe",
        "countbot_cli.messages.ChatRequest",
        "countbot_cli.messages.Finished",
        "countbot_cli.messages.Message",
        "countbot_cli.messages.ReasoningDelta",
        "countbot_cli.messages.TextDelta",
        "countbot_cli.messages.ToolCall",
        "countbot_cli.messages.ToolCallDelta",
        "countbot_cli.messages.Usage",
        "countbot_cli.provider.assemble.Assembler",
        "countbot_cli.provider.assemble._Slot",
        "countbot_cli.tools.approval.ApprovalPolicy",
    }
)

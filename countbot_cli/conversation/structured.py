"""`ask --schema FILE|JSON`: an answer that is one JSON value conforming to a JSON schema.

- The schema is a JSON object, given inline (text starting with `{`) or as a file (read
  bounded, a regular file only: prompt_input.read_attachment); anything else is exit 2.
- A provider whose preset takes structured output (OpenAI, OpenRouter, vLLM, Ollama, LM
  Studio; any server can name one with `preset:`) gets it as the request's
  `response_format: {"type": "json_schema", …}`; any other gets it as an instruction in the
  system prompt (prompts.SCHEMA_INSTRUCTION).
- The answer (a ```json fence around it is tolerated) is parsed with jsonsafe's limits and
  checked with tools/schema.py's validator, the one the tool arguments use. One that does not
  parse or conform is sent back once with the errors (prompts.SCHEMA_REPAIR), in the same
  conversation; if the second answer fails too, `ask` exits 7 with the validation error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from countbot_cli.config.presets import PRESETS
from countbot_cli.conversation.input.prompt_input import read_attachment
from countbot_cli.errors import UsageError
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.prompts import SCHEMA_INSTRUCTION, SCHEMA_REPAIR
from countbot_cli.tools.schema import validate

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.chat import Conversation
    from countbot_cli.conversation.input.attachments import Attached
    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.conversation.view import ConversationView

FENCE = re.compile(r"\A\s*(`{3,}|~{3,})[\w-]*[ \t]*\n(.*)\n\s*\1\s*\Z", re.S)
STOPPED = ("max_iterations", "repeated_tool_call")  # the tool loop was stopped: exit 8
MAX_SCHEMA_BYTES = 200_000
MAX_ERRORS = 5  # shown to the model and on stderr
REPAIR_ANSWER_CHARS = 4_000  # of the failed answer, quoted back in the repair request


def load_schema(arg: str) -> dict[str, Any]:
    """The schema of `--schema ARG`: inline JSON or a file; UsageError (exit 2) when it is
    neither, or not a JSON object."""
    text = arg if arg.lstrip().startswith("{") else None
    if text is None:
        path = Path(arg).expanduser()
        if not path.exists():
            raise UsageError(
                f"--schema: no such file: {arg}",
                hint="give a JSON schema file, or the schema itself: --schema '{\"type\": …}'",
            )
        text = read_attachment(path, MAX_SCHEMA_BYTES, flag="--schema")
    try:
        schema = loads_bounded(text)
    except ValueError as e:
        raise UsageError(f"--schema: not valid JSON ({e})") from None
    if not isinstance(schema, dict):
        raise UsageError('--schema: a JSON schema is a JSON object ({"type": …})')
    return schema


def schema_settings(settings: Settings, schema: dict[str, Any]) -> Settings:
    """The settings asking for `schema`: as the request's response_format when the provider
    takes it, else as an instruction joining the extra system text (--system's)."""
    p = settings.provider
    preset = PRESETS.get(p.preset or "")
    if preset is None or not preset.json_schema:
        rule = SCHEMA_INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
        return replace(settings, system="\n\n".join(t for t in (settings.system, rule) if t))
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    extra = MappingProxyType({**p.extra_body, "response_format": fmt})
    return replace(settings, provider=replace(p, extra_body=extra))


def check_answer(answer: str, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    """(the parsed value, []) when `answer` is JSON conforming to `schema`; else (None or
    the value, the errors)."""
    m = FENCE.match(answer)
    text = m.group(2) if m else answer
    try:
        value = loads_bounded(text.strip())
    except ValueError as e:
        return None, [f"the answer is not JSON ({e})"]
    return value, validate(schema, value, noun="property")[:MAX_ERRORS]


@dataclass
class Structured:
    """The outcome of `ask --schema`: the last turn, its parsed value, what did not conform."""

    result: TurnResult
    value: Any = None
    errors: list[str] = field(default_factory=list)
    repaired: bool = False

    @property
    def error_text(self) -> str:
        return "the answer does not match the schema: " + "; ".join(self.errors)


def ask_structured(
    conversation: Conversation,
    text: str,
    view: ConversationView,
    schema: dict[str, Any],
    attached: Attached | None = None,
) -> Structured:
    """Send `text`; an answer that does not conform is sent back once with the errors."""
    result = conversation.send(text, view, attached=attached)
    if result.status != "ok" or result.finish_reason in STOPPED:
        return Structured(result)
    value, errors = check_answer(result.answer, schema)
    if not errors:
        return Structured(result, value)
    quoted = result.answer[:REPAIR_ANSWER_CHARS]
    first = result
    repair = SCHEMA_REPAIR.format(errors="; ".join(errors), answer=quoted)
    result = conversation.send(repair, view)
    result.calls[:0] = first.calls  # the usage (and cost) of both requests
    if result.status != "ok" or result.finish_reason in STOPPED:
        return Structured(result, repaired=True)
    value, errors = check_answer(result.answer, schema)
    return Structured(result, value if not errors else None, errors, repaired=True)

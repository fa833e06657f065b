"""The session value: one conversation as it is saved (SPEC §8). No I/O here.

A session holds the live `messages` (the ones the history window chooses from), the `archived`
messages already summarised out of the window (never destroyed: `sessions show` and export still
have them), the user's `summary` (/summary) and the `rolling_summary` memory upkeep keeps of what
left the window (memory/rolling.py; `context_summary` says which one a request carries), the records of the tool calls made while answering (`tool_conversations`), opaque
memory `cursors` and usage totals. `SessionStore` (store.py) reads and writes it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from countbot_cli.messages import Message, Usage, utc_now
from countbot_cli.prompts import rolling_context

SCHEMA_VERSION = 1
TITLE_MAX = 60

HEADER_KEYS = (
    "id",
    "title",
    "created_at",
    "updated_at",
    "provider",
    "model",
    "message_count",
    "gist",
)
GIST_MAX = 80


class SchemaVersionError(ValueError):
    """The file was written by a newer countbot: it is valid, just not readable by this version."""

    def __init__(self, version: int) -> None:
        super().__init__(f"schema version {version} is newer than this countbot understands")
        self.version = version


@dataclass
class Session:
    id: str
    title: str
    created_at: str  # UTC ISO-8601
    updated_at: str
    provider: str
    model: str
    summary: str = ""  # the user's (/summary): wins over the rolling one, never overwritten
    rolling_summary: str = ""  # what left the window, updated at each step (memory/rolling.py)
    system: str = ""  # the conversation's extra instructions (/system); "" = none
    workspace: str = ""  # the tools' workspace it was started in ("" = before it was recorded)
    messages: list[Message] = field(default_factory=list)
    # raw messages already summarised out of the window (memory feature); never destroyed
    archived: list[Message] = field(default_factory=list)
    # one record a tool call: tool, arguments, result (bounded), error, duration_ms, approval,
    # timestamp, message_id (the answer it belongs to)
    tool_conversations: list[dict[str, Any]] = field(default_factory=list)
    cursors: dict[str, int] = field(default_factory=dict)  # memory cursors; opaque to the store
    usage: Usage = field(default_factory=Usage)
    schema_version: int = SCHEMA_VERSION
    # the fingerprint of the last request (conversation/cache_report.py): hashes, no text
    last_request: dict[str, Any] = field(default_factory=dict)

    def all_messages(self) -> list[Message]:
        """The whole transcript: archived messages first, then the live ones."""
        return [*self.archived, *self.messages]

    def context_summary(self) -> str:
        """The summary a request carries in its stable head: the user's, else the rolling one
        (introduced as what came before the messages sent)."""
        if self.summary.strip():
            return self.summary
        return rolling_context(self.rolling_summary) if self.rolling_summary.strip() else ""

    def header(self) -> dict[str, Any]:
        """What a listing needs. `message_count` counts archived messages too."""
        return {
            "id": self.id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "provider": self.provider,
            "model": self.model,
            "message_count": len(self.messages) + len(self.archived),
            "gist": gist(self.summary or self.rolling_summary),
        }

    def to_dict(self) -> dict[str, Any]:
        """The stored form: small fields first so the head of the file is readable."""
        return {
            "schema_version": self.schema_version,
            "id": self.id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "provider": self.provider,
            "model": self.model,
            "summary": self.summary,
            "rolling_summary": self.rolling_summary,
            "system": self.system,
            "workspace": self.workspace,
            "usage": self.usage.to_dict(),
            "cursors": dict(self.cursors),
            "messages": [m.to_dict() for m in self.messages],
            "archived": [m.to_dict() for m in self.archived],
            "tool_conversations": [_json_copy(r) for r in self.tool_conversations],
            **({"last_request": _json_copy(self.last_request)} if self.last_request else {}),
        }

    @classmethod
    def from_dict(cls, d: Any) -> Session:
        """Parse the stored form. Raises ValueError (SchemaVersionError for a newer file)."""
        head = header_from_dict(d)
        try:
            return cls(
                id=head["id"],
                title=head["title"],
                created_at=head["created_at"],
                updated_at=head["updated_at"],
                provider=head["provider"],
                model=head["model"],
                summary=_str(d, "summary"),
                rolling_summary=_str(d, "rolling_summary"),  # absent in older files
                system=_str(d, "system"),  # absent in files written before it existed
                workspace=_str(d, "workspace"),
                messages=_messages(d, "messages"),
                archived=_messages(d, "archived"),
                tool_conversations=_records(d.get("tool_conversations")),
                cursors=_cursors(d.get("cursors")),
                usage=_usage(d.get("usage")),
                last_request=_mapping(d.get("last_request")),
            )
        except (TypeError, AttributeError, KeyError) as e:
            raise ValueError(f"bad session shape: {e}") from e


def last_user_at(messages: Sequence[Message]) -> int | None:
    """Where the last user message is (None: there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None


def header_from_dict(d: Any) -> dict[str, Any]:
    """The listing header of a stored session, checking only the top-level shape (cheap).

    Raises ValueError on a bad shape and SchemaVersionError for a file from a newer countbot.
    """
    if not isinstance(d, dict):
        raise ValueError("a session file must hold a JSON object")
    version = d.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"bad schema_version: {version!r}")
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(version)
    sid = d.get("id")
    if not isinstance(sid, str) or not sid:
        raise ValueError("missing session id")
    for key in ("messages", "archived"):
        if not isinstance(d.get(key, []), list):
            raise ValueError(f"'{key}' must be a list")
    head: dict[str, Any] = {"id": sid}
    for key in ("title", "created_at", "updated_at", "provider", "model"):
        head[key] = _str(d, key)
    head["message_count"] = len(d.get("messages", [])) + len(d.get("archived", []))
    head["gist"] = gist(_str(d, "summary") or _str(d, "rolling_summary"))
    return head


def _str(d: dict[str, Any], key: str) -> str:
    value = d.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string")
    return value


_ROLES = frozenset(("system", "user", "assistant", "tool"))
_PLAIN_KEYS = frozenset(("id", "role", "content", "created_at", "status", "name", "tool_call_id"))


def _messages(d: dict[str, Any], key: str) -> list[Message]:
    items = d.get(key) or []
    out = []
    for item in items:
        if type(item) is not dict:
            raise ValueError(f"'{key}' holds a non-object item")
        out.append(_message(item))
    return out


def _message(d: dict[str, Any]) -> Message:
    """Message.from_dict, with a fast path for the common stored shape (no tool calls)."""
    if (
        d.keys() <= _PLAIN_KEYS
        and d.get("role") in _ROLES
        and type(d.get("content")) is str
        and type(d.get("id")) is str
        and type(d.get("created_at")) is str
    ):
        return Message(
            role=d["role"],
            content=d["content"],
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            status=d.get("status"),
            created_at=d["created_at"],
            id=d["id"],
        )
    return Message.from_dict(d)


def _records(items: Any) -> list[dict[str, Any]]:
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise ValueError("'tool_conversations' must be a list of objects")
    return [_json_copy(x) for x in items]  # the session must not share objects with `d`


def _mapping(value: Any) -> dict[str, Any]:
    """A stored object (anything else, from an older or damaged file: none)."""
    return dict(_json_copy(value)) if isinstance(value, dict) else {}


def _json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def _cursors(value: Any) -> dict[str, int]:
    """Memory cursors are opaque to the store: any values are kept (integers by convention)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("'cursors' must be an object")
    return {str(k): _json_copy(v) for k, v in value.items()}


def _usage(value: Any) -> Usage:
    """Stored usage totals; `cached_tokens` and `cost` are absent in older files (and when no
    provider reported a cache or no prices were set)."""
    if value is None:
        return Usage()
    if not isinstance(value, dict):
        raise ValueError("'usage' must be an object")
    nums = {}
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = value.get(k, 0)
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"usage '{k}' must be an integer")
        nums[k] = v
    cached, cost, saved = value.get("cached_tokens"), value.get("cost"), value.get("saved")
    if cached is not None and (not isinstance(cached, int) or isinstance(cached, bool)):
        raise ValueError("usage 'cached_tokens' must be an integer")
    if cost is not None and (not isinstance(cost, (int, float)) or isinstance(cost, bool)):
        raise ValueError("usage 'cost' must be a number")
    if saved is not None and (not isinstance(saved, (int, float)) or isinstance(saved, bool)):
        saved = None  # only ever a tally: a bad one is dropped, never the session
    return Usage(
        **nums,
        cached_tokens=cached,
        cost=None if cost is None else float(cost),
        saved=None if saved is None else float(saved),
    )


def new_session_id() -> str:
    """12 random hex digits.

    Random rather than time-prefixed: ids made on the same day would share a long prefix, and
    the listing's short ids (and the prefixes users type) would have to grow to 15+ characters.
    Listings sort by `updated_at`, not by id. 48 bits make a clash vanishingly rare, and
    `SessionStore.create` refuses to overwrite one anyway.
    """
    return secrets.token_hex(6)


def new_session(*, provider: str, model: str, title: str = "", workspace: str = "") -> Session:
    now = utc_now()
    return Session(
        id=new_session_id(),
        title=title,
        created_at=now,
        updated_at=now,
        provider=provider,
        model=model,
        workspace=workspace,
    )


def title_from(text: str) -> str:
    """The first non-empty line of `text`, whitespace collapsed, at most 60 characters."""
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1].rstrip() + "…"
    return ""


def gist(summary: str) -> str:
    """A summary's first sentence or line, whitespace collapsed, at most GIST_MAX characters
    (listings and the /resume picker show it)."""
    text = " ".join(summary.split())
    for end in (". ", "。", "! ", "？", "? "):
        cut = text.find(end)
        if 0 < cut < GIST_MAX:
            text = text[: cut + len(end.rstrip())]
            break
    return text if len(text) <= GIST_MAX else text[: GIST_MAX - 1].rstrip() + "…"


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 message`, `2 messages` (`words`: an irregular plural, e.g. "entries")."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def short_ids(ids: list[str], min_len: int = 8) -> dict[str, str]:
    """For each id, its shortest unique prefix among `ids`, at least `min_len` long (or whole)."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, sid in enumerate(ordered):
        need = 1
        for j in (i - 1, i + 1):
            if 0 <= j < len(ordered):
                need = max(need, _common_prefix(sid, ordered[j]) + 1)
        out[sid] = sid[: max(need, min_len)]
    return out


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n

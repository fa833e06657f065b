"""A provider entry of the config file (`providers: NAME: {...}`), or a bare preset named
with `-p`: its keys checked, its values read (None where unset), and the preset's values
behind them. `providers.py` turns entries into resolved `ProviderConfig`s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from countbot_cli.config.file import Section, did_you_mean
from countbot_cli.config.presets import PRESETS, PROVIDER_TYPES, Preset, ProviderType
from countbot_cli.errors import ConfigError

PROVIDER_KEYS = (
    "type",
    "preset",
    "api_base",
    "api_key_env",
    "api_key",
    "api_key_cmd",
    "model",
    "context_window",
    "headers",
    "stream_tools",
    "include_usage",
    "connect_timeout",
    "read_timeout",
    "max_retries",
    "model_path",
    "vision",
    "prompt_cache_key",
)


class EntryValues(NamedTuple):
    """What a provider entry of the file sets (None: not set)."""

    api_base: str | None = None
    api_key_env: str | None = None
    api_key: str | None = None
    api_key_cmd: str | None = None
    model: str | None = None
    context_window: int | None = None
    headers: dict[str, str] | None = None
    stream_tools: bool | None = None
    include_usage: bool | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_retries: int | None = None
    model_path: str | None = None
    vision: bool | None = None
    prompt_cache_key: bool | None = None


@dataclass
class ProviderEntry:
    """A provider entry of the file (or a bare preset): its values, then the preset's."""

    name: str
    sec: Section
    in_file: bool
    preset: Preset | None
    type: ProviderType
    v: EntryValues

    def api_base(self) -> str:
        return self.v.api_base or (self.preset.api_base if self.preset else "")

    def model(self) -> str:
        return self.v.model or (self.preset.model or "" if self.preset else "")

    def key_env(self) -> str | None:
        """The variable that should hold the key, unless a literal or a command gives it."""
        if self.v.api_key or self.v.api_key_cmd:
            return None
        return self.v.api_key_env or (self.preset.api_key_env if self.preset else None)

    def flag(self, name: str, default: bool) -> bool:
        value = getattr(self.v, name)
        if value is None and self.preset is not None:
            value = getattr(self.preset, name)
        return default if value is None else bool(value)

    def error(self, key: str | None, message: str, hint: str | None = None) -> ConfigError:
        """A ConfigError about this entry: at its file, line and key when it is in the file."""
        if self.in_file:
            return self.sec.error(key, message, hint)
        return ConfigError(message, hint=hint)


def parse_entry(providers: Section, name: str, env: Mapping[str, str], home: Path) -> ProviderEntry:
    sec = providers.section(name)
    sec.check_keys(PROVIDER_KEYS)
    preset_name = sec.text("preset")
    if preset_name is not None and preset_name not in PRESETS:
        hint = did_you_mean(preset_name, PRESETS) or "presets: " + ", ".join(PRESETS)
        raise sec.error("preset", f"unknown preset '{preset_name}'", hint)
    preset = PRESETS.get(preset_name or name)
    kind = sec.choice("type", PROVIDER_TYPES) or (preset.type if preset else "openai")
    given = [k for k in ("api_key_env", "api_key", "api_key_cmd") if sec.has(k)]
    if len(given) > 1:
        raise sec.error(given[1], f"set only one of {', '.join(given)}")
    model_path = sec.path("model_path", home, env)
    values = EntryValues(
        api_base=sec.text("api_base"),
        api_key_env=sec.text("api_key_env"),
        api_key=sec.text("api_key"),
        api_key_cmd=sec.text("api_key_cmd"),
        model=sec.text("model"),
        context_window=sec.integer("context_window", 1),
        headers=sec.text_map("headers"),
        stream_tools=sec.flag("stream_tools"),
        include_usage=sec.flag("include_usage"),
        connect_timeout=sec.number("connect_timeout", 0.1),
        read_timeout=sec.number("read_timeout", 0.1),
        max_retries=sec.integer("max_retries", 0),
        model_path=str(model_path) if model_path else None,
        vision=sec.flag("vision"),
        prompt_cache_key=sec.flag("prompt_cache_key"),
    )
    return ProviderEntry(name, sec, True, preset, kind, values)


def preset_entry(name: str, values: EntryValues | None = None) -> ProviderEntry:
    preset = PRESETS.get(name)
    kind = preset.type if preset else "openai"
    return ProviderEntry(name, Section.empty(), False, preset, kind, values or EntryValues())

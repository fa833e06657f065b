"""The `fallback:` key: the providers a failed turn moves on to, in order.

```yaml
fallback: [deepseek, local]     # a provider of the file, a preset, or `local` (embedded model)
```

Checked like every key: a list of names (one name alone is a list of one), each a provider of
the file or a preset, none twice. A link is resolved only when a turn needs it
(`providers.link_resolver`): its key command runs then, not at start-up, and a link that cannot
be used (no key, the embedded model not installed) is skipped with a notice. `ask --fallback
NAME` (repeatable) replaces the chain for one question; `check_names` is its check too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from countbot_cli.config.file import Section, did_you_mean
from countbot_cli.config.presets import PRESETS
from countbot_cli.config.providers import ProviderConfig, resolve_providers
from countbot_cli.errors import UsageError

FALLBACK_KEY = "fallback"
# the chosen provider's overrides: a link of the chain is its own config
CHOSEN_ONLY_VARS = ("COUNTBOT_MODEL", "COUNTBOT_API_BASE", "COUNTBOT_API_KEY")


@dataclass(frozen=True)
class Chain:
    """The chain's names, and how a link's provider is resolved when a turn needs it."""

    names: tuple[str, ...] = ()
    resolve: Callable[[str], ProviderConfig] | None = field(default=None, repr=False, compare=False)


def parse_fallback(
    root: Section, env: Mapping[str, str], home: Path, find_local_model: Callable[[], str | None]
) -> Chain:
    """The chain as the file gives it, each name checked (ConfigError naming file and line)."""
    names = root.texts(FALLBACK_KEY) or ()
    known = [*root.section("providers").names(), *PRESETS]
    seen: set[str] = set()
    for name in names:
        if name not in known:
            hint = did_you_mean(name, known) or "known providers: " + ", ".join(known)
            raise root.error(FALLBACK_KEY, f"no provider named '{name}'", hint)
        if name in seen:
            raise root.error(FALLBACK_KEY, f"'{name}' is in the chain twice")
        seen.add(name)
    return Chain(tuple(names), link_resolver(root, env, home, find_local_model))


def check_names(names: Sequence[str], known: Iterable[str]) -> tuple[str, ...]:
    """`--fallback NAME`s checked against the configured providers and the presets (exit 2)."""
    names_known = list(known)
    names_known += [p for p in PRESETS if p not in names_known]
    out: list[str] = []
    for raw in names:
        name = raw.strip()
        if name not in names_known:
            hint = did_you_mean(name, names_known) or "known: " + ", ".join(names_known)
            raise UsageError(f"--fallback: no provider named '{name}'", hint=hint)
        if name not in out:
            out.append(name)
    return tuple(out)


def link_resolver(
    root: Section, env: Mapping[str, str], home: Path, find_local_model: Callable[[], str | None]
) -> Callable[[str], ProviderConfig]:
    """A provider of the chain by name, resolved when a turn needs it as strictly as the chosen
    one (its key command runs, a key and a model are required: ConfigError) but without the
    chosen provider's overrides (-m, COUNTBOT_MODEL, COUNTBOT_API_BASE/KEY)."""
    link_env = {k: v for k, v in env.items() if k not in CHOSEN_ONLY_VARS}

    def resolve(name: str) -> ProviderConfig:
        chosen, _all, _default = resolve_providers(
            root,
            link_env,
            home,
            flag_provider=name,
            flag_model=None,
            strict=True,
            require_model=True,
            find_local_model=find_local_model,
        )
        return chosen

    return resolve

"""The `fallback:` key: the providers a failed turn moves on to, in order (issue 24).

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

from collections.abc import Iterable, Sequence

from countbot_cli.config.file import Section, did_you_mean
from countbot_cli.config.presets import PRESETS
from countbot_cli.errors import UsageError

FALLBACK_KEY = "fallback"


def parse_fallback(root: Section) -> tuple[str, ...]:
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
    return tuple(names)


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

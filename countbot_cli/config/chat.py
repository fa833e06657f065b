"""The `chat:` section of the config: how the interactive chat's prompt behaves (issue 23
point 10). Each can also be changed for one chat with `/set KEY VALUE`.

```yaml
chat:
  editing_mode: emacs   # or vi (the toolbar shows vi's insert/normal mode)
  enter: send           # or newline (then Esc Enter / Alt-Enter sends)
  notify: off           # bell or desktop (notify-send where present, else the bell): when an
                        # answer that took notify_after seconds or more ends, or an approval waits
  notify_after: 10      # seconds
```
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from countbot_cli.config.file import Section

CHAT_KEYS = ("editing_mode", "enter", "notify", "notify_after")
CHOICES = {
    "editing_mode": ("emacs", "vi"),
    "enter": ("send", "newline"),
    "notify": ("off", "bell", "desktop"),
}


@dataclass(frozen=True)
class ChatSettings:
    editing_mode: str = "emacs"
    enter: str = "send"
    notify: str = "off"
    notify_after: float = 10.0  # seconds an answer must take before it notifies


def parse_chat(sec: Section) -> ChatSettings:
    sec.check_keys(CHAT_KEYS)
    d = ChatSettings()
    after = sec.number("notify_after", 0.0, 86_400.0)
    return ChatSettings(
        editing_mode=sec.choice("editing_mode", CHOICES["editing_mode"]) or d.editing_mode,
        enter=sec.choice("enter", CHOICES["enter"]) or d.enter,
        notify=sec.choice("notify", CHOICES["notify"]) or d.notify,
        notify_after=d.notify_after if after is None else after,
    )


def with_value(chat: ChatSettings, key: str, text: str) -> ChatSettings:
    """`/set KEY VALUE` for a chat key; ValueError with a one-line message when it is wrong."""
    if key == "notify_after":
        try:
            seconds = float(text)
        except ValueError:
            raise ValueError(f"notify_after takes a number of seconds, not {text!r}") from None
        if not 0 <= seconds <= 86_400:
            raise ValueError("notify_after takes 0 to 86400 seconds")
        return replace(chat, notify_after=seconds)
    if text not in CHOICES[key]:
        raise ValueError(f"{key} takes one of {', '.join(CHOICES[key])}, not {text!r}")
    if key == "editing_mode":
        return replace(chat, editing_mode=text)
    return replace(chat, enter=text) if key == "enter" else replace(chat, notify=text)

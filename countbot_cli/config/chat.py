"""The `chat:` section of the config: how the interactive chat's prompt behaves.
Each can also be changed for one chat with `/set KEY VALUE`.

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

from typing import Literal, NamedTuple, get_args

from countbot_cli.config.file import Section, pick

EditingMode = Literal["emacs", "vi"]
EnterKey = Literal["send", "newline"]  # what Enter does: send the line, or a new line
Notify = Literal["off", "bell", "desktop"]
EDITING_MODES: tuple[EditingMode, ...] = get_args(EditingMode)
ENTER_KEYS: tuple[EnterKey, ...] = get_args(EnterKey)
NOTIFY: tuple[Notify, ...] = get_args(Notify)

CHAT_KEYS = ("editing_mode", "enter", "notify", "notify_after")
CHOICES: dict[str, tuple[str, ...]] = {
    "editing_mode": EDITING_MODES,
    "enter": ENTER_KEYS,
    "notify": NOTIFY,
}


class ChatSettings(NamedTuple):
    editing_mode: EditingMode = "emacs"
    enter: EnterKey = "send"
    notify: Notify = "off"
    notify_after: float = 10.0  # seconds an answer must take before it notifies


def parse_chat(sec: Section) -> ChatSettings:
    sec.check_keys(CHAT_KEYS)
    d = ChatSettings()
    after = sec.number("notify_after", 0.0, 86_400.0)
    return ChatSettings(
        editing_mode=sec.choice("editing_mode", EDITING_MODES) or d.editing_mode,
        enter=sec.choice("enter", ENTER_KEYS) or d.enter,
        notify=sec.choice("notify", NOTIFY) or d.notify,
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
        return chat._replace(notify_after=seconds)
    if text not in CHOICES[key]:
        raise ValueError(f"{key} takes one of {', '.join(CHOICES[key])}, not {text!r}")
    if key == "editing_mode":
        return chat._replace(editing_mode=pick(text, EDITING_MODES) or chat.editing_mode)
    if key == "enter":
        return chat._replace(enter=pick(text, ENTER_KEYS) or chat.enter)
    return chat._replace(notify=pick(text, NOTIFY) or chat.notify)

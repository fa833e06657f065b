"""Memory upkeep never evicts the chat: a summary call on the embedded model
goes through `LocalProvider.for_upkeep()`, whose calls leave the model's KV cache as they found
it, so the chat's next turn reuses its prefix as the turns before it did (real bundled model).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from cbenv import local_settings
from local_extra import needs_local

from countbot_cli.messages import ChatRequest, Finished
from countbot_cli.provider.local import LocalProvider

pytestmark = needs_local

SYSTEM = "You are a helpful assistant. " * 8  # a prefix worth caching
SUMMARY = "Summarise in one line: the user said their name is Ada and that they live in Lyon."


def turn(prov: LocalProvider, chat: list[dict[str, Any]], text: str) -> Finished:
    """One chat turn (streamed, as the engine asks): the question, then the answer kept."""
    chat.append({"role": "user", "content": text})
    req = ChatRequest(model="", messages=list(chat), max_tokens=8, temperature=0)
    fin = list(prov.stream(req))[-1]
    assert isinstance(fin, Finished) and fin.usage is not None
    chat.append({"role": "assistant", "content": fin.content})
    return fin


def summary_call(prov: LocalProvider) -> None:
    req = ChatRequest(model="", messages=[{"role": "user", "content": SUMMARY}], max_tokens=16)
    assert isinstance(list(prov.stream(req))[-1], Finished)


def test_the_turn_after_an_upkeep_call_reuses_the_chats_prefix() -> None:
    prov = LocalProvider(local_settings())
    chat: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    turn(prov, chat, "Tell me about cats.")
    before = turn(prov, chat, "And dogs?")
    assert before.usage is not None and before.usage.cached_tokens  # turns reuse the prefix
    summary_call(prov.for_upkeep())  # what the summariser does between two turns
    after = turn(prov, chat, "And birds?")
    assert after.usage is not None and after.usage.cached_tokens is not None
    # everything the previous turn evaluated (its prompt and answer) is still cached
    assert after.usage.cached_tokens >= before.usage.prompt_tokens
    # the same call on the chat's own provider would have thrown the chat's cache away
    summary_call(prov)
    evicted = turn(prov, chat, "And fish?")
    assert evicted.usage is not None and evicted.usage.cached_tokens is not None
    assert evicted.usage.cached_tokens < 10


def test_the_summariser_calls_the_local_model_through_its_upkeep_view(tmp_path: Path) -> None:
    from countbot_cli.config.settings import load_settings
    from countbot_cli.memory.summariser import Summariser

    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    settings = load_settings(env=env, cwd=tmp_path)
    prov = LocalProvider(local_settings())
    chat: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    turn(prov, chat, "Tell me about cats.")
    before = turn(prov, chat, "And dogs?")
    assert Summariser(settings, prov).summarise(SUMMARY, "summary")  # a real summary call
    after = turn(prov, chat, "And birds?")
    assert before.usage is not None and after.usage is not None
    assert after.usage.cached_tokens is not None
    assert after.usage.cached_tokens >= before.usage.prompt_tokens


def test_an_upkeep_call_stopped_while_it_evaluates_its_prompt_gives_the_chat_its_cache_back() -> (
    None
):
    """A turn wants the model as an upkeep call's long prompt is sent: the call's stream ends
    with nothing, and the next turn finds the same process (no reload) with the chat's KV cache
    as it was. (That the evaluation itself is aborted inside native code, not run to its end,
    is shown by tests/repl/test_repl_upkeep.py's scripted model, whose events say so; on a fast
    CPU this prompt could finish within the cancel's grace either way.)"""
    prov = LocalProvider(local_settings())
    chat: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    turn(prov, chat, "Tell me about cats.")
    before = turn(prov, chat, "And dogs?")
    stop = threading.Event()
    stop.set()  # the turn is there as the call is sent: it is cancelled during the evaluation
    long = SUMMARY + " The user talked about cats and dogs and birds." * 140  # ~1500 tokens
    req = ChatRequest(model="", messages=[{"role": "user", "content": long}], max_tokens=16)
    assert list(prov.for_upkeep(stop).stream(req)) == []
    after = turn(prov, chat, "And birds?")
    assert prov.last_stats is not None and prov.last_stats.load_seconds == 0.0  # no reload
    assert after.usage is not None and after.usage.cached_tokens is not None
    assert after.usage.cached_tokens >= before.usage.prompt_tokens  # type: ignore[union-attr]

"""A redraw asked for from another thread (the toolbar's tokenizer loaded, the upkeep ended)
while a real prompt runs on pipe input, and after it has gone."""

from __future__ import annotations

import asyncio
import threading

from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from waits import wait_until

from countbot_cli.repl.prompt import redraw_soon


def test_a_redraw_from_another_thread_is_done_in_the_prompts_loop_and_none_once_it_is_gone() -> (
    None
):
    with create_pipe_input() as pipe:
        session: PromptSession[str] = PromptSession(input=pipe, output=DummyOutput())
        app = session.app
        drawn_in: list[str] = []  # the thread each invalidate() ran in
        real = app.invalidate

        def invalidate() -> None:
            drawn_in.append(threading.current_thread().name)
            real()

        app.invalidate = invalidate  # type: ignore[method-assign]
        answers: list[str] = []

        def ask() -> None:
            answers.append(asyncio.run(session.prompt_async("> ")))

        prompting = threading.Thread(target=ask, name="prompt")
        prompting.start()
        wait_until(lambda: app.is_running and app.loop is not None, "the prompt to run", 10)
        before = len(drawn_in)
        redraw_soon(session)  # from this thread, as the tokenizer's does
        wait_until(lambda: len(drawn_in) > before, "the redraw", 10)
        pipe.send_text("hi\r")
        prompting.join(10)
    assert answers == ["hi"]
    # in the prompt's loop: there, its end cannot clear the loop between check and use
    assert set(drawn_in) == {"prompt"}
    gone = len(drawn_in)
    redraw_soon(session)  # the prompt has gone: nothing to redraw, nothing raised
    assert len(drawn_in) == gone

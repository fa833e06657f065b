"""The starter config: `countbot config init` writes it, and `config.example.yaml` at the top of
the repository is an exact copy (a test keeps the two identical). Every key is documented here;
the active values are the defaults and no provider is chosen, so the file behaves like no file
at all (the environment's provider, else the embedded model) until the user uncomments one.
"""

from __future__ import annotations

EXAMPLE_CONFIG = """\
# countbot configuration (YAML). Every key is optional; the values shown are the defaults.
#
# Where countbot looks, first match wins:
#   1. --config PATH               (must exist)
#   2. $COUNTBOT_CONFIG            (must exist)
#   3. ./config.yaml               (the folder countbot is started in; skipped silently when
#                                   it has no countbot key, and otherwise applied only once
#                                   you ran `countbot config trust`: a project's file could send
#                                   your prompts and keys elsewhere or run commands. Editing it
#                                   untrusts it again; until then countbot says it ignored it.)
#   4. $XDG_CONFIG_HOME/countbot/config.yaml   (XDG_CONFIG_HOME defaults to ~/.config)
# Relative paths in this file resolve against the folder that holds it, so a checkout with a
# config.yaml keeps sessions/ and MEMORY.md beside it. With no file at all the home folder is
# $XDG_CONFIG_HOME/countbot. `countbot config path` prints every resolved path;
# `countbot config show` prints the effective settings (keys masked); `countbot config check`
# validates this file and then really calls the provider.
#
# Environment overrides (they win over this file; command-line flags win over them):
#   COUNTBOT_PROVIDER   choose a provider by name (flag: -p/--provider)
#   COUNTBOT_MODEL      the model of the chosen provider (flag: -m/--model)
#   COUNTBOT_API_KEY    the API key of the chosen provider
#   COUNTBOT_API_BASE   the API base URL of the chosen provider
#   OPENAI_API_KEY / OPENAI_BASE_URL   used when no provider is configured here: countbot then
#                       talks to OPENAI_BASE_URL (default https://api.openai.com/v1).
#                       OPENAI_API_KEY is sent only to OpenAI or to OPENAI_BASE_URL; pair
#                       COUNTBOT_API_BASE with COUNTBOT_API_KEY.
# With no provider here and none in the environment, countbot uses the embedded local model
# when it is installed (pip install 'countbot-cli[local]'), unless COUNTBOT_NO_LOCAL_MODEL=1.
#
# A mistake in this file stops countbot with exit code 2 and a message naming the file, the
# line and the key. Unknown keys are errors too (typos are caught, not ignored).

# The provider used when neither -p nor COUNTBOT_PROVIDER names one.
# Default: the first entry under `providers`.
# default_provider: openai

# Named providers. A name that is a preset (openai, deepseek, qwen, moonshot, zhipu,
# openrouter, ollama, vllm, lmstudio, llamacpp, local) starts from that preset; any other name
# can say `preset: NAME`. Keys set here win over the preset. A preset can also be used without
# an entry: `countbot -p ollama -m llama3.2`.
# This starter file sets none, so it works as no file at all: countbot talks to OpenAI when
# OPENAI_API_KEY is set (or to COUNTBOT_API_BASE), else to the embedded local model, and
# `countbot -p local` asks the embedded model in any case. To choose a provider, uncomment
# `providers:` and an entry (remove the first `# ` of each of its lines), e.g. openai:
# providers:
#   openai:
#     # type: openai          # openai: any OpenAI-compatible HTTP API | local: a GGUF file run
#     #                       #   by llama-cpp-python in its own process (no server, no key)
#     preset: openai          # base URL, key variable, default model, context window, quirks
#     # api_base: https://api.openai.com/v1   # ends in /v1 (or the service's equivalent)
#     #
#     # The API key: give at most one of these three. API keys are never printed, logged or
#     # stored in sessions; prefer an environment variable or a command to a literal key.
#     api_key_env: OPENAI_API_KEY   # name of the environment variable that holds the key
#     # api_key: sk-...             # the key itself (keep this file private: chmod 600)
#     # api_key_cmd: pass show openai/api-key   # a shell command printing the key (first line
#     #                                         #   of its output); run only for the provider
#     #                                         #   in use, with a 15 s timeout
#     model: gpt-4o-mini
#     # context_window: 128000  # tokens the model accepts; history is trimmed to fit.
#     #                         # Default: the preset's figure for its default model, then
#     #                         # countbot's table of known models, then what the server says
#     #                         # (llama.cpp /props, vLLM or OpenRouter /models, Ollama
#     #                         # /api/show; asked once, cached), else 8192 (said on stderr
#     #                         # when history is trimmed against it). COUNTBOT_CONTEXT_WINDOW
#     #                         # or --context-window N (ask, chat) override it.
#     # vision: true            # does the model take images (-a photo.png)? Default: countbot's
#     #                         # table of known models; an unknown model is let through
#     # headers:                # extra HTTP headers sent with every request
#     #   OpenAI-Organization: org-...
#     # stream_tools: true      # false: requests that carry tools are sent without streaming,
#     #                         # with tool_choice "auto" (llama-cpp-python's server needs both)
#     #                         #   (servers that fail on streamed tool calls)
#     # include_usage: true     # ask for token usage in streams (stream_options.include_usage)
#     # connect_timeout: 10     # seconds to open the connection
#     # read_timeout: 120       # seconds to wait for the next bytes of an answer
#     # max_retries: 2          # retries before the first byte (429, 5xx, network errors)
#     # prompt_cache_key: true  # send the session id as prompt_cache_key (routes a
#     #                         # conversation to one prompt cache); default: openai preset only
#
#   # deepseek:                 # preset: https://api.deepseek.com/v1, DEEPSEEK_API_KEY,
#   #   model: deepseek-flash   #   deepseek-flash (deepseek-chat was retired on 2026-07-24)
#   # qwen:                     # preset: DashScope compatible mode, DASHSCOPE_API_KEY, qwen-plus
#   #   model: qwen-plus        #   (international: api_base:
#   #                           #   https://dashscope-intl.aliyuncs.com/compatible-mode/v1)
#   # moonshot:                 # preset: https://api.moonshot.cn/v1, MOONSHOT_API_KEY
#   #   model: moonshot-v1-8k   #   (international: api_base: https://api.moonshot.ai/v1)
#   # zhipu:                    # preset: https://open.bigmodel.cn/api/paas/v4, ZHIPUAI_API_KEY,
#   #   model: glm-4-flash      #   glm-4-flash
#   # openrouter:               # preset: https://openrouter.ai/api/v1, OPENROUTER_API_KEY
#   #   model: openai/gpt-4o-mini
#   # ollama:                   # preset: http://localhost:11434/v1, no key
#   #   model: llama3.2         #   Ollama cuts the context at its num_ctx (2048-4096) silently;
#   #   context_window: 4096    #   set this to the num_ctx you configured
#   # vllm:                     # preset: http://localhost:8000/v1, no key (tools need
#   #   model: Qwen/Qwen2.5-7B-Instruct   #   --enable-auto-tool-choice --tool-call-parser ...)
#   # lmstudio:                 # preset: http://localhost:1234/v1, no key
#   #   model: qwen2.5-7b-instruct
#   # llamacpp:                 # preset: http://localhost:8080/v1, no key, stream_tools: false
#   #   model: default          #   (llama-server -m MODEL.gguf --jinja)
#   # local:                    # preset: type local, the embedded SmolLM2-135M-Instruct model
#   #                           #   (an offline smoke test: short answers, often wrong)
#   #   model_path: ~/models/qwen2.5-3b-instruct-q4_k_m.gguf   # any GGUF file (default: the
#   #                           #   bundled one); a 1.5B+ instruct model answers, and one
#   #                           #   whose template takes tools (Qwen2.5, Hermes) runs them
#   # work:                     # any other name: say which preset, or give api_base yourself
#   #   preset: openai
#   #   api_base: https://llm-gateway.example.com/v1
#   #   api_key_cmd: cat ~/.secrets/gateway-key
#   #   model: gpt-4o

# Model settings, sent with every request.
# temperature: 0.7     # 0 to 2; 0 is sent as 0. Default: not sent (the server's default)
# max_tokens: 4096     # answer length limit. Default: not sent (the server's default)
max_iterations: 10     # tool rounds allowed in one turn before countbot stops the loop

persona:
  ai_name: countbot         # the assistant's name in the system prompt
  user_name: user           # how the assistant addresses you
  personality: ""           # free text for the system prompt; "" = the built-in default
  language: en              # language of answers and summaries: en, zh, ...
  max_history_messages: 50  # earlier messages sent with each request (0 = unlimited);
  #                         # a hard cap. Once full, the oldest half (25 -> 24 messages, an
  #                         # even number, at least 4) leaves at once and is summarised, so
  #                         # between two steps each request repeats the previous one as a
  #                         # prefix (providers' prompt caches); trimmed further, in the
  #                         # same blocks, so the request fits the context window

memory:
  file: MEMORY.md           # long-term memory, one `YYYY-MM-DD|source|content` entry a line
  overflow_summary: true    # summarise messages that leave the history window into memory
  session_summary: true     # ... and into the session's own rolling summary (same call),
  #                         # sent in the system prompt; a /summary you set wins over it
  # auto_memory: true       # summarise the conversation into memory as it grows
  #                         #   (default: true, but false with the bundled SmolLM2-135M,
  #                         #   whose summaries are junk; true turns it on for it too):
  auto_messages: 30         #   first at this many messages ...
  auto_chars: 15000         #   ... or this many characters, then every auto_messages more
  inject: relevant          # memory sent with your message (after the history, never in
  #                         # the system prompt): relevant (entries matching the message)
  #                         # | recent (the newest entries) | "off". Lines pinned with
  #                         # `countbot memory pin N` are always in the system prompt;
  #                         # muted ones (`memory mute N`) are never sent
  recall_lines: 20          # at most this many lines go with a message, oldest first,
  recall_tokens: 1000       #   each with its date, within this many tokens
  recall_wait: 1            # seconds a message waits for recall by meaning (the recall
  #                         # extra): lines not embedded by then are recalled by their
  #                         # words while the rest is embedded (a long wait: all of them)
  recall_keep: 300          # seconds the recall encoders stay loaded after countbot ends,
  #                         # so the next ask does not load them again (~50 MB of memory
  #                         # while they wait; 0: they end with countbot)

tools:
  enabled: true             # offer read_file, write_file, edit_file, list_dir, exec, memory
  approval: ask             # ask: writes, edits and commands ask first | auto: writes and
  #                         # edits run without asking (commands still need an allow rule)
  #                         # | "off": everything that needs approval is denied.
  #                         # Hidden files (.env, .ssh, .git/...), key files and countbot's own
  #                         # config, sessions and MEMORY.md always ask, reads included.
  # workspace: .            # the folder tools work in. Default: the folder countbot was
  #                         # started in (a relative path here resolves against this file)
  allow_outside_workspace: false   # true: reads outside the workspace run without asking
  #                         # (writes and commands there still ask)
  search_all_sessions: false   # true: the search_sessions tool reads the conversations of
  #                         # every project without asking (false: this workspace's, and
  #                         # another project's only when you approve it at the prompt)
  shell_timeout: 60         # seconds before a command (and its whole process group) is killed
  max_output_chars: 10000   # tool output longer than this is cut, with a note
  allow: []                 # commands exec may run without asking, as shell-style patterns
  #                         # matched against the whole command, e.g. ["git status", "ls *"].
  #                         # * never matches ; & | ` $ < > or a newline. Careful: a rule for a
  #                         # program that runs code via its flags (git -c, find -exec) allows
  #                         # anything
  deny: []                  # commands that are always refused, e.g. ["rm -rf *", "sudo *"]

# Where sessions are stored, one JSON file each.
sessions_dir: sessions

# -a/--attach PATH|URL (images, PDFs and web pages need: pip install 'countbot-cli[attach]')
attachments:
  max_image_pixels: 2000000 # larger images are scaled down to about this many pixels
  max_pdf_pages: 50         # pages of a PDF whose text is sent
  max_url_bytes: 5000000    # most bytes read from an http(s) URL
  url_timeout: 20           # seconds for a whole fetch, redirects included
  max_redirects: 4

# The interactive chat's prompt (each also `/set KEY VALUE` for one chat).
chat:
  editing_mode: emacs       # or vi (the toolbar shows vi's insert/normal mode)
  enter: send               # or newline (then Esc Enter / Alt-Enter sends)
  notify: off               # bell, or desktop (notify-send where present): a long answer ended
  notify_after: 10          # or an approval waits; seconds an answer must take to notify

# When a turn fails after the retries for a reason another provider can fix (no connection,
# timeout, 5xx, 429, out of quota), it runs on the next provider of this list, with one line
# saying so; the answer records its model. 401/403 and rejected requests never fall back.
# `local` is the embedded model. `ask --fallback NAME` (repeatable) replaces the list.
# fallback: [deepseek, local]

# What a model's tokens cost, per million, in your currency: with a price the usage line,
# ask --json, /tokens and `sessions show` add the cost of the turn, the session and the day.
# countbot ships no prices (they change); a model without one shows no cost. cached_input
# (prompt tokens the provider read from its cache) defaults to input.
# prices:
#   gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.60}

# MCP servers whose tools the model may call (needs: pip install 'countbot-cli[mcp]').
# Their tools appear as mcp__NAME__TOOL. Each call asks first, also with --yes, unless the
# tool is in the server's allow list; without a terminal such a call is denied. Servers start
# on the first turn that offers tools and stop, with their process groups, when countbot
# exits. A project's ./config.yaml runs its servers only once you trusted it. `countbot mcp
# list` starts them and lists their state and tools.
# mcp:
#   servers:
#     time:                          # a stdio server: a program and its arguments
#       command: uvx
#       args: [mcp-server-time]
#       env: {TZ: Europe/Paris}      # added to a minimal environment (HOME, PATH, USER, ...)
#       cwd: .                       # where it runs (relative to this file's folder)
#       allow: [get_current_time]    # these tools run without asking
#       timeout: 60                  # seconds a call may take
#       start_timeout: 30            # seconds to start and list its tools
#     docs:                          # a streamable HTTP server
#       url: https://mcp.example.com/mcp
#       headers: {Authorization: "Bearer ..."}
"""

"""countbot: a terminal chat client for OpenAI-compatible language models."""

__version__ = "0.1.0"

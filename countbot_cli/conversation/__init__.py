"""One conversation (SPEC §4, §8): the turn and what it is built from. `sessions/` holds the
session value, its store and search; `input/` the user's input (prompt, attachments, images,
fetch); the modules here the messages array, the token budget and trimming, and the engine that
runs a turn with its tool rounds."""

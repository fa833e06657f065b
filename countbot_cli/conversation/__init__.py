"""One conversation (SPEC §4, §8): the session value and its store, the messages array, the
token budget and trimming, and the engine that runs a turn with its tool rounds."""

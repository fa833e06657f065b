"""Which MEMORY.md lines go with a user message (`memory.inject: relevant`).

Two rankings, fused:

- **Lexical** (always): the message's content words (`query_words`: no stop words, CJK
  bigrams), matched as words (`Index.word_hits`: "rent" is not in "parents"), each weighed by
  how rare it is in the memory (IDF scaled to 0..1: a word on one line of N weighs 1, a word on
  every line almost 0). So five lines sharing "now" do not push out the one sharing "Corolla".
- **Semantic** (with the `recall` extra, memory/embed.py): the cosine of the message's vector
  and each line's (cached in MEMORY.vectors.bin, memory/vectors.py), which finds "cello
  lessons" for "which instrument do I play" and an English line for a Chinese question.

The fused score is `cosine + LEX_WEIGHT * lexical`: a distinctive shared word lifts its line
above lines that are only close in meaning, while a common one adds almost nothing and cannot
crowd out a semantic match. The cosine is taken with the message's vector minus that of small
talk (embed.SMALL_TALK), so a line that is close to every message does not come back for
"hi"; a line is sent when its score reaches MIN_SCORE and a quarter of the best line's
(FLOOR_SHARE), best first.

**Up to date.** Of two candidate lines about the same thing (their vectors' cosine at least
SUPERSEDE_COSINE: "drives a Toyota Corolla" / "sold the Corolla, drives a Model 3"), only the
newer (by date, then by place in the file) is sent; the older one stays in MEMORY.md. The
newer line must say it is an update (UPDATE_CUES: "now", "sold", "换了" ...) and each must be
the other's closest line (and, when the older says it is an update too, the newer must
answer the message at least as well); otherwise both are sent, the older marked `(older)`
when the newer is its closest line in the whole memory (MARK_COSINE). A newer update of a
line sent is sent after it even when it ranks lower itself (PULL_COSINE).

**Loading.** `ask` waits for its one recall: USE's load is mapped from its cache in the user's
cache folder (memory/model_cache.py: 15 ms instead of 1-2.7 s; the one kept beside MEMORY.md
before is removed), and the small-talk vector is cached with the lines' (SMALL_TALK_LINE), so `ask` embeds only the message.
The REPL loads the models in the background and recalls by words until they are loaded.

Without the extra (or when its models fail to load) recall is lexical only: the lines holding
the rarest of the message's words, newest first among equals. Tuned with bench/bench_recall.py.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from countbot_cli.config.own_files import OLD_MODEL_CACHE_SUFFIX, memory_sidecar
from countbot_cli.memory import model_cache
from countbot_cli.memory.embed import Embedder, available, import_numpy, shared
from countbot_cli.memory.search import Entry, Snapshot, query_words
from countbot_cli.memory.vectors import VectorCache, vectors_path
from countbot_cli.textsafe import LazyPattern

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from countbot_cli.memory.store import MemoryStore

LEX_WEIGHT = 0.1
MIN_SCORE = 0.06  # above what the line scores for small talk (see embed.SMALL_TALK)
# nor under this share of the best line's score: a line that is only of the same field as the
# message (eight ops lines for a question about one of them) costs tokens and the shared prefix
FLOOR_SHARE = 0.25
SUPERSEDE_COSINE = 0.7
SUPERSEDE_LEXICAL = 0.5
# words by which a line says it is an update ("sold the Corolla, now drives ...", "换了新手机")
UPDATE_CUES = LazyPattern(
    r"\b(?:now|no longer|any ?more|moved|switched|changed|replaced|sold|left|quit|new|since|"
    r"upgraded|migrated|rose|went up|went down|cut down|instead|stopped|started|after|became|"
    r"dropped|fell|lost|gained|increased|decreased|raised|lowered|renewed|nowadays|these days|"
    r"currently|recently|took up|gave up)\b"
    r"|现在|换|改|搬|不再|已经|升|降|涨|变|跳槽|放弃|新的|不.了|后来|之后|以后|最近|目前|如今|了[。！!]?$"
)
MARK_COSINE = 0.65  # a line sent with a newer update this close to it is marked older
PULL_COSINE = 0.7  # a newer line this close that says it is an update is sent after the older
RESTATED_COSINE = 0.95  # a line this close to a newer one sent is the same fact: left out
# the small-talk vector (embed.SMALL_TALK) is cached as if it were this line (no line holds a newline)
SMALL_TALK_LINE = "\nsmall talk\n"


class Recall:
    """Recall over one memory file; semantic when the extra is installed and loads."""

    def __init__(
        self,
        memory: MemoryStore,
        *,
        semantic: bool | None = None,
        notice: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.memory = memory
        self.notice = notice
        use = available() if semantic is None else semantic
        self.embedder: Embedder | None = shared() if use else None
        self._cache: VectorCache | None = None
        self._lock = threading.Lock()  # the turn's recall and the upkeep's new lines
        model_cache.remove_old(memory_sidecar(memory.path, OLD_MODEL_CACHE_SUFFIX))
        if self.embedder is not None:
            memory.on_added["recall"] = self._embed_added  # the newest Recall on the store
        self._said_failure = False
        self.older: set[int] = set()  # line numbers the last `relevant` marked as older

    def label(self, entry: Entry) -> str:
        """How a recalled entry is sent: `date: content`, `date (older): content` for a line
        the last `relevant` found a newer line on the same thing for."""
        older = " (older)" if entry.line_no in self.older else ""
        return f"{entry.date}{older}: {entry.content}"

    @property
    def mode(self) -> str:
        """ "semantic" or "lexical" (what `/context` and `config show` report)."""
        return (
            "semantic" if self.embedder is not None and self.embedder.error is None else "lexical"
        )

    def start(self) -> None:
        """Start loading the models in the background when there is a memory to recall from
        (no-op when lexical): the REPL while you type, `ask` while the request is prepared."""
        try:
            has_lines = self.memory.path.stat().st_size > 0
        except OSError:
            has_lines = False
        if self.embedder is not None and has_lines:
            self.embedder.start()

    def relevant(self, text: str, limit: int) -> list[Entry]:
        """At most `limit` entries for `text`, best first."""
        snap = self.memory.snapshot()
        if not snap.contents or not text.strip():
            return []
        self.older = set()
        lexical = lexical_scores(snap, query_words(text))
        semantic = self._semantic(snap, text)
        if semantic is None:
            order = list(lexical)
            order.sort(key=lambda i: (lexical[i], snap.dates[i], i), reverse=True)
            return [snap.entry(i) for i in order[:limit]]
        vectors, cosines = semantic
        scores = cosines.copy()
        for i, s in lexical.items():
            scores[i] += LEX_WEIGHT * s
        picked, older = _pick(snap, scores, lexical, vectors, limit)
        self.older = {snap.line_nos[i] for i in older}
        return [snap.entry(i) for i in picked]

    def _semantic(
        self, snap: Snapshot, text: str
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]] | None:
        """(line vectors, cosine of each line with `text`), or None when recall is lexical."""
        embedder = self.embedder
        if embedder is None:
            return None
        if not embedder.wait and not embedder.ready:
            embedder.start()  # by words this turn; by meaning once loaded
            return None
        import_numpy()
        try:
            with self._lock:
                cache = self._vector_cache(embedder)
                vectors = cache.matrix(snap.contents)
                probe = embedder.query(text) - self._small_talk(embedder, cache)
        except (RuntimeError, OSError, ValueError) as e:
            if not self._said_failure:
                self._said_failure = True
                self.notice(f"recall by meaning is off ({e}); recalling by words")
            self.embedder = None
            return None
        finally:
            while embedder.notices:  # what loading had to say, in this thread (not the loader's)
                self.notice(embedder.notices.pop(0))
        return vectors, vectors @ probe

    def _vector_cache(self, embedder: Embedder) -> VectorCache:
        if self._cache is None:
            path = vectors_path(self.memory.path)
            self._cache = VectorCache(path, embedder, self.notice)
        return self._cache

    def _embed_added(self, _entries: list[Entry]) -> None:
        """Embed lines as they are written (automatic memory, `--remember`, the memory tool),
        so the next recall has nothing to embed; only when the models are loaded (`countbot
        memory add` from the shell leaves them to the next recall)."""
        embedder = self.embedder
        if embedder is None or not embedder.ready:
            return
        try:
            with self._lock:
                self._vector_cache(embedder).matrix(self.memory.snapshot().contents)
        except (RuntimeError, OSError, ValueError):
            pass  # the next recall embeds them (and says what went wrong)

    @staticmethod
    def _small_talk(embedder: Embedder, cache: VectorCache) -> NDArray[np.float32]:
        """The small-talk vector: cached with the lines' (so `ask` does not embed its ten
        sentences), else embedded once and cached."""
        stored = cache.stored(SMALL_TALK_LINE)
        if stored is not None:
            return stored
        small_talk = embedder.small_talk()
        cache.store(SMALL_TALK_LINE, small_talk)
        return small_talk


def lexical_scores(snap: Snapshot, words: list[str]) -> dict[int, float]:
    """Entry index -> the summed rarity (IDF scaled to 0..1) of the words it holds."""
    n = len(snap.contents)
    index = snap.index()
    norm = math.log(1 + n)
    out: dict[int, float] = {}
    for word in words:
        hits = index.word_hits(word.casefold())
        if not hits:
            continue
        weight = math.log(1 + n / len(hits)) / norm
        for i in hits:
            out[i] = out.get(i, 0.0) + weight
    return out


def _pick(
    snap: Snapshot,
    scores: NDArray[np.float32],
    lexical: dict[int, float],
    vectors: NDArray[np.float32],
    limit: int,
) -> tuple[list[int], set[int]]:
    """(the best lines reaching MIN_SCORE, each line superseded by a newer one replaced by it
    (`_successor`) and followed by a newer update of it; those of them to mark older)."""
    import numpy as np

    floor = max(MIN_SCORE, FLOOR_SHARE * float(scores.max()))
    ranked = [int(i) for i in np.argsort(-scores, kind="stable")[:limit] if scores[i] >= floor]
    if not ranked:
        return [], set()
    near = vectors[ranked] @ vectors.T  # one product for every candidate's nearest line
    near[np.arange(len(ranked)), ranked] = -1.0
    out: list[int] = []
    for a, i in enumerate(ranked):
        j = _successor(snap, (scores, lexical), vectors, i, near[a])
        if j not in out:
            out.append(j)
        k = int(near[a].argmax())  # an update of a line sent is sent after it
        if j == i and k not in out and near[a, k] >= PULL_COSINE and _updates(snap, k, i):
            out.append(k)
    out = _without_restated(snap, out, vectors)
    return out, _older(snap, out, vectors, scores)


def _without_restated(snap: Snapshot, out: list[int], vectors: NDArray[np.float32]) -> list[int]:
    """`out` without the lines a newer line of it restates (cosine at least RESTATED_COSINE:
    the same fact written again by automatic memory, a number aside): sent once, the newest."""
    if len(out) < 2:
        return out
    close = vectors[out] @ vectors[out].T
    keep = []
    for a, i in enumerate(out):
        newer = [b for b, j in enumerate(out) if (snap.dates[j], j) > (snap.dates[i], i)]
        if not any(close[a, b] >= RESTATED_COSINE for b in newer):
            keep.append(i)
    return keep


def _older(
    snap: Snapshot, out: list[int], vectors: NDArray[np.float32], scores: NDArray[np.float32]
) -> set[int]:
    """The lines of `out` to send marked `(older)`: a newer line sent with it is an update of
    it, close to it (cosine at least MARK_COSINE), saying it is an update (UPDATE_CUES) and
    sharing a word with it ("rent is 1,400 euros" / "rent rose to 1,650 euros"; "favourite
    podcast is ..." is not older than "favourite album is ...", nor "phone number is ..."
    than "email changed to ..."). A line that says it is an update itself is marked only by
    a newer line that answers the message at least as well."""
    import numpy as np

    if len(out) < 2:
        return set()
    close = vectors[out] @ vectors[out].T
    np.fill_diagonal(close, -1.0)
    older = set()
    for a, i in enumerate(out):
        for b in np.argsort(-close[a]):
            j = out[int(b)]
            if close[a, b] < MARK_COSINE:
                break
            if _updates(snap, j, i) and _share_a_word(snap, i, j):
                if not _says_update(snap, i) or scores[j] >= scores[i]:
                    older.add(i)
                break
    return older


def _share_a_word(snap: Snapshot, i: int, j: int) -> bool:
    """Whether lines `i` and `j` have a content word in common (not an update cue)."""
    mine = {w for w in query_words(snap.contents[i]) if not UPDATE_CUES.re.fullmatch(w)}
    return any(w in mine for w in query_words(snap.contents[j]))


def _successor(
    snap: Snapshot,
    ranking: tuple[NDArray[np.float32], dict[int, float]],
    vectors: NDArray[np.float32],
    i: int,
    near: NDArray[np.float32],
) -> int:
    """The line that supersedes line `i` (else `i`; `near`: its cosine with every line, itself
    left out): newer and saying it is an update (UPDATE_CUES), each the other's closest line in
    the whole memory (cosine at least SUPERSEDE_COSINE), and not missing a word of the message
    that line `i` holds (at most SUPERSEDE_LEXICAL less: "sister Lena lives in Vienna" is no
    update of "mother lives in Lisbon" for "what is my sister's name"). When line `i` says it
    is an update itself, their shared cue makes them look alike ("now runs with Tom" / "now
    runs in Hoka shoes"): then line `j` must also answer the message at least as well."""
    import numpy as np

    scores, lexical = ranking
    j = int(near.argmax())
    if near[j] < SUPERSEDE_COSINE or not _updates(snap, j, i):
        return i
    if lexical.get(i, 0.0) - lexical.get(j, 0.0) > SUPERSEDE_LEXICAL:
        return i
    if _says_update(snap, i) and scores[j] < scores[i]:
        return i
    back = vectors @ vectors[j]
    back[j] = -1.0
    return j if int(np.argmax(back)) == i else i


def _updates(snap: Snapshot, j: int, i: int) -> bool:
    """Whether line `j` is newer than line `i` and says it is an update (UPDATE_CUES)."""
    newer = (snap.dates[j], j) > (snap.dates[i], i)
    return newer and _says_update(snap, j)


def _says_update(snap: Snapshot, i: int) -> bool:
    return UPDATE_CUES.re.search(snap.contents[i].casefold()) is not None

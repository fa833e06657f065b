"""The content words of a question, in every script: one vocabulary for recall and search.

A question typed as a sentence ("which airline do I usually fly", "我上次说的火锅店叫什么")
is searched by its content words, not as one phrase: English stop words are left out, English
contractions and possessives cut ("cat's" -> "cat"), and a run of CJK characters (written
without spaces) becomes the bigrams of its content characters (`cjk_bigrams`). Memory recall
(`memory.search.query_words`) and session search (`conversation.sessions.search_text.question_terms`)
both use it.
"""

from __future__ import annotations

import re

from countbot_cli.textsafe import CJK_CHARS, LazyPattern

CJK_RUN = LazyPattern(f"([{CJK_CHARS}]+)")  # captured: split() keeps the runs
WORD_EDGE = " \t\r\n.,!?~。，！？～…、"  # stripped off a word (and a pleasantry)
_STOP_WORDS = (
    "a an the and or but if of to in on at for with by from as is are was were be been am do "
    "does did i you he she it we they me my your our their this that these those what which who "
    "how why when where can could would should will shall may might please not no yes so just "
    "about into than then there here have has had hi hello tell know let like get got want need "
    "any some all more most very also"
)
STOP = frozenset(_STOP_WORDS.split())
CJK_STOP = frozenset("的了是我你他她它们在有和就不也都这那吗呢吧啊么什怎个一")
_APOSTROPHE = re.compile(r"['’](s|re|ve|ll|d|m|t)$")
_EDGE = WORD_EDGE + "'\"()[]{}<>:;`*#’"


def content_words(text: str, limit: int = 40) -> list[str]:
    """The search words of `text`: CJK content characters as bigrams (a run of one or two
    characters whole), other words casefolded without stop words; at most `limit`."""
    out: dict[str, None] = {}
    for run in CJK_RUN.re.findall(text):
        if len(run) <= 2:
            if not all(ch in CJK_STOP for ch in run):
                out[run] = None
            continue
        out.update(dict.fromkeys(cjk_bigrams(run)))
    for word in CJK_RUN.re.sub(" ", text).split():
        w = _APOSTROPHE.sub("", word.strip(_EDGE).casefold())
        if len(w) >= 2 and w not in STOP:
            out[w] = None
    return list(out)[:limit]


def cjk_bigrams(run: str) -> list[str]:
    """The bigrams of a CJK run made of two content characters; a content character with no
    such bigram (between function characters: 住 in 我住在哪里) keeps the bigrams it is in."""
    content = [ch not in CJK_STOP for ch in run]
    pairs = [i for i in range(len(run) - 1) if content[i] and content[i + 1]]
    covered = {j for i in pairs for j in (i, i + 1)}
    for j in range(len(run)):
        if content[j] and j not in covered:
            pairs += [i for i in (j - 1, j) if 0 <= i < len(run) - 1]
    return [run[i : i + 2] for i in sorted(set(pairs))]

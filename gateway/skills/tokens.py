"""Terms for tool search: text of any language and identifiers of any style made comparable.

A tool catalog mixes prose ("Read the contents of a file"), identifiers (`read_file`,
`getHTTPResponse`, `base64-encode`) and text in other scripts ("使用必应搜索关键词"). The same
`terms()` runs over the query and over every indexed field, so both sides meet in one form:
- NFKC then casefold, so full-width letters, ligatures and case never decide a match;
- identifiers split at `_`, `-`, camelCase humps and letter/digit boundaries;
- runs of Chinese, Japanese or Korean characters, which carry no spaces, become their single
  characters and every pair of neighbours (bigrams), the usual unit of CJK retrieval;
- English words lose a small set of stop words and are reduced by the Snowball English stemmer,
  so "tables", "tabled" and "table" meet.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache
from typing import Any

# A break inside an identifier: lower or digit before upper ("getHttp"), an acronym's end
# before a capitalised word ("HTTPResponse"), and the edges between letters and digits.
_CAMEL = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Han (with its extensions and compatibility block), Hiragana, Katakana and Hangul.
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK = re.compile(f"[{_CJK_CHARS}]+")
_WORD = re.compile(f"[^\\W_{_CJK_CHARS}]+")
_SPLIT = re.compile(f"([{_CJK_CHARS}]+)")
# fmt: off
STOP_WORDS = frozenset(
    {
        "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
        "could", "do", "does", "each", "eg", "for", "from", "get", "given", "has", "have", "how", "i", "if",
        "in", "into", "is", "it", "its", "just", "me", "my", "need", "of", "on", "or", "our", "please", "should",
        "so", "some", "than", "that", "the", "their", "them", "then", "there", "these", "this", "those", "to",
        "us", "use", "used", "using", "via", "want", "was", "we", "were", "what", "when", "where", "which",
        "while", "who", "will", "with", "would", "you", "your",
    }
)
# Particles that join Chinese sentences and say nothing about a tool on their own.
CJK_STOP_CHARS = frozenset("的了和是在与及或等把被将对从为")
# fmt: on


@cache
def _stemmer() -> Any:
    # Loaded at the first search, not at start-up: snowballstemmer brings every language's stemmer (3 MB).
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """The Snowball English stem of a casefolded word; words with digits stay whole."""
    if not word.isalpha() or not word.isascii():
        return word
    stem: str = _stemmer().stemWord(word)
    return stem


def _cjk_terms(run: str) -> list[str]:
    """Unigrams and bigrams of one CJK run; a bigram matches a two-character word exactly."""
    chars = [char for char in run if char not in CJK_STOP_CHARS]
    return chars + [run[i : i + 2] for i in range(len(run) - 1)]


def terms(text: str) -> list[str]:
    """The search terms of `text`, in order (CJK runs give their unigrams, then their bigrams)."""
    result: list[str] = []
    normal = unicodedata.normalize("NFKC", text)
    for part in _SPLIT.split(normal):
        if not part:
            continue
        if _CJK.fullmatch(part):
            result += _cjk_terms(part)
            continue
        for whole in _WORD.findall(part):
            # Every break `_CAMEL` finds lies inside a word, after its first letter, at a digit
            # or a capital: most words of prose have neither, and skip the expression.
            rest = whole[1:]
            for word in (whole,) if whole.isalpha() and rest == rest.lower() else _CAMEL.sub(" ", whole).split():
                folded = word.casefold()
                if folded not in STOP_WORDS:
                    result.append(_stem(folded))
    return result

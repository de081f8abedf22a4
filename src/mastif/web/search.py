"""The sandbox's own search engine: BM25 over every page of the offline sites.

Agents in the sandbox have no internet, yet many stacks start a web task with a search
query. This index gives them a realistic first step: results point at real sandbox pages,
ranked by Okapi BM25 (a few lines, no extra dependency, deterministic), and every snippet
starts with the page's key facts (a product's price and rating, a hotel's nightly rate, a
match score) so a well-phrased query can answer a simple question from the snippet alone.

Tokens are lower-cased, accent-folded words and numbers with a light plural fold
(``headphones`` -> ``headphone``); titles count three times so a query naming a product
ranks that product's page first.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TOKEN_RE = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
STOPWORDS = frozenset(
    "a an and are at be by do does for from how i in is it its me much of on or the this "
    "to was what when where which who with".split()
)
TITLE_WEIGHT = 3
"""How many times title tokens are counted: titles name the thing a page is about."""
K1 = 1.2
B = 0.75
SNIPPET_CHARS = 300


def fold(text: str) -> str:
    """Lower-case and strip accents so ``Reykjavík`` and ``reykjavik`` are one token."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def _stem(token: str) -> str:
    """Fold a plain English plural (``backpacks``); keeps ``glass`` and short words."""
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss") and token.isalpha():
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text`` (stopwords kept: they are scored low by IDF anyway)."""
    return [_stem(t) for t in TOKEN_RE.findall(fold(text))]


@dataclass(frozen=True)
class SearchDocument:
    """One indexed page.

    ``path`` is the page's path on the sandbox (made absolute per request, so results
    are right whatever port the server got); ``summary`` leads every snippet and should
    hold the facts people search for; ``text`` is the rest of the page's searchable prose.
    """

    path: str
    title: str
    summary: str
    text: str = ""
    site: str = ""


@dataclass(frozen=True)
class SearchHit:
    """A ranked result: the document, its BM25 score and a query-focused snippet."""

    doc: SearchDocument
    score: float
    snippet: str


class SearchIndex:
    """An immutable BM25 index; build once per app, query from any thread."""

    def __init__(self, docs: Iterable[SearchDocument]) -> None:
        self.docs: list[SearchDocument] = list(docs)
        self._tf: list[Counter[str]] = []
        self._len: list[int] = []
        df: Counter[str] = Counter()
        for doc in self.docs:
            tokens = tokenize(doc.title) * TITLE_WEIGHT + tokenize(doc.summary + " " + doc.text)
            tf = Counter(tokens)
            self._tf.append(tf)
            self._len.append(len(tokens))
            df.update(tf.keys())
        n = len(self.docs)
        self._avg_len = (sum(self._len) / n) if n else 0.0
        self._idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, n: int = 10) -> list[SearchHit]:
        """The ``n`` best documents for ``query`` (ties keep index order), with snippets."""
        terms = [t for t in dict.fromkeys(tokenize(query)) if t not in STOPWORDS]
        if not terms or not self.docs:
            return []
        scored: list[tuple[float, int]] = []
        for i, tf in enumerate(self._tf):
            score = 0.0
            norm = K1 * (1 - B + B * self._len[i] / self._avg_len)
            for term in terms:
                f = tf.get(term)
                if f:
                    score += self._idf[term] * f * (K1 + 1) / (f + norm)
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda si: (-si[0], si[1]))
        return [
            SearchHit(self.docs[i], round(s, 4), make_snippet(self.docs[i], terms))
            for s, i in scored[: max(0, n)]
        ]


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+", text.strip())
    return [p for p in parts if p]


def make_snippet(doc: SearchDocument, terms: Sequence[str]) -> str:
    """The summary, then the text sentences that mention the most query terms.

    Sentences keep page order, and the snippet is cut at a word boundary near
    :data:`SNIPPET_CHARS` so results stay compact for small-context models.
    """
    wanted = set(terms)
    ranked: list[tuple[int, int, str]] = []
    for pos, sentence in enumerate(_sentences(doc.text)):
        hits = len(wanted & set(tokenize(sentence)))
        if hits:
            ranked.append((hits, pos, sentence))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    chosen = sorted(ranked[:2], key=lambda r: r[1])
    if not chosen and doc.text:
        chosen = [(0, 0, _sentences(doc.text)[0])]
    snippet = " ".join([doc.summary, *(s for _, _, s in chosen)]).strip()
    if len(snippet) > SNIPPET_CHARS:
        cut = snippet.rfind(" ", 0, SNIPPET_CHARS)
        snippet = snippet[: cut if cut > 0 else SNIPPET_CHARS].rstrip(" ,;") + " ..."
    return snippet

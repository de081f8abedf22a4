"""A bundled model requantised to Q8_0: what is converted, what is copied, derived once."""

from __future__ import annotations

import threading
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import quants

from mastif.providers import requantise
from mastif.providers.local import REQUANTISED_MODELS, resolve_gguf
from mastif.providers.requantise import derived_path, ensure_requantised

Q41, Q80, F32 = (
    gguf.GGMLQuantizationType.Q4_1,
    gguf.GGMLQuantizationType.Q8_0,
    gguf.GGMLQuantizationType.F32,
)
UNQUANTISED = (F32, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16)


@pytest.fixture
def q4_1_model(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """A small GGUF like the bundled one: a Q4_1 weight, an F32 norm, metadata."""
    rng = np.random.default_rng(7)
    weight = rng.normal(size=(8, 64)).astype(np.float32)
    norm = rng.normal(size=(64,)).astype(np.float32)
    path = tmp_path / "tiny.Q4_1.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny")
    writer.add_context_length(128)
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_1))
    writer.add_array("tokenizer.ggml.tokens", ["<a>", "<b>"])
    writer.add_tensor("blk.0.attn_q.weight", quants.quantize(weight, Q41), raw_dtype=Q41)
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    q4_values = quants.dequantize(quants.quantize(weight, Q41), Q41)
    return path, q4_values, norm


def test_quantised_tensors_become_q8_0_and_the_rest_is_copied(q4_1_model, tmp_path):
    source, q4_values, norm = q4_1_model
    dest = tmp_path / "tiny.Q8_0.gguf"
    requantise.requantise(source, dest, "Q8_0")

    reader = gguf.GGUFReader(dest)
    tensors = {t.name: t for t in reader.tensors}
    weight = tensors["blk.0.attn_q.weight"]
    assert weight.tensor_type == Q80
    values = quants.dequantize(weight.data, Q80).reshape(q4_values.shape)
    # Q8_0 rounds each block of 32 to steps of its largest magnitude / 127: half a step,
    # plus the half-precision rounding of the block's scale (2**-11 of it) times up to 127
    step = np.abs(q4_values.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
    err = np.abs(values - q4_values).reshape(-1, 32)
    assert np.all(err <= step * (0.5 + 127 * 2.0**-11) + 1e-6)
    assert err.max() > 0  # requantised, not copied
    assert tensors["blk.0.attn_norm.weight"].tensor_type == F32
    np.testing.assert_array_equal(np.asarray(tensors["blk.0.attn_norm.weight"].data), norm)

    fields = reader.fields
    assert fields["general.name"].contents() == "tiny"
    assert fields["llama.context_length"].contents() == 128
    assert fields["tokenizer.ggml.tokens"].contents() == ["<a>", "<b>"]
    assert fields["general.file_type"].contents() == int(gguf.LlamaFileType.MOSTLY_Q8_0)


def test_an_unknown_target_is_named(q4_1_model, tmp_path):
    with pytest.raises(ValueError, match="unknown GGUF quantisation 'Q9_9'"):
        requantise.requantise(q4_1_model[0], tmp_path / "x.gguf", "Q9_9")
    assert not (tmp_path / "x.gguf").exists()


def test_derived_once_per_machine_under_a_lock(q4_1_model, tmp_path, monkeypatch):
    monkeypatch.setenv("MASTIF_CACHE", str(tmp_path / "cache"))
    calls = []
    real = requantise.requantise

    def counting(source, dest, target):
        calls.append(dest)
        real(source, dest, target)

    monkeypatch.setattr(requantise, "requantise", counting)
    source = q4_1_model[0]
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(ensure_requantised(source)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert set(results) == {derived_path(source, "Q8_0")}
    assert results[0].parent == tmp_path / "cache" / "models"
    # the name holds the source's hash: another source file is another derivation
    assert "Q8_0" in results[0].name and results[0].name.startswith("tiny.Q4_1.")
    assert ensure_requantised(source) == results[0] and len(calls) == 1
    assert not list(results[0].parent.glob(".*tmp*"))


@pytest.mark.slow
def test_the_bundled_smollm2_requantised(tmp_path):
    """The real bundled file: every quantised tensor is Q8_0, the shapes are the source's."""
    path = resolve_gguf("smollm2-135m-instruct-q8_0")
    source = gguf.GGUFReader(resolve_gguf(REQUANTISED_MODELS["smollm2-135m-instruct-q8_0"]))
    derived = gguf.GGUFReader(path)
    assert [t.name for t in derived.tensors] == [t.name for t in source.tensors]
    for old, new in zip(source.tensors, derived.tensors, strict=True):
        assert list(new.shape) == list(old.shape)
        kept = old.tensor_type in UNQUANTISED
        assert new.tensor_type == (old.tensor_type if kept else Q80), old.name

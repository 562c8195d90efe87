"""How a model runs: the one home of the options every command that runs one shares
(predict, evaluate, compare, occurrence), their defaults and their checks; and predict's own,
which add what it writes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from ..io import check_creation_options
from ..option_checks import check_types, precision_text
from ..rulebook import option, refuse
from ..sources.options import SceneOptions

DEFAULT_TILE_SIZE = 512  # 10 m pixels a side: the largest tile a scene is planned in (memory grows with it)
MIN_TILE_SIZE = 16  # the smallest tile read (the network pads it to a multiple of its stride, 32)
DEFAULT_OVERLAP = 64  # 10 m pixels of context, or the whole tile size when that is smaller
PRECISIONS = ("auto", "32", "bf16", "16")  # what networks train and run in
RUN_PRECISIONS = (*PRECISIONS, "int8")  # and run in: int8, the head's convolutions in 8-bit integers (CPUs)
# water indices run as models
BASELINES = ("ndwi", "mndwi", "ndwi-otsu", "mndwi-otsu", "ndwi-bilinear", "mndwi-bilinear")


@dataclass
class ModelOptions:
    """Which model runs and how: its weights, tiles, batches, device, arithmetic, flips and
    threshold. Checked when made (UsageError naming the option)."""

    weights: str | None = None  # a weights file, or None / "default" for the bundled model
    tile_size: int | None = None  # None: planned for each scene (tiling.planned_tile), up to DEFAULT_TILE_SIZE
    overlap: int | None = None  # context read around each tile (10 m pixels); None: DEFAULT_OVERLAP or the tile size
    batch_size: int | None = None  # tiles a forward pass; None: 1 on the CPU, 8 on a GPU
    device: str = "auto"  # auto, cpu, cuda or cuda:N
    precision: str = "auto"  # auto, 32, bf16, 16 or int8 (the head's convolutions in 8-bit integers, CPUs)
    flips: bool = False  # average over the eight flips and quarter turns of each tile (8x the work)
    threshold: float | None = None  # None: the model's calibrated threshold (its card's)
    full_head: bool = False  # run the head everywhere, even where the weights' water gate rules water out

    def __post_init__(self):
        self.precision = precision_text(self.precision)
        check_types(self)
        if self.overlap is None:
            self.overlap = min(DEFAULT_OVERLAP, self.tile_size or DEFAULT_TILE_SIZE)
        check_model_options(self)


def is_device(text: str) -> bool:
    """Whether ``text`` names a device a model runs on: auto, cpu, cuda or cuda:N."""
    return re.fullmatch(r"auto|cpu|cuda(:\d+)?", text) is not None


def check_model_options(options: ModelOptions) -> None:
    """Refuse options no model can run with, as the rulebook words them."""
    if options.tile_size is not None and options.tile_size < MIN_TILE_SIZE:
        raise refuse("S2N-TILE-SIZE", None, tile_size=options.tile_size, least=MIN_TILE_SIZE)
    if options.overlap < 0:
        raise refuse("S2N-OVERLAP-NEGATIVE", None, overlap=options.overlap)
    if options.tile_size is not None and options.overlap > options.tile_size:
        raise refuse("S2N-OVERLAP-TILE", None, overlap=options.overlap, tile_size=options.tile_size)
    if options.batch_size is not None and options.batch_size < 1:
        raise refuse("S2N-BATCH-SIZE", None, batch_size=options.batch_size)
    if not is_device(options.device):
        raise refuse("S2N-DEVICE-UNKNOWN", option("device"), value=options.device)  # named where Python gives it
    if options.precision not in RUN_PRECISIONS:
        raise refuse("S2N-PRECISION-UNKNOWN", None, value=options.precision, choices=", ".join(RUN_PRECISIONS))
    if options.threshold is not None and not 0 <= options.threshold <= 1:
        raise refuse("S2N-THRESHOLD-RANGE", None, threshold=options.threshold)


@dataclass
class PredictOptions(ModelOptions):
    """The model's options, how scenes are read, and what predict writes."""

    blend: int = 8  # 10 m pixels of each tile's output beyond its core, blended with the neighbours'
    scene: SceneOptions = field(default_factory=SceneOptions)
    probability: bool = False
    cog: bool = False
    creation_options: dict = field(default_factory=dict)
    overwrite: bool = False

    @classmethod
    def of(cls, model: ModelOptions, **more) -> PredictOptions:
        """PredictOptions of ``model``'s options and ``more`` of predict's own."""
        return cls(**{f.name: getattr(model, f.name) for f in fields(ModelOptions)}, **more)

    @classmethod
    def from_flat(cls, **options) -> PredictOptions:
        """PredictOptions from one flat set of keywords, those of SceneOptions among them
        (``offset=-1000, tile_size=256``), as notebooks and scripts give them."""
        scene_fields = {f.name for f in fields(SceneOptions)}
        scene = SceneOptions(**{k: v for k, v in options.items() if k in scene_fields})
        return cls(scene=scene, **{k: v for k, v in options.items() if k not in scene_fields})

    def __post_init__(self):
        super().__post_init__()
        if self.blend < 0:
            raise refuse("S2N-BLEND-NEGATIVE", None, blend=self.blend)
        check_creation_options(self.creation_options, self.cog)

"""A set of synthetic pairs written to a folder, as ``s2s2net synth`` makes it: scenes and exact
2 m masks (and the rivers drawn), synthetic landscapes or water painted into real scenes, seed
after seed, with a manifest."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil
import rasterio

from ..io import check_folder_output, check_output, make_folder
from ..manifest import write_manifest
from ..option_checks import SEED_BOUNDS, check_bounds, check_types, options_said
from ..rulebook import option, refuse
from .painted import background_reading, make_painted_pair
from .scenes import make_pair, write_pair, write_river_truth

LEVELS = ("L1C", "L2A", "mixed")  # top-of-atmosphere haze, surface reflectance, or either by seed
LANDSCAPES = ("mixed", "rivers", "floods")
MIN_SIZE, MAX_SIZE = 8, 20000  # 10 m pixels a side
# The memory a pair takes to draw, per 10 m pixel: its landscape, spectra and blur at 2 m (25 pixels
# each, about 47 bytes apiece). Peak resident memory of `s2s2net synth --count 1` less that of
# --size 8: 1.09 KB a pixel at --size 1024 (every landscape alike), 1.15 KB at 2048.
PAIR_BYTES_PER_PIXEL = 1200
MEMORY_SHARE = 0.8  # of the memory free, what a pair may take: the estimate's margin, and the system's


@dataclass
class SynthOptions:
    count: int = 1
    size: int = 256  # 10 m pixels a side
    seed: int = 0  # pair i uses seed + i
    level: str = "mixed"  # "L1C", "L2A" or "mixed" (either by seed; a background's: its tag's, else L2A)
    landscape: str = "mixed"  # "mixed", "rivers" or "floods"
    backgrounds: tuple = ()  # real scenes to paint water into, taken in turn
    bands: tuple[int, ...] | None = None  # how the backgrounds are read
    offset: float = 0.0
    manifest: bool = True
    overwrite: bool = False

    def __post_init__(self):
        check_types(self)
        check_bounds(self, least={"count": 1, "size": MIN_SIZE, **SEED_BOUNDS["least"]},
                     most={"size": MAX_SIZE, **SEED_BOUNDS["most"]})
        for name, choices in {"level": LEVELS, "landscape": LANDSCAPES}.items():
            if getattr(self, name) not in choices:
                raise refuse("S2N-OPTION-CHOICE", None, given=option(name, getattr(self, name)),
                             choices=", ".join(choices))
        if self.backgrounds and self.landscape != "mixed":  # a painted pair keeps its background's land
            raise refuse("S2N-SYNTH-BACKGROUND-SHAPED", None, given=option("landscape", self.landscape))
        reading = [name for name, plain in (("bands", None), ("offset", 0.0)) if getattr(self, name) != plain]
        if reading and not self.backgrounds:  # they say how a background is read; none would be
            raise refuse("S2N-SYNTH-READING-NO-BACKGROUND", None, given=options_said(self, reading))


@dataclass
class SynthSummary:
    rows: list[dict] = field(default_factory=list)  # image, mask, id of each pair (the manifest's rows)
    warnings: list = field(default_factory=list)  # how the backgrounds were read
    manifest: str | None = None  # the manifest written, if any

    def to_dict(self) -> dict:
        return {"pairs": self.rows, "manifest": self.manifest, "warnings": [w.to_dict() for w in self.warnings]}


def make_synthetic_set(out_dir, options: SynthOptions, on_background: Callable[[list], None] | None = None,
                       on_pair: Callable[[Path, Path, float], None] | None = None) -> SynthSummary:
    """Write ``options.count`` pairs into ``out_dir``. ``on_background(findings)`` hears how
    each background was read before the first pair; ``on_pair(scene, mask, water_share)`` each pair."""
    out_dir = Path(out_dir)
    check_folder_output(out_dir)
    summary, readings = SynthSummary(), {}
    for bg in dict.fromkeys(options.backgrounds):
        level = None if options.level == "mixed" else options.level  # a background's that says none
        readings[bg], said = background_reading(bg, options.bands, options.offset, options.size, level)
        summary.warnings += said
        if on_background:
            on_background(said)
    check_memory(options.size, max(map(_crop_pixels, readings.values(), [options.size] * len(readings)),
                                   default=options.size * options.size))
    for s in range(options.seed, options.seed + options.count):  # every output, before the first is written
        for path in _pair_paths(out_dir, s):
            check_output(path, options.overwrite, options.backgrounds)
    listed = _listed_pairs(out_dir / "manifest.csv", options) if options.manifest else []
    make_folder(out_dir)
    for i in range(options.count):
        s = options.seed + i
        scene_path, mask_path, rivers_path = _pair_paths(out_dir, s)
        if options.backgrounds:
            background = options.backgrounds[i % len(options.backgrounds)]
            pair = make_painted_pair(background, options.size, s, readings[background])
        else:
            pair = make_pair(options.size, seed=s, level=None if options.level == "mixed" else options.level,
                             landscape=options.landscape)
        write_pair(pair, scene_path, mask_path)
        if pair.rivers:
            write_river_truth(pair, rivers_path)
        summary.rows.append({"image": scene_path.name, "mask": mask_path.name, "id": f"synth_{s}"})
        if on_pair:
            on_pair(scene_path, mask_path, float((pair.mask == 1).mean()))
    if options.manifest:  # the pairs listed before, that these did not make again, and these
        made = {row["id"] for row in summary.rows}
        write_manifest(out_dir / "manifest.csv", [r for r in listed if r["id"] not in made] + summary.rows)
        summary.manifest = str(out_dir / "manifest.csv")
    return summary


def check_memory(size: int, pixels: int) -> None:
    """InputError when a pair of ``pixels`` 10 m pixels (``size`` x ``size``, or a background's
    crop) needs more memory to draw than MEMORY_SHARE of what the machine has free (a whole
    tile, 10980 px, needs about 135 GB), before anything is written: it was drawn until the
    system killed it."""
    need, free = pixels * PAIR_BYTES_PER_PIXEL, psutil.virtual_memory().available
    if need > MEMORY_SHARE * free:
        largest = int((MEMORY_SHARE * free / PAIR_BYTES_PER_PIXEL) ** 0.5) // 8 * 8
        raise refuse("S2N-SYNTH-MEMORY", option("size", size), need=need / 2**30, free=free / 2**30,
                     largest=option("size", largest))


def _crop_pixels(reading, size: int) -> int:
    """The 10 m pixels of a background's crop: ``size`` a side, or the scene's where smaller."""
    with rasterio.open(reading.dataset) as src:
        return min(size, src.height) * min(size, src.width)


def _listed_pairs(manifest: Path, options: SynthOptions) -> list[dict]:
    """The rows of the folder's manifest.csv of pairs synth made before (image, mask, id), kept
    beside the pairs added; a manifest.csv of other columns is refused unless --overwrite
    replaces it (checked before any pair is written)."""
    if not manifest.exists():
        return []
    try:
        with open(manifest, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            ours = reader.fieldnames == ["image", "mask", "id"]
    except (OSError, UnicodeDecodeError, csv.Error):
        ours = False
    if not ours:
        check_output(manifest, options.overwrite)
        return []
    return rows


def _pair_paths(out_dir: Path, seed: int) -> tuple[Path, Path, Path]:
    """The scene, mask and river truth of the pair of ``seed``."""
    return tuple(out_dir / f"synth_{seed}_{part}" for part in ("scene.tif", "mask.tif", "rivers.gpkg"))

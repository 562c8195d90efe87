"""Datasets over chips: reading, normalising and augmenting image/mask pairs, from one or
more chip folders (sources), each drawn as often as its weight says.

A mask kept at 10 m (a coarse label) is given to the loss as its 10 m cells repeated on the
2 m grid, with the sample's ``label_scale`` (5), so that batches have one shape and the loss
scores the cells, never the repeated 2 m blocks. Every random choice for a sample is drawn
from a generator seeded by (seed, epoch, index), so a run is repeatable, ranks agree, and a
resumed run sees exactly the same batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
import torch
from rasterio.errors import RasterioIOError
from scipy import ndimage
from torch.utils.data import Dataset

from ..bands import BandSpec, normalise
from ..errors import first_line
from ..formats import NODATA, check_each_source_once, dn_to_reflectance, valid_mask
from ..grid import SCALE_FACTOR
from ..rulebook import option, refuse
from .losses import IGNORE


@dataclass(frozen=True)
class ChipRecord:
    """One chip: its image and mask files and the source (chips folder) it comes from."""

    image: Path
    mask: Path
    source: str = ""


@dataclass(frozen=True)
class Augment:
    """Geometric (flips, 90-degree turns, alike for image and mask) and radiometric changes
    (per-band gain and offset, overall brightness, noise, blur) that differ between scenes and
    sensors."""

    geometric: bool = True
    gain: float = 0.0  # sd of a per-band multiplicative gain
    offset: float = 0.0  # sd of a per-band additive offset (reflectance)
    brightness: float = 0.0  # sd of a common multiplicative factor
    noise: float = 0.0  # largest sd of additive noise (reflectance)
    blur: float = 0.0  # probability of a slight blur

    @classmethod
    def none(cls) -> "Augment":
        return cls(geometric=False)

    @classmethod
    def radiometric(cls) -> "Augment":
        return cls(gain=0.08, offset=0.01, brightness=0.1, noise=0.006, blur=0.3)


def read_chip_index(chips_dir):
    import geopandas as gpd  # heavy: only reading the index needs it

    chips_dir = Path(chips_dir)
    index = chips_dir / "index.gpkg"
    if not chips_dir.is_dir():
        raise refuse("S2N-CHIPS-NOT-FOUND", chips_dir)
    if not index.exists():
        raise refuse("S2N-CHIPS-NO-INDEX", chips_dir)
    try:
        gdf = gpd.read_file(index)
    except Exception as exc:
        raise refuse("S2N-CHIPS-INDEX-UNREADABLE", index, error=first_line(exc)) from exc
    missing = {"image", "mask", "split"} - set(gdf.columns)
    if missing:
        raise refuse("S2N-CHIPS-INDEX-COLUMNS", index, missing=', '.join(sorted(missing)))
    return gdf


class ChipDataset(Dataset):
    """(image, target, label_scale) triples: image normalised float32 (bands, s, s); target
    float32 (1, 5s, 5s) with 0/1 and IGNORE at nodata; label_scale the 2 m cells a label cell
    spans (1, or 5 for a mask kept at 10 m, whose cells the target repeats)."""

    def __init__(self, records: list[ChipRecord], spec: BandSpec = BandSpec(), augment: Augment = Augment(),
                 seed: int = 42):
        self.records = records
        self.spec = spec
        self.augment = augment
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int):
        record = self.records[i]
        raw, nodata = _read_chip(record.image)
        mask, _ = _read_chip(record.mask)
        mask, label_scale = _on_fine_grid(mask[0], raw.shape[1:], record.mask)
        rng = np.random.default_rng([self.seed, self.epoch, i])
        valid = valid_mask(raw, nodata)
        refl = dn_to_reflectance(raw)
        refl = self._radiometric(refl, rng)
        image = normalise(refl, valid, self.spec)
        target = mask.astype(np.float32)
        target[mask == NODATA] = IGNORE
        if self.augment.geometric:
            k = int(rng.integers(0, 4))
            flip = bool(rng.integers(0, 2))
            image, target = np.rot90(image, k, axes=(1, 2)), np.rot90(target, k, axes=(0, 1))
            if flip:
                image, target = image[:, :, ::-1], target[:, ::-1]
        return (torch.from_numpy(np.ascontiguousarray(image)), torch.from_numpy(np.ascontiguousarray(target))[None],
                label_scale)

    def _radiometric(self, refl: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        a = self.augment
        n = refl.shape[0]
        if a.gain or a.brightness:
            refl = refl * (rng.normal(1, a.gain, (n, 1, 1)) * rng.normal(1, a.brightness)).astype(np.float32)
        if a.offset:
            refl = refl + rng.normal(0, a.offset, (n, 1, 1)).astype(np.float32)
        if a.blur and rng.random() < a.blur:
            refl = ndimage.gaussian_filter(refl, sigma=(0, rng.uniform(0.3, 0.8), rng.uniform(0.3, 0.8)))
        if a.noise:
            refl = refl + rng.normal(0, rng.uniform(0, a.noise), refl.shape).astype(np.float32)
        return refl


def _on_fine_grid(mask: np.ndarray, image_shape: tuple[int, int], path: Path) -> tuple[np.ndarray, int]:
    """The mask on the image's 2 m grid and the 2 m cells one of its cells spans (1 or 5)."""
    fine = (image_shape[0] * SCALE_FACTOR, image_shape[1] * SCALE_FACTOR)
    if mask.shape == fine:
        return mask, 1
    if mask.shape == tuple(image_shape):
        return np.repeat(np.repeat(mask, SCALE_FACTOR, axis=0), SCALE_FACTOR, axis=1), SCALE_FACTOR
    raise refuse("S2N-CHIPS-MASK-SIZE", path, width=mask.shape[1], height=mask.shape[0], fine_width=fine[1], fine_height=fine[0], width_10m=image_shape[1], height_10m=image_shape[0])


def _read_chip(path: Path):
    try:
        with rasterio.open(path) as src:
            return src.read(), src.nodata
    except RasterioIOError as exc:
        raise refuse("S2N-CHIPS-CHIP-UNREADABLE", path, error=first_line(exc)) from exc


def chip_splits(chips_dir, seed: int = 42, val_fraction: float = 0.1) -> tuple[list[ChipRecord], list[ChipRecord]]:
    """Train and val records of one chips folder; where the index has no val chips, a seeded
    ``val_fraction`` of the train chips (at least one, where there are two; none for 0)."""
    chips_dir = Path(chips_dir)
    gdf = read_chip_index(chips_dir)
    source = chips_dir.name or str(chips_dir)
    train = [ChipRecord(chips_dir / r.image, chips_dir / r.mask, source) for r in gdf.itertuples() if r.split == "train"]
    val = [ChipRecord(chips_dir / r.image, chips_dir / r.mask, source) for r in gdf.itertuples() if r.split == "val"]
    if not train and not val:
        raise refuse("S2N-CHIPS-NO-TRAIN-VAL", chips_dir / "index.gpkg")
    # every chip's files, before a run starts: one gone (a copy cut short) stopped it when drawn
    missing = [path for record in train + val for path in (record.image, record.mask) if not path.exists()]
    if missing:
        others = f" (and {len(missing) - 1} more of its files)" if len(missing) > 1 else ""
        raise refuse("S2N-CHIPS-CHIP-MISSING", missing[0], others=others)
    return (train, val) if val else held_out(train, seed, val_fraction)


def held_out(train: list[ChipRecord], seed: int, fraction: float) -> tuple[list[ChipRecord], list[ChipRecord]]:
    """``train`` split in two by a seeded draw: the rest, and ``fraction`` of it for validation
    (at least one chip where there are two; none for 0)."""
    if fraction <= 0 or len(train) < 2:
        return train, []
    order = np.random.default_rng(seed).permutation(len(train))
    n_val = max(1, int(round(len(train) * fraction)))
    return [train[i] for i in order[n_val:]], [train[i] for i in order[:n_val]]


def source_splits(chips_dirs: list, seed: int = 42) -> tuple[list[ChipRecord], list[ChipRecord]]:
    """Train and val records of every chips folder, each folder a source named by its name
    (its path where two share a name). A folder with val chips only validates; one without
    any (``chip --val-fraction 0``) trains on all its chips, validating nothing, unless no
    folder has val chips: then a seeded tenth of each one's train chips validates."""
    if not chips_dirs:
        raise refuse("S2N-CHIPS-MISSING")
    check_each_source_once(chips_dirs, "chips folder")  # drawn twice as often, silently (--source-weight says so)
    dirs = [Path(d) for d in chips_dirs]
    names = [d.name for d in dirs]
    splits = [chip_splits(d, seed, val_fraction=0) for d in dirs]
    if not any(v for _, v in splits):
        splits = [held_out(t, seed, 0.1) for t, _ in splits]
    train, val = [], []
    for d, (t, v) in zip(dirs, splits):
        name = d.name if names.count(d.name) == 1 else str(d)
        train += [ChipRecord(r.image, r.mask, name) for r in t]
        val += [ChipRecord(r.image, r.mask, name) for r in v]
    if not train:
        raise refuse("S2N-CHIPS-NO-TRAIN", dirs[0] / "index.gpkg")
    _check_one_chip_side(dirs, splits)
    return train, val


def _check_one_chip_side(dirs: list[Path], splits: list) -> None:
    """InputError when two folders' chips differ in side: a batch stacks chips of one size (two
    folders cut at two --size stopped in torch.stack at the first mixed batch)."""
    sides = {}
    for d, (t, v) in zip(dirs, splits):
        first = next(iter(t or v), None)
        if first is None:  # a folder without chips: nothing to compare
            continue
        try:
            with rasterio.open(first.image) as src:
                sides[d] = (src.width, src.height)
        except RasterioIOError:
            continue  # the dataset names the chip it cannot read, with its path
    if not sides:
        return
    (a, side_a), *others = sides.items()
    for b, side_b in others:
        if side_b != side_a:
            raise refuse("S2N-CHIPS-SIDES", b, side=f"{side_b[0]} x {side_b[1]}", other=a,
                         other_side=f"{side_a[0]} x {side_a[1]}")


def check_source_weights(weights: dict[str, float], records: list[ChipRecord]) -> None:
    """Every weight names a source among the records."""
    sources = sorted({r.source for r in records})
    for name in weights:
        if name not in sources:
            raise refuse("S2N-TRAIN-SOURCE-WEIGHT", option("source_weight"), name=name, sources=', '.join(sources))


def weighted_order(records: list[ChipRecord], weights: dict[str, float], seed: int, epoch: int) -> list[int]:
    """The indices of one epoch: each source's chips ``weight`` times (a weight of 2.5 draws
    every chip twice and a seeded half once more; 0.5 a seeded half), in a seeded order.
    With every weight 1 this is DistributedSampler's order (``torch.randperm`` seeded
    ``seed + epoch``)."""
    weight = [weights.get(r.source, 1.0) for r in records]
    drawn = [i for i in range(len(records)) for _ in range(int(math.floor(weight[i])))]
    for k, source in enumerate(sorted({r.source for r in records})):
        part = weights.get(source, 1.0) % 1
        indices = [i for i, r in enumerate(records) if r.source == source]
        extra = int(round(part * len(indices)))
        if extra:
            rng = np.random.default_rng([seed, epoch, k])
            drawn += sorted(rng.choice(indices, extra, replace=False).tolist())
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return [drawn[j] for j in torch.randperm(len(drawn), generator=g).tolist()]

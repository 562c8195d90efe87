"""Datasets over chips: reading, normalising and augmenting image/mask pairs.

Every random choice for a sample is drawn from a generator seeded by (seed, epoch, index),
so a run is repeatable, ranks agree, and a resumed run sees exactly the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
import torch
from scipy import ndimage
from torch.utils.data import Dataset

from rasterio.errors import RasterioIOError

from ..bands import BandSpec, normalise
from ..errors import InputError, describe, first_line
from ..formats import NODATA, dn_to_reflectance, valid_mask
from .losses import IGNORE


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
        raise InputError(describe(chips_dir, "chips folder not found"))
    if not index.exists():
        raise InputError(describe(chips_dir, "has no index.gpkg; make chips with `s2s2net chip`"))
    try:
        gdf = gpd.read_file(index)
    except Exception as exc:
        raise InputError(describe(index, f"chip index cannot be read ({first_line(exc)})")) from exc
    missing = {"image", "mask", "split"} - set(gdf.columns)
    if missing:
        raise InputError(describe(index, f"chip index lacks column(s) {', '.join(sorted(missing))}"))
    return gdf


class ChipDataset(Dataset):
    """(image, target) pairs: image normalised float32 (bands, s, s); target float32
    (1, 5s, 5s) with 0/1 and IGNORE at nodata."""

    def __init__(self, chips_dir, records: list[tuple[str, str]], spec: BandSpec = BandSpec(),
                 augment: Augment = Augment(), seed: int = 42):
        self.dir = Path(chips_dir)
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
        image_rel, mask_rel = self.records[i]
        raw, nodata = _read_chip(self.dir / image_rel)
        mask, _ = _read_chip(self.dir / mask_rel)
        mask = mask[0]
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
        return torch.from_numpy(np.ascontiguousarray(image)), torch.from_numpy(np.ascontiguousarray(target))[None]

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


def _read_chip(path: Path):
    try:
        with rasterio.open(path) as src:
            return src.read(), src.nodata
    except RasterioIOError as exc:
        raise InputError(describe(path, f"chip cannot be read ({first_line(exc)})")) from exc


def chip_splits(chips_dir, seed: int = 42, val_fraction: float = 0.1) -> tuple[list, list]:
    """Train and val records from the index; val is a seeded split of train when absent."""
    gdf = read_chip_index(chips_dir)
    train = [(r.image, r.mask) for r in gdf.itertuples() if r.split == "train"]
    val = [(r.image, r.mask) for r in gdf.itertuples() if r.split == "val"]
    if not train:
        raise InputError(describe(Path(chips_dir) / "index.gpkg", "has no chips in the train split"))
    if not val:
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(train))
        n_val = max(1, int(round(len(train) * val_fraction))) if len(train) > 1 else 0
        val = [train[i] for i in order[:n_val]]
        train = [train[i] for i in order[n_val:]]
    for image, mask in train[:1] + val[:1]:
        for rel in (image, mask):
            if not (Path(chips_dir) / rel).exists():
                raise InputError(describe(Path(chips_dir) / rel, "listed in index.gpkg but missing"))
    return train, val

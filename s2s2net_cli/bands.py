"""The spectral bands the network reads, and how their reflectance is normalised.

The network reads B02, B03, B04, B08, B11, B12 at 10 m as reflectance, (DN + offset) /
scale. The band order, scale and normalisation a model was trained with travel in its weights
file (``BandSpec``). Pixels without data are set to the band mean (0 after normalisation), so
they never reach the network as zeros that look like water.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import numpy as np

from .rulebook import Finding, finding, option, refuse

BAND_NAMES = ("B02", "B03", "B04", "B08", "B11", "B12")
SWIR_BANDS = ("B11", "B12")  # read at 20 m by the satellite, the others at 10 m
DEFAULT_SCALE = 10000.0
# Reflectance mean and spread of a mixed land/water Sentinel-2 scene, per band above.
DEFAULT_MEAN = (0.08, 0.09, 0.09, 0.22, 0.18, 0.12)
DEFAULT_STD = (0.05, 0.05, 0.06, 0.12, 0.09, 0.07)


@dataclass(frozen=True)
class BandSpec:
    """What a model expects of its input: band names, reflectance scale and normalisation."""

    names: tuple[str, ...] = BAND_NAMES
    scale: float = DEFAULT_SCALE
    mean: tuple[float, ...] = DEFAULT_MEAN
    std: tuple[float, ...] = DEFAULT_STD

    def to_dict(self) -> dict:
        return {"names": list(self.names), "scale": self.scale, "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, data: dict) -> "BandSpec":
        spec = cls(
            names=tuple(str(n) for n in data["names"]),
            scale=float(data["scale"]),
            mean=tuple(float(v) for v in data["mean"]),
            std=tuple(float(v) for v in data["std"]),
        )
        n = len(spec.names)
        if not (len(spec.mean) == len(spec.std) == n) or n == 0:
            raise ValueError("band names, mean and std differ in length")
        if not (spec.scale > 0 and all(s > 0 for s in spec.std)):
            raise ValueError("scale and std must be positive")
        return spec


def normalise(reflectance: np.ndarray, valid: np.ndarray, spec: BandSpec) -> np.ndarray:
    """(reflectance - mean) / std per band, with nodata pixels set to 0 (the band mean)."""
    mean = np.asarray(spec.mean, dtype=np.float32)[:, None, None]
    std = np.asarray(spec.std, dtype=np.float32)[:, None, None]
    out = (reflectance - mean) / std
    out[:, ~valid] = 0.0
    np.nan_to_num(out, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    return out


def band_token(text: str) -> str | None:
    """'B8', 'B08', 'b08 (nir)', 'B08_10m', 'B8_median' -> 'B08'; None when the text names no
    Sentinel-2 band. What follows a band after an underscore (a resolution, a composite's
    statistic) is read past; what goes before it is not ('SR_B5' is Landsat's NIR, not B05)."""
    m = re.search(r"\bB0?(\d{1,2})(A?)(?=_|\b)", text.upper())
    if not m:
        return None
    return f"B{int(m.group(1)):02d}{m.group(2)}"


# what else the bands the network reads are called: colour names, Earth Search's asset keys
# (swir16, swir22) and the SWIR1/SWIR2 of many exports (Earth Engine scripts rename them so)
BAND_ALIASES = {"B02": ("blue",), "B03": ("green",), "B04": ("red",), "B08": ("nir",), "B11": ("swir16", "swir1"),
                "B12": ("swir22", "swir2")}


def band_name(text: str | None) -> str | None:
    """The Sentinel-2 band a band description or colour interpretation names ('B8', 'b08 (nir)',
    'nir', 'red', 'SWIR 1' -> 'B08', 'B08', 'B08', 'B04', 'B11'); None when it names none."""
    if not text:
        return None
    word = re.sub(r"[\s_-]+", "", text.lower())  # SWIR 1, swir_1, SWIR-1: swir1
    return next((band for band, aliases in BAND_ALIASES.items() if word in aliases), None) or band_token(text)


def band_indexes(given) -> tuple[int, ...]:
    """Six distinct 1-based band indexes from "1,2,3,4,5,6" (as --bands takes them) or whole
    numbers; UsageError naming the option otherwise."""
    items = given.split(",") if isinstance(given, str) else list(given)
    text = ",".join(str(v).strip() for v in items)
    try:
        indexes = tuple(int(v) if isinstance(v, str) else operator.index(v) for v in items)
    except (TypeError, ValueError):
        names = [band_name(str(v).strip()) for v in items]
        named = (": it takes each band's 1-based position in the stack, not its name (a stack whose bands are"
                 " described is read by name without it)") if any(names) else ""
        raise refuse("S2N-BANDS-NOT-LIST", option("bands"), value=text, named=named) from None
    if len(indexes) != len(BAND_NAMES):
        raise refuse("S2N-BANDS-OPTION-COUNT", option("bands"), bands=",".join(BAND_NAMES), count=len(indexes))
    if min(indexes) < 1:
        raise refuse("S2N-BANDS-ONE-BASED", option("bands"))
    twice = repeated_band(indexes)
    if twice:
        raise refuse(twice.code, option("bands"), **twice.values)
    return indexes


def repeated_band(indexes) -> Finding | None:
    """What is wrong with 1-based band ``indexes`` (in the model's band order) that name one
    band twice: read twice, it would stand for two of B02, B03, B04, B08, B11, B12 and the
    network be given a wrong band without a word. None when every index is its own."""
    indexes = list(indexes)
    twice = next((i for i in indexes if indexes.count(i) > 1), None)
    if twice is None:
        return None
    said = " and ".join(name for name, i in zip(BAND_NAMES, indexes) if i == twice)
    return finding("S2N-BANDS-TWICE", None, index=twice, said=said, bands=", ".join(BAND_NAMES))

"""Reading a Sentinel-2 scene: band order, reflectance scale, nodata, normalisation.

The network reads B02, B03, B04, B08, B11, B12 at 10 m as reflectance, (DN + offset) /
scale. The band order, scale and normalisation a model was trained with travel in its weights
file. Nodata is the file's nodata value (every band equal to it), NaN in any band, or a pixel
whose bands are all zero. Nodata never reaches the network as zeros that look like water:
it is filled with the band mean (0 after normalisation) and reported in a valid mask.
SceneReader reads windows of any scene (see sources.py for where scenes come from) with
where they hold data and where that data counts in outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import rasterio
from rasterio.errors import RasterioIOError
from affine import Affine
from rasterio.windows import Window

from .errors import InputError, describe, first_line
from .grid import is_rotated

BAND_NAMES = ("B02", "B03", "B04", "B08", "B11", "B12")
DEFAULT_SCALE = 10000.0
# Reflectance mean and spread of a mixed land/water Sentinel-2 scene, per band above.
DEFAULT_MEAN = (0.08, 0.09, 0.09, 0.22, 0.18, 0.12)
DEFAULT_STD = (0.05, 0.05, 0.06, 0.12, 0.09, 0.07)

_REFLECTANCE_DTYPES = {"uint16", "int16", "uint32", "int32", "float32", "float64"}


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


@dataclass(frozen=True)
class Scene:
    """An opened, checked scene: its grid, where its pixels are and how to read them.

    ``path`` is what the user named (a stack, a product folder or zip, a STAC item, a URL);
    ``dataset`` is what GDAL opens (the stack itself, or a VRT of a product's band files).
    The grid (crs, transform, width, height) is the part read: the whole dataset, or the
    window ``origin`` (row, col) of an area of interest. Reflectance = (DN + offset) / scale.
    Pixels of ``cloud_band`` in CLOUD_CLASSES, nonzero in ``mask`` or outside ``aoi`` (shapes
    in the scene's CRS) are left out of outputs and scores but still seen as context.
    """

    path: str
    crs: object
    transform: object
    width: int
    height: int
    dtype: str
    count: int
    indexes: tuple[int, ...]
    nodata: float | None
    descriptions: tuple[str | None, ...] = field(default=())
    dataset: str = ""
    kind: str = "stack"
    scale: float = DEFAULT_SCALE
    offset: tuple[float, ...] = (0.0,) * len(BAND_NAMES)
    cloud_band: int | None = None
    mask: str | None = None
    origin: tuple[int, int] = (0, 0)
    dataset_shape: tuple[int, int] = (0, 0)
    aoi: tuple = ()

    def __post_init__(self):
        if not self.dataset:
            object.__setattr__(self, "dataset", str(self.path))
        if self.dataset_shape == (0, 0):
            object.__setattr__(self, "dataset_shape", (self.height, self.width))

    @property
    def shape(self) -> tuple[int, int]:
        return self.height, self.width

    @property
    def name(self) -> str:
        """A short name for tags and messages: the file or folder name, not its whole path."""
        return source_name(self.path)

    @property
    def dataset_transform(self):
        """The transform of the whole dataset (the scene's grid may be a window of it)."""
        from affine import Affine

        return self.transform * Affine.translation(-self.origin[1], -self.origin[0])

    def reflectance(self, raw: np.ndarray) -> np.ndarray:
        """(bands, h, w) DNs as float32 reflectance: (DN + offset) / scale."""
        offset = np.asarray(self.offset, dtype=np.float32)[:, None, None]
        return (raw.astype(np.float32) + offset) / np.float32(self.scale)


def source_name(path) -> str:
    """'/data/S2B_MSIL2A_x.SAFE/MTD_MSIL2A.xml' -> 'S2B_MSIL2A_x.SAFE'; URLs keep their last part."""
    text = str(path).rstrip("/")
    parts = [p for p in text.replace("\\", "/").split("/") if p]
    if not parts:
        return text
    if parts[-1].upper().startswith("MTD_MSIL") and len(parts) > 1:
        return parts[-2]
    return parts[-1]


def source_stem(path) -> str:
    """A file-name stem for outputs named after a scene: suffixes .tif/.vrt/.json/.zip/.SAFE dropped."""
    name = source_name(path)
    for suffix in (".zip", ".json", ".tiff", ".tif", ".vrt", ".SAFE", ".safe"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "scene"


def open_stack(path, indexes: tuple[int, ...] | None = None, n_bands: int = len(BAND_NAMES)) -> Scene:
    """Open a GeoTIFF/VRT stack ``path`` and check that it can be read as a reflectance scene.

    ``indexes`` are the 1-based bands to read, in the model's band order (default 1..n).
    Raises InputError naming the file for anything that cannot be a scene.
    """
    try:
        with rasterio.open(path) as src:
            crs, transform = src.crs, src.transform
            width, height, count, dtype = src.width, src.height, src.count, src.dtypes[0]
            nodata, descriptions = src.nodata, tuple(src.descriptions)
    except RasterioIOError as exc:
        raise InputError(describe(path, f"not a readable raster ({first_line(exc)})")) from exc
    check_grid(path, crs, transform)
    if dtype not in _REFLECTANCE_DTYPES:
        raise InputError(describe(path, f"has dtype {dtype}, which cannot hold reflectance (expected uint16, int16 or float)"))
    if indexes is None:
        if count < n_bands:
            raise InputError(describe(path, f"has {count} band(s); the model needs {n_bands} ({', '.join(BAND_NAMES)})"))
        indexes = tuple(range(1, n_bands + 1))
    else:
        indexes = tuple(int(i) for i in indexes)
        if len(indexes) != n_bands:
            raise InputError(describe(path, f"{len(indexes)} band indexes given; the model needs {n_bands}"))
        bad = [i for i in indexes if not 1 <= i <= count]
        if bad:
            raise InputError(describe(path, f"has {count} band(s); band index {bad[0]} does not exist"))
    return Scene(str(path), crs, transform, width, height, dtype, count, indexes, nodata, descriptions)


def check_grid(path, crs, transform) -> None:
    """InputError unless the grid is georeferenced, north-up and unrotated."""
    if crs is None:
        raise InputError(describe(path, "has no CRS; a scene must be georeferenced"))
    if is_rotated(transform):
        raise InputError(describe(path, "has a rotated or sheared transform; only north-up grids are supported"))
    if transform.is_identity or transform.a <= 0 or transform.e >= 0:
        raise InputError(describe(path, "has no usable geotransform (expected north-up pixels)"))


# Scene classification (L2A SCL) classes left out unless --keep-clouds: saturated or
# defective, cloud shadow, cloud medium and high probability, thin cirrus, snow.
CLOUD_CLASSES = (1, 3, 8, 9, 10, 11)


class SceneReader:
    """Windows of a scene's bands with their validity, read on demand (memory bounded by the
    window). Windows are in the scene's pixels and may reach past its edges: the parts inside
    the dataset are read (an area of interest sees its real surroundings as context), the parts
    past the dataset's edges are filled by reflection."""

    def __init__(self, scene: Scene):
        self.scene = scene
        self.src = rasterio.open(scene.dataset)
        self.mask_src = self.mask_vrt = None
        try:
            if scene.mask:
                from rasterio.vrt import WarpedVRT
                from rasterio.warp import Resampling

                self.mask_src = rasterio.open(scene.mask)
                height, width = scene.dataset_shape
                self.mask_vrt = WarpedVRT(self.mask_src, crs=scene.crs, transform=scene.dataset_transform,
                                          width=width, height=height, resampling=Resampling.nearest, nodata=0)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "SceneReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for ds in (self.mask_vrt, self.mask_src, self.src):
            if ds is not None:
                ds.close()

    def window_transform(self, window: Window):
        return self.scene.transform * Affine.translation(window.col_off, window.row_off)

    def read(self, window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(raw, valid, keep) for ``window``: the bands' DNs (bands, h, w) as stored, where
        they hold data, and where that data also counts in outputs (not cloud, not masked,
        inside the area of interest)."""
        scene = self.scene
        row0, col0 = int(window.row_off) + scene.origin[0], int(window.col_off) + scene.origin[1]
        h, w = int(window.height), int(window.width)
        H, W = scene.dataset_shape
        r0, c0 = max(row0, 0), max(col0, 0)
        r1, c1 = min(row0 + h, H), min(col0 + w, W)
        if r1 <= r0 or c1 <= c0:
            raise ValueError(f"window {window} does not overlap the scene")
        inner = Window(c0, r0, c1 - c0, r1 - r0)
        try:
            raw = self.src.read(list(scene.indexes), window=inner)
            clouds = self.src.read(scene.cloud_band, window=inner) if scene.cloud_band else None
        except RasterioIOError as exc:
            raise InputError(describe(scene.path, f"cannot be read at rows {r0}-{r1}, columns {c0}-{c1} "
                                                  f"({first_line(exc)})")) from exc
        valid = valid_mask(raw, scene.nodata)
        left_out = np.zeros(valid.shape, dtype=bool)
        if clouds is not None:
            left_out |= np.isin(clouds, CLOUD_CLASSES)
        if self.mask_vrt is not None:
            try:
                left_out |= self.mask_vrt.read(1, window=inner) != 0
            except RasterioIOError as exc:
                raise InputError(describe(scene.mask, f"--mask cannot be read ({first_line(exc)})")) from exc
        if scene.aoi:
            from rasterio.features import geometry_mask

            left_out |= geometry_mask(scene.aoi, out_shape=valid.shape, transform=self.src.window_transform(inner),
                                      all_touched=True)
        pads = ((r0 - row0, row0 + h - r1), (c0 - col0, col0 + w - c1))
        if any(p for pair in pads for p in pair):
            mode = "reflect" if min(raw.shape[1:]) > 1 else "edge"
            raw = np.pad(raw, ((0, 0), *pads), mode=mode)
            valid = np.pad(valid, pads, mode=mode)
            left_out = np.pad(left_out, pads, mode=mode)
        return raw, valid, valid & ~left_out


def read_sample(scene: Scene, size: int = 256) -> np.ndarray:
    """A decimated view of the scene's bands (at most size x size), read across the whole
    grid, so a truncated or damaged file is caught before any output is started."""
    shape = (len(scene.indexes), min(size, scene.height), min(size, scene.width))
    window = Window(scene.origin[1], scene.origin[0], scene.width, scene.height)
    try:
        with rasterio.open(scene.dataset) as src:
            return src.read(list(scene.indexes), out_shape=shape, window=window)
    except RasterioIOError as exc:
        raise InputError(describe(scene.path, f"cannot be read, damaged or truncated ({first_line(exc)})")) from exc


def check_has_valid_pixels(scene: Scene) -> np.ndarray:
    """InputError when the scene holds no valid pixel; returns the decimated sample read."""
    sample = read_sample(scene)
    if valid_mask(sample, scene.nodata).any():
        return sample
    with SceneReader(scene) as reader:  # the sample can miss a small valid area
        for row0 in range(0, scene.height, 256):
            _, valid, _ = reader.read(Window(0, row0, scene.width, min(256, scene.height - row0)))
            if valid.any():
                return sample
    raise InputError(describe(scene.path, "has no valid pixel (all nodata)"))


def valid_mask(raw: np.ndarray, nodata: float | None) -> np.ndarray:
    """Pixels that hold data: not NaN in any band, not all-nodata, not all-zero. ``raw`` is (bands, h, w)."""
    valid = np.ones(raw.shape[1:], dtype=bool)
    if raw.dtype.kind == "f":
        valid &= ~np.isnan(raw).any(axis=0)
    if nodata is not None and not (isinstance(nodata, float) and math.isnan(nodata)):
        valid &= ~(raw == nodata).all(axis=0)
    valid &= (raw != 0).any(axis=0)
    return valid


def normalise(reflectance: np.ndarray, valid: np.ndarray, spec: BandSpec) -> np.ndarray:
    """(reflectance - mean) / std per band, with nodata pixels set to 0 (the band mean)."""
    mean = np.asarray(spec.mean, dtype=np.float32)[:, None, None]
    std = np.asarray(spec.std, dtype=np.float32)[:, None, None]
    out = (reflectance - mean) / std
    out[:, ~valid] = 0.0
    np.nan_to_num(out, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    return out


def read_normalised(reader: SceneReader, window: Window, spec: BandSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The network's input for ``window`` (normalised float32 (bands, h, w); pixels without
    data at the band mean), where the output counts (``keep`` of SceneReader.read) and where
    data is left out (valid but not kept: clouds, mask, outside the AOI)."""
    raw, valid, keep = reader.read(window)
    return normalise(reader.scene.reflectance(raw), valid, spec), keep, valid & ~keep


def read_scene(path, spec: BandSpec = BandSpec(), indexes=None) -> tuple[np.ndarray, np.ndarray, Scene]:
    """A whole (small) stack as normalised array, valid mask and Scene. For chips and tests."""
    scene = replace(open_stack(path, indexes, len(spec.names)), scale=spec.scale)
    with SceneReader(scene) as reader:
        data, valid, _ = read_normalised(reader, Window(0, 0, scene.width, scene.height), spec)
    return data, valid, scene


def band_order_warnings(scene: Scene, spec: BandSpec) -> list[str]:
    """Warnings when the scene's band descriptions name other bands than the model expects."""
    warnings = []
    for pos, (index, expected) in enumerate(zip(scene.indexes, spec.names)):
        desc = scene.descriptions[index - 1] if index - 1 < len(scene.descriptions) else None
        if desc and _band_token(desc) and _band_token(desc) != _band_token(expected):
            warnings.append(
                describe(scene.path, f"band {index} is described as {desc!r} but the model reads {expected} there (input {pos + 1})")
            )
    return warnings


def scale_warning(scene: Scene, sample: np.ndarray, valid: np.ndarray) -> str | None:
    """A warning when the valid pixels' median reflectance is implausible for the scene's scale."""
    if not valid.any():
        return None
    median = float(np.median(scene.reflectance(sample)[:, valid]))
    if median > 1.5 or median < 0.002:
        return describe(
            scene.path,
            f"median reflectance is {median:.4g} with scale {scene.scale:g}; values look like another scale (see --scale)",
        )
    return None


# Below this reflectance lies the darkest 1 % of some band of nearly every scene (water,
# shadow, vegetation in the SWIR). Since processing baseline 04.00 DNs carry +1000, which
# lifts every band's darkest pixels above 0.1.
OFFSET_SUSPECT_REFLECTANCE = 0.09


def offset_warning(scene: Scene, sample: np.ndarray, valid: np.ndarray) -> str | None:
    """A warning when a stack read without offset looks like DNs that still carry the +1000 of
    processing baseline 04.00 and later: even the darkest pixels of every band are bright."""
    if scene.kind != "stack" or any(scene.offset) or valid.sum() < 100:
        return None
    darkest = np.percentile(scene.reflectance(sample)[:, valid], 1, axis=1)
    if float(darkest.min()) >= OFFSET_SUSPECT_REFLECTANCE:
        return describe(
            scene.path,
            f"even the darkest 1 % of every band is brighter than {OFFSET_SUSPECT_REFLECTANCE:g} reflectance; "
            "a stack from a product of processing baseline 04.00 or later (2022 on) stores DN = 10000 x "
            "reflectance + 1000: pass --offset -1000",
        )
    return None


def _band_token(text: str) -> str | None:
    """'B8', 'B08', 'b08 (nir)' -> 'B08'; None when the text names no Sentinel-2 band."""
    import re

    m = re.search(r"\bB0?(\d{1,2})(A?)\b", text.upper())
    if not m:
        return None
    return f"B{int(m.group(1)):02d}{m.group(2)}"


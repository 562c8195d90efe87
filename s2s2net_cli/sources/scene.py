"""A scene, opened and checked, and the reader of its windows.

A ``Scene`` is what every source (sources/open.py) opens to: its 10 m grid, where its six bands
are and how their DNs become reflectance, (DN + offset) / scale, and which pixels count (L2A
scene classes, a raster of pixels to leave out, an area of interest). ``SceneReader`` reads
windows of it with where they hold data (formats.valid_mask) and where that data counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine
from rasterio.errors import RasterioIOError
from rasterio.features import geometry_mask
from rasterio.vrt import WarpedVRT
from rasterio.warp import Resampling
from rasterio.windows import Window

from .. import remedies
from ..bands import BAND_NAMES, DEFAULT_SCALE, SWIR_BANDS, BandSpec, band_name, normalise, repeated_band
from ..errors import first_line
from ..formats import gdal_empty, gdal_masked, source_name, valid_mask
from ..grid import is_rotated, is_south_up
from ..io import gdal_threads
from ..labels import check_gridded
from ..polygons import open_layer
from ..rulebook import Phrase, refuse

_REFLECTANCE_DTYPES = {"uint16", "int16", "uint32", "int32", "float32", "float64"}


@dataclass(frozen=True)
class Scene:
    """An opened, checked scene: its grid, where its pixels are and how to read them.

    ``path`` is what the user named (a stack, a product folder or zip, a STAC item, a URL);
    ``dataset`` is what GDAL opens (the stack itself, or a VRT of a product's band files).
    The grid (crs, transform, width, height) is the part read: the whole dataset, or the
    window ``origin`` (row, col) of an area of interest. Reflectance = (DN + offset) / scale.
    Pixels of ``cloud_band`` in CLOUD_CLASSES, nonzero in ``leave_out`` (a raster on any grid),
    touched by ``leave_out_shapes`` (its polygons, in the scene's CRS, when it is a vector file)
    or outside ``aoi`` (shapes in the scene's CRS) are left out of outputs and scores but still
    seen as context.
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
    order_assumed: bool = False  # a stack whose bands say nothing, read in the model's order
    leave_out: str | None = None
    leave_out_shapes: tuple = ()
    origin: tuple[int, int] = (0, 0)
    dataset_shape: tuple[int, int] = (0, 0)
    aoi: tuple = ()
    aoi_name: str = ""  # what the area of interest was given as (--bbox W,S,E,N, or its file)

    def __post_init__(self):
        if not self.dataset:
            object.__setattr__(self, "dataset", str(self.path))
        if self.dataset_shape == (0, 0):
            object.__setattr__(self, "dataset_shape", (self.height, self.width))

    @property
    def radiometry_by_options(self) -> bool:
        """Whether its scale and offset are --scale's and --offset's (a stack, a folder of band
        files), not its own metadata's (a product, a STAC item)."""
        return self.kind in ("stack", "band folder")

    @property
    def shape(self) -> tuple[int, int]:
        return self.height, self.width

    @property
    def name(self) -> str:
        """A short name for tags and messages: the file or folder name, not its whole path."""
        return source_name(self.path)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(left, bottom, right, top) of the scene's grid, in its CRS."""
        right, bottom = self.transform @ (self.width, self.height)
        return self.transform.c, bottom, right, self.transform.f

    @property
    def dataset_transform(self):
        """The transform of the whole dataset (the scene's grid may be a window of it)."""
        return self.transform @ Affine.translation(-self.origin[1], -self.origin[0])

    def reflectance(self, raw: np.ndarray) -> np.ndarray:
        """(bands, h, w) DNs as float32 reflectance: (DN + offset) / scale."""
        offset = np.asarray(self.offset, dtype=np.float32)[:, None, None]
        return (raw.astype(np.float32) + offset) / np.float32(self.scale)


SCENE_SUFFIXES = (".tif", ".tiff", ".vrt", ".zip", ".safe", ".json")  # what may be a scene, named in a folder


def _scenes_held(folder: Path) -> str:
    """What a folder given as a scene holds that may be scenes, as its refusal says it (a user
    who meant its scenes: ``predict scenes/`` for ``predict scenes/*.tif``); "" when nothing,
    or when its files are bands (``..._B02_10m.tif``) of more than one name, one band each
    (scenes named Red_River_2023.tif and Blue_Nile_2022.tif are scenes)."""
    try:
        held = sorted(p for p in folder.iterdir() if p.suffix.lower() in SCENE_SUFFIXES)
    except OSError:
        return ""
    bands = {band_name(word) for p in held for word in re.split(r"[_.\- ]", p.stem)} - {None}
    if not held or (len(bands) > 1 and not any(band_count(p) > 1 for p in held)):
        return ""
    suffixes = {p.suffix for p in held}
    pattern = folder / ("*" + suffixes.pop() if len(suffixes) == 1 else "*")
    names = ", ".join(p.name for p in held[:2]) + (", ..." if len(held) > 2 else "")
    return f" (it holds {len(held)} files that may be scenes: {names}; name each, as {pattern})"


def band_count(path) -> int:
    """How many bands the raster ``path`` holds; 0 where it cannot be read."""
    try:
        with rasterio.open(path) as src:
            return src.count
    except RasterioIOError:
        return 0


def open_stack(path, indexes: tuple[int, ...] | None = None, n_bands: int = len(BAND_NAMES)) -> Scene:
    """Open a GeoTIFF/VRT stack ``path`` and check that it can be read as a reflectance scene.

    ``indexes`` are the 1-based bands to read, in the model's band order; without them the
    stack's own band descriptions (or colour interpretation) say which band is which, and a
    stack that says nothing is read as B02, B03, B04, B08, B11, B12 only when it has six bands.
    A band described as SCL holds L2A scene classes: its clouds are left out, as a product's are.
    Raises InputError naming the file for anything that cannot be a scene, or whose bands
    cannot be told apart.
    """
    try:
        with rasterio.open(path) as src:
            crs, transform, gcps = src.crs, src.transform, src.gcps
            width, height, count, dtype = src.width, src.height, src.count, src.dtypes[0]
            nodata, descriptions = src.nodata, tuple(src.descriptions)
            named = tuple(band_name(d) or band_name(c.name) for d, c in zip(src.descriptions, src.colorinterp))
    except RasterioIOError as exc:
        if Path(path).is_dir():  # not a product's folder (open_scene reads those): a folder of band files, say
            raise refuse("S2N-SCENE-IS-FOLDER", path, holds=_scenes_held(Path(path))) from exc
        if open_layer(path) is not None:  # water polygons given where the scene belongs
            raise refuse("S2N-SCENE-IS-VECTOR", path) from exc
        raise refuse("S2N-SCENE-UNREADABLE", path, error=first_line(exc)) from exc
    scl = [i for i, d in enumerate(descriptions, start=1) if d and d.strip().upper() in SCL_NAMES]
    check_grid(path, crs, transform, (width, height), gcps)
    if dtype not in _REFLECTANCE_DTYPES:
        mask_like = ": a mask, perhaps (one band of bytes); of a pair, the scene comes first and its mask second" \
            if count == 1 else ""
        raise refuse("S2N-SCENE-DTYPE", path, dtype=dtype, mask_like=mask_like)
    order_assumed = indexes is None and not any(named)
    if indexes is None:
        indexes = stack_band_indexes(path, named, BAND_NAMES if n_bands == len(BAND_NAMES) else None, n_bands)
    else:
        indexes = tuple(int(i) for i in indexes)
        if len(indexes) != n_bands:
            raise refuse("S2N-BANDS-COUNT", path, count=len(indexes), n_bands=n_bands)
        bad = [i for i in indexes if not 1 <= i <= count]
        if bad:
            raise refuse("S2N-BANDS-INDEX", path, count=count, index=bad[0])
        twice = repeated_band(indexes)
        if twice:
            raise refuse(twice.code, path, **twice.values)
    return Scene(str(path), crs, transform, width, height, dtype, count, indexes, nodata, descriptions,
                 cloud_band=scl[0] if len(scl) == 1 else None, order_assumed=order_assumed)


def lacking(named: tuple[str | None, ...]) -> str:
    """What a stack whose bands are ``named`` lacks of the model's, said where its bands are named
    (a stack of the 10 m bands alone lacks the 20 m SWIR ones); empty where none is named."""
    if not any(named):
        return ""
    missing = [band for band in BAND_NAMES if band not in named]
    twenty = [band for band in missing if band in SWIR_BANDS]
    said = f": it lacks {', '.join(missing)}"
    if twenty:
        said += f" ({', '.join(twenty)} are 20 m bands: resample them to its 10 m grid and add them, or give the product itself)"
    return said


def stack_band_indexes(path, named: tuple[str | None, ...], wanted: tuple[str, ...] | None, n_bands: int) -> tuple:
    """The 1-based indexes of the ``wanted`` bands in a stack whose bands are ``named`` (from
    their descriptions; None where a band says nothing): found by name when every wanted band
    is named once; 1..n when the stack has exactly n bands and no name contradicts that order;
    else InputError asking for --bands."""
    count, needs = len(named), ", ".join(BAND_NAMES)
    if count < n_bands:
        raise refuse("S2N-SCENE-BAND-COUNT", path, count=count, n_bands=n_bands, needs=needs, lacking=lacking(named))
    if wanted is not None:
        where = {band: [i for i, n in enumerate(named, start=1) if n == band] for band in wanted}
        if all(len(found) == 1 for found in where.values()):
            return tuple(where[band][0] for band in wanted)
        if count == n_bands and all(n is None or n == band for n, band in zip(named, wanted)):
            return tuple(range(1, n_bands + 1))
    if count == n_bands and not any(named):
        return tuple(range(1, n_bands + 1))
    said = ", ".join(f"{i}={n}" for i, n in enumerate(named, start=1) if n) or "nothing"
    whole = WHOLE_PRODUCT_ORDERS.get(count) if not any(named) else None
    product = Phrase("") if whole is None else Phrase(
        f"; a stack of all {count} bands of {whole[0]} in ESA's order ({whole[1]}) is "
        + "{o.bands:" + ",".join(str(whole[1].split(", ").index(b) + 1) for b in BAND_NAMES) + "}")
    raise refuse("S2N-BANDS-AMBIGUOUS", path, count=count, needs=needs, said=said, product=product)


# the bands of a whole product in ESA's order, as a stack of all of them (Earth Engine's, a
# SNAP export) holds them: an unnamed stack of this many bands is likely one
WHOLE_PRODUCT_ORDERS = {
    12: ("L2A", "B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B11, B12"),
    13: ("L1C", "B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B10, B11, B12"),
}


def check_grid(path, crs, transform, size: tuple[int, int] = (0, 0), gcps: tuple = ((), None)) -> None:
    """InputError unless the grid is georeferenced, north-up and unrotated; one georeferenced
    by ground control points (``gcps``: rasterio's points and their CRS) or rotated is told the
    ``rio warp`` that puts it on a grid."""
    check_gridded(path, crs, gcps, resolution=10)
    if crs is None:
        raise refuse("S2N-SCENE-NO-CRS", path)
    if is_rotated(transform):
        how = remedies.onto_grid(path, crs, *(transform @ (size[0] / 2, size[1] / 2)), resolution=10)
        raise refuse("S2N-SCENE-ROTATED", path, how=how)
    if transform.is_identity or transform.a <= 0 or transform.e == 0:
        raise refuse("S2N-SCENE-NO-TRANSFORM", path)
    if is_south_up(transform):
        raise refuse("S2N-RASTER-SOUTH-UP", path, fix=remedies.north_up(path))


# Scene classification (L2A SCL) classes left out unless --keep-clouds: saturated or
# defective, cloud shadow, cloud medium and high probability, thin cirrus, snow.
CLOUD_CLASSES = (1, 3, 8, 9, 10, 11)
SCL_NAMES = ("SCL", "SCENE CLASSIFICATION")  # the description of a stack's band of L2A scene classes


class SceneReader:
    """Windows of a scene's bands with their validity, read on demand (memory bounded by the
    window). Windows are in the scene's pixels and may reach past its edges: the parts inside
    the dataset are read (an area of interest sees its real surroundings as context), the parts
    past the dataset's edges are filled by reflection."""

    def __init__(self, scene: Scene):
        self.scene = scene
        self.src = open_for_reading(scene.dataset)
        self.masked_by_gdal = gdal_masked(self.src)  # an alpha band, an internal or .msk mask
        self.leave_out_src = self.leave_out_vrt = None
        try:
            if scene.leave_out and not scene.leave_out_shapes:
                self.leave_out_src = rasterio.open(scene.leave_out)
                height, width = scene.dataset_shape
                # outside the file, and its own nodata, are NaN: a nodata of 0 (kept) made GDAL 3.11 on
                # write the file's every 0 as 1, and the whole scene was left out
                self.leave_out_vrt = WarpedVRT(self.leave_out_src, crs=scene.crs, transform=scene.dataset_transform,
                                               width=width, height=height, resampling=Resampling.nearest,
                                               dtype="float32", nodata=np.nan)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "SceneReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for ds in (self.leave_out_vrt, self.leave_out_src, self.src):
            if ds is not None:
                ds.close()

    def window_transform(self, window: Window):
        return self.scene.transform @ Affine.translation(window.col_off, window.row_off)

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
            empty = gdal_empty(self.src, inner) if self.masked_by_gdal else None
        except RasterioIOError as exc:
            raise refuse("S2N-SCENE-WINDOW-UNREADABLE", scene.path, r0=r0, r1=r1, c0=c0, c1=c1, error=first_line(exc)) from exc
        valid = valid_mask(raw, scene.nodata) if empty is None else valid_mask(raw, scene.nodata) & ~empty
        left_out = np.zeros(valid.shape, dtype=bool)
        if clouds is not None:
            left_out |= np.isin(clouds, CLOUD_CLASSES)
        if self.leave_out_vrt is not None:
            try:
                flags = self.leave_out_vrt.read(1, window=inner)
                left_out |= (flags != 0) & ~np.isnan(flags)
            except RasterioIOError as exc:
                raise refuse("S2N-LEAVE-OUT-READ-FAILED", scene.leave_out, error=first_line(exc)) from exc
        if scene.leave_out_shapes:
            left_out |= ~geometry_mask(scene.leave_out_shapes, out_shape=valid.shape,
                                       transform=self.src.window_transform(inner), all_touched=True)
        if scene.aoi:
            left_out |= geometry_mask(scene.aoi, out_shape=valid.shape, transform=self.src.window_transform(inner),
                                      all_touched=True)
        pads = ((r0 - row0, row0 + h - r1), (c0 - col0, col0 + w - c1))
        if any(p for pair in pads for p in pair):
            mode = "reflect" if min(raw.shape[1:]) > 1 else "edge"
            raw = np.pad(raw, ((0, 0), *pads), mode=mode)
            valid = np.pad(valid, pads, mode=mode)
            left_out = np.pad(left_out, pads, mode=mode)
        return raw, valid, valid & ~left_out


def open_for_reading(dataset):
    """A scene's dataset opened to read its bands, GDAL decoding each read's blocks in parallel."""
    with gdal_threads():
        return rasterio.open(dataset)


def read_sample(scene: Scene, size: int = 256) -> np.ndarray:
    """A decimated view of the scene's bands (at most size x size, the pixels GDAL's nearest
    decimation picks), read across the whole grid, so a truncated or damaged file is caught
    before any output is started."""
    shape = (len(scene.indexes), min(size, scene.height), min(size, scene.width))
    window = Window(scene.origin[1], scene.origin[0], scene.width, scene.height)
    try:
        with open_for_reading(scene.dataset) as src:
            if src.driver == "GTiff" and not src.overviews(scene.indexes[0]) and shape[1:] != (scene.height, scene.width):
                return _sample_by_blocks(src, scene, shape)
            return src.read(list(scene.indexes), out_shape=shape, window=window)
    except RasterioIOError as exc:
        raise refuse("S2N-SCENE-DAMAGED", scene.path, error=first_line(exc)) from exc


SAMPLE_WINDOW = (256, 4096)  # rows and columns (at least: whole blocks) of a window read for a sample


def _sample_by_blocks(src, scene: Scene, shape: tuple[int, int, int]) -> np.ndarray:
    """``read_sample`` of a GeoTIFF without overviews: its windows of whole blocks read one after
    the other, the sampled pixels kept. GDAL's own decimated read of such a file decodes every
    block too, about four times slower (24 s against 6 s on a full tile's 1.2 GB GeoTIFF).
    Elsewhere GDAL's read is left to do it: from a COG's overviews, from a JPEG 2000's coarser
    resolution levels (a product's bands, through their VRT), without decoding every block."""
    (top, left), (height, width) = scene.origin, (scene.height, scene.width)
    rows = top + np.floor((np.arange(shape[1]) + 0.5) * height / shape[1]).astype(int)
    cols = left + np.floor((np.arange(shape[2]) + 0.5) * width / shape[2]).astype(int)
    block_rows, block_cols = src.block_shapes[scene.indexes[0] - 1]
    step_r = block_rows * -(-SAMPLE_WINDOW[0] // block_rows)
    step_c = block_cols * -(-SAMPLE_WINDOW[1] // block_cols)
    out = np.empty(shape, dtype=src.dtypes[scene.indexes[0] - 1])
    for r0 in range(top - top % block_rows, top + height, step_r):
        r, r1 = max(r0, top), min(r0 + step_r, top + height)
        i0, i1 = np.searchsorted(rows, [r, r1])  # the sampled rows in [r, r1): rows are sorted
        for c0 in range(left - left % block_cols, left + width, step_c):
            c, c1 = max(c0, left), min(c0 + step_c, left + width)
            j0, j1 = np.searchsorted(cols, [c, c1])
            data = src.read(list(scene.indexes), window=Window(c, r, c1 - c, r1 - r))
            out[:, i0:i1, j0:j1] = data[:, rows[i0:i1] - r][:, :, cols[j0:j1] - c]
    return out


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
    raise refuse("S2N-SCENE-ALL-NODATA", scene.path)


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

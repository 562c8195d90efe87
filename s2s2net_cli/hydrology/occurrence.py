"""Water occurrence over many dates of one place, with JRC Global Surface Water's definitions.

For each pixel of one output grid: how many dates saw it valid (not nodata: not cloud, shadow,
snow, outside the scene or the area of interest), how many of those saw water, and the
occurrence, water / valid in percent. Each date's 2 m mask (predicted by ``predict``'s code,
or given: a 0/1 mask with nodata, or a ``predict --probability`` raster, read as water from
the threshold in its tags) is brought onto the output grid by nearest (the same grid is read
as it is) and counted window by window, so memory holds one window's counts and one date's
window, whatever the number of dates and the size of the grid. Under a launcher the dates are
shared among the ranks and each window's counts summed across them.

Optional classes (``classes``): 0 never water, 1 seasonal (occurrence under
``PERMANENT_FROM`` percent), 2 permanent (water on at least ``PERMANENT_FROM`` percent of the
valid dates); 255 never seen.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.vrt import WarpedVRT
from rasterio.warp import transform_bounds
from rasterio.windows import Window

from .. import remedies
from ..bands import BAND_NAMES
from ..errors import InputError, S2S2NetError
from ..formats import (
    OCCURRENCE_FILE,
    OCCURRENCE_SOFTWARE,
    PERMANENT_FROM,
    PERMANENT_TAG,
    WATER,
    check_each_source_once,
    check_exists,
    probability_cut,
)
from ..grid import grid_shift, is_south_up, row_pixel_areas
from ..io import (
    atomic_path,
    check_creation_options,
    check_output,
    check_writable,
    copy_to_cog,
    geotiff_profile,
    make_folder,
    temporary_sibling,
)
from ..labels import MAX_VALUES_NAMED, NODATA_TAG, check_gridded, check_nodata_value, check_one_band, unexpected_values
from ..rulebook import code_of, finding, refuse
from ..sources.dates import acquisition
from ..world import World

WINDOW = 2048
OUTSIDE = -2 ** 31  # where a warped mask has no pixel, in its working type (int32): no mask value
PROCESS_GROUP_TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class Grid:
    crs: object
    transform: object
    width: int
    height: int

    @classmethod
    def of(cls, path) -> "Grid":
        check_exists(path)
        try:
            with rasterio.open(path) as src:
                grid = cls(src.crs, src.transform, src.width, src.height)
                check_gridded(path, src.crs, src.gcps)
        except rasterio.errors.RasterioIOError as exc:
            raise refuse("S2N-RASTER-UNREADABLE", path) from exc
        if grid.crs is not None and is_south_up(grid.transform):  # no CRS: GDAL's identity, said by the caller
            raise refuse("S2N-RASTER-SOUTH-UP", path, fix=remedies.north_up(path))
        return grid

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(left, bottom, right, top)."""
        north, west = self.transform.f, self.transform.c
        south, east = north + self.transform.e * self.height, west + self.transform.a * self.width
        return min(west, east), min(north, south), max(west, east), max(north, south)


@dataclass
class OccurrenceOptions:
    classes: bool = False
    strict: bool = False  # stop at a date that fails instead of skipping it
    window: int = WINDOW
    cog: bool = False
    creation_options: dict = field(default_factory=dict)
    overwrite: bool = False

    def __post_init__(self):
        check_creation_options(self.creation_options, self.cog)


@dataclass
class DateMask:
    source: str  # the scene (or mask) the user named
    date: str | None
    mask: str | Path | None = None  # its 2 m mask, given (None in a summary where it was predicted: a scratch file)
    water_km2: float = 0.0
    valid_share: float = 0.0  # of the output grid
    error: str | None = None
    warnings: list = field(default_factory=list)  # what reading its scene said (predict's findings)
    code: str | None = None  # the rule its error was raised by

    def to_dict(self) -> dict:
        out = {"source": self.source, "date": self.date, "water_km2": round(self.water_km2, 6),
               "valid_share": round(self.valid_share, 6), "warnings": [w.to_dict() for w in self.warnings]}
        return out if self.error is None else {"source": self.source, "date": self.date, "error": self.error,
                                               "code": self.code}


@dataclass
class OccurrenceSummary:
    output: str
    dates: list = field(default_factory=list)  # DateMask counted, in date order
    skipped: list = field(default_factory=list)  # DateMask that failed, with their error
    width: int = 0
    height: int = 0
    ever_water_km2: float = 0.0
    permanent_water_km2: float | None = None

    def to_dict(self) -> dict:
        return {"output": self.output, "dates": [d.to_dict() for d in self.dates],
                "skipped": [d.to_dict() for d in self.skipped], "counted": len(self.dates),
                "width": self.width, "height": self.height, "ever_water_km2": round(self.ever_water_km2, 6),
                "permanent_water_km2": None if self.permanent_water_km2 is None else round(self.permanent_water_km2, 6)}


def water_occurrence(dates: list[DateMask], out_path, grid: Grid, options: OccurrenceOptions = OccurrenceOptions(),
                     predict: Callable[[str, Path], list[str]] | None = None, world: World = World(),
                     on_progress: Callable[[int, int], None] | None = None) -> OccurrenceSummary | None:
    """Count ``dates`` onto ``grid`` and write ``out_path``. With ``predict(source, mask_path)``
    (returning what reading the scene warned of, kept on its date) each date's mask is predicted
    first (into a temporary folder beside the output, removed at the end); without it each
    date's ``mask`` is read. The summary on the leading rank, None on the others."""
    check_each_date_once(dates)
    if world.leads:  # the name as given: a Path would lose a trailing /
        check_output(out_path, options.overwrite, inputs=[d.source for d in dates], kind=OCCURRENCE_FILE)
    out_path = Path(out_path)
    if world.is_shared:
        world.join(PROCESS_GROUP_TIMEOUT)
    mine = dates[world.rank::world.size]
    if predict:  # its masks go beside the output first
        make_folder(out_path.parent, out_path)
        check_writable(temporary_sibling(out_path), out_path)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out_path.stem}.dates", dir=out_path.parent or ".")) if predict else None
    try:
        for k, d in enumerate(mine):
            _prepare(d, grid, predict, scratch, k, options.strict)
        counted = [d for d in mine if d.error is None]
        summary = _count_and_write(counted, out_path, grid, options, world, on_progress)
        everyone = _gather(mine, world)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if world.is_shared:
            World.leave()
    if not world.leads:
        return None
    if predict:  # the masks were scratch files, removed: no path to a file that is not there
        everyone = [replace(d, mask=None) for d in everyone]
    summary.dates = sorted([d for d in everyone if d.error is None], key=lambda d: (d.date is None, d.date or "", d.source))
    summary.skipped = [d for d in everyone if d.error is not None]
    return summary


def check_each_date_once(dates: list[DateMask]) -> None:
    """InputError when one file is named twice, or one Sentinel-2 acquisition twice (a product's
    .zip and its .SAFE folder, its L1C and its L2A, two masks predicted from it): it would be
    counted as two dates, and its water weighed twice in every pixel's occurrence."""
    check_each_source_once(d.source for d in dates)
    acquisitions = {}
    for d in dates:
        key = acquisition(d.source)
        if key in acquisitions:
            raise refuse("S2N-OCCURRENCE-ACQUISITION-TWICE", d.source, other=acquisitions[key], acquisition=' '.join(key))
        if key:
            acquisitions[key] = d.source


def _prepare(d: DateMask, grid: Grid, predict, scratch: Path | None, k: int, strict: bool) -> None:
    """Predict (or check) one date's mask; a failure is recorded on it, or raised with ``strict``."""
    try:
        if predict is not None:
            d.mask = scratch / f"{k:04d}.tif"
            d.warnings += list(predict(d.source, d.mask) or [])
        _check_mask(d, grid)
    except S2S2NetError as exc:
        if strict:
            raise
        d.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        d.code = code_of(exc)


def _check_mask(d: DateMask, grid: Grid) -> None:
    """InputError unless the date's mask can be read, overlaps the grid and, when it is a 0/1
    mask, has a nodata value that is neither land's 0 nor water's 1 (a GDAL tool's nodata 0 would
    leave all its land unseen: water on every date it is seen)."""
    try:
        with rasterio.open(d.mask) as src:
            scene_like = src.count >= len(BAND_NAMES)  # six bands or more: a scene given as a mask
            check_one_band(d.mask, src.count, scene_like)
            check_gridded(d.mask, src.crs, src.gcps)
            if src.crs is None:
                raise refuse("S2N-MASK-NO-CRS", d.mask)
            if is_south_up(src.transform):
                raise refuse("S2N-RASTER-SOUTH-UP", d.mask, fix=remedies.north_up(d.mask))
            left, bottom, right, top = transform_bounds(src.crs, grid.crs, *src.bounds)
            shift = grid_shift(src.transform, grid.transform, factor=1) if src.crs == grid.crs else None
            if shift is not None:  # counted onto the grid, each cell read partly from its neighbours
                d.warnings.append(finding("S2N-GRID-SHIFT-OUTPUT", d.mask, dx=shift[0], dy=shift[1]))
            if probability_cut(src.tags()) is None:
                check_nodata_value(d.mask, src.nodata, NODATA_TAG)
    except rasterio.errors.RasterioIOError as exc:
        raise refuse("S2N-OCCURRENCE-MASK-UNREADABLE", d.mask) from exc
    g_left, g_bottom, g_right, g_top = grid.bounds
    if left >= g_right or right <= g_left or bottom >= g_top or top <= g_bottom:
        raise refuse("S2N-OCCURRENCE-NO-OVERLAP", d.source)


def _count_and_write(dates: list[DateMask], out_path: Path, grid: Grid, options: OccurrenceOptions, world: World,
                     on_progress) -> OccurrenceSummary:
    """Count window by window (summed across ranks) and write the output on the leading rank."""
    n_dates = len(dates)
    total = torch_sum([n_dates], world)[0] if world.is_shared else n_dates
    dtype, nodata = ("uint8", 255) if total < 255 else ("uint16", 65535)
    bands = 4 if options.classes else 3
    summary = OccurrenceSummary(output=str(out_path), width=grid.width, height=grid.height,
                                permanent_water_km2=0.0 if options.classes else None)
    windows = [Window(c, r, min(options.window, grid.width - c), min(options.window, grid.height - r))
               for r in range(0, grid.height, options.window) for c in range(0, grid.width, options.window)]
    sources = [_open_on_grid(d, grid) for d in dates]
    try:
        with _OutputFile(out_path, grid, bands, dtype, nodata, options, world) as dst:
            for k, window in enumerate(windows, start=1):
                water = np.zeros((int(window.height), int(window.width)), dtype=np.int32)
                valid = np.zeros_like(water)
                if k == 1 or window.row_off != windows[k - 2].row_off:  # a band of rows: its pixels' areas
                    row_km2 = row_pixel_areas(grid.crs, grid.transform, int(window.row_off), int(window.height),
                                              grid.width) / 1e6
                stop = None
                for d, src in zip(dates, sources):
                    try:
                        wet, seen = src.read_water(window)
                    except InputError as exc:
                        stop = exc
                        break
                    valid += seen
                    water += wet
                    d.water_km2 += float(wet.sum(axis=1) @ row_km2)
                    d.valid_share += float(seen.sum()) / (grid.width * grid.height)
                _stop_together(stop, world)
                if world.is_shared:
                    counts = torch_sum(np.stack([water, valid]), world)
                    water, valid = counts[0], counts[1]
                if dst is not None:
                    _write_window(dst, window, water, valid, options.classes, nodata, summary, row_km2)
                if on_progress:
                    on_progress(k, len(windows))
    finally:
        for src in sources:
            src.close()
    return summary


def _stop_together(error: InputError | None, world: World) -> None:
    """Raise ``error`` on this rank, and on every rank when one of them has one (each rank reads
    its own dates: one that stopped alone would leave the others waiting in the next sum)."""
    if world.is_shared and torch_sum([error is not None], world)[0] and error is None:
        error = refuse("S2N-OCCURRENCE-RANK-FAILED")
    if error is not None:
        raise error


def _open_on_grid(d: DateMask, grid: Grid) -> "_MaskOnGrid":
    return _MaskOnGrid(rasterio.open(d.mask), grid)


class _MaskOnGrid:
    """A date's mask read on the output grid, window by window, as water and seen: itself when
    it is on that grid, else a nearest-neighbour WarpedVRT of it in a wider type, whose
    OUTSIDE value no mask pixel can hold. Seen: not the file's nodata (only a value its tags
    declare), not NaN, not outside. A probability raster is water from its threshold. A mask
    holding other values than 0, 1 and its nodata (a 255 with no nodata tag, a class raster) is
    an InputError as it is read, rather than counted as land or unseen (checked while counting:
    a whole pass more would double the time of a full tile). Closed with its source."""

    def __init__(self, src, grid: Grid):
        self.src, self.cut, self.nodata = src, probability_cut(src.tags()), src.nodata
        kind = np.dtype(src.dtypes[0]).kind
        if kind in "iu":  # compared as integers: a float would make each test a float one
            self.cut = None if self.cut is None else math.ceil(self.cut)
            self.nodata = None if self.nodata is None or self.nodata != int(self.nodata) else int(self.nodata)
        same = src.crs == grid.crs and src.transform == grid.transform and (src.width, src.height) == (grid.width,
                                                                                                     grid.height)
        self.floating = kind == "f"
        self.vrt = None if same else WarpedVRT(
            src, crs=grid.crs, transform=grid.transform, width=grid.width, height=grid.height,
            resampling=Resampling.nearest, src_nodata=src.nodata, nodata=np.nan if self.floating else OUTSIDE,
            dtype="float32" if self.floating else "int32")

    def read_water(self, window) -> tuple[np.ndarray, np.ndarray]:
        data = (self.vrt or self.src).read(1, window=window)
        if self.floating:
            seen = ~np.isnan(data)
            if self.vrt is None and self.nodata is not None and not np.isnan(self.nodata):
                seen &= data != self.nodata
        else:
            blank = OUTSIDE if self.vrt is not None else self.nodata  # the file's nodata became OUTSIDE in the VRT
            seen = data != blank if blank is not None else np.ones(data.shape, dtype=bool)
        if self.cut is not None:
            return seen & (data >= self.cut), seen
        if self._others(data, seen):
            values = np.unique(data[seen & (data != 0) & (data != WATER)])[:MAX_VALUES_NAMED].tolist()
            raise unexpected_values(self.src.name, values, self.nodata, NODATA_TAG)
        return seen & (data == WATER), seen

    def _others(self, data: np.ndarray, seen: np.ndarray) -> bool:
        """Whether a seen pixel holds another value than 0 and 1 (cheaply where none is above 1)."""
        if data.dtype.kind == "u":  # unsigned: only values above 1 can be others; a max is one fast pass
            return int(data.max(initial=0)) > WATER and bool(((data > WATER) & seen).any())
        if self.vrt is not None and not self.floating:  # unseen pixels hold OUTSIDE, below 0
            return bool((data > WATER).any()) or bool(((data < 0) & seen).any())
        return bool((seen & (data != 0) & (data != WATER)).any())

    def close(self):
        if self.vrt is not None:
            self.vrt.close()
        self.src.close()


def torch_sum(values, world: World):
    """``values`` (a list or array of integers) summed across the ranks of ``world``."""
    import torch  # heavy: only a shared run needs it
    import torch.distributed as dist

    tensor = torch.as_tensor(np.asarray(values, dtype=np.int64))
    dist.all_reduce(tensor)
    return tensor.numpy()


def _gather(mine: list[DateMask], world: World) -> list[DateMask]:
    if not world.is_shared:
        return list(mine)
    import torch.distributed as dist  # heavy: only a shared run gathers

    gathered = [None] * world.size
    dist.all_gather_object(gathered, [(d.source, d.date, d.water_km2, d.valid_share, d.error, d.warnings,
                                       d.code) for d in mine])
    return [DateMask(s, date, None, w, v, e, said, code) for part in gathered for (s, date, w, v, e, said, code) in part]


class _OutputFile:
    """The output GeoTIFF opened on the leading rank under a temporary name (None elsewhere),
    renamed when whole (a COG is made from it then)."""

    def __init__(self, path: Path, grid: Grid, bands: int, dtype: str, nodata: int, options: OccurrenceOptions,
                 world: World):
        self.path, self.grid, self.bands, self.dtype, self.nodata = path, grid, bands, dtype, nodata
        self.options, self.world = options, world

    def __enter__(self):
        if not self.world.leads:
            return None
        self.atomic = atomic_path(self.path)
        self.tmp = self.atomic.__enter__()
        user = None if self.options.cog else self.options.creation_options  # a COG's are the copy's
        self.profile = geotiff_profile((self.bands, self.grid.height, self.grid.width), self.dtype, self.grid.crs,
                                       self.grid.transform, self.nodata, creation_options=user)
        self.gtiff = temporary_sibling(self.tmp) if self.options.cog else self.tmp
        self.dst = rasterio.open(self.gtiff, "w", **self.profile)
        names = ["occurrence (percent of valid dates seen as water)", "water count (dates seen as water)",
                 "valid count (dates seen)"] + (["class (0 never water, 1 seasonal, 2 permanent)"] if self.bands == 4
                                                else [])
        self.dst.descriptions = tuple(names)
        self.dst.update_tags(**{PERMANENT_TAG: str(PERMANENT_FROM), "software": OCCURRENCE_SOFTWARE})
        return self.dst

    def __exit__(self, kind, value, traceback):
        if not self.world.leads:
            return False
        self.dst.close()
        try:
            if kind is None and self.options.cog:
                copy_to_cog(self.gtiff, self.tmp, self.profile, self.options.creation_options, "NEAREST")
        finally:
            if self.options.cog:
                self.gtiff.unlink(missing_ok=True)
        return self.atomic.__exit__(kind, value, traceback)


def _write_window(dst, window: Window, water: np.ndarray, valid: np.ndarray, classes: bool, nodata: int,
                  summary: OccurrenceSummary, row_km2: np.ndarray) -> None:
    """Write one window's bands; add its areas (``row_km2``: a pixel's area in each of its rows)
    to the summary."""
    seen = valid > 0
    occurrence = np.full(water.shape, nodata, dtype=np.int64)
    occurrence[seen] = np.round(100.0 * water[seen] / valid[seen])
    dst.write(occurrence.astype(dst.dtypes[0]), 1, window=window)
    dst.write(water.astype(dst.dtypes[0]), 2, window=window)
    dst.write(valid.astype(dst.dtypes[0]), 3, window=window)
    summary.ever_water_km2 += float((water > 0).sum(axis=1) @ row_km2)
    if classes:
        cls = np.full(water.shape, nodata, dtype=np.int64)
        cls[seen] = np.where(occurrence[seen] >= PERMANENT_FROM, 2, np.where(water[seen] > 0, 1, 0))
        dst.write(cls.astype(dst.dtypes[0]), 4, window=window)
        summary.permanent_water_km2 += float((cls == 2).sum(axis=1) @ row_km2)

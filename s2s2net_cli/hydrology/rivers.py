"""River centrelines and widths from a water mask, window by window, into a GeoPackage.

The mask is read in windows of ``window`` px with a margin of ``margin`` px on every side;
each window's centrelines and transects are computed on the window with its margin and only
the parts inside the window itself are kept, so memory is bounded by one window whatever the
mask's size. The pieces of a centreline cut at window borders are joined afterwards
(``shapely.line_merge``); junctions split reaches. The GeoPackage has two layers:

- ``reaches`` (LineString): ``reach_id``, ``length_m``, ``width_median_m``, ``width_min_m``,
  ``width_max_m``, ``transects``;
- ``widths`` (Point, a transect's centre every ``spacing``): ``reach_id``, ``distance_m``
  (along the reach from its first vertex), ``width_m`` and ``flag`` (``bank``, ``island`` or
  ``edge``: see ``widths``).

Widths are measured at least every ``MEASURE_STEP_M`` (an odd fraction of ``spacing``, so that
every transect the widths layer has is one of them): a reach's statistics, which reaches are
kept and where open water cuts a centreline do not depend on ``spacing``, which only thins
the widths layer.

Water bodies smaller than ``min_area_m2`` are left out before the skeleton is drawn; the
skeleton is cut where the water is wider than ``max_width_m`` (lakes and the sea, whose
skeleton is no river: a creek running into the sea ends at its mouth); reaches whose median
width is below ``min_width_m`` (noise, ditches under the mask's detail) or above
``max_width_m`` are left out.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio
import shapely
from rasterio.windows import Window
from scipy.spatial import cKDTree
from shapely import line_merge
from shapely.geometry import LineString, MultiLineString, Point, box
from shapely.ops import substring

from .. import remedies
from ..bands import BAND_NAMES
from ..formats import NODATA, RIVERS_FILE, WATER, check_exists, occurrence_cut, probability_cut, raster_in_zip
from ..grid import linear_scales
from ..io import atomic_path, check_output
from ..labels import NODATA_TAG, check_gridded, check_label, check_one_band, open_label
from ..option_checks import check_bounds, check_types
from ..rulebook import refuse
from .bridges import bridge_gaps
from .centrelines import centreline_branches, label_8
from .widths import smooth_path, transects

LAYERS = ("reaches", "widths")
PR_SET_PDEATHSIG = 1  # prctl(2)
WORKER_GDAL_CACHE_MB = 64
DECIMALS = 4  # pixel coordinates of centrelines are rounded to this many decimals
MEASURE_STEP_M = 30.0  # reaches are measured at least this often, whatever --spacing the widths layer has


MIN_WINDOW = 256  # px a side


@dataclass
class RiverOptions:
    spacing_m: float = 30.0  # between transects
    min_width_m: float = 6.0
    max_width_m: float = 500.0
    min_area_m2: float = 2000.0
    prune: float = 2.0  # spurs shorter than this many channel widths are pruned
    max_bridge_m: float = 20.0  # land across a channel up to this long is a bridge the centreline runs under (0: none)
    bridge_span_m: float = 150.0  # the longest bridge (across the channel)
    window: int = 4096  # px a side, without the margin
    margin: int | None = None  # px; default: enough for the widest channel kept (max_width_m)
    workers: int | None = None  # processes measuring windows at once; default: one per core it may use
    min_occurrence: int | None = None  # an occurrence raster's water: percent of dates; default its permanent water's
    overwrite: bool = False

    def __post_init__(self):
        check_types(self)
        check_bounds(self, least={"min_width_m": 0, "min_area_m2": 0, "max_bridge_m": 0, "bridge_span_m": 0,
                                  "prune": 0, "window": MIN_WINDOW, "margin": 0, "workers": 1, "min_occurrence": 1},
                     above={"spacing_m": 0, "max_width_m": 0}, most={"min_occurrence": 100})
        if self.min_width_m >= self.max_width_m:  # every channel would be too narrow or too wide
            raise refuse("S2N-RIVERS-WIDTHS", None, low=self.min_width_m, high=self.max_width_m)


@dataclass
class RiverSummary:
    reaches: int = 0
    transects: int = 0
    length_km: float = 0.0
    width_median_m: float | None = None
    windows: int = 0
    output: str = ""
    flags: dict = field(default_factory=dict)
    open_water_km: float = 0.0  # skeleton cut out where no bank was within --max-width (lakes, bays, the sea)

    def to_dict(self) -> dict:
        return {"reaches": self.reaches, "transects": self.transects, "length_km": self.length_km,
                "width_median_m": self.width_median_m, "flags": self.flags, "open_water_km": self.open_water_km,
                "windows": self.windows, "output": self.output}


def measure_rivers(mask_path, out_path, options: RiverOptions = RiverOptions(),
                   on_progress: Callable[[int, int], None] | None = None) -> RiverSummary:
    """Centrelines and widths of the water in ``mask_path`` written to ``out_path`` (GeoPackage)."""
    check_exists(mask_path)  # a mask that is not there is the mistake to say first, as predict says a scene's
    out_path = check_output(out_path, options.overwrite, kind=RIVERS_FILE)
    reader = MaskReader(mask_path, options.min_occurrence)
    finest = reader.finest_ground_pixel()
    margin = options.margin if options.margin is not None else int(np.ceil(options.max_width_m / finest)) + 32
    lines, points, open_m = [], [], 0.0
    windows = list(_windows(reader.width, reader.height, options.window))
    for k, (piece_lines, piece_points, piece_open_m) in enumerate(_measured(reader, windows, margin, options), start=1):
        lines += piece_lines
        points += piece_points
        open_m += piece_open_m
        if on_progress:
            on_progress(k, len(windows))
    reaches, widths, measured = _assemble(lines, points, reader, options)
    _write(out_path, reaches, widths, reader.crs)
    summary = RiverSummary(reaches=len(reaches["geometry"]), transects=len(widths["geometry"]),
                           length_km=round(float(sum(reaches["length_m"])) / 1000, 3), windows=len(windows),
                           open_water_km=round(open_m / 1000, 3), output=str(out_path))
    if len(measured):
        summary.width_median_m = round(float(np.median(measured)), 2)
    summary.flags = {f: widths["flag"].count(f) for f in sorted(set(widths["flag"]))}
    return summary


def _measured(reader: "MaskReader", windows: list, margin: int, options: RiverOptions):
    """Each window's measures, in the windows' order: in ``options.workers`` processes (spawned,
    each reading its own windows) when there is more than one window and workers can start,
    else here."""
    workers = min(options.workers or _cores(), len(windows))
    if workers <= 1 or not _spawnable():
        for window in windows:
            yield _measure_window(reader, window, margin, options)
        return
    # spawned, not forked: predict --rivers calls this with torch's threads running; the pool's
    # exit terminates its workers, so an interrupted run stops at once
    with multiprocessing.get_context("spawn").Pool(workers, _worker_start, (os.getpid(),)) as pool:
        yield from pool.imap(partial(_measure_window, reader, margin=margin, options=options), windows)


def _spawnable() -> bool:
    """Whether spawned workers can start: each runs the main script again from its path, which a
    script read from stdin (``python - < job.py``: "<stdin>") has not; its workers would die as
    they start and the pool start new ones without end. Notebooks and ``python -c`` have none
    to run, scripts a real one."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return path is None or os.path.exists(path)


def _cores() -> int:
    """The CPU cores this process may run on (its affinity: a container's or a job's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _worker_start(parent: int) -> None:
    """A window worker ends with its parent, even one killed outright (Linux: the kernel's
    parent-death signal), leaves Ctrl-C (sent to every process of the terminal's group) to the
    parent, which ends the pool, and keeps GDAL's block cache small (a user's GDAL_CACHEMAX
    wins)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # GDAL's block cache would otherwise grow to 5 % of RAM in each worker: a window is read once
    os.environ.setdefault("GDAL_CACHEMAX", str(WORKER_GDAL_CACHE_MB))
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the pool's own end of the pipe ends it
        pass
    if os.getppid() != parent:  # the parent died before the signal was set
        os._exit(1)


def check_measurable(path, crs, transform, width: int, height: int, scene: bool = False) -> None:
    """InputError unless a ``width`` x ``height`` raster on ``crs`` and ``transform`` (a mask, or
    with ``scene`` the scene a mask will be made of) has square north-up pixels in a projected
    CRS (of metres, feet or any linear unit: widths and lengths are measured on the ground, in
    metres). One in degrees, or with no CRS, is told how to reproject it to its UTM zone (a
    scene at 10 m)."""
    if crs is None or crs.is_geographic:
        how = remedies.to_utm(path, crs, transform, width, height, resolution=10 if scene else None) \
            if crs is not None else "give it a projected CRS in metres (UTM)"
        raise refuse("S2N-RIVERS-NOT-PROJECTED", path, how=how)
    if abs(abs(transform.a) - abs(transform.e)) > 1e-6 * abs(transform.a) or transform.b or transform.d:
        raise refuse("S2N-RIVERS-NOT-SQUARE", path)


class MaskReader:
    """Water and validity of a mask, a window at a time: 0/1 with nodata, a probability raster
    of ``predict --probability`` (percent) cut at the threshold in its tags, or the occurrence
    raster of ``s2s2net occurrence`` (band 1, percent of dates) cut at ``min_occurrence``, by
    default where its permanent water starts (its tag)."""

    def __init__(self, path, min_occurrence: int | None = None):
        check_exists(path)
        self.path = raster_in_zip(path) or str(path)  # as given: a GDAL path or URL keeps its //
        try:
            with rasterio.open(self.path) as src:
                self.width, self.height, self.crs, self.transform = src.width, src.height, src.crs, src.transform
                self.nodata, tags, self.count = src.nodata, src.tags(), src.count
                check_gridded(self.path, src.crs, src.gcps)
                dtype = src.dtypes[0]
        except rasterio.errors.RasterioIOError as exc:
            raise refuse("S2N-RASTER-UNREADABLE", self.path) from exc
        check_measurable(self.path, self.crs, self.transform, self.width, self.height)
        self.cut = occurrence_cut(tags, min_occurrence)
        if self.cut is None and min_occurrence is not None:
            raise refuse("S2N-RIVERS-NOT-OCCURRENCE", self.path)
        if self.cut is not None:
            return  # bands 2-4 count dates and classes: band 1 is read
        if self.count >= len(BAND_NAMES) and dtype != "uint8":  # a scene's reflectance, not its water
            raise refuse("S2N-RIVERS-GIVEN-SCENE", self.path, count=self.count)
        check_one_band(self.path, self.count)
        self.cut = probability_cut(tags)
        if self.cut is None:
            check_label(open_label(self.path), declare_nodata=NODATA_TAG)

    @property
    def pixel_size(self) -> float:
        """A pixel's side in the map's units."""
        return abs(self.transform.a)

    @property
    def unit_metres(self) -> float:
        """The map's unit in metres: 1, or a foot's 0.3048 (a US state plane's)."""
        return float(self.crs.linear_units_factor[1])

    def ground_pixel(self, window: Window) -> float:
        """A pixel's side on the ground in metres at the middle of ``window``: the map's over the
        projection's linear scale there (Web Mercator's map metre is half a metre at 60 degrees
        of latitude; UTM's within 0.1 % of one)."""
        x, y = self.transform @ (window.col_off + window.width / 2, window.row_off + window.height / 2)
        return float(self.ground_lengths(x, y)[0]) * self.pixel_size

    def finest_ground_pixel(self) -> float:
        """The smallest of ``ground_pixel`` over the mask (at its corners, the middles of its
        sides and its middle): the most pixels a width in metres spans anywhere on it."""
        cols, rows = np.meshgrid([0, self.width / 2, self.width], [0, self.height / 2, self.height])
        x, y = self.transform @ (cols.ravel(), rows.ravel())
        return float(self.ground_lengths(x, y).min()) * self.pixel_size

    def ground_lengths(self, x, y) -> np.ndarray:
        """How many metres on the ground one of the map's units is at each point (``x``, ``y``)."""
        return self.unit_metres / linear_scales(self.crs, x, y)

    def read(self, window: Window) -> tuple[np.ndarray, np.ndarray]:
        with rasterio.open(self.path) as src:
            data = src.read(1, window=window)
        valid = np.ones(data.shape, dtype=bool)
        if data.dtype.kind == "f":
            valid &= ~np.isnan(data)
        if self.nodata is not None and not np.isnan(self.nodata):
            valid &= data != self.nodata
        if self.cut is not None:
            valid &= data != NODATA
            return (data >= self.cut) & valid, valid
        return (data == WATER) & valid, valid


def _windows(width: int, height: int, size: int):
    for row in range(0, height, size):
        for col in range(0, width, size):
            yield Window(col, row, min(size, width - col), min(size, height - row))


def _measure_window(reader: MaskReader, window: Window, margin: int, options: RiverOptions):
    """Centreline pieces (map coordinates) and transects inside ``window``, measured on it
    with its margin."""
    outer = Window(window.col_off - margin, window.row_off - margin, window.width + 2 * margin,
                   window.height + 2 * margin).intersection(Window(0, 0, reader.width, reader.height))
    water, valid = reader.read(outer)
    pixel = reader.ground_pixel(window)  # metres on the ground: every width and distance below is in them
    min_px = max(int(options.min_area_m2 / pixel ** 2), 1)
    water, bodies = _without_small_bodies(water, min_px)
    if not water.any():
        return [], [], 0.0
    gaps = bridge_gaps(water, options.max_bridge_m / pixel, options.bridge_span_m / pixel, bodies)
    if gaps.any():
        water, bodies = water | gaps, None  # bodies joined by a bridge: labelled again
    branches, half_width = centreline_branches(water, options.prune, options.max_width_m / pixel, bodies)
    # lines are drawn in the whole mask's pixel coordinates, rounded, so that the two windows
    # that share a border cut a centreline at the very same point, and the pieces join
    offset = np.array([outer.col_off, outer.row_off], dtype=float)
    core = box(window.col_off, window.row_off, window.col_off + window.width, window.row_off + window.height)
    lines, points, open_m = [], [], 0.0
    every = measure_every(options.spacing_m)
    step, max_px = options.spacing_m / every / pixel, options.max_width_m / pixel
    for branch in branches:
        local = smooth_path(branch.path())
        if len(local) < 2:
            continue
        opened = []  # where along the branch a transect found no bank within reach: open water
        measured = []
        for t in transects(LineString(local), water, valid, half_width, step, max_px, gaps):
            if t.open or t.width > max_px:
                opened.append(t.distance)
            else:
                measured.append(t)
        if measured:
            x = np.array([t.x for t in measured]) + offset[0]
            y = np.array([t.y for t in measured]) + offset[1]
            inside = shapely.contains_xy(core, x, y)
            mx, my = reader.transform @ (x[inside], y[inside])
            in_core = [t for t, k in zip(measured, inside) if k]
            # the transects at half a spacing and every spacing on are the widths layer's
            listed = [round(t.distance / step - 0.5) % every == every // 2 for t in in_core]
            points += [(Point(px, py), t.width * pixel, t.flag, shown)
                       for px, py, t, shown in zip(mx, my, in_core, listed)]
        line = LineString(np.round(smooth_path(branch.path() + offset), DECIMALS))
        kept, cut = _split_at_open_water(line, opened, step)
        open_m += sum(piece.intersection(core).length for piece in cut) * pixel
        for piece in kept:
            inside = piece.intersection(core)
            for part in getattr(inside, "geoms", [inside]):
                if isinstance(part, LineString) and not part.is_empty and part.length > 0:
                    coords = np.round(np.asarray(part.coords), DECIMALS)
                    lines.append(LineString(np.c_[reader.transform @ (coords[:, 0], coords[:, 1])]))
    return lines, points, open_m


def measure_every(spacing_m: float) -> int:
    """How many transects are measured for each one the widths layer lists: the least odd
    number that measures at least every MEASURE_STEP_M (odd, so that a listed transect, half a
    spacing in and every spacing on, is a measured one)."""
    every = max(int(np.ceil(spacing_m / MEASURE_STEP_M - 1e-9)), 1)
    return every if every % 2 else every + 1


def _split_at_open_water(line: LineString, opened: list[float], spacing: float) -> tuple[list, list]:
    """The parts of ``line`` a river runs on and the parts cut out: a stretch of ``spacing``
    (the measuring step) centred on each transect at the distances ``opened`` along it (no bank
    within reach there)."""
    if not opened:
        return [line], []
    removed = []  # merged [start, end] intervals along the line
    for d in sorted(opened):
        a, b = max(d - spacing / 2, 0.0), min(d + spacing / 2, line.length)
        if removed and a <= removed[-1][1] + 1e-9:
            removed[-1][1] = b
        else:
            removed.append([a, b])
    kept, cut, start = [], [], 0.0
    for a, b in removed:
        if a - start > 1e-9:
            kept.append(substring(line, start, a))
        cut.append(substring(line, a, b))
        start = b
    if line.length - start > 1e-9:
        kept.append(substring(line, start, line.length))
    return [k for k in kept if isinstance(k, LineString) and k.length > 0], cut


def _without_small_bodies(water: np.ndarray, min_px: int) -> tuple[np.ndarray, np.ndarray]:
    """``water`` without its 8-connected bodies of fewer than ``min_px`` pixels, and the labels
    of the bodies kept (``ndimage.label``'s, 0 elsewhere)."""
    labels, n = label_8(water)
    if n == 0:
        return water, labels
    sizes = np.bincount(labels[water], minlength=n + 1)
    keep = sizes >= min_px
    keep[0] = False
    kept = keep[labels]
    labels *= kept
    return kept, labels


def _assemble(lines: list, points: list, reader: MaskReader, options: RiverOptions):
    """Reaches (window pieces joined, split at junctions) with their measured transects'
    statistics, the transects the widths layer lists with their reach and distance along it, and
    every measured width of the reaches kept; reaches outside the widths asked for are left out
    with their transects. Lengths and distances along a reach are the map's times the ground's
    metres per map metre at the reach's middle."""
    merged = line_merge(MultiLineString(lines)) if lines else MultiLineString()
    reach_lines = [g for g in getattr(merged, "geoms", [merged]) if not g.is_empty]
    by_reach: dict[int, list] = {i: [] for i in range(len(reach_lines))}
    middles = shapely.get_coordinates(shapely.line_interpolate_point(reach_lines, 0.5, normalized=True))
    on_ground = reader.ground_lengths(middles[:, 0], middles[:, 1]) if reach_lines else np.zeros(0)
    if reach_lines and points:
        reach, along = _located(np.array([(p.x, p.y) for p, *_ in points]), reach_lines, reader.pixel_size)
        for (p, w, flag, shown), i, d in zip(points, reach, along):
            by_reach[int(i)].append((p, w, flag, d, shown))
    reaches = {"reach_id": [], "length_m": [], "width_median_m": [], "width_min_m": [], "width_max_m": [],
               "transects": [], "geometry": []}
    widths = {"reach_id": [], "distance_m": [], "width_m": [], "flag": [], "geometry": []}
    kept_widths = []  # every measured width of the reaches kept
    for i, line in enumerate(reach_lines):
        measured = by_reach[i]
        if not measured:
            continue
        w = np.array([m[1] for m in measured])
        median = float(np.median(w))
        if median < options.min_width_m or median > options.max_width_m:
            continue
        kept_widths.append(w)
        listed = sorted((m for m in measured if m[4]), key=lambda m: m[3])
        rid = len(reaches["geometry"]) + 1
        reaches["reach_id"].append(rid)
        reaches["length_m"].append(round(line.length * on_ground[i], 2))
        reaches["width_median_m"].append(round(median, 2))
        reaches["width_min_m"].append(round(float(w.min()), 2))
        reaches["width_max_m"].append(round(float(w.max()), 2))
        reaches["transects"].append(len(listed))
        reaches["geometry"].append(line)
        for p, width, flag, along, _ in listed:
            widths["reach_id"].append(rid)
            widths["distance_m"].append(round(along * on_ground[i], 2))
            widths["width_m"].append(round(width, 2))
            widths["flag"].append(flag)
            widths["geometry"].append(p)
    return reaches, widths, np.concatenate(kept_widths) if kept_widths else np.zeros(0)


def _located(xy: np.ndarray, lines: list, pixel: float) -> tuple[np.ndarray, np.ndarray]:
    """For each point (x, y), the line it lies on (the nearest of ``lines``) and its distance
    along it (as ``LineString.project``). The lines' segments are found near each point by a
    KD-tree of their midpoints, so a point costs the segments around it, not its line's length."""
    coords, which = shapely.get_coordinates(lines, return_index=True)
    same = which[1:] == which[:-1]
    a, b, line_of = coords[:-1][same], coords[1:][same], which[:-1][same]
    step = b - a
    length = np.hypot(step[:, 0], step[:, 1])
    before = np.empty_like(length)  # each segment's start along its line, summed as GEOS sums it
    bounds = np.r_[0, np.flatnonzero(np.diff(line_of)) + 1, len(line_of)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        before[lo] = 0.0
        if hi - lo > 1:
            before[lo + 1:hi] = np.cumsum(length[lo:hi - 1])
    near = cKDTree((a + b) / 2).query_ball_point(xy, float(length.max()) / 2 + pixel)
    counts = np.fromiter(map(len, near), dtype=np.int64, count=len(near))
    point = np.repeat(np.arange(len(xy)), counts)
    segment = np.fromiter((s for found in near for s in found), dtype=np.int64, count=int(counts.sum()))
    rel = xy[point] - a[segment]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.clip((rel * step[segment]).sum(axis=1) / length[segment] ** 2, 0.0, 1.0)
    frac[length[segment] == 0] = 0.0
    off = rel - frac[:, None] * step[segment]
    gap = np.hypot(off[:, 0], off[:, 1])
    order = np.lexsort((segment, gap, point))  # per point, the nearest segment first
    first = order[np.r_[0, np.flatnonzero(np.diff(point[order])) + 1]]
    best = segment[first]
    reach = np.empty(len(xy), dtype=np.int64)
    along = np.empty(len(xy), dtype=np.float64)
    found = counts > 0
    reach[found], along[found] = line_of[best], before[best] + frac[first] * length[best]
    for i in np.flatnonzero(~found):  # off every line by more than a pixel: the nearest, however far
        p = shapely.Point(xy[i])
        reach[i] = int(np.argmin(shapely.distance(lines, p)))
        along[i] = lines[reach[i]].project(p)
    return reach, along


def _write(out_path: Path, reaches: dict, widths: dict, crs) -> None:
    """Both layers into one GeoPackage, written under a temporary name and renamed when whole;
    empty layers keep their fields and geometry type."""
    import geopandas as gpd  # heavy: only writing needs it

    with atomic_path(out_path) as tmp:
        for name, data, kind in (("reaches", reaches, "LineString"), ("widths", widths, "Point")):
            gdf = gpd.GeoDataFrame(data, geometry="geometry", crs=crs)
            if gdf.empty:
                gdf = gdf.astype({k: ("int64" if k in ("reach_id", "transects") else
                                      "object" if k == "flag" else "float64") for k in data if k != "geometry"})
            gdf.to_file(tmp, layer=name, driver="GPKG", geometry_type=kind)

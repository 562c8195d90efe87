"""Tiled, blended, streaming inference: a whole scene to a georeferenced 2 m mask.

The scene is cut into tiles of ``tile_size`` 10 m pixels, each read with ``overlap`` pixels of
context on every side (rasterio windows, reflected past the scene edges); where they lie is
``tiling.TileGrid``'s arithmetic. The encoder and decoder see the whole read window; the
upsampling head, nine tenths of the work, runs only on the tile plus ``blend`` pixels
(``S2S2Net.forward_window``), so context costs little. Neighbouring outputs are blended over
those ``2 * blend`` pixels with weights that sum to one, so a constant scene gives a constant
mask across tile borders. Tiles go to the network in batches, one row of tiles at a time, with
on a GPU, the next tiles read and the finished blocks written in background threads. Each block
of the output is written as soon as no later tile can touch it; only the seams between tiles
are held back, so memory grows with neither the scene's area nor, beyond a seam's rows, its
width.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio
import torch
from rasterio.errors import RasterioIOError
from rasterio.windows import Window

from . import __version__
from .bands import (BAND_NAMES, Scene, SceneReader, band_order_warnings, check_has_valid_pixels, offset_warning,
                    read_normalised, scale_warning, valid_mask)
from .checkpoint import load_model
from .errors import InputError, describe, first_line
from .grid import SCALE_FACTOR, fine_transform, row_pixel_areas
from .io import atomic_path, check_output, geotiff_profile, temporary_sibling
from .sources import SceneOptions, open_scene
from .tiling import TileGrid

NODATA = 255
WRITE_ROWS = 512  # 2 m rows converted and written at a time
DEFAULT_WEIGHTS = Path(__file__).parent / "weights" / "default.safetensors"


@dataclass
class PredictOptions:
    tile_size: int = 512
    overlap: int = 64  # context read around each tile (10 m pixels)
    blend: int = 8  # 10 m pixels of each tile's output beyond its core, blended with the neighbours'
    batch_size: int | None = None  # None: 1 on the CPU, 8 on a GPU
    device: str = "auto"
    precision: str = "auto"
    bands: tuple[int, ...] | None = None
    scale: float | None = None  # None: 10000, 1 for float reflectance stacks (products say their own)
    offset: float = 0.0  # added to a stack's DNs before dividing by scale
    keep_clouds: bool = False
    mask: str | None = None  # raster of pixels to leave out (nonzero)
    bbox: tuple[float, float, float, float] | None = None
    aoi: str | None = None
    probability: bool = False
    threshold: float | None = None  # None: the model's calibrated threshold (its card's)
    flips: bool = False  # average over the eight flips and quarter turns of each tile (8x the work)
    cog: bool = False
    creation_options: dict = field(default_factory=dict)
    overwrite: bool = False

    def scene_options(self) -> SceneOptions:
        """How scenes are read under these options."""
        return SceneOptions(bands=self.bands, scale=self.scale, offset=self.offset,
                            keep_clouds=self.keep_clouds, mask=self.mask, bbox=self.bbox, aoi=self.aoi)

    def __post_init__(self):
        if self.tile_size < 1 or self.overlap < 0 or self.blend < 0:
            raise ValueError("tile size must be positive, overlap and blend not negative")
        if self.threshold is not None and not 0 <= self.threshold <= 1:
            raise ValueError("threshold must lie in 0-1")


@dataclass
class SceneResult:
    scene: str
    output: str
    seconds: float
    water_km2: float
    nodata_fraction: float
    tiles: int
    warnings: list[str] = field(default_factory=list)
    masked_fraction: float = 0.0  # of the output's pixels: data left out (clouds, --mask, outside --aoi)
    gpu_peak_mb: float | None = None  # the most GPU memory torch held at once (GPUs only)

    def to_dict(self) -> dict:
        out = {"scene": self.scene, "output": self.output, "seconds": round(self.seconds, 3),
               "water_km2": self.water_km2, "nodata_fraction": self.nodata_fraction,
               "masked_fraction": self.masked_fraction, "tiles": self.tiles, "warnings": self.warnings}
        if self.gpu_peak_mb is not None:
            out["gpu_peak_mb"] = round(self.gpu_peak_mb, 1)
        return out


def default_weights() -> Path:
    if not DEFAULT_WEIGHTS.exists():
        raise InputError(describe(DEFAULT_WEIGHTS.parent, "no bundled default model in this install; pass --weights FILE"))
    return DEFAULT_WEIGHTS


def resolve_device(device: str) -> torch.device:
    """The torch device for ``device``; "auto" and "cuda" take this rank's GPU (LOCAL_RANK) under a launcher."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(describe(device, "CUDA was asked for but no GPU is available"))
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    return dev


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device`` (None for fp32)."""
    if precision == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return None
    return {"32": None, "bf16": torch.bfloat16, "16": torch.float16}[precision]


class Predictor:
    """A loaded model plus the settings to run it over scenes."""

    def __init__(self, weights, options: PredictOptions | None = None):
        self.options = options or PredictOptions()
        self.weights = Path(weights)
        self.device = resolve_device(self.options.device)
        self.model, self.card = load_model(self.weights, self.device)
        self.model.to(memory_format=torch.channels_last)  # 1.4x faster convolutions on CPUs and GPUs
        if tuple(self.card.bands.names) != BAND_NAMES:
            raise InputError(describe(self.weights, f"weights were trained on bands {', '.join(self.card.bands.names)}; "
                                                    f"s2s2net reads {', '.join(BAND_NAMES)}"))
        self.amp = autocast_dtype(self.options.precision, self.device)
        self.spec = self.card.bands
        self.scene_options = self.options.scene_options()
        self.threshold = self.card.threshold if self.options.threshold is None else self.options.threshold

    @property
    def model_name(self) -> str:
        return f"{self.weights.name}+flips" if self.options.flips else self.weights.name

    @torch.inference_mode()
    def probabilities(self, batch: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        """Water probability (n, 5 height, 5 width) float32 inside ``box`` = (top, left, height,
        width) of a normalised batch (n, bands, h, w); the whole batch is the network's context.
        With ``flips``, the mean over the eight flips and quarter turns of the batch."""
        x = torch.from_numpy(batch)
        if self.device.type == "cuda":
            x = x.pin_memory().to(self.device, non_blocking=True)

        def probability(x, *box):
            with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
                logits = self.model.forward_window(x.contiguous(memory_format=torch.channels_last), *box)
            return torch.sigmoid(logits.float())

        prob = mean_over_flips(probability, x, box) if self.options.flips else probability(x, *box)
        return prob[:, 0].cpu().numpy()

    def predict_scene(self, scene_path, output_path, on_tile: Callable[[int, int], None] | None = None) -> SceneResult:
        """Predict ``scene_path`` into ``output_path`` (GeoTIFF, uint8), atomically."""
        start = time.perf_counter()
        scene, warnings = self.prepare(scene_path, output_path)

        def fill(dst) -> dict:
            stats = new_stats()
            with SceneReader(scene) as reader:
                self.run_rows(reader, 0, self.grid(scene).n_rows,
                              lambda row0, col0, prob, valid: self.write_block(dst, prob, row0, valid, stats, col0), stats, on_tile)
            return stats

        stats = self.write_output(scene, output_path, fill)
        return self.result(scene, output_path, stats, warnings, start)

    def prepare(self, scene_path, output_path) -> tuple[Scene, list[str]]:
        """Check the output path and the scene; the scene and its warnings (band order, scale)."""
        check_output(output_path, self.options.overwrite)
        scene = open_scene(scene_path, self.scene_options, len(self.spec.names))
        warnings = band_order_warnings(scene, self.spec)
        sample = check_has_valid_pixels(scene)
        valid = valid_mask(sample, scene.nodata)
        warnings += [w for w in (scale_warning(scene, sample, valid), offset_warning(scene, sample, valid)) if w]
        return scene, warnings

    def write_output(self, scene, output_path, fill: Callable) -> dict:
        """Open the 2 m mask of ``scene`` at a temporary name, let ``fill(dst)`` write its rows
        (it returns the stats), add description and tags, make it a COG if asked, then rename."""
        opts = self.options
        profile = self._profile(scene)
        with atomic_path(check_output(output_path, opts.overwrite)) as tmp:
            gtiff = temporary_sibling(tmp) if opts.cog else tmp
            try:
                with rasterio.open(gtiff, "w", **profile) as dst:
                    try:
                        stats = fill(dst)
                    except RasterioIOError as exc:
                        if gtiff.name in str(exc):
                            raise
                        raise InputError(describe(scene.path, f"cannot be read ({first_line(exc)})")) from exc
                    dst.set_band_description(1, "water probability (percent)" if opts.probability else "water (1), land (0)")
                    dst.update_tags(**self._tags(scene))
                if opts.cog:
                    _to_cog(gtiff, tmp, profile, opts.creation_options, opts.probability)
            finally:
                if opts.cog and gtiff.exists():
                    gtiff.unlink()
        return stats

    def result(self, scene, output_path, stats: dict, warnings: list[str], start: float) -> SceneResult:
        total = scene.width * scene.height * SCALE_FACTOR ** 2
        gpu_peak = torch.cuda.max_memory_allocated(self.device) / 2 ** 20 if self.device.type == "cuda" else None
        return SceneResult(str(scene.path), str(output_path), time.perf_counter() - start,
                           water_km2=stats["water_m2"] / 1e6, nodata_fraction=stats["nodata"] / total,
                           tiles=stats["tiles"], warnings=warnings, masked_fraction=stats["masked"] / total,
                           gpu_peak_mb=gpu_peak)

    # -- internals ---------------------------------------------------------------------

    def _profile(self, scene) -> dict:
        return mask_profile(scene, self.options.creation_options)

    def _tags(self, scene) -> dict:
        return {
            "s2s2net_version": __version__, "model": self.model_name,
            "model_version": self.card.version, "threshold": str(self.threshold),
            "values": "probability percent 0-100, 255 nodata" if self.options.probability else "0 land, 1 water, 255 nodata",
            "source_scene": scene.name, "source_kind": scene.kind, "bands": ",".join(map(str, scene.indexes)),
            "scale": f"{scene.scale:g}", "offset": ",".join(f"{v:g}" for v in scene.offset),
            "clouds_left_out": "yes" if scene.cloud_band else "no",
        }

    def grid(self, scene) -> TileGrid:
        """Where this predictor's tiles lie on ``scene``."""
        opts = self.options
        return TileGrid.for_scene(scene.height, scene.width, opts.tile_size, opts.overlap, opts.blend)

    def run_rows(self, reader: SceneReader, first: int, last: int, emit: Callable, stats: dict,
                 on_tile: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Run the tile rows ``first`` to ``last - 1`` and blend them on the 2 m grid.

        Each block of the output that no later tile of the range can still touch goes to
        ``emit(row0, col0, prob, valid_10m)`` as soon as its tile has run (``valid_10m``: where
        the output counts, 10 m, covering the block). On a GPU, emits run in a background
        thread, in order, while the network works on the next tile, and the next tiles are
        read the same way. Blocks partition the range's rows; only the seams between
        neighbouring tiles are held back (float32), so memory grows with the scene's width by
        a seam's rows only. The seam rows at the top of a range that does not start at the top
        hold only this range's share of the blend, like the seam rows below its last tile row:
        those are returned, (rows, 5 * width) float32.
        """
        f, grid = SCALE_FACTOR, self.grid(reader.scene)
        batch_size = self.options.batch_size or (8 if self.device.type == "cuda" else 1)
        box, c = grid.output_box, grid.context
        W2 = grid.width * f
        # the seam below the previous tile row: its rows, the part the tiles above added
        below = np.zeros((0, W2), dtype=np.float32)
        batches = [(i, range(j0, min(j0 + batch_size, grid.n_cols)))
                   for i in range(first, last) for j0 in range(0, grid.n_cols, batch_size)]
        total, done = (last - first) * grid.n_cols, 0

        def read(i, cols):
            return [read_normalised(reader, grid.read_window(i, j), self.spec) for j in cols]

        # Beside a GPU, reading and writing run in threads. On the CPU the network already keeps
        # every core busy: threads gained nothing measurable there and raised peak memory.
        executor = ThreadPoolExecutor if self.device.type == "cuda" else InlineExecutor
        with executor(1, thread_name_prefix="s2s2net-read") as reads, \
                executor(1, thread_name_prefix="s2s2net-write") as writes:
            next_tiles, writing = reads.submit(read, *batches[0]), deque()
            for n, (i, cols) in enumerate(batches):
                top, bottom = grid.output_rows(i)
                r0, r1 = max(top, 0), min(bottom, grid.height * f)  # this tile row's output rows
                final = grid.final_bottom(i)  # rows [r0, final) are done after this row, [final, r1) wait
                if cols.start == 0:
                    above, below = below, np.zeros((r1 - final, W2), dtype=np.float32)
                    assert i == first or len(above) == min(2 * f * grid.blend, grid.height * f - r0)
                    right = np.zeros((r1 - r0, 0), dtype=np.float32)  # seam right of the previous tile
                tiles = next_tiles.result()
                if n + 1 < len(batches):
                    next_tiles = reads.submit(read, *batches[n + 1])
                release_free_memory()
                probs = self.probabilities(np.stack([x for x, _, _ in tiles]), box)
                for k, j in enumerate(cols):
                    left_edge, right_edge = grid.output_cols(j)
                    c0, c1 = max(left_edge, 0), min(right_edge, W2)
                    acc = probs[k][r0 - top: r1 - top, c0 - left_edge: c1 - left_edge]
                    acc *= grid.row_weights[i][r0 - top: r1 - top, None]
                    acc *= grid.col_weights[j][None, c0 - left_edge: c1 - left_edge]
                    acc[:, : right.shape[1]] += right
                    acc[: len(above), right.shape[1]:] += above[:, c0 + right.shape[1]: c1]  # the rest added before
                    done_right = grid.final_right(j)  # columns [c0, done_right) are done after this tile
                    block = np.ascontiguousarray(acc[: final - r0, : done_right - c0])
                    below[:, c0: done_right] = acc[final - r0:, : done_right - c0]
                    right = acc[:, done_right - c0:].copy()
                    window = grid.read_window(i, j)
                    wr, wc = window.row_off, window.col_off
                    keep = tiles[k][1][r0 // f - wr: final // f - wr, c0 // f - wc: done_right // f - wc]
                    while len(writing) >= 2:
                        writing.popleft().result()
                    if block.size:
                        writing.append(writes.submit(emit, r0, c0, block, keep))
                    core_r, core_c = grid.core_rows(i), grid.core_cols(j)
                    stats["masked"] += f * f * int(tiles[k][2][c: c + core_r[1] - core_r[0], c: c + core_c[1] - core_c[0]].sum())
                    stats["tiles"] += 1
                    done += 1
                    if on_tile:
                        on_tile(done, total)
                del probs, acc, block, tiles  # not alive while the network runs the next tiles
            while writing:
                writing.popleft().result()
        return below

    def write_block(self, dst, prob: np.ndarray, row0: int, valid_10m: np.ndarray, stats: dict, col0: int = 0,
                    dst_row0: int | None = None) -> None:
        """Write the 2 m block ``prob`` whose corner is (row0, col0) of the output at row
        ``dst_row0`` (default row0) of ``dst``, as mask or percent, nodata where ``valid_10m``
        (10 m, from row row0 // 5 and column col0 // 5; col0 a multiple of 5) is False."""
        f, step = SCALE_FACTOR, WRITE_ROWS
        shift = (row0 if dst_row0 is None else dst_row0) - row0
        for a in range(row0, row0 + prob.shape[0], step):  # in pieces: a few bytes per pixel of temporaries
            piece = prob[a - row0: a - row0 + step]
            rows_10m = np.arange(a, a + piece.shape[0]) // f - row0 // f
            valid = np.repeat(valid_10m[rows_10m], f, axis=1)[:, : piece.shape[1]]
            water = (piece >= self.threshold) & valid
            if self.options.probability:
                out = np.clip(np.rint(piece * 100), 0, 100).astype(np.uint8)
            else:
                out = water.astype(np.uint8)
            per_row = water.sum(axis=1)
            stats["water"] += int(per_row.sum())
            stats["water_m2"] += float(per_row @ row_pixel_areas(dst.crs, dst.transform, a + shift, len(per_row)))
            out[~valid] = NODATA
            stats["nodata"] += int((~valid).sum())
            dst.write(out, 1, window=Window(col0, a + shift, out.shape[1], out.shape[0]))


class InlineExecutor:
    """A ThreadPoolExecutor's ``submit`` that runs the call at once, in this thread."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args) -> Future:
        future = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed over like a thread's, raised by result()
            future.set_exception(exc)
        return future


FLIPS = tuple((transpose, flip_rows, flip_cols) for transpose in (False, True) for flip_rows in (False, True)
              for flip_cols in (False, True))  # the eight flips and quarter turns of a square


def mean_over_flips(forward: Callable, x: torch.Tensor, box: tuple[int, int, int, int]) -> torch.Tensor:
    """Test-time augmentation: the mean of ``forward(x', *box')`` over the eight flips and
    quarter turns x' of ``x`` (n, c, h, w), each output turned back onto ``x``'s grid. ``box``
    = (top, left, height, width) is the window of ``x`` to return, turned with it; ``forward``
    returns that window's pixels at any whole multiple of the input's resolution. The mean
    commutes with every flip and turn of the input (up to float rounding)."""
    h, w = x.shape[-2:]
    total = None
    for transpose, flip_rows, flip_cols in FLIPS:
        top, left, height, width = box
        rows, cols = h, w
        y = x
        if transpose:
            y = y.transpose(-2, -1)
            top, left, height, width, rows, cols = left, top, width, height, w, h
        dims = [d for d, flip in ((-2, flip_rows), (-1, flip_cols)) if flip]
        if dims:
            y = y.flip(dims)
        if flip_rows:
            top = rows - top - height
        if flip_cols:
            left = cols - left - width
        out = forward(y, top, left, height, width)
        if dims:
            out = out.flip(dims)
        if transpose:
            out = out.transpose(-2, -1)
        total = out if total is None else total + out
    return total / len(FLIPS)


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim). The network's
    large temporaries of one tile otherwise leave holes that the next tile's do not fit,
    and resident memory creeps up tile by tile (measured: +150 MB of peak over six 640 px tiles;
    flat with this, at no cost in time). Nothing where there is no glibc."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _glibc()


def valid_rows(reader: SceneReader, row0: int, row1: int) -> np.ndarray:
    """Where the output counts (10 m, rows x width) in the scene rows [row0, row1); empty when row1 <= row0."""
    if row1 <= row0:
        return np.zeros((0, reader.scene.width), dtype=bool)
    return reader.read(Window(0, row0, reader.scene.width, row1 - row0))[2]


def new_stats() -> dict:
    """Counters of a prediction: 2 m pixels of water (and their area), nodata and left out
    (masked), tiles run."""
    return {"water": 0, "water_m2": 0.0, "nodata": 0, "masked": 0, "tiles": 0}


def mask_profile(scene, creation_options: dict | None = None) -> dict:
    """The GeoTIFF profile of a 2 m uint8 mask on the exact 5x sub-grid of ``scene``."""
    f = SCALE_FACTOR
    profile = geotiff_profile(scene.width * f, scene.height * f, 1, "uint8", scene.crs, fine_transform(scene.transform),
                              NODATA, block=512, creation_options=creation_options)
    profile.setdefault("tiled", True)  # a mask narrower than a block: tiled all the same, as --co may ask
    profile.setdefault("blockxsize", 512)
    profile.setdefault("blockysize", 512)
    return profile


def _to_cog(src_path, dst_path, profile, creation_options: dict | None = None, probability: bool = False) -> None:
    """Copy to a Cloud Optimized GeoTIFF: overviews by mode for a 0/1 mask and by average for
    probabilities; the user's --co options carried over under the COG driver's names."""
    from rasterio.shutil import copy

    options = {"COMPRESS": str(profile.get("compress", "deflate")).upper(), "PREDICTOR": "YES", "BLOCKSIZE": 512,
               "BIGTIFF": "IF_SAFER", "OVERVIEW_RESAMPLING": "AVERAGE" if probability else "MODE"}
    renamed = {"ZLEVEL": "LEVEL", "ZSTD_LEVEL": "LEVEL", "JPEG_QUALITY": "QUALITY", "BLOCKXSIZE": "BLOCKSIZE"}
    for key, value in (creation_options or {}).items():
        key = renamed.get(key.upper(), key.upper())
        if key not in ("TILED", "BLOCKYSIZE", "INTERLEAVE"):  # a COG is always tiled, with square blocks
            options[key] = value
    copy(str(src_path), str(dst_path), driver="COG", **options)

"""The mask writer: a 2 m GeoTIFF on the exact 5x sub-grid of a scene, written block by block
as the stream finishes them (0 land, 1 water, 255 nodata; or probability in percent), with its
description and tags, made a Cloud Optimized GeoTIFF if asked, and renamed into place only
when complete.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable

import numpy as np
import rasterio
from rasterio.errors import RasterioIOError
from rasterio.windows import Window

from .. import __version__
from ..errors import first_line
from ..formats import NODATA, VALUES_TAG, mask_palette, percent_cut, source_name, source_stem, water_percent
from ..grid import SCALE_FACTOR, fine_transform, row_pixel_areas
from ..io import (
    atomic_path,
    check_output,
    copy_to_cog,
    gdal_threads,
    geotiff_profile,
    is_write_error,
    temporary_sibling,
)
from ..rulebook import refuse
from ..sources.dates import DATE_TAG, PRODUCT_TAG, SOURCE_TAG, product_name, scene_date

WRITE_ROWS = 512  # 2 m rows converted and written at a time
MADE_WITH = ("model", "model_sha256", "threshold", "ndwi_prior", "values")  # the tags that say how a mask was made


@dataclass
class PredictionStats:
    """Counters of a prediction: 2 m pixels of water (and their area), nodata and left out
    (masked: clouds, --mask, outside the AOI), tiles run."""

    water: int = 0
    water_m2: float = 0.0
    nodata: int = 0
    masked: int = 0
    tiles: int = 0

    def __iadd__(self, other: "PredictionStats") -> "PredictionStats":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def made_with(forward_tags: dict, probability: bool, threshold_per_scene: bool = False) -> dict:
    """The MADE_WITH tags a mask gets from a forward's ``forward_tags`` and whether it is a
    ``probability`` raster; without the threshold when each scene draws its own."""
    tags = {**forward_tags, "values": VALUES_TAG[probability]}
    return {k: tags[k] for k in MADE_WITH if k in tags and not (k == "threshold" and threshold_per_scene)}


def reading_tags(scene) -> dict:
    """The tags of a mask of ``scene`` that say how the scene was read: which bands, scale,
    offset, clouds, pixels left out and area of interest."""
    return {
        "bands": ",".join(map(str, scene.indexes)), "scale": f"{scene.scale:g}",
        "offset": ",".join(f"{v:g}" for v in scene.offset),
        "clouds_left_out": "yes" if scene.cloud_band else "no",
        "left_out": source_name(scene.leave_out) if scene.leave_out else "none",
        "area_of_interest": source_name(scene.aoi_name) if scene.aoi_name else "none",  # the file's name, or --bbox
    }


def acquisition_tags(scene) -> dict:
    """ACQUISITION_DATE, the scene's date, and source_product, the product it holds where it is
    named otherwise (a renamed .zip, a STAC item), as far as its name, metadata or tags say
    them: what dates the mask in ``occurrence --from-masks`` and tells its acquisition, whatever
    the mask is called."""
    date, product = scene_date(scene.path), product_name(scene.path)
    return {**({DATE_TAG: date} if date else {}),
            **({PRODUCT_TAG: product} if product and product != source_stem(scene.name) else {})}


def mask_profile(scene, creation_options: dict | None = None) -> dict:
    """The GeoTIFF profile of a 2 m uint8 mask on the exact 5x sub-grid of ``scene``."""
    f = SCALE_FACTOR
    profile = geotiff_profile((1, scene.height * f, scene.width * f), "uint8", scene.crs, fine_transform(scene.transform),
                              NODATA, block=512, creation_options=creation_options)
    profile.setdefault("tiled", True)  # a mask narrower than a block: tiled all the same, as --co may ask
    profile.setdefault("blockxsize", 512)
    profile.setdefault("blockysize", 512)
    return profile


@dataclass(frozen=True)
class MaskWriter:
    """How 2 m probabilities become the output: the threshold, mask or percent, the forward's
    tags, GeoTIFF creation options, COG, and whether an existing output may be replaced."""

    threshold: float
    probability: bool = False
    forward_tags: dict | None = None
    creation_options: dict | None = None
    cog: bool = False
    overwrite: bool = False

    def write(self, scene, output_path, fill: Callable) -> PredictionStats:
        """Open the 2 m mask of ``scene`` at a temporary name, let ``fill(dst)`` write its rows
        (it returns the stats), add description and tags, make it a COG if asked, then rename."""
        profile = mask_profile(scene, None if self.cog else self.creation_options)  # a COG's are the copy's
        with atomic_path(check_output(output_path, self.overwrite)) as tmp:
            gtiff = temporary_sibling(tmp) if self.cog else tmp
            try:
                with gdal_threads(), rasterio.open(gtiff, "w", **profile) as dst:  # blocks compressed in threads
                    try:
                        stats = fill(dst)
                    except RasterioIOError as exc:
                        if is_write_error(exc, gtiff):
                            raise
                        raise refuse("S2N-SCENE-READ-FAILED", scene.path, error=first_line(exc)) from exc
                    dst.set_band_description(1, "water probability (percent)" if self.probability else "water (1), land (0)")
                    if not self.probability:  # a GIS opens it land and water, not a grey stretch of 0 to 1
                        dst.write_colormap(1, mask_palette())
                    dst.update_tags(**self.tags(scene))
                if self.cog:
                    copy_to_cog(gtiff, tmp, profile, self.creation_options, "AVERAGE" if self.probability else "MODE")
            finally:
                if self.cog and gtiff.exists():
                    gtiff.unlink()
        return stats

    def tags(self, scene) -> dict:
        return {
            "s2s2net_version": __version__, **(self.forward_tags or {}),
            "values": VALUES_TAG[self.probability],
            SOURCE_TAG: scene.name, "source_kind": scene.kind, **reading_tags(scene), **acquisition_tags(scene),
        }

    def write_block(self, dst, prob: np.ndarray, row0: int, valid_10m: np.ndarray, stats: PredictionStats,
                    col0: int = 0, dst_row0: int | None = None) -> None:
        """Write the 2 m block ``prob`` whose corner is (row0, col0) of the output at row
        ``dst_row0`` (default row0) of ``dst``, as mask or percent, nodata where ``valid_10m``
        (10 m, from row row0 // 5 and column col0 // 5; col0 a multiple of 5) is False."""
        f, step = SCALE_FACTOR, WRITE_ROWS
        shift = (row0 if dst_row0 is None else dst_row0) - row0
        for a in range(row0, row0 + prob.shape[0], step):  # in pieces: a few bytes per pixel of temporaries
            piece = prob[a - row0: a - row0 + step]
            rows_10m = np.arange(a, a + piece.shape[0]) // f - row0 // f
            cols_10m = -(-piece.shape[1] // f)
            # the pieces whose 10 m pixels all count (most) need no 2 m map of them
            all_valid = bool(valid_10m[rows_10m[0]: rows_10m[-1] + 1, :cols_10m].all())
            valid = None if all_valid else np.repeat(valid_10m[rows_10m], f, axis=1)[:, : piece.shape[1]]
            water = piece >= self.threshold
            if valid is not None:
                water &= valid
            per_row = np.count_nonzero(water, axis=1)
            stats.water += int(per_row.sum())
            stats.water_m2 += float(per_row @ row_pixel_areas(dst.crs, dst.transform, a + shift, len(per_row), dst.width))
            # a mask is the water pixels' bytes themselves (bool is 0 or 1 in a byte)
            out = water_percent(piece, water, percent_cut(self.threshold)) if self.probability else water.view(np.uint8)
            if valid is not None:
                invalid = ~valid
                out[invalid] = NODATA
                stats.nodata += int(np.count_nonzero(invalid))
            dst.write(out, 1, window=Window(col0, a + shift, out.shape[1], out.shape[0]))

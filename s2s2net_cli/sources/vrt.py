"""A product's or item's band files as one scene: a GDAL VRT (an XML string, opened in place:
nothing is unpacked or copied) on the 10 m grid of B02. B11 and B12 reach that grid from 20 m
by nearest: each 20 m pixel is copied to its four 10 m pixels, as ``synth`` and ``chip`` feed
them to the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

import rasterio
from rasterio.errors import RasterioIOError

from ..bands import BAND_NAMES
from ..errors import first_line
from ..rulebook import refuse
from .scene import Scene, check_grid


@dataclass(frozen=True)
class BandFiles:
    """What a product or item resolves to: one GDAL path per band (B02 ... B12, optional SCL)."""

    source: str
    kind: str
    files: dict
    offset: tuple[float, ...]
    scale: float


def band_files_scene(band_files: BandFiles, keep_clouds: bool = False) -> Scene:
    """A Scene reading ``band_files`` through a VRT on the grid of its first band (B02)."""
    names = list(BAND_NAMES) + (["SCL"] if "SCL" in band_files.files and not keep_clouds else [])
    grids = [_band_grid(band_files.source, band_files.files[name], name) for name in names]
    ref = grids[0]
    check_grid(band_files.source, ref["crs"], ref["transform"])
    if ref["dtype"] not in GDAL_TYPES:
        raise refuse("S2N-SCENE-DTYPE", band_files.files[names[0]], dtype=ref["dtype"], mask_like="")
    bands_xml = []
    for k, (name, grid) in enumerate(zip(names, grids), start=1):
        if grid["crs"] != ref["crs"]:
            raise refuse("S2N-PRODUCT-BAND-CRS", band_files.source, name=name)
        if grid["dtype"] != ref["dtype"] and name != "SCL":  # SCL's classes fit any type
            raise refuse("S2N-PRODUCT-BAND-DTYPE", band_files.source, name=name, dtype=grid["dtype"],
                         b02_dtype=ref["dtype"])
        bands_xml.append(_vrt_band(k, name, band_files.files[name], grid, ref, band_files.source,
                                   GDAL_TYPES[ref["dtype"]]))
    xml = (f'<VRTDataset rasterXSize="{ref["width"]}" rasterYSize="{ref["height"]}">'
           f'<SRS>{escape(ref["crs"].to_wkt())}</SRS>'
           f'<GeoTransform>{", ".join(repr(float(v)) for v in ref["transform"].to_gdal())}</GeoTransform>'
           + "".join(bands_xml) + "</VRTDataset>")
    return Scene(band_files.source, ref["crs"], ref["transform"], ref["width"], ref["height"], ref["dtype"],
                 len(names), tuple(range(1, len(BAND_NAMES) + 1)), 0, tuple(BAND_NAMES), dataset=xml,
                 kind=band_files.kind, scale=band_files.scale, offset=band_files.offset,
                 cloud_band=len(names) if names[-1] == "SCL" else None)


# a reflectance band's dtype as a VRT names it: every band of a scene is read as B02's
GDAL_TYPES = {"uint16": "UInt16", "int16": "Int16", "uint32": "UInt32", "int32": "Int32", "float32": "Float32",
              "float64": "Float64"}


def _band_grid(source: str, path: str, name: str) -> dict:
    try:
        with rasterio.open(path) as src:
            return {"crs": src.crs, "transform": src.transform, "width": src.width, "height": src.height,
                    "dtype": src.dtypes[0]}
    except RasterioIOError as exc:
        raise refuse("S2N-PRODUCT-BAND-UNREADABLE", source, name=name, file=path, error=first_line(exc)) from exc


def _vrt_band(k: int, name: str, path: str, grid: dict, ref: dict, source: str, gdal_type: str) -> str:
    """One VRT band: the whole band file placed on the reference grid (nearest when coarser)."""
    rt, t = ref["transform"], grid["transform"]
    ratio_x, ratio_y = t.a / rt.a, t.e / rt.e
    x_off, y_off = (t.c - rt.c) / rt.a, (t.f - rt.f) / rt.e
    values = (ratio_x, ratio_y, x_off, y_off)
    if any(abs(v - round(v)) > 1e-6 for v in values) or min(ratio_x, ratio_y) < 1:
        raise refuse("S2N-PRODUCT-BAND-GRID", source, name=name, metres=abs(t.a), x_off=x_off, y_off=y_off)
    ratio_x, ratio_y, x_off, y_off = (int(round(v)) for v in values)
    return (f'<VRTRasterBand dataType="{gdal_type}" band="{k}"><Description>{name}</Description>'
            f'<SimpleSource resampling="nearest"><SourceFilename relativeToVRT="0">{escape(path)}</SourceFilename>'
            f'<SourceBand>1</SourceBand>'
            f'<SrcRect xOff="0" yOff="0" xSize="{grid["width"]}" ySize="{grid["height"]}"/>'
            f'<DstRect xOff="{x_off}" yOff="{y_off}" xSize="{grid["width"] * ratio_x}" '
            f'ySize="{grid["height"] * ratio_y}"/></SimpleSource></VRTRasterBand>')

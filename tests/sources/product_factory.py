"""Sentinel-2 products in ESA's SAFE layout, written from a 6-band stack (the real Virginia
crop), so tests and the sample product read exactly the pixels of a known stack.

The stack's B11/B12 must be 20 m pixels copied 2 x 2 on the 10 m grid, with a block starting
at the window's top-left pixel (for the Virginia crop: an odd column, an even row). Band
files are lossless JPEG 2000 (or GeoTIFF for speed), georeferenced; metadata follows the
baseline 05.09 MTD_MSIL1C.xml / MTD_MSIL2A.xml structure (GDAL's autotest products), with
offsets -1000 from baseline 04.00 on and DNs stored with +1000 there.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine
from rasterio.windows import Window

VIRGINIA = Path(__file__).resolve().parents[2] / "sample_data" / "virginia_shoreline_s2_6band_10m.tif"
BANDS = ("B02", "B03", "B04", "B08", "B11", "B12")
TILE, SENSED, DATATAKE = "T18SVG", "20230823T155559", "A033753_20230823T155553"


def virginia_window(row: int, col: int, size: int) -> Window:
    """A window of the Virginia crop whose top-left pixel starts a 20 m SWIR block."""
    assert row % 2 == 0 and col % 2 == 1 and size % 2 == 0
    return Window(col, row, size, size)


def read_stack(stack=VIRGINIA, window: Window | None = None):
    """(data uint16 (6, h, w), transform, crs) of a stack window."""
    with rasterio.open(stack) as src:
        window = window or Window(0, 0, src.width, src.height)
        return src.read(window=window), src.window_transform(window), src.crs


def write_stack(path, data, transform, crs) -> Path:
    """The equivalent stack: the same pixels as a 6-band GeoTIFF."""
    with rasterio.open(path, "w", driver="GTiff", width=data.shape[2], height=data.shape[1], count=6, dtype="uint16",
                       nodata=0, crs=crs, transform=transform) as dst:
        dst.write(data)
        dst.descriptions = BANDS
    return Path(path)


def product_name(level: str, baseline: str) -> str:
    return f"S2B_MSI{level}_{SENSED}_N{baseline.replace('.', '')}_R122_{TILE}_20230823T184759.SAFE"


def write_product(out_dir, data, transform, crs, level="L2A", baseline="05.09", scl=None, as_zip=False,
                  driver="JP2OpenJPEG", name=None, drop=()) -> Path:
    """Write a SAFE product holding ``data`` (6, h, w) (B11/B12 taken at 20 m from it).

    ``scl`` (h/2, w/2) uint8 is the L2A scene classification; ``drop`` names band files to
    leave out (a damaged product). Returns the .SAFE folder or the .zip."""
    out_dir = Path(out_dir)
    name = name or product_name(level, baseline)
    safe = out_dir / name
    offset = 1000 if float(baseline) >= 4.0 else 0
    dn = np.where(data > 0, data.astype(np.int32) + offset, 0).astype(np.uint16)
    granule = f"GRANULE/{level}_{TILE}_{DATATAKE}/IMG_DATA"
    suffix = ".jp2"
    files = []
    for k, band in enumerate(BANDS):
        coarse = band in ("B11", "B12")
        pixels = dn[k, ::2, ::2] if coarse else dn[k]
        res = 20 if coarse else 10
        stem = f"{granule}/R{res}m/{TILE}_{SENSED}_{band}_{res}m" if level == "L2A" else f"{granule}/{TILE}_{SENSED}_{band}"
        files.append(stem)
        if level == "L2A" and not coarse:  # the 20 m copy of a 10 m band: the reader must take the 10 m one
            files.append(f"{granule}/R20m/{TILE}_{SENSED}_{band}_20m")
            _write_band(safe / (files[-1] + suffix), dn[k, ::2, ::2], transform * Affine.scale(2), crs, driver)
        if band not in drop:
            _write_band(safe / (stem + suffix), pixels, transform * Affine.scale(res / 10), crs, driver)
    if level == "L2A":
        scl = np.full((data.shape[1] // 2, data.shape[2] // 2), 4, np.uint8) if scl is None else scl
        stem = f"{granule}/R20m/{TILE}_{SENSED}_SCL_20m"
        files.append(stem)
        _write_band(safe / (stem + suffix), scl, transform * Affine.scale(2), crs, driver)
    (safe / f"MTD_MSI{level}.xml").write_text(_metadata(level, baseline, name, files))
    if not as_zip:
        return safe
    archive = out_dir / (name + ".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for path in sorted(safe.rglob("*")):
            zf.write(path, path.relative_to(out_dir).as_posix())
    shutil.rmtree(safe)  # only the zip remains: it must be read in place
    return archive


def write_item(path, hrefs: dict, properties: dict | None = None, raster_bands: dict | None = None,
               names="earthsearch") -> Path:
    """A STAC item whose assets point at ``hrefs`` (band -> href, relative or absolute)."""
    keys = {"earthsearch": {"B02": "blue", "B03": "green", "B04": "red", "B08": "nir", "B11": "swir16",
                            "B12": "swir22", "SCL": "scl"},
            "planetary": {b: b for b in (*BANDS, "SCL")}}[names]
    assets = {}
    for band, href in hrefs.items():
        asset = {"href": str(href), "type": "image/tiff; application=geotiff; profile=cloud-optimized"}
        if raster_bands and band in raster_bands:
            asset["raster:bands"] = [raster_bands[band]]
        assets[keys[band]] = asset
    item = {"type": "Feature", "stac_version": "1.0.0", "id": Path(path).stem, "geometry": None,
            "properties": {"datetime": "2023-08-23T15:55:59Z", **(properties or {})}, "assets": assets, "links": []}
    Path(path).write_text(json.dumps(item, indent=1))
    return Path(path)


def write_band_files(folder, data, transform, crs, offset=0, scl=None) -> dict:
    """One GeoTIFF per band (B11/B12 at 20 m, SCL at 20 m), as a STAC item's assets; band -> path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dn = np.where(data > 0, data.astype(np.int32) + offset, 0).astype(np.uint16)
    out = {}
    for k, band in enumerate(BANDS):
        coarse = band in ("B11", "B12")
        out[band] = _write_band(folder / f"{band}.tif", dn[k, ::2, ::2] if coarse else dn[k],
                                transform * Affine.scale(2 if coarse else 1), crs, "GTiff")
    if scl is not None:
        out["SCL"] = _write_band(folder / "SCL.tif", scl, transform * Affine.scale(2), crs, "GTiff")
    return out


def _write_band(path: Path, pixels, transform, crs, driver) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    options = {"QUALITY": 100, "REVERSIBLE": "YES"} if driver == "JP2OpenJPEG" else {}
    with rasterio.open(path, "w", driver=driver, width=pixels.shape[1], height=pixels.shape[0], count=1,
                       dtype=pixels.dtype, crs=crs, transform=transform, **options) as dst:
        dst.write(pixels, 1)
    for aux in path.parent.glob(path.name + ".aux.xml"):
        aux.unlink()
    return path


def _metadata(level: str, baseline: str, name: str, files: list[str]) -> str:
    image_files = "\n".join(f"          <IMAGE_FILE>{f}</IMAGE_FILE>" for f in files)
    ids = {"B01": 0, "B02": 1, "B03": 2, "B04": 3, "B05": 4, "B06": 5, "B07": 6, "B08": 7, "B8A": 8, "B09": 9,
           "B10": 10, "B11": 11, "B12": 12}
    new = float(baseline) >= 4.0
    if level == "L2A":
        root, q = "n1:Level-2A_User_Product", '<QUANTIFICATION_VALUES_LIST>\n        <BOA_QUANTIFICATION_VALUE unit="none">10000</BOA_QUANTIFICATION_VALUE>\n        <AOT_QUANTIFICATION_VALUE unit="none">1000.0</AOT_QUANTIFICATION_VALUE>\n      </QUANTIFICATION_VALUES_LIST>'
        offsets = ("<BOA_ADD_OFFSET_VALUES_LIST>\n" + "\n".join(
            f'        <BOA_ADD_OFFSET band_id="{i}">-1000</BOA_ADD_OFFSET>' for i in ids.values())
            + "\n      </BOA_ADD_OFFSET_VALUES_LIST>") if new else ""
        xmlns = "https://psd-14.sentinel2.eo.esa.int/PSD/User_Product_Level-2A.xsd"
    else:
        root, q = "n1:Level-1C_User_Product", '<QUANTIFICATION_VALUE unit="none">10000</QUANTIFICATION_VALUE>'
        offsets = ("<Radiometric_Offset_List>\n" + "\n".join(
            f'        <RADIO_ADD_OFFSET band_id="{i}">-1000</RADIO_ADD_OFFSET>' for i in ids.values())
            + "\n      </Radiometric_Offset_List>") if new else ""
        xmlns = "https://psd-14.sentinel2.eo.esa.int/PSD/User_Product_Level-1C.xsd"
    return f"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<{root} xmlns:n1="{xmlns}">
  <n1:General_Info>
    <Product_Info>
      <PRODUCT_START_TIME>2023-08-23T15:55:59.024Z</PRODUCT_START_TIME>
      <PRODUCT_URI>{name}</PRODUCT_URI>
      <PROCESSING_LEVEL>Level-{level[1:]}</PROCESSING_LEVEL>
      <PRODUCT_TYPE>S2MSI{level[1:]}</PRODUCT_TYPE>
      <PROCESSING_BASELINE>{baseline}</PROCESSING_BASELINE>
      <Product_Organisation>
        <Granule_List>
          <Granule imageFormat="JPEG2000">
{image_files}
          </Granule>
        </Granule_List>
      </Product_Organisation>
    </Product_Info>
    <Product_Image_Characteristics>
      <Special_Values>
        <SPECIAL_VALUE_TEXT>NODATA</SPECIAL_VALUE_TEXT>
        <SPECIAL_VALUE_INDEX>0</SPECIAL_VALUE_INDEX>
      </Special_Values>
      {q}
      {offsets}
    </Product_Image_Characteristics>
  </n1:General_Info>
</{root}>
"""

"""File conventions of the house: what a mask's values mean, how chips store reflectance,
which pixels of an input hold data, how sources and the outputs named after them are named,
and how the CSV tables users write (manifests, dates) are read.

Masks are uint8: 0 land, 1 water, 255 nodata. Chips store reflectance x 10000 as uint16
with 0 as nodata. An input pixel holds no data where any band is NaN, where every band equals
the file's nodata value, or where every band is 0 (Sentinel-2's own convention).
"""

from __future__ import annotations

import csv
import glob
import io
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
from rasterio.enums import ColorInterp, MaskFlags

from .rulebook import refuse

LAND, WATER, NODATA = 0, 1, 255
CHIP_SCALE = 10000.0  # chips (and synthetic scenes) store reflectance x 10000 as uint16, 0 nodata
GEOTIFF_SUFFIXES = (".tif", ".tiff", "")  # names rasters are written under (GDAL's GTiff takes none too)
PRODUCT_METADATA_NAMES = ("MTD_MSIL2A.xml", "MTD_MSIL1C.xml")  # a Sentinel-2 product's, in its .SAFE folder
PRODUCT_DEPTH = 4  # folders from a product's R10m up to it: R10m, IMG_DATA, the granule's, GRANULE
RASTER_SUFFIXES = (".tif", ".tiff", ".jp2", ".vrt")  # what counts as a raster among a folder's or a zip's files


@dataclass(frozen=True)
class OutputKind:
    """What an output file is written as: the suffixes its name may end in (any case; "" for
    none), and how a refusal of another name says it."""

    suffixes: tuple[str, ...]
    writes: str


OCCURRENCE_FILE = OutputKind(GEOTIFF_SUFFIXES, "occurrence writes a GeoTIFF")
RIVERS_FILE = OutputKind((".gpkg",), "rivers are written as a GeoPackage")
POLYGONS_FILE = OutputKind((".gpkg", ".geojson", ".json", ".shp", ".fgb"),
                           "polygons are written in the format of their suffix")
PLOT_FILE = OutputKind((".png", ""), "the plot is a PNG")
TABLE_FILE = OutputKind((".csv", ".txt", ""), "the table is written as CSV")
WEIGHTS_FILE = OutputKind((".safetensors",), "weights are written as safetensors")


# A training run's folder: its DeepSpeed checkpoints (for --resume), and the weights it exports
RUN_CHECKPOINTS, RUN_BEST, RUN_LAST = "checkpoints", "best.safetensors", "last.safetensors"
# A mask's colours, in its palette (a GIS shows water blue as it opens it) and in plots
MASK_COLOURS = {"water": "#1f5fbf", "land": "#d9c89e", "left out": "#808080"}


def mask_palette() -> dict[int, tuple[int, int, int, int]]:
    """The colour table of a 0/1 mask: land and water in MASK_COLOURS, nodata transparent."""
    rgb = {name: tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5)) for name, colour in MASK_COLOURS.items()}
    return {LAND: (*rgb["land"], 255), WATER: (*rgb["water"], 255), NODATA: (0, 0, 0, 0)}


# A 2 m output's ``values`` tag: a 0/1 mask, or (True) a ``predict --probability`` raster.
VALUES_TAG = {False: "0 land, 1 water, 255 nodata", True: "probability percent 0-100, 255 nodata"}


def percent_cut(threshold: float) -> int:
    """The least whole percent at or above ``threshold`` (a probability, 0-1): where a percent
    raster cut at ``threshold`` is water (0.55 gives 55: the product is rounded to 6 places first,
    as 0.55 x 100 is 55.00000000000001 in floats)."""
    return math.ceil(round(float(threshold) * 100, 6))


def probability_cut(tags: dict) -> int | None:
    """Where a raster of ``predict --probability`` (its ``values`` tag says so) is water: pixels at
    or above its ``threshold`` tag as a whole percent (0.5 when untagged); None for any other raster
    (a 0/1 mask)."""
    if "probability" not in tags.get("values", ""):
        return None
    return percent_cut(float(tags.get("threshold", 0.5)))


# The ``software`` tag of ``s2s2net occurrence``'s raster (band 1: percent of the dates seen
# as water), and the tag naming where its permanent water starts (percent), by JRC's definition
OCCURRENCE_SOFTWARE, PERMANENT_TAG = "s2s2net occurrence", "permanent_from_percent"
PERMANENT_FROM = 90  # percent of valid dates seen as water: permanent water


def occurrence_cut(tags: dict, at_least: int | None = None) -> int | None:
    """Where a raster of ``s2s2net occurrence`` (its ``software`` tag says so) is water: band 1
    at or above ``at_least`` percent, or else its permanent water's (the tag's,
    ``PERMANENT_FROM`` when untagged); None for any other raster."""
    if tags.get("software") != OCCURRENCE_SOFTWARE:
        return None
    return at_least if at_least is not None else int(float(tags.get(PERMANENT_TAG, PERMANENT_FROM)))


def water_percent(prob: np.ndarray, water: np.ndarray, cut: int) -> np.ndarray:
    """Probabilities as whole percent (uint8): rounded, except that the pixels ``water`` holds read
    at least ``cut`` and the others less, so that the raster cut there is exactly the mask
    (rounding alone puts the half percent below a threshold on the water's side)."""
    percent = np.clip(np.rint(prob * 100), 0, 100)
    return np.where(water, np.maximum(percent, cut), np.minimum(percent, cut - 1)).astype(np.uint8)


def reflectance_to_dn(reflectance: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Reflectance as uint16 reflectance x 10000 (at least 1, so that 0 stays nodata); 0 where not ``valid``.
    The product is taken in ``reflectance``'s own float type; NaN (a degraded scene's nodata) is 0."""
    dn = np.clip(np.rint(np.nan_to_num(reflectance * CHIP_SCALE, nan=0.0)), 1, 65535).astype(np.uint16)
    if valid is not None:
        dn[:, ~valid] = 0
    return dn


def dn_to_reflectance(dn: np.ndarray) -> np.ndarray:
    """uint16 reflectance x 10000 (chips, synthetic scenes) as float32 reflectance."""
    return dn.astype(np.float32) / np.float32(CHIP_SCALE)


def valid_mask(raw: np.ndarray, nodata: float | None) -> np.ndarray:
    """Pixels that hold data: not NaN in any band, not all-nodata, not all-zero. ``raw`` is (bands, h, w)."""
    valid = np.ones(raw.shape[1:], dtype=bool)
    if raw.dtype.kind == "f":
        valid &= ~np.isnan(raw).any(axis=0)
    if nodata is not None and not (isinstance(nodata, float) and math.isnan(nodata)):
        valid &= ~(raw == nodata).all(axis=0)
    valid &= (raw != 0).any(axis=0)
    return valid


def safe_name(text: str) -> str:
    """``text`` with every character but letters, digits, '-', '_' and '.' replaced by '_' (for file names)."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


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
    """A file-name stem for outputs and ids named after a scene: suffixes .tif/.vrt/.json/.zip/.SAFE
    dropped, in any case (a camera's or Windows' SCENE.TIF too); a band folder inside an unpacked
    product (its granule's folder, IMG_DATA) named after the product, IMG_DATA being no name."""
    product = enclosing_product(path)
    name = source_name(product if product is not None else path)
    for suffix in (".zip", ".json", ".tiff", ".tif", ".vrt", ".safe"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or "scene"


def enclosing_product(folder) -> Path | None:
    """The unpacked Sentinel-2 product (a folder holding its MTD_MSIL*.xml) that the local folder
    ``folder`` lies in, as its granule, IMG_DATA or R10m folder does; None for anything else."""
    path = Path(str(folder))
    if is_remote(folder) or not path.is_dir():
        return None
    for parent in list(path.resolve().parents)[:PRODUCT_DEPTH]:
        if any((parent / name).is_file() for name in PRODUCT_METADATA_NAMES):
            return parent
    return None


def source_file(source) -> str:
    """The file or URL ``source`` reads: the collection's, for one of its items
    (``search.json#ITEM_ID``)."""
    where, sep, _ = str(source).rpartition("#")
    return where if sep and where.lower().endswith(".json") else str(source)


def check_exists(source) -> None:
    """InputError when ``source`` names a local file or folder that is not there (for a
    collection's item, the collection's file): said before a model loads or anything is read.
    URLs and GDAL's virtual paths are GDAL's to find; a pattern that files match (a quoted
    ``"scenes/*.tif"``, which no shell expanded) is said to be one."""
    if not is_remote(source) and not os.path.exists(source_file(source)):
        matches = glob.glob(str(source)) if any(c in str(source) for c in "*?[") else []
        if matches:
            raise refuse("S2N-FILE-IS-PATTERN", source, count=len(matches))
        raise refuse("S2N-FILE-NOT-FOUND", source)


def source_key(source) -> str:
    """What a source is, whatever it was named: the real path of a file or folder (by any name,
    through links), else the name itself (a URL, a GDAL path)."""
    return os.path.realpath(source) if os.path.exists(str(source)) else str(source)


def check_each_source_once(sources, what: str = "scene") -> None:
    """InputError when one source (a ``what``) is named twice (the same file or folder by two
    names too, a link to it): mapped, counted as a date, or trained on twice."""
    seen = {}
    for source in sources:
        where = source_key(source)
        if where in seen:
            raise refuse("S2N-INPUT-TWICE", source, other=seen[where], what=what)
        seen[where] = source


def is_remote(path) -> bool:
    """URLs and GDAL virtual paths, which are strings for GDAL, never local files."""
    text = str(path)
    return "://" in text or text.startswith("/vsi")


def zipped_rasters(archive) -> list[tuple[PurePosixPath, str]]:
    """The rasters (by RASTER_SUFFIXES) in the zip ``archive``: (name in it, GDAL /vsizip/ path),
    in order; empty for a Sentinel-2 product's zip (its metadata lists its files), a zip of none
    (a zipped shapefile) or anything that is no zip."""
    if not str(archive).lower().endswith(".zip") or not os.path.isfile(archive):
        return []
    try:
        with zipfile.ZipFile(archive) as zf:
            members = sorted(n for n in zf.namelist() if not n.endswith("/"))
    except (zipfile.BadZipFile, OSError):
        return []
    if any(PurePosixPath(n).name in PRODUCT_METADATA_NAMES for n in members):
        return []
    root = "/vsizip/" + os.path.abspath(archive)
    return [(PurePosixPath(n), f"{root}/{n}") for n in members if PurePosixPath(n).suffix.lower() in RASTER_SUFFIXES]


def raster_in_zip(source) -> str | None:
    """The GDAL path (/vsizip/) of the one raster the zip ``source`` holds, which stands for it
    wherever a raster is read (Google Earth Engine downloads one so: ``download.tif`` in a zip);
    None for anything else (a file that is no zip, a zipped shapefile, a product). InputError for
    a zip of several, naming them and the path that reads one."""
    rasters = zipped_rasters(source)
    if len(rasters) > 1:
        raise refuse("S2N-ZIP-SEVERAL-RASTERS", source, count=len(rasters),
                     names=", ".join(str(n) for n, _ in rasters[:3]) + (", ..." if len(rasters) > 3 else ""),
                     one=rasters[0][1])
    return rasters[0][1] if rasters else None


def gdal_path(path) -> str:
    """A path or URL as GDAL opens it: https:// via /vsicurl/, s3:// via /vsis3/, gs:// via
    /vsigs/; local paths absolute; GDAL virtual paths as given."""
    text = str(path)
    if text.startswith("/vsi"):
        return text
    for scheme, prefix in (("s3://", "/vsis3/"), ("gs://", "/vsigs/"), ("az://", "/vsiaz/")):
        if text.startswith(scheme):
            return prefix + text[len(scheme):]
    if text.startswith(("http://", "https://", "ftp://")):
        return "/vsicurl/" + text
    return os.path.abspath(text)


def gdal_masked(src) -> bool:
    """Whether ``src`` keeps a mask beside its values that says more than its nodata values: an
    internal or .msk mask band, or an alpha band (of any stack, not only GDAL's RGBA)."""
    return (any(MaskFlags.per_dataset in flags for flags in src.mask_flag_enums)
            or ColorInterp.alpha in src.colorinterp)


def gdal_empty(src, window) -> np.ndarray:
    """Where ``src``'s mask band (GDAL's dataset mask) or its alpha band (0) marks ``window``
    empty: nodata, whatever its values."""
    empty = src.dataset_mask(window=window) == 0
    for index, interp in enumerate(src.colorinterp, start=1):
        if interp == ColorInterp.alpha:
            empty |= src.read(index, window=window) == 0
    return empty


CSV_DELIMITERS = ",;\t"  # a comma, or what spreadsheets save in many locales: ';', or a tab


def header_said(path, most: int = 60) -> str:
    """The header of the table at ``path`` as a refusal of its columns says it: its first line as
    written (cut to ``most`` characters: a table without a header row starts with paths), or
    that it has none."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
        said = fh.readline().strip()
    if not said.strip(",;\t "):
        return "it has no header row"
    return "its header is " + (said if len(said) <= most else said[:most - 3] + "...")


def read_csv(path) -> tuple[list[str], list[dict]]:
    """The column names and rows (dicts by column) of a CSV table a user wrote, as spreadsheets
    save it too: a UTF-8 byte-order mark (Excel's "CSV UTF-8"), CRLF lines, ';' or a tab
    between the columns (the first of CSV_DELIMITERS the header holds), and column names in any
    case or with spaces around them ("Image" is image). OSError, UnicodeDecodeError and
    csv.Error are the caller's to word."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        text = fh.read()
    header = text.splitlines()[0] if text else ""
    reader = csv.DictReader(io.StringIO(text), delimiter=next((d for d in CSV_DELIMITERS if d in header), ","))
    reader.fieldnames = [(name or "").strip().lower() for name in reader.fieldnames or ()]
    return reader.fieldnames, list(reader)

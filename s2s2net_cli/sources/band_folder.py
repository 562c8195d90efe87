"""A folder of band files as one scene: a raster per band, named for it (an unpacked product's
``T18SVG_20230823T155559_B02_10m.jp2``, Copernicus Browser's ``..._L2A_B02_(Raw).tiff``, a
notebook's ``blue.tif``), read through a VRT on the grid of B02 as a product's band files are.
A ``.zip`` of such files (as Copernicus Browser downloads them) is read in place, as a folder;
a zip that holds one raster named for no band (a stack, as Google Earth Engine downloads one)
is read in place as that stack (``formats.raster_in_zip``, in open.py).

A folder says nothing of its radiometry: it is read as a stack is, with --scale (default
10000, or 1 for float reflectance) and --offset; one inside an unpacked product (its granule,
IMG_DATA or R10m folder) with the product's, as the product itself would be.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath, PurePosixPath

import rasterio
from rasterio.errors import RasterioIOError

from ..bands import BAND_NAMES, band_name
from ..errors import first_line
from ..formats import RASTER_SUFFIXES, zipped_rasters
from ..rulebook import refuse
from .scene import band_count
from .vrt import BandFiles

SCL = "SCL"
RESOLUTION_FOLDER = re.compile(r"R\d+m")


def band_of(path: PurePath) -> str | None:
    """The one band (of the model's six, or SCL) a file's name says it holds; None where it
    names none, several (``red_edge_B05``: red and B05), or another (``B8A``, ``TCI``)."""
    words = re.split(r"[_.\- ]", path.stem)
    named = {w.upper() if w.upper() == SCL else band_name(w) for w in words} - {None}
    return named.pop() if len(named) == 1 and named <= {*BAND_NAMES, SCL} else None


def held_bands(source) -> dict[str, list[str]]:
    """The band files in the folder or zip ``source``, by band, as GDAL opens them: a folder's
    directly in it and in its R10m, R20m and R60m folders (an unpacked L2A product's IMG_DATA), a
    granule's folder's in its IMG_DATA; a zip's anywhere in it. Empty for anything else (a
    file, a zip that is a product or no zip at all)."""
    folder = Path(source)
    if str(source).lower().endswith(".zip") and folder.is_file():
        return _zipped_bands(folder)
    if not folder.is_dir():
        return {}
    if (folder / "IMG_DATA").is_dir():
        folder = folder / "IMG_DATA"
    try:
        places = [folder, *(p for p in folder.iterdir() if p.is_dir() and RESOLUTION_FOLDER.fullmatch(p.name))]
        files = sorted(p for place in places for p in place.iterdir()
                       if p.is_file() and p.suffix.lower() in RASTER_SUFFIXES)
    except OSError:
        return {}
    return _by_band((path, str(path)) for path in files)


def _zipped_bands(archive: Path) -> dict[str, list[str]]:
    """The band files in the zip ``archive``, read in place through GDAL's /vsizip/; empty for a
    product's zip (its metadata lists its files) or a file that is no zip."""
    return _by_band(zipped_rasters(archive))


def _by_band(files) -> dict[str, list[str]]:
    """(name, GDAL path) pairs by the band each name says."""
    found: dict[str, list[str]] = {}
    for name, path in files:
        band = band_of(name)
        if band is not None:
            found.setdefault(band, []).append(path)
    return found


def holds_band_files(found: dict[str, list[str]]) -> bool:
    """Whether the files ``found`` (held_bands's) are band files, of one band each, and not
    scenes whose names carry a band's word (a folder of Red_River_2023.tif, Blue_Nile_2022.tif
    and Mekong_2021.tif was refused as band files lacking B03). Opened only where a band is
    missing: a folder that names all six is read as band files."""
    if all(band in found for band in BAND_NAMES):
        return True
    return all(band_count(p) <= 1 for paths in found.values() for p in paths)  # one unread: said as its band's


def folder_bands(source: str, found: dict[str, list[str]]) -> BandFiles:
    """The band files of the folder or zip ``source`` (``found``: held_bands's), one per band,
    the finest where a band has files at several pixel sizes (an unpacked L2A product's R10m,
    R20m and R60m); InputError naming the folder for a band it lacks or holds twice at one size.
    Its radiometry is left to --scale and --offset (open_scene sets a product's on a folder inside one)."""
    missing = [band for band in BAND_NAMES if band not in found]  # said before any file is read
    if missing:
        raise refuse("S2N-BAND-FOLDER-MISSING", source, band=missing[0], held=", ".join(sorted(found)))
    files = {}
    for band in (*BAND_NAMES, SCL):
        paths = found.get(band, [])
        if len(paths) < 2:  # one file, read once by the VRT; none: no SCL, no cloud mask, as an L1C's
            files.update({band: p for p in paths})
            continue
        sizes = {path: _pixel_size(source, path, band) for path in paths}
        finest = min(sizes.values())
        at_finest = [PurePosixPath(p).name for p, size in sizes.items() if size == finest]
        if len(at_finest) > 1:
            raise refuse("S2N-BAND-FOLDER-TWICE", source, band=band, files=", ".join(at_finest))
        files[band] = next(p for p, size in sizes.items() if size == finest)
    return BandFiles(source, "band folder", files, (0.0,) * len(BAND_NAMES), 1.0)


def _pixel_size(source: str, path: str, band: str) -> float:
    try:
        with rasterio.open(path) as src:
            return abs(src.transform.a)
    except RasterioIOError as exc:
        raise refuse("S2N-PRODUCT-BAND-UNREADABLE", source, name=band, file=path, error=first_line(exc)) from exc

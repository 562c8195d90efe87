"""Sentinel-2 L1C and L2A products in ESA's SAFE layout: a ``.SAFE`` folder, its
``MTD_MSIL1C.xml`` / ``MTD_MSIL2A.xml``, or the ``.zip`` holding it (read in place through
GDAL's ``/vsizip/``, never unpacked).

The product metadata lists the band files (IMAGE_FILE, without the ``.jp2`` suffix) and
states the radiometry: reflectance = (DN + offset) / quantification, with QUANTIFICATION_VALUE
and RADIO_ADD_OFFSET in L1C, BOA_QUANTIFICATION_VALUE and BOA_ADD_OFFSET in L2A. Products
before processing baseline 04.00 have no offset list (offset 0); later ones say -1000. Each
band is taken at its finest resolution; 0 is nodata by the product's convention.
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from ..bands import BAND_NAMES, DEFAULT_SCALE
from ..formats import PRODUCT_METADATA_NAMES, gdal_path, is_remote
from ..rulebook import refuse
from .vrt import BandFiles

# band_id in the metadata's offset lists
BAND_IDS = {"B01": 0, "B02": 1, "B03": 2, "B04": 3, "B05": 4, "B06": 5, "B07": 6, "B08": 7, "B8A": 8,
            "B09": 9, "B10": 10, "B11": 11, "B12": 12}
_IMAGE_FILE = re.compile(r"_(B\d\d|B8A|SCL)(?:_(\d+)m)?$")


def is_product(text: str) -> bool:
    """A path that names a SAFE product: a .SAFE folder, an MTD_MSIL*.xml, a .zip, or a
    folder that holds an MTD_MSIL*.xml."""
    name = text.rstrip("/").rsplit("/", 1)[-1]
    if name.lower().endswith((".safe", ".zip")) or (name.upper().startswith("MTD_MSIL") and name.lower().endswith(".xml")):
        return True
    return not is_remote(text) and os.path.isdir(text) and any(os.path.exists(os.path.join(text, m)) for m in PRODUCT_METADATA_NAMES)


def product_bands(source: str) -> BandFiles:
    """The six bands (and SCL for L2A) of the product ``source`` with its offsets and scale."""
    root, metadata_name, elements, exists = _metadata(source)
    level = "L2A" if metadata_name == "MTD_MSIL2A.xml" else "L1C"
    granules = sum(1 for tag, _ in elements if tag == "Granule" or tag == "Granules")
    if granules > 1:
        raise refuse("S2N-SAFE-GRANULES", source, granules=granules)
    image_files = [el.text.strip() for tag, el in elements if tag == "IMAGE_FILE" and el.text]
    if not image_files:
        raise refuse("S2N-SAFE-NO-BAND-FILES", source, metadata_name=metadata_name)
    finest = _finest_band_files(image_files)
    wanted = list(BAND_NAMES) + (["SCL"] if level == "L2A" else [])
    files = {}
    for band in wanted:
        if band not in finest:
            if band == "SCL":
                continue  # an L2A product without scene classification: no cloud mask
            raise refuse("S2N-SAFE-NO-BAND-FILE", source, metadata_name=metadata_name, band=band)
        member = finest[band] + ".jp2"
        if not exists(member):
            raise refuse("S2N-SAFE-BAND-MISSING", source, member=member)
        files[band] = f"{root}/{member}"
    scale, offset = _radiometry(source, level, elements)
    return BandFiles(source, f"{level} product", files, offset, scale)


def product_radiometry(source: str) -> tuple[str, float, tuple[float, ...]]:
    """The level (L1C or L2A), scale and six offsets the product ``source``'s metadata state."""
    _, metadata_name, elements, _ = _metadata(source)
    level = "L2A" if metadata_name == "MTD_MSIL2A.xml" else "L1C"
    return (level, *_radiometry(source, level, elements))


def _metadata(source: str):
    """The product's root (as GDAL reads it), its metadata file's name, the metadata's elements
    as (tag, element) and a test of whether a member exists."""
    if is_remote(source):
        raise refuse("S2N-SAFE-REMOTE", source)
    if source.lower().endswith(".zip"):
        root, metadata_name, xml_bytes, exists = _from_zip(source)
    else:
        root, metadata_name, xml_bytes, exists = _from_folder(source)
    try:
        tree = ET.fromstring(xml_bytes)
    except ET.ParseError as exc:
        raise refuse("S2N-SAFE-XML", source, metadata_name=metadata_name, error=exc) from exc
    return root, metadata_name, [(el.tag.rsplit("}", 1)[-1], el) for el in tree.iter()], exists


def _radiometry(source: str, level: str, elements) -> tuple[float, tuple[float, ...]]:
    """Scale and the six bands' offsets: reflectance = (DN + offset) / scale."""
    prefix = "BOA_" if level == "L2A" else ""
    quantification = [el.text for tag, el in elements if tag == f"{prefix}QUANTIFICATION_VALUE"]
    scale = offset_value(quantification[0], source, f"{prefix}QUANTIFICATION_VALUE") if quantification else DEFAULT_SCALE
    if scale <= 0:
        raise refuse("S2N-SAFE-SCALE", source, prefix=prefix, scale=scale)
    offset_tag = "BOA_ADD_OFFSET" if level == "L2A" else "RADIO_ADD_OFFSET"
    offsets = {el.get("band_id"): offset_value(el.text, source, offset_tag) for tag, el in elements if tag == offset_tag}
    return scale, tuple(offsets.get(str(BAND_IDS[b]), 0.0) for b in BAND_NAMES)


def product_names(source: str) -> list[str]:
    """What the product ``source`` says of itself, whatever its file is called: its sensing start
    (PRODUCT_START_TIME) and its name (PRODUCT_URI, and the .SAFE folder it sits in); empty
    when its metadata cannot be read (the product's own reading says why)."""
    from ..errors import S2S2NetError

    try:
        if source.lower().endswith(".zip"):
            root, _, xml_bytes, _ = _from_zip(source)
        else:
            root, _, xml_bytes, _ = _from_folder(source)
        tree = ET.fromstring(xml_bytes)
    except (S2S2NetError, ET.ParseError, OSError):
        return []
    said = {el.tag.rsplit("}", 1)[-1]: (el.text or "").strip() for el in tree.iter()
            if el.tag.rsplit("}", 1)[-1] in ("PRODUCT_START_TIME", "PRODUCT_URI")}
    return [v for v in (said.get("PRODUCT_START_TIME"), said.get("PRODUCT_URI"), root.rsplit("/", 1)[-1]) if v]


def _finest_band_files(image_files: list[str]) -> dict:
    """Band name -> IMAGE_FILE at the finest resolution listed (L1C files have no suffix)."""
    best: dict[str, tuple[int, str]] = {}
    for item in image_files:
        m = _IMAGE_FILE.search(item)
        if not m:
            continue
        band, res = m.group(1), int(m.group(2) or 0)
        if band not in best or res < best[band][0]:
            best[band] = (res, item)
    return {band: item for band, (_, item) in best.items()}


def _from_folder(source: str):
    path = Path(source)
    if path.is_file() and path.name in PRODUCT_METADATA_NAMES:
        metadata = path
    elif path.is_dir():
        found = [path / m for m in PRODUCT_METADATA_NAMES if (path / m).exists()]
        if not found:
            raise refuse("S2N-SAFE-NO-METADATA", source)
        metadata = found[0]
    elif not path.exists():
        raise refuse("S2N-FILE-NOT-FOUND", source)
    else:
        raise refuse("S2N-SAFE-NOT-METADATA", source)
    root = gdal_path(metadata.parent)
    return root, metadata.name, metadata.read_bytes(), lambda member: (metadata.parent / member).is_file()


def _from_zip(source: str):
    try:
        archive = zipfile.ZipFile(source)
    except FileNotFoundError as exc:
        raise refuse("S2N-FILE-NOT-FOUND", source) from exc
    except (zipfile.BadZipFile, OSError) as exc:
        raise refuse("S2N-SAFE-ZIP", source, error=exc) from exc
    with archive:
        names = set(archive.namelist())
        candidates = sorted((n for n in names if n.rsplit("/", 1)[-1] in PRODUCT_METADATA_NAMES and n.count("/") <= 1),
                            key=lambda n: n.count("/"))
        if not candidates:
            raise refuse("S2N-SAFE-NO-METADATA-ZIP", source)
        member = candidates[0]
        xml_bytes = archive.read(member)
    folder = member.rsplit("/", 1)[0] if "/" in member else ""
    root = "/vsizip/" + os.path.abspath(source) + (f"/{folder}" if folder else "")
    return root, member.rsplit("/", 1)[-1], xml_bytes, lambda m: (f"{folder}/{m}" if folder else m) in names


def offset_value(text, source: str, what: str) -> float:
    """A float from product metadata, or InputError naming the product."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise refuse("S2N-SAFE-NOT-NUMBER", source, what=what, text=text) from None
    if not math.isfinite(value):
        raise refuse("S2N-SAFE-NOT-FINITE", source, what=what)
    return value

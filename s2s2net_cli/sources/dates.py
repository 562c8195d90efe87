"""When a scene was seen: from a STAC item's ``datetime``, a product's name (its sensing
start, ``..._MSIL2A_20230823T095559_...``) or, renamed, its metadata, a GeoTIFF's acquisition
tags (``ACQUISITION_DATE`` on predict's masks), or a date in the file name; ``None`` when none
of them says (then ``--dates`` must, a CSV read by read_dates_csv, or from Python a mapping,
read_dates).
And which acquisition it is (``acquisition``): one pass over one tile, whatever its product."""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path

import rasterio

from ..formats import header_said, read_csv, source_stem
from ..rulebook import option, refuse
from . import safe, stac
from .band_folder import held_bands

PRODUCT_TIME = re.compile(r"_MSIL(?:1C|2A)_(\d{8})T(\d{6})")
# a product's name: satellite, sensing time, (processing baseline,) relative orbit, tile
PRODUCT_NAME = re.compile(r"^(S2[A-D])_MSIL(?:1C|2A)_(\d{8}T\d{6})(?:_N\d{4})?_(R\d{3})_(T\w{5})")
DATE_TAG = "ACQUISITION_DATE"  # the tag predict writes a scene's date in, on its mask
SOURCE_TAG = "source_scene"  # the tag naming the scene a mask of predict's was made from
PRODUCT_TAG = "source_product"  # and the product it holds, where the scene is named otherwise
TAGS = (DATE_TAG, "acquisition_date", "DATETIME", "datetime", "TIFFTAG_DATETIME", "SENSING_TIME",
        "PRODUCT_START_TIME", "date")
NAME_DATE = re.compile(r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})(?!\d)")


def scene_date(source) -> str | None:
    """The scene's date as ISO ``YYYY-MM-DD``; None when nothing says it."""
    text = str(source)
    if stac.is_item(text):
        when = stac.item_datetime(text)
        return when[:10] if when else None
    match = PRODUCT_TIME.search(Path(text).name) or PRODUCT_TIME.search(text)
    if match:
        d = match.group(1)
        return f"{d[:4]}-{d[4:6]}-{d[6:]}"
    if safe.is_product(text):  # renamed: its metadata's sensing start (or name) says
        for said in safe.product_names(text):
            found = NAME_DATE.search(said)
            if found and _iso(found):
                return _iso(found)
    tags = raster_tags(text)
    for key in TAGS:
        if key in tags:
            found = NAME_DATE.search(tags[key].replace(":", "-", 2))
            if found:
                return _iso(found)
    found = NAME_DATE.search(Path(text).name)
    return _iso(found) if found else _band_files_date(text)


def _band_files_date(source) -> str | None:
    """A folder (or zip) of band files' date, as its B02 file's name says it (``T18SVG_20230823T155559_
    B02_10m.jp2``); None for anything else."""
    for path in held_bands(source).get("B02", []):
        found = NAME_DATE.search(Path(path).name)
        if found and _iso(found):
            return _iso(found)
    return None


def raster_tags(path) -> dict:
    """A raster's tags; empty for a file GDAL cannot open (a mask not written yet, a file that
    says nothing of its date)."""
    try:
        with rasterio.open(path) as src:
            return src.tags()
    except Exception:  # noqa: BLE001 - any file at all may be named
        return {}


def _iso(match) -> str | None:
    y, m, d = (int(v) for v in match.groups())
    if 1 <= m <= 12 and 1 <= d <= 31 and 1950 <= y <= 2200:
        return f"{y:04d}-{m:02d}-{d:02d}"
    return None


def read_dates(given) -> dict[str, str]:
    """Scene name or path -> ISO ``YYYY-MM-DD``: from a CSV file (read_dates_csv) or, from Python,
    a mapping of scenes to dates (``datetime.date``, ``datetime`` or ISO text), each checked as
    a CSV's row is."""
    if isinstance(given, Mapping):
        return {str(scene): iso_date(day, option("dates"), str(scene)) for scene, day in given.items()}
    return read_dates_csv(given)


def iso_date(value, where, scene: str, line: str = "") -> str:
    """``value`` (a date, a datetime or ISO text) as ``YYYY-MM-DD``; InputError naming ``where``
    (and the ``line`` of a file) for text that is not an ISO date (a 23/08/2023 would be ordered
    as text)."""
    if isinstance(value, date):  # a datetime too
        return value.isoformat()[:10]
    text = str(value).strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        raise refuse("S2N-DATES-NOT-ISO", where, where=line, text=text, scene=scene) from None


def read_dates_csv(path) -> dict[str, str]:
    """Scene name or path -> ISO ``YYYY-MM-DD`` from a CSV with the columns scene,date (a date,
    or an ISO date and time). InputError naming the file and row for a date that is not ISO (a
    23/08/2023 would be ordered as text), or a scene given two dates."""
    try:
        columns, rows = read_csv(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise refuse("S2N-DATES-UNREADABLE", path, error=getattr(exc, 'strerror', None) or exc) from exc
    if not {"scene", "date"} <= set(columns):
        raise refuse("S2N-DATES-COLUMNS", path, header=header_said(path))
    dates: dict[str, str] = {}
    for line, row in enumerate(rows, start=2):
        scene, text = (row["scene"] or "").strip(), (row["date"] or "").strip()
        day = iso_date(text, path, scene, f"line {line}: ")
        if dates.get(scene, day) != day:
            raise refuse("S2N-DATES-TWICE", path, line=line, scene=scene, first=dates[scene], date=day)
        dates[scene] = day
    return dates


def acquisition(source) -> tuple[str, ...] | None:
    """(satellite, sensing time, relative orbit, tile) of the Sentinel-2 acquisition ``source``
    holds, the same for its L1C and L2A, its .zip and .SAFE, its STAC items and the masks
    predicted from it: from its product_name; None when none says. Two tiles of one pass are
    two acquisitions."""
    name = product_name(source)
    return PRODUCT_NAME.match(name).groups() if name else None


def product_name(source) -> str | None:
    """The name of the Sentinel-2 product ``source`` holds (without .SAFE or .zip): its own name,
    a STAC item's product name or id (stac.item_product_names), a renamed product's metadata, or
    the tags of a mask of predict's (``source_scene``, ``source_product``); None when none says."""
    text = str(source)
    for name in [text] if PRODUCT_NAME.match(source_stem(text)) else [text, *_names_within(text)]:
        if PRODUCT_NAME.match(source_stem(name)):
            return source_stem(name)
    return None


def _names_within(text: str) -> list[str]:
    """The names a source not named after its product holds: a STAC item's, a renamed
    product's metadata's, or the tags of a mask of predict's."""
    if stac.is_item(text):
        return stac.item_product_names(text)
    if safe.is_product(text):
        return safe.product_names(text)
    tags = raster_tags(text)
    return [tags[key] for key in (SOURCE_TAG, PRODUCT_TAG) if tags.get(key)]

"""When a scene was seen: from a STAC item's ``datetime``, a product's name (its sensing
start, ``..._MSIL2A_20230823T095559_...``), a GeoTIFF's acquisition tags, or a date in the
file name; ``None`` when none of them says (then ``--dates`` must)."""

from __future__ import annotations

import re
from pathlib import Path

import rasterio

from . import stac

PRODUCT_TIME = re.compile(r"_MSIL(?:1C|2A)_(\d{8})T(\d{6})")
TAGS = ("ACQUISITION_DATE", "acquisition_date", "DATETIME", "datetime", "TIFFTAG_DATETIME", "SENSING_TIME",
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
    try:
        with rasterio.open(text) as src:
            tags = src.tags()
    except Exception:  # noqa: BLE001 - a file GDAL cannot open says nothing of its date
        tags = {}
    for key in TAGS:
        if key in tags:
            found = NAME_DATE.search(tags[key].replace(":", "-", 2))
            if found:
                return _iso(found)
    found = NAME_DATE.search(Path(text).name)
    return _iso(found) if found else None


def _iso(match) -> str | None:
    y, m, d = (int(v) for v in match.groups())
    if 1 <= m <= 12 and 1 <= d <= 31 and 1950 <= y <= 2200:
        return f"{y:04d}-{m:02d}-{d:02d}"
    return None

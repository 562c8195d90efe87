"""A STAC Item of a Sentinel-2 scene: a local ``.json`` (relative hrefs resolve against it)
or a URL. The bands are assets named as Earth Search names them (blue, green, red, nir,
swir16, swir22, scl) or as the Planetary Computer does (B02 ... B12, SCL). Hrefs that are
URLs or GDAL paths go to GDAL as given (https via /vsicurl/, s3 via /vsis3/).

Radiometry, reflectance = (DN + offset) / scale, in this order of authority:
1. Earth Search's ``earthsearch:boa_offset_applied: true``: the DNs carry no offset;
2. the asset's ``raster:bands`` ``scale`` and ``offset`` (reflectance = DN x scale + offset);
3. the item's ``s2:processing_baseline``: 04.00 and later store +1000 (offset -1000);
4. otherwise offset 0 and scale 10000.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request

from ..bands import BAND_NAMES, DEFAULT_SCALE
from ..errors import InputError
from ..formats import gdal_path, is_remote
from ..rulebook import refuse
from .vrt import BandFiles

ASSET_NAMES = {
    "B02": ("blue", "B02", "b02"), "B03": ("green", "B03", "b03"), "B04": ("red", "B04", "b04"),
    "B08": ("nir", "B08", "b08"), "B11": ("swir16", "B11", "b11"), "B12": ("swir22", "B12", "b12"),
    "SCL": ("scl", "SCL"),
}


def is_item(text: str) -> bool:
    lower = text.lower().split("?", 1)[0]
    return lower.endswith(".json") or (lower.startswith(("http://", "https://")) and "/items/" in lower)


def item_id(source: str) -> str | None:
    """The ``id`` of the STAC item ``source``; None when it cannot be read or has none."""
    try:
        item = _load(source)
    except InputError:
        return None
    ident = item.get("id") if isinstance(item, dict) else None
    return str(ident) if ident else None


def item_product_names(source: str) -> list[str]:
    """The names a STAC item gives its Sentinel-2 product: its ``s2:product_uri`` (Earth Search
    and the Planetary Computer both carry it), then its ``id`` (the Planetary Computer's ids are
    product names; Earth Search's, ``S2B_18SVG_20230823_0_L2A``, are not). Empty when unreadable."""
    try:
        item = _load(source)
    except InputError:
        return []
    if not isinstance(item, dict):
        return []
    props = item.get("properties") or {}
    return [str(v) for v in (props.get("s2:product_uri"), item.get("id")) if v]


def is_item_collection(source: str) -> bool:
    """Whether ``source`` is a local STAC ItemCollection (a GeoJSON FeatureCollection of items,
    as ``stac-client search --save`` writes one)."""
    if not str(source).lower().endswith(".json") or is_remote(str(source)) or not os.path.isfile(source):
        return False
    try:
        data = _load(str(source))
    except InputError:
        return False
    return isinstance(data, dict) and data.get("type") == "FeatureCollection"


def collection_items(source: str, folder) -> list[str]:
    """The items of the ItemCollection ``source`` written one a file into ``folder`` (their
    relative hrefs made absolute against the collection), in date order."""
    data = _load(str(source))
    features = [f for f in data.get("features") or [] if isinstance(f, dict) and f.get("type") == "Feature"]
    if not features:
        raise refuse("S2N-STAC-EMPTY", source)
    features.sort(key=lambda f: str((f.get("properties") or {}).get("datetime") or ""))
    paths = []
    for k, feature in enumerate(features):
        item = json.loads(json.dumps(feature))
        for asset in (item.get("assets") or {}).values():
            href = asset.get("href") if isinstance(asset, dict) else None
            if href and not is_remote(href) and not os.path.isabs(href) and not href.startswith("file://"):
                asset["href"] = os.path.join(os.path.dirname(os.path.abspath(source)), href)
        path = os.path.join(str(folder), f"{k:04d}_{str(item.get('id') or 'item').replace(os.sep, '_')}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(item, fh)
        paths.append(path)
    return paths


def item_datetime(source: str) -> str | None:
    """The ``datetime`` (or ``start_datetime``) of the STAC item ``source``; None when absent."""
    try:
        props = _load(source).get("properties") or {}
    except (InputError, AttributeError):
        return None
    value = props.get("datetime") or props.get("start_datetime")
    return str(value) if value else None


def item_bands(source: str) -> BandFiles:
    item = _load(source)
    if not isinstance(item, dict) or item.get("type") != "Feature" or not isinstance(item.get("assets"), dict):
        raise refuse("S2N-STAC-NOT-ITEM", source)
    assets = item["assets"]
    props = item.get("properties") or {}
    files, offsets, scales = {}, [], []
    for band in [*BAND_NAMES, "SCL"]:
        key = next((k for k in ASSET_NAMES[band] if k in assets), None)
        if key is None:
            if band == "SCL":
                continue
            raise refuse("S2N-STAC-NO-ASSET", source, band=band, looked_for=', '.join(ASSET_NAMES[band]))
        href = assets[key].get("href") if isinstance(assets[key], dict) else None
        if not href:
            raise refuse("S2N-STAC-NO-HREF", source, key=key)
        files[band] = _resolve(source, href)
        if band != "SCL":
            scale, offset = _radiometry(assets[key], props)
            scales.append(scale)
            offsets.append(offset)
    if len(set(scales)) > 1:
        raise refuse("S2N-STAC-SCALES-DIFFER", source, scales=sorted(set(scales)))
    return BandFiles(source, "STAC item", files, tuple(offsets), scales[0])


def _load(source: str):
    try:
        if source.lower().startswith(("http://", "https://")):
            with urllib.request.urlopen(source, timeout=60) as response:
                return json.loads(response.read().decode("utf-8"))
        with open(source, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise refuse("S2N-FILE-NOT-FOUND", source) from exc
    except (OSError, ValueError) as exc:  # URLError and JSONDecodeError among them
        raise refuse("S2N-STAC-UNREADABLE", source, error=exc) from exc


def _resolve(source: str, href: str) -> str:
    """The GDAL path of ``href``: URLs and GDAL paths as given, relative paths against the item."""
    if href.startswith("file://"):
        href = urllib.parse.unquote(urllib.parse.urlparse(href).path)
    elif is_remote(href):
        return gdal_path(href)
    elif is_remote(source):
        return gdal_path(urllib.parse.urljoin(source, href))
    path = href if os.path.isabs(href) else os.path.join(os.path.dirname(os.path.abspath(source)), href)
    if not os.path.exists(path):
        raise refuse("S2N-STAC-HREF-MISSING", source, href=href)
    return gdal_path(path)


def _radiometry(asset: dict, props: dict) -> tuple[float, float]:
    """(scale, offset) of one band asset in DN terms: reflectance = (DN + offset) / scale."""
    raster = (asset.get("raster:bands") or [{}])[0] or {}
    stac_scale = raster.get("scale")
    scale = 1.0 / float(stac_scale) if stac_scale else DEFAULT_SCALE
    if props.get("earthsearch:boa_offset_applied") is True:
        return scale, 0.0
    if raster.get("offset") is not None:
        return scale, float(raster["offset"]) * scale
    baseline = props.get("s2:processing_baseline")
    try:
        if baseline is not None and float(baseline) >= 4.0:
            return scale, -1000.0 * scale / DEFAULT_SCALE
    except (TypeError, ValueError):
        pass
    return scale, 0.0

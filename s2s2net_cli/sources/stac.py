"""A STAC Item of a Sentinel-2 scene, read with pystac: a local ``.json`` (relative hrefs
resolve against it), a URL, or one item of a local ItemCollection (``search.json#ITEM_ID``, as
occurrence names the items of a collection given it). The bands are assets named as Earth Search
names them (blue, green, red, nir, swir16, swir22, scl) or as the Planetary Computer does (B02 ...
B12, SCL). Hrefs that are URLs or GDAL paths go to GDAL as given (https via /vsicurl/, s3 via
/vsis3/). Each file or URL is read once (the reads are cached).

Radiometry, reflectance = (DN + offset) / scale, in this order of authority:
1. Earth Search's ``earthsearch:boa_offset_applied: true``: the DNs carry no offset;
2. the asset's raster extension (``raster:bands`` ``scale`` and ``offset``: reflectance = DN x
   scale + offset);
3. the item's ``s2:processing_baseline``: 04.00 and later store +1000 (offset -1000);
4. otherwise offset 0 and scale 10000.
"""

from __future__ import annotations

import functools
import os
import urllib.parse

import pystac
from pystac.extensions.raster import RasterExtension

from ..bands import BAND_NAMES, DEFAULT_SCALE
from ..errors import InputError
from ..formats import gdal_path, is_remote, source_file
from ..rulebook import refuse
from .vrt import BandFiles

ASSET_NAMES = {
    "B02": ("blue", "B02", "b02"), "B03": ("green", "B03", "b03"), "B04": ("red", "B04", "b04"),
    "B08": ("nir", "B08", "b08"), "B11": ("swir16", "B11", "b11"), "B12": ("swir22", "B12", "b12"),
    "SCL": ("scl", "SCL"),
}


def _split(source: str) -> tuple[str, str | None]:
    """(file or URL, item id) of ``source``: ``search.json#ITEM_ID`` names one item of a collection."""
    where = source_file(source)
    return (where, str(source)[len(where) + 1:]) if where != str(source) else (where, None)


def is_item(text: str) -> bool:
    lower = _split(text)[0].lower().split("?", 1)[0]
    return lower.endswith(".json") or (lower.startswith(("http://", "https://")) and "/items/" in lower)


def _read(location: str) -> dict:
    """The JSON of a file or URL, read once (a local file again when it has changed)."""
    where = location if is_remote(location) else os.path.abspath(location)
    try:
        changed = None if is_remote(where) else os.stat(where).st_mtime_ns
    except OSError:
        changed = None
    return _read_once(where, changed, location)


@functools.lru_cache(maxsize=256)
def _read_once(where: str, changed: int | None, location: str) -> dict:
    try:
        return pystac.StacIO.default().read_json(where)
    except FileNotFoundError as exc:
        raise refuse("S2N-FILE-NOT-FOUND", location) from exc
    except Exception as exc:  # JSONDecodeError, OSError; pystac wraps an HTTP error in a bare Exception
        raise refuse("S2N-STAC-UNREADABLE", location, error=exc) from exc


def read_item(source: str) -> pystac.Item:
    """The STAC item ``source`` (a file, a URL, or ``collection.json#ITEM_ID``), its hrefs
    resolving against where it was read from."""
    location, ident = _split(source)
    data = _read(location)
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        if ident is None:  # a saved search where one scene belongs (a pair's image)
            ids = [f.get("id") for f in data.get("features") or [] if isinstance(f, dict)]
            example = f"{os.path.basename(location)}#{ids[0] if ids else 'ITEM_ID'}"
            raise refuse("S2N-STAC-COLLECTION-NOT-ITEM", source, count=len(ids), example=example)
        data = next((f for f in data.get("features") or [] if isinstance(f, dict) and f.get("id") == ident), None)
    item = _item_of(data, source)
    item.set_self_href(location if is_remote(location) else os.path.abspath(location))
    return item


# what a GeoJSON Feature with assets lacks to be read as a STAC item: a search's saved features
# and hand-made items often carry no stac_version or links
ITEM_DEFAULTS = {"stac_version": "1.0.0", "links": [], "geometry": None, "properties": {}}


def _item_of(data, source: str) -> pystac.Item:
    if not isinstance(data, dict) or data.get("type") != "Feature" or not isinstance(data.get("assets"), dict):
        raise refuse("S2N-STAC-NOT-ITEM", source)
    try:
        return pystac.Item.from_dict({**ITEM_DEFAULTS, **data})
    except (pystac.STACError, KeyError, TypeError, ValueError) as exc:
        raise refuse("S2N-STAC-NOT-ITEM", source) from exc


def _item_or_none(source: str) -> pystac.Item | None:
    try:
        return read_item(source)
    except InputError:
        return None


def item_id(source: str) -> str | None:
    """The ``id`` of the STAC item ``source``; None when it cannot be read or has none."""
    item = _item_or_none(source)
    return str(item.id) if item is not None and item.id else None


def item_product_names(source: str) -> list[str]:
    """The names a STAC item gives its Sentinel-2 product: its ``s2:product_uri`` (Earth Search
    and the Planetary Computer both carry it), then its ``id`` (the Planetary Computer's ids are
    product names; Earth Search's, ``S2B_18SVG_20230823_0_L2A``, are not). Empty when unreadable."""
    item = _item_or_none(source)
    if item is None:
        return []
    return [str(v) for v in (item.properties.get("s2:product_uri"), item.id) if v]


def item_datetime(source: str) -> str | None:
    """The ``datetime`` (or ``start_datetime``) of the STAC item ``source``; None when absent."""
    item = _item_or_none(source)
    if item is None:
        return None
    value = item.properties.get("datetime") or item.properties.get("start_datetime")
    return str(value) if value else None


def is_item_collection(source: str) -> bool:
    """Whether ``source`` is a local STAC ItemCollection (a GeoJSON FeatureCollection of items,
    as ``stac-client search --save`` writes one)."""
    if not str(source).lower().endswith(".json") or is_remote(str(source)) or not os.path.isfile(source):
        return False
    try:
        data = _read(str(source))
    except InputError:
        return False
    return isinstance(data, dict) and data.get("type") == "FeatureCollection"


def collection_items(source: str) -> list[str]:
    """The items of the ItemCollection ``source``, in date order, each named
    ``source#ITEM_ID`` (read from the collection itself: no file is written)."""
    features = _read(str(source)).get("features") or []
    items = sorted((_item_of(f, f"{source}#{k}") for k, f in enumerate(features)
                    if isinstance(f, dict) and f.get("type") == "Feature"),
                   key=lambda i: str(i.properties.get("datetime") or ""))
    if not items:
        raise refuse("S2N-STAC-EMPTY", source)
    return [f"{source}#{item.id}" for item in items]


def expand_collections(sources) -> list:
    """``sources`` with each local ItemCollection standing for its items (collection_items);
    the others as given."""
    return [item for s in sources for item in (collection_items(s) if is_item_collection(s) else [s])]


def item_bands(source: str) -> BandFiles:
    item = read_item(source)
    files, offsets, scales = {}, [], []
    for band in [*BAND_NAMES, "SCL"]:
        key = next((k for k in ASSET_NAMES[band] if k in item.assets), None)
        if key is None:
            if band == "SCL":
                continue
            raise refuse("S2N-STAC-NO-ASSET", source, band=band, looked_for=", ".join(ASSET_NAMES[band]))
        asset = item.assets[key]
        if not asset.href:
            raise refuse("S2N-STAC-NO-HREF", source, key=key)
        files[band] = _resolve(source, item, asset.href)
        if band != "SCL":
            scale, offset = _radiometry(asset, item.properties)
            scales.append(scale)
            offsets.append(offset)
    if len(set(scales)) > 1:
        raise refuse("S2N-STAC-SCALES-DIFFER", source, scales=sorted(set(scales)))
    return BandFiles(source, "STAC item", files, tuple(offsets), scales[0])


def _resolve(source: str, item: pystac.Item, href: str) -> str:
    """The GDAL path of ``href``: URLs and GDAL paths as given, relative paths against the item."""
    if href.startswith("file://"):
        href = urllib.parse.unquote(urllib.parse.urlparse(href).path)
    elif is_remote(href):
        return gdal_path(href)
    elif is_remote(item.get_self_href()):
        return gdal_path(urllib.parse.urljoin(item.get_self_href(), href))
    path = href if os.path.isabs(href) else os.path.join(os.path.dirname(item.get_self_href()), href)
    if not os.path.exists(path):
        raise refuse("S2N-STAC-HREF-MISSING", source, href=href)
    return gdal_path(path)


def _radiometry(asset: pystac.Asset, props: dict) -> tuple[float, float]:
    """(scale, offset) of one band asset in DN terms: reflectance = (DN + offset) / scale."""
    bands = RasterExtension.ext(asset, add_if_missing=True).bands or []
    raster = bands[0] if bands else None
    stac_scale = raster.scale if raster is not None else None
    scale = 1.0 / float(stac_scale) if stac_scale else DEFAULT_SCALE
    if props.get("earthsearch:boa_offset_applied") is True:
        return scale, 0.0
    if raster is not None and raster.offset is not None:
        return scale, float(raster.offset) * scale
    baseline = props.get("s2:processing_baseline")
    try:
        if baseline is not None and float(baseline) >= 4.0:
            return scale, -1000.0 * scale / DEFAULT_SCALE
    except (TypeError, ValueError):
        pass
    return scale, 0.0

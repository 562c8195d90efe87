"""Scoring measured river centrelines and widths against the rivers a synthetic scene drew.

Both are GeoPackages in one CRS: the measurement as ``s2s2net rivers`` writes it (layers
``reaches`` and ``widths``), the truth as ``s2s2net synth`` writes it (layer ``rivers``:
centreline and ``width_m``). Places where a truth is ambiguous are left out of every figure:
where two drawn rivers meet or cross (within their widths), and near the scene's edge (within
twice the river's width), where a channel's end is cut. Figures:

- widths: each transect inside a drawn river's channel against that river's width (median
  and 90th percentile of the absolute error, the median error's sign says over or under);
- centrelines: the share of the measured centreline's length, inside the drawn channels, within
  ``tolerance_m`` of the drawn centreline;
- found: the share of the drawn centrelines' length with a measured centreline within the
  river's half width (what the measurement missed lowers it).

Where the scene has no data (``nodata_area``) is left out too, with the same band around it.
"""

from __future__ import annotations

import numpy as np
from shapely import STRtree, prepare
from shapely.geometry import box
from shapely.ops import unary_union

SAMPLE_M = 2.0  # centrelines are compared every this many metres


def score_rivers(measured_path, truth_path, scene_bounds: tuple[float, float, float, float],
                 tolerance_m: float = 2.0, with_errors: bool = False, nodata_area=None) -> dict:
    """Width errors, centreline distances and the share found (see the module's docstring);
    with ``with_errors``, also every matched transect's error (``errors``, metres), for pooling.
    ``nodata_area`` (a geometry: where the scene has no data) is left out like the edge band."""
    import geopandas as gpd  # heavy: only scoring reads the layers

    truth = gpd.read_file(truth_path, layer="rivers")
    reaches = gpd.read_file(measured_path, layer="reaches")
    widths = gpd.read_file(measured_path, layer="widths")
    channels = [line.buffer(w / 2) for line, w in zip(truth.geometry, truth.width_m)]
    excluded = _ambiguous(truth, channels, scene_bounds)
    if nodata_area is not None and not nodata_area.is_empty:
        excluded = excluded.union(nodata_area.buffer(2 * float(truth.width_m.max()) if len(truth) else 0))
    for geometry in channels + [excluded]:
        prepare(geometry)
    found_errors = []
    for point, width in zip(widths.geometry, widths.width_m):
        if excluded.contains(point):
            continue
        inside = [i for i, c in enumerate(channels) if c.contains(point)]
        if len(inside) == 1:
            found_errors.append(width - float(truth.width_m.iloc[inside[0]]))
    error_list, errors = found_errors, np.asarray(found_errors)
    near, total = 0.0, 0.0
    truth_lines = list(truth.geometry)
    for line in reaches.geometry:
        for p in _samples(line):
            if excluded.contains(p) or not any(c.contains(p) for c in channels):
                continue
            total += SAMPLE_M
            near += SAMPLE_M * (min(t.distance(p) for t in truth_lines) <= tolerance_m)
    found, drawn = 0.0, 0.0
    tree = STRtree(list(reaches.geometry)) if len(reaches) else None
    for line, w in zip(truth.geometry, truth.width_m):
        for p in _samples(line):
            if excluded.contains(p):
                continue
            drawn += SAMPLE_M
            if tree is not None:
                nearest = tree.geometries[tree.nearest(p)]
                found += SAMPLE_M * (nearest.distance(p) <= max(w / 2, tolerance_m))
    return {
        "transects": int(errors.size),
        "width_median_abs_error_m": round(float(np.median(np.abs(errors))), 3) if errors.size else None,
        "width_p90_abs_error_m": round(float(np.percentile(np.abs(errors), 90)), 3) if errors.size else None,
        "width_median_error_m": round(float(np.median(errors)), 3) if errors.size else None,
        "centreline_within_tolerance": round(near / total, 4) if total else None,
        "centreline_length_m": round(total, 1),
        "found": round(found / drawn, 4) if drawn else None,
        "drawn_length_m": round(drawn, 1),
        "tolerance_m": tolerance_m,
        **({"errors": [round(float(e), 3) for e in error_list]} if with_errors else {}),
    }


def _ambiguous(truth, channels: list, scene_bounds):
    """Where the truth says nothing clean: rivers meeting, and the scene's edge band."""
    parts = []
    for i, ci in enumerate(channels):
        for j in range(i + 1, len(channels)):
            meet = ci.intersection(channels[j])
            if not meet.is_empty:
                reach = max(truth.width_m.iloc[i], truth.width_m.iloc[j])
                parts.append(meet.buffer(reach))
    left, bottom, right, top = scene_bounds
    widest = float(truth.width_m.max()) if len(truth) else 0.0
    edge = 2 * widest + SAMPLE_M
    frame = box(left, bottom, right, top).difference(box(left + edge, bottom + edge, right - edge, top - edge))
    parts.append(frame)
    return unary_union(parts)


def nodata_area_of(mask_path):
    """The part of a mask that holds no data (NaN or its nodata value), as one geometry."""
    import rasterio
    from rasterio.features import shapes
    from shapely.geometry import shape

    with rasterio.open(mask_path) as src:
        data, transform, nodata = src.read(1), src.transform, src.nodata
    invalid = np.isnan(data) if data.dtype.kind == "f" else np.zeros(data.shape, bool)
    if nodata is not None and not np.isnan(nodata):
        invalid |= data == nodata
    if not invalid.any():
        return None
    return unary_union([shape(g) for g, _ in shapes(invalid.astype(np.uint8), mask=invalid, transform=transform)])


def _samples(line):
    n = max(int(line.length / SAMPLE_M), 1)
    return [line.interpolate((k + 0.5) * line.length / n) for k in range(n)]

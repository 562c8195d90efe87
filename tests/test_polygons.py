"""Polygons read from vector files: what is kept of invalid and collected geometries, and what
is refused."""

import geopandas as gpd
import pytest
import shapely

from s2s2net_cli.polygons import polygons_only

from .conftest import raises_rule


def test_invalid_polygons_are_made_valid_without_the_lines_that_leaves():
    bowtie = shapely.Polygon([(0, 0), (2, 2), (2, 0), (0, 2)])  # a ring that crosses itself
    spiked = shapely.Polygon([(0, 0), (4, 0), (4, 4), (0, 4), (0, 0), (-3, -3), (0, 0)])  # a spike out of a corner
    kept = polygons_only("water.gpkg", gpd.GeoSeries([bowtie, spiked, shapely.Polygon()]))
    assert [g.geom_type for g in kept] == ["MultiPolygon", "Polygon"]
    assert all(g.is_valid for g in kept) and [g.area for g in kept] == [pytest.approx(2.0), pytest.approx(16.0)]
    assert kept[1].bounds == (0, 0, 4, 4)  # the spike is a line once valid: dropped, not drawn


def test_a_collection_of_polygons_stands_for_its_parts_and_lines_are_refused():
    collected = shapely.GeometryCollection([shapely.box(10, 10, 11, 11), shapely.box(12, 12, 13, 13)])
    assert [g.bounds for g in polygons_only("w.geojson", gpd.GeoSeries([collected]))] == [(10, 10, 11, 11),
                                                                                          (12, 12, 13, 13)]
    mixed = shapely.GeometryCollection([shapely.box(0, 0, 1, 1), shapely.Point(5, 5)])
    with raises_rule("S2N-VECTOR-NOT-POLYGONS", "w.geojson") as info:
        polygons_only("w.geojson", gpd.GeoSeries([mixed]))
    assert "holds Point geometries" in str(info.value)

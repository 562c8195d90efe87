"""Polygons read from a vector file (an area of interest, water polygons, pixels to leave out):
only polygons, each valid, from the file's first layer. A line or a point has no area, so where
polygons are needed it is refused, not drawn as the pixels it touches."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from .errors import first_line
from .rulebook import finding, refuse

POLYGON, MULTIPOLYGON = 3, 6  # shapely's geometry type ids
# text columns that sort polygons into kinds (OpenStreetMap's water layers: fclass water,
# wetland, reservoir, glacier...; a land cover map's class), matched in any case
KIND_COLUMNS = ("class", "fclass", "type", "kind", "category", "landuse", "landcover", "land_cover", "natural",
                "label")


def unreadable(path, exc: Exception):
    """The refusal of ``path``, which no vector driver read (``exc``, pyogrio's error): a raster
    said to be one, where polygons are needed; else the driver's first sentence."""
    import rasterio

    try:
        with rasterio.open(path):
            return refuse("S2N-VECTOR-IS-RASTER", path)
    except (rasterio.errors.RasterioError, rasterio.errors.RasterioIOError):  # an OSError before rasterio 1.4
        pass
    said = first_line(exc).split(" It might help")[0].rstrip(";")  # GDAL's hint of a driver prefix, after "." or ";"
    return refuse("S2N-VECTOR-UNREADABLE", path, error=said)


def polygons_only(path, geometries) -> tuple:
    """The polygons of ``geometries`` (a GeoSeries read from ``path``; a collection stands for
    its parts), empty ones left out and invalid ones made valid (the slivers and spikes that
    leaves, lines and points, dropped); InputError naming ``path`` when any other kind is among
    them."""
    import shapely

    geometries = geometries[~(geometries.isna() | geometries.is_empty)]
    parts = shapely.get_parts(geometries.to_numpy())
    kinds = {g.geom_type for g in parts if shapely.get_type_id(g) not in (POLYGON, MULTIPOLYGON)}
    if kinds:
        raise refuse("S2N-VECTOR-NOT-POLYGONS", path, kinds=", ".join(sorted(kinds)))
    return tuple(g for g in map(_valid, parts) if not g.is_empty)


def _valid(polygon):
    """``polygon`` made valid where it is not (a self-crossing ring, a ring bent by reprojection):
    its polygons, without the lines that making it valid may leave."""
    import shapely

    if polygon.is_valid:
        return polygon
    made = shapely.get_parts(shapely.make_valid(polygon))
    return shapely.union_all([p for p in made if shapely.get_type_id(p) in (POLYGON, MULTIPOLYGON)])


def polygons_in(shapes, src_crs, dst_crs) -> list:
    """``shapes`` (polygons in ``src_crs``, rasterio's CRSs) reprojected to ``dst_crs``, made
    valid again where reprojection bent them. PROJ's errors are the caller's to word."""
    import geopandas as gpd  # heavy: only polygons need it

    moved = gpd.GeoSeries(list(shapes), crs=src_crs.to_wkt()).to_crs(dst_crs.to_wkt())
    return [g for g in map(_valid, moved) if not g.is_empty]


@dataclass(frozen=True)
class PolygonLayer:
    """The first layer of a vector file: its CRS (rasterio's; None when it has none), how many
    features it holds (-1 when its driver cannot tell without reading them) and the file's
    layer names."""

    path: str
    crs: object | None
    features: int
    layers: tuple[str, ...]
    kind_columns: tuple[str, ...] = ()  # its text columns named as KIND_COLUMNS are

    def read(self, near: tuple | None = None) -> tuple:
        """Its polygons (polygons_only), those whose bounding boxes meet ``near`` (a CRS and
        bounds in it) when given."""
        import pyogrio

        try:
            frame = pyogrio.read_dataframe(self.path, layer=0, bbox=self._bbox(near), columns=[], read_geometry=True)
        except Exception as exc:  # pyogrio raises its own errors
            raise unreadable(self.path, exc) from exc
        return polygons_only(self.path, frame.geometry)

    def kinds(self, near: tuple | None = None) -> tuple[str, tuple] | None:
        """The first of its kind columns whose features (those near ``near``) hold two values or
        more, with each value's count, most first; None where none does."""
        import pyogrio

        for column in self.kind_columns:
            try:  # with the geometries: without them GDAL before 3.9 (pyogrio before 0.10) met no feature's bbox
                frame = pyogrio.read_dataframe(self.path, layer=0, bbox=self._bbox(near), columns=[column],
                                               read_geometry=True)
            except Exception as exc:  # pyogrio raises its own errors
                raise unreadable(self.path, exc) from exc
            counts = frame[column].dropna().astype(str).value_counts()
            if len(counts) > 1:
                return column, tuple(counts.items())
        return None

    def _bbox(self, near: tuple | None):
        """``near`` (a CRS and bounds in it) as bounds in the layer's CRS; None for all of it."""
        from rasterio.warp import transform_bounds

        if near is None or self.crs is None:
            return None
        try:
            return transform_bounds(near[0], self.crs, *near[1], densify_pts=21)
        except Exception:  # PROJ raises various errors: read them all, the caller's reprojection says why
            return None


def open_layer(path) -> PolygonLayer | None:
    """The first layer of the vector file ``path``; None when no vector driver reads it, or it
    is a table with no geometries (a CSV)."""
    import pyogrio
    from rasterio.crs import CRS

    try:
        with warnings.catch_warnings():  # GDAL's "HTTP response code on URL: 0", said again by the raster's refusal
            warnings.simplefilter("ignore", RuntimeWarning)
            layers = tuple(str(name) for name, _ in pyogrio.list_layers(path))
            info = pyogrio.read_info(path, layer=0) if layers else None
    except Exception:  # pyogrio raises its own errors: not a vector file
        return None
    if info is None:
        return PolygonLayer(str(path), None, 0, layers)
    if info["geometry_type"] is None:
        return None
    kinds = tuple(str(name) for name, dtype in zip(info["fields"], info["dtypes"])
                  if dtype == "object" and str(name).lower() in KIND_COLUMNS)
    return PolygonLayer(str(path), CRS.from_user_input(info["crs"]) if info["crs"] else None, int(info["features"]),
                        layers, kinds)


def layers_warnings(layer: PolygonLayer) -> list:
    """That only the first layer of a file of several was read."""
    if len(layer.layers) > 1:
        return [finding("S2N-VECTOR-LAYERS", layer.path, count=len(layer.layers), layer=layer.layers[0])]
    return []


KINDS_NAMED = 5  # the kinds a warning names, most first


def kinds_warnings(path, kinds: tuple[str, tuple] | None) -> list:
    """That the water polygons of ``path`` are of several kinds by a column (``kinds``, as
    PolygonLayer.kinds gives them), every one drawn as water: a wetland or a glacier too."""
    if not kinds:
        return []
    column, counts = kinds
    named = ", ".join(f"{value} {count}" for value, count in counts[:KINDS_NAMED])
    more = f", and {len(counts) - KINDS_NAMED} more" if len(counts) > KINDS_NAMED else ""
    return [finding("S2N-MASK-VECTOR-KINDS", path, count=len(counts), column=column, kinds=named + more)]

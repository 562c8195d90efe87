"""Synthetic Sentinel-2 scenes whose 2 m water truth is known exactly.

A landscape is drawn at 2 m as a class map (water bodies from vector shapes: rivers, streams a
few metres wide, canals, lakes, coasts; land cover from noise fields and rotated parcels;
buildings with tiled, metal or dark tar roofs and the shadows they cast; dark confusers such as
asphalt and burnt ground). Each class has a 6-band reflectance spectrum taken from published
Sentinel-2 ranges and varied per scene. The 10 m scene is the area average over each 5 x 5
block (computed exactly as class fractions times spectra) times a smooth brightness texture,
blurred slightly, with B11/B12 averaged to 20 m and brought back to 10 m, and sensor noise. On
top of that, drawn per scene: terrain shading and cloud shadows (lit by blue-rich skylight
only, so that shadowed land has a positive MNDWI, as in real scenes), thin semi-transparent
cloud, top-of-atmosphere path radiance (L1C-like) and nodata margins.

The 2 m mask lies on the exact 5x sub-grid of the scene (transform times Affine.scale(1/5)).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import rasterio
from affine import Affine
from rasterio.crs import CRS
from rasterio.features import rasterize
from scipy import ndimage
from shapely import affinity
from shapely.geometry import LineString, Polygon, box

from ..bands import BAND_NAMES
from ..formats import reflectance_to_dn
from ..grid import SCALE_FACTOR, fine_transform, to_fine
from ..indices import bilinear_to_fine
from ..io import atomic_path, geotiff_profile

# name: (B02, B03, B04, B08, B11, B12) surface reflectance
SPECTRA = {
    "clear_water": (0.050, 0.045, 0.030, 0.015, 0.008, 0.005),
    "turbid_water": (0.070, 0.090, 0.085, 0.045, 0.020, 0.012),
    "shallow_water": (0.085, 0.100, 0.070, 0.035, 0.015, 0.010),
    "dark_water": (0.022, 0.026, 0.020, 0.010, 0.005, 0.003),  # humic, deep or shaded
    "grass": (0.035, 0.070, 0.045, 0.320, 0.200, 0.110),
    "forest": (0.020, 0.040, 0.025, 0.260, 0.130, 0.060),
    "crop_green": (0.030, 0.070, 0.035, 0.420, 0.220, 0.110),
    "crop_dry": (0.060, 0.085, 0.100, 0.250, 0.300, 0.210),
    "bare_soil": (0.090, 0.120, 0.160, 0.230, 0.320, 0.270),
    "wet_soil": (0.050, 0.070, 0.085, 0.130, 0.170, 0.120),
    "urban": (0.090, 0.100, 0.110, 0.160, 0.200, 0.180),
    "asphalt": (0.060, 0.065, 0.070, 0.085, 0.100, 0.090),
    "shadow": (0.030, 0.028, 0.022, 0.045, 0.018, 0.012),  # skylight only: blue-rich, MNDWI > 0
    "metal_roof": (0.140, 0.145, 0.130, 0.190, 0.110, 0.095),  # MNDWI > 0, NDWI < 0
    "dark_roof": (0.075, 0.080, 0.082, 0.095, 0.090, 0.080),  # tar and bitumen: dark and flat, MNDWI about 0
    "burnt": (0.030, 0.040, 0.050, 0.090, 0.150, 0.140),
    "sand": (0.150, 0.180, 0.210, 0.260, 0.330, 0.270),
    "marsh": (0.030, 0.055, 0.045, 0.180, 0.110, 0.060),
    # what real floods and coasts add (measured on real scenes the model missed)
    "flood_water": (0.105, 0.108, 0.104, 0.105, 0.060, 0.035),  # muddy, shallow, over fields: NIR as high as green
    "flooded_vegetation": (0.050, 0.070, 0.055, 0.140, 0.060, 0.030),  # plants standing in water: low SWIR
    "glint_water": (0.120, 0.115, 0.105, 0.090, 0.070, 0.060),  # sun glint on waves
    "tidal_flat": (0.075, 0.095, 0.105, 0.140, 0.110, 0.075),  # wet mud and sand left by the tide: land
}
CLASSES = tuple(SPECTRA)
CLASS = {name: i for i, name in enumerate(CLASSES)}
FIELDS = [CLASS[c] for c in ("grass", "crop_green", "crop_dry", "bare_soil", "wet_soil", "marsh")]  # what floods cover
WATER_CLASSES = (CLASS["clear_water"], CLASS["turbid_water"], CLASS["shallow_water"], CLASS["dark_water"],
                 CLASS["flood_water"], CLASS["flooded_vegetation"], CLASS["glint_water"])
# Path radiance added by the atmosphere (reflectance units), for L1C-like scenes.
TOA_OFFSET = np.array([0.070, 0.050, 0.035, 0.020, 0.006, 0.003], dtype=np.float32)
# Share of each band's illumination that is diffuse skylight, all that reaches a shadow.
DIFFUSE = np.array([0.40, 0.30, 0.25, 0.15, 0.07, 0.05], dtype=np.float32)
# Thin cloud: bright, nearly flat, a little darker in the SWIR.
CLOUD = np.array([0.38, 0.37, 0.36, 0.36, 0.27, 0.19], dtype=np.float32)
PIXEL_SIZE = 10.0


@dataclass
class SyntheticPair:
    scene: np.ndarray  # (6, h, w) uint16 reflectance x 10000, 0 = nodata
    mask: np.ndarray  # (5h, 5w) float32 0/1, NaN = nodata
    classes: np.ndarray  # (5h, 5w) uint8 class index at 2 m
    spectra: np.ndarray  # (n_classes, 6) float32, this scene's spectra
    transform: Affine
    crs: CRS
    level: str  # "L1C" or "L2A"
    seed: int
    rivers: list = field(default_factory=list)  # RiverTruth of each river and tributary drawn

    @property
    def mask_transform(self) -> Affine:
        return fine_transform(self.transform)


@dataclass(frozen=True)
class RiverTruth:
    """A river as drawn: its centreline in 2 m pixel coordinates (x, y) and its width in 2 m pixels."""

    line: LineString
    width: float

@dataclass(frozen=True)
class Sensor:
    """How the synthetic sensor sees the 2 m landscape: ``blur`` (sigma in 10 m pixels) and
    ``noise`` (reflectance sd), drawn from the seed when None; the ``texture`` of land cover;
    ``effects``: terrain and cloud shadow and thin cloud."""

    blur: float | None = None
    noise: float | None = None
    texture: float = 0.08
    effects: bool = True


BARE = Sensor(blur=0, noise=0, texture=0, effects=False)  # with level "L2A": the bare area average of the landscape


def make_pair(height: int = 256, width: int | None = None, seed: int = 0, *, level: str | None = None,
              nodata_margin: bool | None = None, sensor: Sensor = Sensor(), landscape: str = "mixed") -> SyntheticPair:
    """A seeded scene of ``height`` x ``width`` 10 m pixels and its exact 2 m truth.

    ``level`` and ``nodata_margin`` are drawn from the seed when None; ``sensor`` says how the
    landscape is seen (BARE: the bare area average of the 2 m landscape, with level "L2A");
    ``landscape`` "mixed" draws every kind of water, "rivers" one or two rivers 10-80 m wide on
    land and nothing else (a clean truth for widths), "floods" a mixed landscape under a
    fragmented flood (``fragmented_flood``). The rivers drawn are in ``rivers``.
    """
    width = height if width is None else width
    rng = np.random.default_rng(seed)
    level = level or ("L1C" if rng.random() < 0.5 else "L2A")
    H, W = height * SCALE_FACTOR, width * SCALE_FACTOR
    rivers: list = []
    if landscape == "rivers":
        classes = draw_river_landscape(H, W, rng, rivers)
    else:
        classes = draw_landscape(H, W, rng, rivers)
        if landscape == "floods":
            fragmented_flood(classes, rng)
    spectra = scene_spectra(rng)
    refl = sense(classes, spectra, rng, level=level, texture=sensor.texture,
                 blur=rng.uniform(0.3, 0.6) if sensor.blur is None else sensor.blur,
                 noise=rng.uniform(0.002, 0.005) if sensor.noise is None else sensor.noise, effects=sensor.effects)
    scene = reflectance_to_dn(refl)
    mask = np.isin(classes, WATER_CLASSES).astype(np.float32)
    if nodata_margin if nodata_margin is not None else rng.random() < 0.3:
        invalid = margin_mask(height, width, rng)
        scene[:, invalid] = 0
        mask[to_fine(invalid)] = np.nan
    zone = int(rng.integers(10, 60))
    crs = CRS.from_epsg(32600 + zone)
    x0 = float(rng.integers(30000, 70000)) * PIXEL_SIZE
    y0 = float(rng.integers(300000, 700000)) * PIXEL_SIZE
    transform = Affine(PIXEL_SIZE, 0, x0, 0, -PIXEL_SIZE, y0)
    return SyntheticPair(scene, mask, classes, spectra, transform, crs, level, seed, rivers)


def write_pair(pair: SyntheticPair, scene_path, mask_path) -> None:
    """Write the scene (uint16, nodata 0, band names) and mask (float32, NaN nodata) as GeoTIFFs."""
    _, h, w = pair.scene.shape
    with atomic_path(scene_path) as tmp:
        with rasterio.open(tmp, "w", **geotiff_profile((6, h, w), "uint16", pair.crs, pair.transform, 0)) as dst:
            dst.write(pair.scene)
            dst.descriptions = BAND_NAMES
            dst.update_tags(synthetic="s2s2net", seed=str(pair.seed), level=pair.level, scale="10000")
    with atomic_path(mask_path) as tmp:
        with rasterio.open(tmp, "w", **geotiff_profile((1, h * SCALE_FACTOR, w * SCALE_FACTOR), "float32", pair.crs,
                                                       pair.mask_transform, float("nan"))) as dst:
            dst.write(pair.mask, 1)
            dst.descriptions = ("water",)
            dst.update_tags(synthetic="s2s2net", seed=str(pair.seed))


def write_river_truth(pair: SyntheticPair, path) -> None:
    """The rivers drawn, as a GeoPackage layer ``rivers``: centreline (LineString, map
    coordinates), ``width_m`` and ``river_id``."""
    import geopandas as gpd  # heavy: only the truth file needs it
    from shapely import affinity as shapely_affinity

    t = pair.mask_transform
    lines = [shapely_affinity.affine_transform(r.line, (t.a, t.b, t.d, t.e, t.c, t.f)) for r in pair.rivers]
    gdf = gpd.GeoDataFrame({"river_id": list(range(1, len(lines) + 1)),
                            "width_m": [r.width * abs(t.a) for r in pair.rivers]},
                           geometry=gpd.GeoSeries(lines, crs=pair.crs))
    with atomic_path(path) as tmp:
        gdf.to_file(tmp, layer="rivers", driver="GPKG")


# ---------------------------------------------------------------------------------------
# landscape at 2 m


def draw_landscape(H: int, W: int, rng: np.random.Generator, rivers: list | None = None) -> np.ndarray:
    """A (H, W) uint8 class map: land cover, then dark confusers, then water on top (the rivers
    drawn appended to ``rivers``)."""
    classes = _land_cover(H, W, rng)
    confusers = []
    for _ in range(rng.poisson(1 + H * W / 2e6)):  # roads and parking lots
        confusers.append((_straight_line(H, W, rng).buffer(rng.uniform(1.5, 5)), CLASS["asphalt"]))
    for _ in range(rng.poisson(2 + H * W / 1e6)):  # shadows of trees, cliffs and lone buildings
        r = rng.uniform(2, 15)
        confusers.append((_blob(rng.uniform(0, W), rng.uniform(0, H), r, rng, 0.3), CLASS["shadow"]))
    if rng.random() < 0.3:
        r = rng.uniform(30, max(30, 0.3 * min(H, W)))  # a whole small scene may burn
        confusers.append((_blob(rng.uniform(0, W), rng.uniform(0, H), r, rng, 0.4), CLASS["burnt"]))
    _burn(classes, confusers)
    draw_water(classes, rng, rivers=rivers)
    return classes


def draw_river_landscape(H: int, W: int, rng: np.random.Generator, rivers: list) -> np.ndarray:
    """A (H, W) class map of land cover crossed by one or two meandering rivers 10 to 80 m wide
    (5 to 40 px), appended to ``rivers``; no other water."""
    classes = _land_cover(H, W, rng)
    bounds = box(0, 0, W, H)
    water_types = [CLASS["clear_water"], CLASS["turbid_water"], CLASS["dark_water"]]
    shapes = []
    for _ in range(int(rng.integers(1, 3))):
        width_px = float(np.exp(rng.uniform(np.log(5), np.log(40))))
        line = _meander(H, W, rng, width=width_px)
        shapes.append((line.buffer(width_px / 2, cap_style="flat").intersection(bounds), water_types[rng.integers(0, 3)]))
        rivers.append(RiverTruth(line.intersection(bounds), width_px))
    _burn(classes, shapes)
    return classes


def draw_water(classes: np.ndarray, rng: np.random.Generator, fields: np.ndarray | None = None,
               rivers: list | None = None) -> None:
    """Burn water bodies and their shores into the (H, W) class map ``classes``: coasts with
    beaches or tidal flats and harbours, meandering rivers with tributaries and banks (each
    appended to ``rivers`` as drawn), canals, streams, lakes with marsh, and in some scenes a
    flood over ``fields`` (default: the map's field classes)."""
    H, W = classes.shape
    bounds = box(0, 0, W, H)
    water, shores = [], []
    water_types = [CLASS["clear_water"], CLASS["turbid_water"], CLASS["shallow_water"], CLASS["dark_water"]]
    if rng.random() < 0.2:  # a coastline, with a beach or tidal flats, and sometimes sun glint
        coast = _coast(H, W, rng)
        if rng.random() < 0.4:
            shores.append((coast.buffer(rng.uniform(10, 60)), CLASS["tidal_flat"]))
        else:
            shores.append((coast.buffer(rng.uniform(3, 15)), CLASS["sand"]))
        sea = [CLASS["clear_water"], CLASS["turbid_water"], CLASS["glint_water"]][rng.choice([0, 1, 1, 2])]
        water.append((coast, sea))
        if rng.random() < 0.5:
            water.extend(_harbour(H, W, rng, near=coast))
    n_rivers = rng.choice([0, 1, 1, 2])
    for _ in range(n_rivers):
        line = _meander(H, W, rng)
        width_px = np.exp(rng.uniform(np.log(2), np.log(40)))  # 4 to 80 m
        kind = water_types[rng.choice([0, 1, 1, 2, 3])]
        channel = line.buffer(width_px / 2, cap_style="flat")
        if rng.random() < 0.4:  # banks of mud or sand
            shores.append((channel.buffer(rng.uniform(1, 4)), CLASS[["wet_soil", "sand", "tidal_flat"][rng.integers(0, 3)]]))
        water.append((channel, kind))
        if rivers is not None:
            rivers.append(RiverTruth(line.intersection(bounds), float(width_px)))
        for _ in range(rng.poisson(1.5)):
            start = line.interpolate(rng.uniform(0.1, 0.9), normalized=True)
            trib = _meander(H, W, rng, start=(start.x, start.y), length=rng.uniform(0.2, 0.8) * max(H, W))
            trib_width = max(2.0, width_px * rng.uniform(0.15, 0.5))
            water.append((trib.buffer(trib_width / 2), kind))
            if rivers is not None:
                rivers.append(RiverTruth(trib.intersection(bounds), float(trib_width)))
    for _ in range(rng.poisson(1.0)):  # narrow straight canals, 4 to 14 m
        water.append((_straight_line(H, W, rng).buffer(rng.uniform(1, 3.5), cap_style="flat"), CLASS["turbid_water"]))
    for _ in range(rng.poisson(1.0)):  # streams 3 to 8 m wide, under a 10 m pixel
        stream = _meander(H, W, rng, start=(rng.uniform(0, W), rng.uniform(0, H)), length=rng.uniform(0.3, 1.0) * (H + W))
        water.append((stream.buffer(rng.uniform(0.75, 2.0)), water_types[rng.choice([0, 1, 3])]))
    for _ in range(rng.poisson(3 + H * W / 5e5)):  # lakes and ponds, 10 m to 1 km across
        radius = np.exp(rng.uniform(np.log(2.5), np.log(min(250, 0.3 * min(H, W)))))
        lake = _blob(rng.uniform(0, W), rng.uniform(0, H), radius, rng, 0.25)
        if radius > 10 and rng.random() < 0.5:
            shores.append((lake.buffer(rng.uniform(2, 8)), CLASS["marsh"]))
        water.append((lake, water_types[rng.integers(0, 4)]))
    if rng.random() < 0.1:  # a harbour basin on a lake or river bank
        water.extend(_harbour(H, W, rng))
    _burn(classes, shores)
    _burn(classes, [(g.intersection(bounds), v) for g, v in water if v is not None])
    _burn(classes, [(g.intersection(bounds), CLASS["urban"]) for g, v in water if v is None])  # piers
    if rng.random() < 0.15:
        _flood(classes, rng, fields)


def _flood(classes: np.ndarray, rng: np.random.Generator, fields: np.ndarray | None = None) -> None:
    """Muddy flood water over the low-lying fields of a smooth extent, with flooded vegetation
    where plants stand in it; towns and forest mostly stay dry."""
    H, W = classes.shape
    extent = smooth_noise(H, W, rng, scale=rng.uniform(60, 250)) > rng.uniform(-0.3, 0.9)
    if fields is None:
        fields = np.isin(classes, FIELDS)
    flooded = extent & fields
    plants = smooth_noise(H, W, rng, scale=rng.uniform(5, 30)) > rng.uniform(0.0, 1.2)
    classes[flooded & ~plants] = CLASS["flood_water"] if rng.random() < 0.7 else CLASS["turbid_water"]
    classes[flooded & plants] = CLASS["flooded_vegetation"]


def fragmented_flood(classes: np.ndarray, rng: np.random.Generator) -> None:
    """Flood water as real floods leave it: a water depth over a rough terrain (noise of
    features from 120-500 m down to 6-20 m, each finer one weaker by a drawn roughness), so
    that deep in the flood the land is water throughout and towards its edges the water breaks
    into ragged lobes, thin channels and scattered pools; in some scenes field parcels a little
    higher or lower than their neighbours and furrows in some of them. The land that is not
    town or forest is water where the depth is positive (plants standing in it: flooded
    vegetation); the water already drawn stays. ``_flood`` draws one smooth extent instead."""
    H, W = classes.shape
    land = np.isin(classes, FIELDS)
    scale, roughness = rng.uniform(60, 250), rng.uniform(0.3, 0.8)
    depth = smooth_noise(H, W, rng, scale=scale) - rng.uniform(-0.6, 0.8)
    finer = scale / 2.5
    while finer >= 3:
        depth += (finer / scale) ** roughness * smooth_noise(H, W, rng, scale=finer)
        finer /= 2.5
    if rng.random() < 0.3:  # farmland: parcels of 40-160 m on a turned grid, furrows 6-16 m apart in some
        u, v, along = _parcels(H, W, rng)
        depth += rng.normal(0, rng.uniform(0.1, 0.5), size=(u.max() + 1, v.max() + 1))[u, v]
        furrowed = rng.random((u.max() + 1, v.max() + 1)) < rng.uniform(0, 0.5)
        depth += np.where(furrowed[u, v], rng.uniform(0.1, 0.4) * np.sin(2 * np.pi * along / rng.uniform(3, 8)), 0)
    flooded = (depth > 0) & land
    plants = smooth_noise(H, W, rng, scale=rng.uniform(5, 30)) > rng.uniform(0.3, 1.5)
    classes[flooded & ~plants] = CLASS["flood_water"] if rng.random() < 0.7 else CLASS["turbid_water"]
    classes[flooded & plants] = CLASS["flooded_vegetation"]


def _harbour(H: int, W: int, rng: np.random.Generator, near=None) -> list:
    """A rectangular basin with piers (None: land) and moored boats (metal roofs) in it."""
    cx, cy = rng.uniform(0, W), rng.uniform(0, H)
    if near is not None and not near.is_empty:
        p = near.boundary.interpolate(rng.uniform(0, 1), normalized=True)
        cx, cy = p.x, p.y
    length, width = rng.uniform(60, 250), rng.uniform(40, 150)
    angle = rng.uniform(0, 180)
    basin = affinity.rotate(box(cx - length / 2, cy - width / 2, cx + length / 2, cy + width / 2), angle)
    shapes = [(basin, CLASS["turbid_water"] if rng.random() < 0.6 else CLASS["clear_water"])]
    spacing = rng.uniform(15, 40)
    for x in np.arange(cx - length / 2 + spacing, cx + length / 2, spacing):
        pier_w = rng.uniform(1.5, 5)
        pier = box(x - pier_w / 2, cy - width / 2, x + pier_w / 2, cy - width / 2 + width * rng.uniform(0.4, 0.8))
        shapes.append((affinity.rotate(pier, angle, origin=(cx, cy)), None))
        for _ in range(rng.poisson(2)):
            bx = x + rng.choice([-1, 1]) * (pier_w / 2 + rng.uniform(1.5, 4))
            by = cy - width / 2 + rng.uniform(0.05, 0.7) * width
            boat = _blob(bx, by, rng.uniform(1.0, 3.0), rng, 0.2)
            shapes.append((affinity.rotate(boat, angle, origin=(cx, cy)), CLASS["metal_roof"]))
    return shapes


def _parcels(H: int, W: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rectangular parcels of 40 to 160 m on a grid turned by a random angle: each 2 m pixel's
    parcel as (u, v) indices from 0, and its distance along the grid's u axis (2 m pixels)."""
    size_u, size_v = rng.uniform(20, 80, size=2)
    angle = rng.uniform(0, np.pi / 2)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    along = xx * np.cos(angle) + yy * np.sin(angle)
    u = np.floor(along / size_u).astype(np.int64)
    v = np.floor((yy * np.cos(angle) - xx * np.sin(angle)) / size_v).astype(np.int64)
    return u - u.min(), v - v.min(), along


def _land_cover(H: int, W: int, rng: np.random.Generator) -> np.ndarray:
    u, v, _ = _parcels(H, W, rng)
    farm_kinds = np.array([CLASS[c] for c in ("grass", "crop_green", "crop_dry", "bare_soil", "wet_soil", "grass")])
    parcels = farm_kinds[rng.integers(0, len(farm_kinds), size=(u.max() + 1, v.max() + 1))]
    classes = parcels[u, v].astype(np.uint8)
    forest = smooth_noise(H, W, rng, scale=rng.uniform(80, 300)) > rng.uniform(0.2, 1.0)
    urban = smooth_noise(H, W, rng, scale=rng.uniform(100, 300)) > rng.uniform(0.6, 1.6)
    classes[forest] = CLASS["forest"]
    classes[urban] = CLASS["urban"]
    _buildings(classes, urban, rng)
    return classes


def _buildings(classes: np.ndarray, urban: np.ndarray, rng: np.random.Generator) -> None:
    """Buildings on lots of 12 to 40 m inside ``urban``, each casting a shadow away from the sun."""
    H, W = classes.shape
    lot = int(rng.integers(6, 21))
    gh, gw = H // lot + 1, W // lot + 1
    lot_y, lot_x = np.arange(H) // lot, np.arange(W) // lot
    in_y, in_x = np.arange(H) % lot, np.arange(W) % lot
    size_y = rng.integers(2, lot - 1, size=(gh, gw))
    size_x = rng.integers(2, lot - 1, size=(gh, gw))
    built = rng.random((gh, gw)) < rng.uniform(0.5, 0.9)
    kind = rng.random((gh, gw))
    metal, dark = rng.uniform(0.1, 0.5), rng.uniform(0.1, 0.4)
    roof = np.where(kind < metal, CLASS["metal_roof"], np.where(kind < metal + dark, CLASS["dark_roof"], CLASS["urban"]))
    footprint = (built[lot_y[:, None], lot_x[None, :]]
                 & (in_y[:, None] < size_y[lot_y[:, None], lot_x[None, :]])
                 & (in_x[None, :] < size_x[lot_y[:, None], lot_x[None, :]])) & urban
    sun = rng.uniform(0, 2 * np.pi)
    length = rng.uniform(1, 6)  # shadow length in 2 m pixels
    dy, dx = int(round(length * np.sin(sun))), int(round(length * np.cos(sun)))
    cast = np.zeros_like(footprint)
    for k in range(1, max(abs(dy), abs(dx)) + 1):
        t = k / max(abs(dy), abs(dx))
        cast |= np.roll(footprint, (int(round(t * dy)), int(round(t * dx))), axis=(0, 1))
    classes[cast & ~footprint & urban] = CLASS["shadow"]
    classes[footprint] = roof[lot_y[:, None], lot_x[None, :]][footprint]


def smooth_noise(H: int, W: int, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Gaussian noise with features of about ``scale`` pixels, unit sd, at (H, W)."""
    # at least 4 x 4 coarse cells: on 2 x 2, the wrapped filter leaves almost no variance and
    # dividing by that tiny sd blew the field up to huge values
    gh, gw = max(4, int(H / scale) + 2), max(4, int(W / scale) + 2)
    coarse = ndimage.gaussian_filter(rng.standard_normal((gh, gw)), 0.7, mode="wrap")
    coarse = (coarse - coarse.mean()) / max(coarse.std(), 1e-3)
    field = ndimage.zoom(coarse, (H / gh * 1.0001, W / gw * 1.0001), order=1, prefilter=False)
    return field[:H, :W].astype(np.float32)


def _burn(classes: np.ndarray, shapes: list) -> None:
    shapes = [(g, int(v)) for g, v in shapes if not g.is_empty]
    if shapes:
        rasterize(shapes, out=classes, transform=Affine.identity(), all_touched=False)


def _blob(cx: float, cy: float, radius: float, rng: np.random.Generator, roughness: float) -> Polygon:
    t = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    r = np.ones_like(t)
    for k in range(2, 6):
        r += roughness / k * rng.standard_normal() * np.cos(k * t + rng.uniform(0, 2 * np.pi))
    r = radius * np.clip(r, 0.3, None)
    return Polygon(np.c_[cx + r * np.cos(t), cy + r * np.sin(t)]).buffer(0)


def _straight_line(H: int, W: int, rng: np.random.Generator) -> LineString:
    cx, cy, angle = rng.uniform(0, W), rng.uniform(0, H), rng.uniform(0, np.pi)
    d = 2 * (H + W)
    return LineString([(cx - d * np.cos(angle), cy - d * np.sin(angle)), (cx + d * np.cos(angle), cy + d * np.sin(angle))])


def _meander(H: int, W: int, rng: np.random.Generator, start=None, length=None, width: float | None = None) -> LineString:
    """A meandering centre line: a heading that swings sinusoidally with a slow random drift
    (with ``width``, the bends of a river that wide: a wavelength of 10 to 14 widths, as real
    meanders have, and gentler swings)."""
    if start is None:
        start = (rng.uniform(0, W), rng.uniform(0, H))
        heading = rng.uniform(0, 2 * np.pi)
        # walk backwards first so that the river crosses the whole scene
        back = _walk(start, heading + np.pi, 1.5 * (H + W), rng, width)
        fwd = _walk(start, heading, 1.5 * (H + W), rng, width)
        return LineString(np.vstack([back[::-1], fwd[1:]]))
    return LineString(_walk(start, rng.uniform(0, 2 * np.pi), length, rng, width))


def _walk(start, heading: float, length: float, rng: np.random.Generator, width: float | None = None) -> np.ndarray:
    step = 4.0
    n = max(2, int(length / step))
    if width is None:
        period, amp = rng.uniform(40, 250), rng.uniform(0.3, 1.1)
    else:
        period, amp = max(40.0, width * rng.uniform(10, 14)), rng.uniform(0.3, 0.8)
    t = np.arange(n) * step
    theta = heading + amp * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi)) \
        + np.cumsum(rng.normal(0, 0.03, n))
    pts = np.c_[np.cumsum(step * np.cos(theta)), np.cumsum(step * np.sin(theta))] + np.asarray(start)
    return np.vstack([np.asarray(start)[None], pts])


def _coast(H: int, W: int, rng: np.random.Generator) -> Polygon:
    """The sea beyond a wavy shoreline across the scene."""
    side = rng.integers(0, 4)
    n = 200
    u = np.linspace(-0.1, 1.1, n)
    depth = rng.uniform(0.1, 0.4) + 0.05 * smooth_noise(1, n, rng, scale=20)[0] + 0.03 * np.sin(u * rng.uniform(5, 30))
    if side in (0, 1):  # top or bottom
        ys = depth * H if side == 0 else H - depth * H
        edge = H * (-1 if side == 0 else 2)
        pts = list(zip(u * W, ys)) + [(1.1 * W, edge), (-0.1 * W, edge)]
    else:
        xs = depth * W if side == 2 else W - depth * W
        edge = W * (-1 if side == 2 else 2)
        pts = list(zip(xs, u * H)) + [(edge, 1.1 * H), (edge, -0.1 * H)]
    return Polygon(pts).buffer(0)


def margin_mask(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """A straight swath edge: the pixels beyond it are nodata (at most about a third)."""
    yy, xx = np.mgrid[0:height, 0:width]
    angle = rng.uniform(0, 2 * np.pi)
    proj = xx * np.cos(angle) + yy * np.sin(angle)
    return proj > np.quantile(proj, 1 - rng.uniform(0.05, 0.3))


# ---------------------------------------------------------------------------------------
# radiometry and the sensor


def scene_spectra(rng: np.random.Generator) -> np.ndarray:
    """This scene's spectra: the table varied per class (brightness) and per band."""
    base = np.array([SPECTRA[c] for c in CLASSES], dtype=np.float32)
    brightness = rng.lognormal(0, 0.12, size=(len(CLASSES), 1))
    per_band = rng.lognormal(0, 0.06, size=base.shape)
    return (base * brightness * per_band).astype(np.float32)


def class_fractions(classes: np.ndarray, n_classes: int, factor: int = SCALE_FACTOR) -> np.ndarray:
    """(h, w, n_classes) fraction of each 10 m cell covered by each class."""
    H, W = classes.shape
    h, w = H // factor, W // factor
    cell = (np.arange(H) // factor)[:, None] * w + (np.arange(W) // factor)[None, :]
    counts = np.bincount((cell * n_classes + classes).ravel(), minlength=h * w * n_classes)
    return counts.reshape(h, w, n_classes).astype(np.float32) / (factor * factor)


def sense(classes: np.ndarray, spectra: np.ndarray, rng: np.random.Generator, *, level: str,
          texture: float, blur: float, noise: float, effects: bool = True) -> np.ndarray:
    """The (6, h, w) reflectance a 10 m sensor records over the 2 m landscape."""
    frac = class_fractions(classes, len(spectra))
    h, w, _ = frac.shape
    refl = np.einsum("hwk,kb->bhw", frac, spectra, optimize=True)
    if texture:
        refl *= 1 + texture * np.clip(smooth_noise(h, w, rng, scale=rng.uniform(3, 12)), -3, 3)
    if effects:
        direct = illumination(h, w, rng)
        refl *= DIFFUSE[:, None, None] + (1 - DIFFUSE[:, None, None]) * direct[None]
        alpha = thin_cloud(h, w, rng)
        refl = (1 - alpha[None]) * refl + alpha[None] * CLOUD[:, None, None] * rng.uniform(0.8, 1.2)
    if blur:
        refl = ndimage.gaussian_filter(refl, sigma=(0, blur, blur), mode="reflect")
    refl[4:] = _at_20m(refl[4:], rng)
    if noise:
        refl += rng.normal(0, noise, refl.shape).astype(np.float32)
    if level == "L1C":
        haze = rng.uniform(0.6, 1.4) * (1 + 0.2 * smooth_noise(h, w, rng, scale=rng.uniform(50, 200)))
        refl += TOA_OFFSET[:, None, None] * haze[None]
    return np.clip(refl, 0.0001, 6.5).astype(np.float32)


def illumination(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Direct sunlight reaching each 10 m pixel, 0 to about 1.3: hill shading and cloud shadows.

    Hilly in about 30 % of the scenes (steep slopes facing away from the sun go dark), cloud
    shadows of 200 m to 1 km in about a fifth; elsewhere 1.
    """
    direct = np.ones((h, w), np.float32)
    if rng.random() < 0.3:
        relief = smooth_noise(h, w, rng, scale=rng.uniform(15, 60))
        sun = rng.uniform(0, 2 * np.pi)
        gy, gx = np.gradient(relief)
        slope = (gx * np.cos(sun) + gy * np.sin(sun)) * rng.uniform(3, 12)
        direct = np.clip(1 + slope, 0, 1.3).astype(np.float32)
    if rng.random() < 0.2:
        shadows = np.zeros((h, w), np.uint8)
        for _ in range(rng.integers(1, 4)):
            r = rng.uniform(10, 50)
            rasterize([(_blob(rng.uniform(0, w), rng.uniform(0, h), r, rng, 0.4), 1)], out=shadows,
                      transform=Affine.identity())
        soft = ndimage.gaussian_filter(shadows.astype(np.float32), 1.0)
        direct *= 1 - rng.uniform(0.8, 1.0) * soft
    return direct


def thin_cloud(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Opacity of thin cloud over each pixel: 0 except in about a fifth of the scenes (up to 0.45)."""
    if rng.random() >= 0.2:
        return np.zeros((h, w), np.float32)
    field = smooth_noise(h, w, rng, scale=rng.uniform(20, 80))
    return (rng.uniform(0.15, 0.45) * np.clip(field - rng.uniform(-0.5, 1.0), 0, 1)).astype(np.float32)


# Share of scenes whose SWIR reached 10 m bilinearly (stacks users made) rather than by nearest
# (products as s2s2net reads them): the model learns both.
SWIR_BILINEAR = 0.25


def _at_20m(bands: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """Average 2 x 2 blocks (the 20 m pixel) and bring them back to 10 m: each copied to its
    four 10 m pixels (nearest, as s2s2net reads products), or, in a share SWIR_BILINEAR of the
    scenes, interpolated bilinearly. The 20 m grid starts at an even or odd 10 m row/column."""
    dy, dx = (int(rng.integers(0, 2)), int(rng.integers(0, 2))) if rng is not None else (0, 0)
    return through_20m(bands, (dy, dx), bilinear=rng is not None and rng.random() < SWIR_BILINEAR)


def through_20m(bands: np.ndarray, phase: tuple[int, int] = (0, 0), bilinear: bool = False) -> np.ndarray:
    """(n, h, w) 10 m bands averaged over the 2 x 2 blocks of a 20 m grid that starts ``phase``
    (row, column) 10 m pixels before the array, and brought back to 10 m by nearest or bilinearly."""
    _, h, w = bands.shape
    dy, dx = phase
    padded = np.pad(bands, ((0, 0), (dy, (h + dy) % 2), (dx, (w + dx) % 2)), mode="edge")
    n, H2, W2 = padded.shape
    coarse = padded.reshape(n, H2 // 2, 2, W2 // 2, 2).mean(axis=(2, 4))
    if bilinear:
        ones = np.ones(coarse.shape[1:], dtype=bool)
        fine = np.stack([bilinear_to_fine(b, ones, factor=2) for b in coarse])
    else:
        fine = to_fine(coarse, 2)
    return fine[:, dy: dy + h, dx: dx + w]

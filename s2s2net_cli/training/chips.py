"""Cutting training chips: scene windows at 10 m and their masks, at 2 m or at 10 m.

Each chip is two small tiled, compressed, georeferenced GeoTIFFs (uint16 reflectance x 10000
with nodata 0; uint8 mask 0/1 with 255 nodata) and one row of ``index.gpkg``. A mask about as
fine as the 5x sub-grid (at most ``COARSE_FROM`` of its 2 m cells) is written on that sub-grid
(averaged when finer); a coarser one (a 10 m label) is kept on the scene's own 10 m grid, so that
training scores it where it is true (``label_scale`` 5 in the index: 5 x 5 cells of 2 m a
label cell) and never as 2 m blocks. Scenes are read
and masks warped one chip window at a time, so memory is bounded by the chip size. The index
is written last, under a temporary name, so an interrupted run leaves no index that points at
missing files.

With ``degrade`` N (Wald's protocol, sources/degraded.py) each scene is first degraded N x and
chipped on that coarser grid, its label kept as it is: degraded 5x, a 10 m hand label is exact
truth on the degraded scene's 5x grid (real spectra, real water shapes), written as a 2 m mask is
and trained on as one. The index records ``degrade`` (0: the scene as it was).
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import rasterio
from rasterio.windows import Window
from scipy.spatial import cKDTree
from shapely import STRtree
from shapely.geometry import box

from ..bands import BAND_NAMES, BandSpec
from ..formats import NODATA, reflectance_to_dn, safe_name
from ..grid import SCALE_FACTOR, fine_transform, to_fine
from ..io import atomic_path, check_folder_output, geotiff_profile, lies_in, remove_stale_siblings, staged_folder
from ..labels import Label, label_resolution_in, warp_label
from ..manifest import Pair, write_manifest
from ..option_checks import SEED_BOUNDS, check_bounds, check_exclusive, check_types
from ..polygons import layers_warnings, open_layer, unreadable
from ..rulebook import Phrase, finding, option, refuse, with_warnings
from ..sources.checks import scene_warnings
from ..sources.degraded import DEGRADED_READING, check_factor, degrade_scene
from ..sources.open import open_pair, open_scene
from ..sources.options import SceneOptions
from ..sources.scene import SceneReader

MIN_CHIP_SIZE = 16  # 10 m pixels a side
VAL_BLOCK = 4  # validation blocks are the area of VAL_BLOCK x VAL_BLOCK chips (_assign_splits)
COARSE_FROM = 1.5  # a mask whose cells are this many 2 m cells or more is kept at 10 m


@dataclass
class ChipOptions:
    size: int = 512
    stride: int | None = None  # step between chips; None: the size (chips side by side)
    max_nodata: float = 0.0
    test_ids: tuple[str, ...] = ()
    test_regions: str | None = None
    val_fraction: float = 0.2
    seed: int = 42
    scene: SceneOptions = field(default_factory=SceneOptions)
    nodata: float | None = None  # the labels' nodata value
    degrade: int | None = None  # chip each scene degraded this many times (Wald's protocol), its label as it is
    overwrite: bool = False

    def __post_init__(self):
        if isinstance(self.test_ids, str):  # "s1,s2" as --test-ids takes them, not its characters
            self.test_ids = tuple(t.strip() for t in self.test_ids.split(",") if t.strip())
        check_types(self)
        if self.stride is None:
            self.stride = self.size
        check_bounds(self, least={"size": MIN_CHIP_SIZE, "stride": 1, "max_nodata": 0, "val_fraction": 0,
                                  **SEED_BOUNDS["least"]},
                     most={"max_nodata": 1, "val_fraction": 1, **SEED_BOUNDS["most"]})
        check_exclusive(self, "test_ids", "test_regions")
        if self.degrade is not None:
            check_factor(self.degrade)


@dataclass
class ChipSummary:
    chips: dict = field(default_factory=lambda: {"train": 0, "val": 0, "test": 0})
    skipped: dict = field(default_factory=lambda: {"nodata": 0, "overlaps_test": 0, "overlaps_val": 0,
                                                   "no_valid_coarse_cell": 0})
    labels_10m: int = 0  # chips whose mask is kept at 10 m (a coarse label)
    water_fraction: dict = field(default_factory=dict)
    scenes: int = 0
    index: str = ""
    test_manifest: str | None = None
    warnings: list = field(default_factory=list)  # how the scenes were read, what their labels say, chips lost to nodata
    train_overlapping_val: int = 0  # training chips overlapping a validation chip of their scene (drawn one by one)

    def to_dict(self) -> dict:
        return {"chips": self.chips, "skipped": self.skipped, "water_fraction": self.water_fraction,
                "scenes": self.scenes, "index": self.index, "test_manifest": self.test_manifest,
                "labels_10m": self.labels_10m,
                "warnings": [w.to_dict() for w in self.warnings]}


@dataclass
class _Prepared:
    pair: Pair
    scene: object  # what is chipped: the scene, or the scene degraded
    read_as: object  # the scene as the user's options read it (its warnings are the user's)
    label: Label
    finer: bool  # the label is finer than the grid its mask is written on (averaged to it)
    label_scale: int  # 2 m cells a mask cell: 1 (2 m mask) or SCALE_FACTOR (kept at 10 m)
    windows: list
    label_warnings: list  # what the label's values say (check_label)


def chip_pairs(pairs: list[Pair], out_dir, options: ChipOptions,
               on_progress: Callable[[str, int, int], None] | None = None) -> ChipSummary:
    """Align and cut chips for every pair into ``out_dir``; returns a summary."""
    with tempfile.TemporaryDirectory(prefix="s2s2net-degraded-") as degraded_dir:
        return _chip_pairs(pairs, Path(out_dir), options, Path(degraded_dir), on_progress)


def _chip_pairs(pairs: list[Pair], out_dir: Path, options: ChipOptions, degraded_dir: Path,
                on_progress: Callable[[str, int, int], None] | None) -> ChipSummary:
    prepared = _check_inputs(pairs, out_dir, options, degraded_dir)  # every input is checked before anything is written
    regions = _read_regions(options.test_regions) if options.test_regions else None
    with staged_folder(out_dir, (*CLEARED_FOLDERS, *CLEARED_FILES), options.overwrite) as stage:  # the index last
        summary = _cut_all(prepared, stage, options, regions, on_progress)  # all or nothing: a full disk leaves out_dir as it was
        if not sum(summary.chips.values()):  # nothing to train on: said now, not by train, and nothing written
            raise with_warnings(refuse("S2N-CHIP-NONE", out_dir, windows=sum(len(p.windows) for p in prepared),
                                       why=_why_skipped(summary.skipped, options.max_nodata)), summary.warnings)
    summary.index = str(out_dir / "index.gpkg")
    windows = sum(len(p.windows) for p in prepared)
    if 2 * summary.skipped["nodata"] > windows:  # the defaults lose most of a cloudy label's chips: say so
        summary.warnings.append(finding("S2N-CHIP-NODATA-SKIPPED", out_dir, skipped=summary.skipped["nodata"],
                                        windows=windows, max_nodata=options.max_nodata))
    if summary.train_overlapping_val:  # the weights would be chosen on pixels trained on: say so
        summary.warnings.append(finding("S2N-CHIP-VAL-OVERLAPS-TRAIN", out_dir, overlapping=summary.train_overlapping_val,
                                        train=summary.chips["train"], stride=options.stride))
    if options.test_regions:
        summary.warnings += layers_warnings(open_layer(options.test_regions))
        if not summary.chips["test"]:  # asked for a test split, and got none: another place, or another CRS
            summary.warnings.append(finding("S2N-CHIP-TEST-REGIONS-MISS", options.test_regions))
    if summary.test_manifest:
        summary.test_manifest = str(out_dir / "test_manifest.csv")
    return summary


def _why_skipped(skipped: dict, max_nodata: float) -> Phrase:
    """What skipped the windows that were skipped, in the options' terms."""
    reasons = {"nodata": "{n} hold more nodata than {o.max_nodata:%g} allows (a higher {o.max_nodata} keeps them)"
                         % max_nodata,
               "overlaps_test": "{n} overlap the test scenes' or regions' chips",
               "overlaps_val": "{n} overlap the validation chips",
               "no_valid_coarse_cell": "{n} have no valid coarse cell"}
    return Phrase(", ".join(reasons[k].replace("{n}", str(n)) for k, n in skipped.items() if n))


def _cut_all(prepared: list["_Prepared"], out_dir: Path, options: ChipOptions, regions,
             on_progress: Callable[[str, int, int], None] | None) -> ChipSummary:
    (out_dir / "images").mkdir()
    (out_dir / "masks").mkdir()
    index_crs = prepared[0].scene.crs if all(p.scene.crs == prepared[0].scene.crs for p in prepared) else "EPSG:4326"
    regions_in_index = regions.to_crs(index_crs).union_all() if regions is not None else None
    # predict's warnings (band order, pixel size, scale, offset) and the labels': chips would teach what they warn of
    warnings = [w for p in prepared for w in (*scene_warnings(p.read_as, BandSpec()), *p.label_warnings)]
    summary = ChipSummary(scenes=len(prepared), warnings=warnings)
    rows, done, total = [], 0, sum(len(p.windows) for p in prepared)
    # a manifest's split=train rows lend validation chips as unsplit rows do, unless some row is split=val
    drawn_from = (None,) if any(p.pair.split == "val" for p in prepared) else (None, "train")
    for prep in prepared:
        is_test_scene = prep.pair.id in options.test_ids or prep.pair.split == "test"
        with SceneReader(prep.scene) as reader:
            for row, col in prep.windows:
                done += 1
                record = _cut_chip(reader, prep, row, col, options, out_dir, index_crs)
                if on_progress:
                    on_progress(prep.pair.id, done, total)
                if isinstance(record, str):
                    summary.skipped[record] += 1
                    continue
                in_region = regions_in_index is not None and _overlaps(record["geometry"], regions_in_index, options.size)
                record["split"] = "test" if (is_test_scene or in_region) else (
                    None if prep.pair.split in drawn_from else prep.pair.split)
                rows.append(record)
        if is_test_scene:
            _write_test_pair(prep, out_dir)
    _write_index(prepared, rows, out_dir, options, summary, index_crs)
    return summary


def _check_inputs(pairs: list[Pair], out_dir: Path, options: ChipOptions, degraded_dir: Path) -> list["_Prepared"]:
    if not pairs:
        raise refuse("S2N-CHIP-NO-PAIRS", Phrase("{o.pair}/{o.manifest}"))
    check_folder_output(out_dir)
    if options.overwrite:
        _check_none_cleared(pairs, out_dir, options)
    if out_dir.exists():
        remove_stale_siblings(out_dir / "staged")  # what a killed run was staging
    if out_dir.exists() and any(out_dir.iterdir()) and not options.overwrite:
        if any((out_dir / name).exists() for name in ("index.gpkg", "images", "masks")):
            raise refuse("S2N-CHIP-FOLDER-HAS-CHIPS", out_dir)
        raise refuse("S2N-CHIP-FOLDER-NOT-EMPTY", out_dir)
    _check_test_ids(pairs, options.test_ids)
    return [_prepare(p, options, degraded_dir / f"{k}.tif") for k, p in enumerate(pairs)]


def _check_test_ids(pairs: list[Pair], test_ids: tuple[str, ...]) -> None:
    """--test-ids name scenes of the pairs, none that a manifest row puts in another split
    (checked before any scene is read)."""
    unknown = set(test_ids) - {p.id for p in pairs}
    if unknown:
        raise refuse("S2N-CHIP-TEST-ID", option("test_ids"), scene_id=sorted(unknown)[0],
                     ids=", ".join(p.id for p in pairs))
    for pair in pairs:
        if pair.id in test_ids and pair.split in ("train", "val"):
            raise refuse("S2N-CHIP-TEST-ID-SPLIT", option("test_ids"), scene_id=pair.id, split=pair.split)


# what a chips folder holds of a run's making, which --overwrite clears: folders, then files
CLEARED_FOLDERS, CLEARED_FILES = ("images", "masks", "test"), ("test_manifest.csv", "index.gpkg")


def _check_none_cleared(pairs: list[Pair], out_dir: Path, options: ChipOptions) -> None:
    """UsageError when an input lies in what --overwrite clears from ``out_dir`` (a run's test
    pairs chipped again into the same folder): it would be deleted before it is read."""
    inputs = [*(path for pair in pairs for path in (pair.image, pair.mask)), options.scene.leave_out,
              options.scene.aoi, options.test_regions]
    for path in filter(None, inputs):
        where = next((name for name in (*CLEARED_FOLDERS, *CLEARED_FILES) if lies_in(path, out_dir / name)), None)
        if where is not None:
            raise refuse("S2N-CHIP-INPUT-INSIDE", path, folder=out_dir / where)


def _write_index(prepared: list["_Prepared"], rows: list[dict], out_dir: Path, options: ChipOptions,
                 summary: ChipSummary, index_crs) -> None:
    """Draw the validation split, drop chips that overlap a hold-out, count the splits, and
    write test_manifest.csv and index.gpkg (last, so an interrupted run leaves no index)."""
    import geopandas as gpd  # heavy: only the index needs it

    in_blocks = _assign_splits(rows, options)
    rows = _drop_overlapping(rows, "test", ("train", "val"), out_dir, summary, options.size)
    # validation chips drawn one by one overlap their own scene's training chips; never another's
    # (two dates or two labels of one place)
    rows = _drop_overlapping(rows, "val", ("train",), out_dir, summary, options.size, other_scenes_only=not in_blocks)
    if not in_blocks:  # validation chips drawn one by one: those their own scene's training chips overlap
        val = {id(r) for r in rows if r["split"] == "val"}
        summary.train_overlapping_val = _overlapping_val([r for r in rows if r["split"] in ("train", "val")], val,
                                                         options.size)
    for r in rows:
        summary.chips[r["split"]] += 1
    summary.labels_10m = sum(r["label_scale"] > 1 for r in rows)
    for split in ("train", "val", "test"):
        fr = [r["water_fraction"] for r in rows if r["split"] == split]
        summary.water_fraction[split] = round(float(np.mean(fr)), 4) if fr else None
    test_rows = _test_manifest_rows(prepared, rows, options)
    if test_rows:
        write_manifest(out_dir / "test_manifest.csv", test_rows, overwrite=True)
        summary.test_manifest = str(out_dir / "test_manifest.csv")
    gdf = gpd.GeoDataFrame(rows, geometry="geometry", crs=index_crs) if rows else gpd.GeoDataFrame(
        {"image": [], "mask": [], "split": [], "scene_id": [], "water_fraction": [], "nodata_fraction": [],
         "label_scale": [], "degrade": []},
        geometry=gpd.GeoSeries([], crs=index_crs))
    index_path = out_dir / "index.gpkg"
    with atomic_path(index_path) as tmp:
        gdf.to_file(tmp, layer="chips", driver="GPKG")
    summary.index = str(index_path)


def _prepare(pair: Pair, options: ChipOptions, degraded_path: Path) -> _Prepared:
    read_as, label, (left, bottom, right, top), label_warnings = open_pair(pair.image, pair.mask, options.scene,
                                                                           options.nodata)
    scene = read_as
    if options.degrade:
        degraded = degrade_scene(read_as, options.degrade, degraded_path)
        scene = replace(open_scene(degraded.path, DEGRADED_READING), path=pair.image, dataset=str(degraded.path))
    resolution, fine = label_resolution_in(label, scene.crs), abs(scene.transform.a) / SCALE_FACTOR
    label_scale = SCALE_FACTOR if resolution >= COARSE_FROM * fine else 1
    finer = resolution < fine * label_scale * 0.999
    size, stride = options.size, options.stride
    if scene.height < size or scene.width < size:
        if options.degrade:
            raise refuse("S2N-CHIP-DEGRADED-SMALL", pair.image, width=scene.width, height=scene.height,
                         factor=options.degrade, size=size)
        raise refuse("S2N-CHIP-SCENE-SMALL", pair.image, width=scene.width, height=scene.height, size=size)
    # chip windows that overlap the mask's bounds, on a grid of stride
    inv = ~scene.transform
    c_a, r_a = inv @ (left, top)
    c_b, r_b = inv @ (right, bottom)
    rows = _positions(scene.height, size, stride)
    cols = _positions(scene.width, size, stride)
    rmin, rmax = min(r_a, r_b), max(r_a, r_b)
    cmin, cmax = min(c_a, c_b), max(c_a, c_b)
    windows = [(r, c) for r in rows for c in cols if r < rmax and r + size > rmin and c < cmax and c + size > cmin]
    return _Prepared(pair, scene, read_as, label, finer, label_scale, windows, label_warnings)


def _positions(length: int, size: int, stride: int) -> list[int]:
    pos = list(range(0, length - size + 1, stride))
    if pos[-1] + size < length:
        pos.append(length - size)
    return pos


def _cut_chip(reader: SceneReader, prep: _Prepared, row: int, col: int, options: ChipOptions, out_dir: Path,
              index_crs) -> dict | str:
    """The index row of the chip at (``row``, ``col``), its two files written; or why it was
    skipped (a key of ChipSummary.skipped)."""
    size = options.size
    scene = prep.scene
    window = Window(col, row, size, size)
    raw, valid10, keep10 = reader.read(window)
    chip_transform = reader.window_transform(window)
    mask, valid = _mask_window(prep, chip_transform, (size, size), keep10)
    nodata_fraction = 1.0 - float(valid.mean())
    if options.degrade and not valid10.any():
        return "no_valid_coarse_cell"
    if nodata_fraction > options.max_nodata or not valid.any():
        return "nodata"
    dn = reflectance_to_dn(scene.reflectance(raw).astype(np.float64), valid10)
    mask_u8 = np.where(valid, mask, NODATA).astype(np.uint8)
    name = f"{safe_name(prep.pair.id)}_r{row}_c{col}.tif"
    image_rel, mask_rel = f"images/{name}", f"masks/{name}"
    mask_transform = chip_transform if prep.label_scale > 1 else fine_transform(chip_transform)
    _write(out_dir / image_rel, dn, chip_transform, scene.crs, "uint16", 0, BAND_NAMES)
    _write(out_dir / mask_rel, mask_u8[None], mask_transform, scene.crs, "uint8", NODATA, ("water",))
    footprint = box(*rasterio.windows.bounds(window, scene.transform))
    if str(index_crs) != str(scene.crs):
        import geopandas as gpd  # heavy, as for the index

        footprint = gpd.GeoSeries([footprint], crs=scene.crs).to_crs(index_crs).iloc[0]
    return {"image": image_rel, "mask": mask_rel, "split": None, "scene_id": prep.pair.id,
            "water_fraction": float(mask[valid].mean()), "nodata_fraction": nodata_fraction,
            "label_scale": prep.label_scale, "degrade": options.degrade or 0, "row": row, "col": col,
            "geometry": footprint}


def _mask_window(prep: _Prepared, transform, shape: tuple[int, int], keep10: np.ndarray):
    """The mask of a 10 m window (``transform``, ``shape``) on its own grid (2 m, or 10 m for
    a coarse label) and where it is valid (in the label and kept in the scene)."""
    if prep.label_scale > 1:
        mask = warp_label(prep.label, transform, prep.scene.crs, shape, prep.finer)
        return mask, ~np.isnan(mask) & keep10
    f = SCALE_FACTOR
    mask = warp_label(prep.label, fine_transform(transform), prep.scene.crs, (shape[0] * f, shape[1] * f), prep.finer)
    return mask, ~np.isnan(mask) & to_fine(keep10)


def _write(path: Path, data: np.ndarray, transform, crs, dtype: str, nodata, descriptions) -> None:
    with atomic_path(path) as tmp:
        profile = geotiff_profile(data.shape, dtype, crs, transform, nodata)
        with rasterio.open(tmp, "w", **profile) as dst:
            dst.write(data)
            dst.descriptions = descriptions


def _assign_splits(rows: list[dict], options: ChipOptions) -> bool:
    """Validation chips come in spatial blocks of one scene drawn at random up to
    ``val_fraction`` of the chips, so that the model is chosen on places it did not train on
    (train chips overlapping them are dropped afterwards). Blocks of VAL_BLOCK x VAL_BLOCK chip
    positions drop a ring of train chips as wide as a chip less a stride: five times their own
    chips at a quarter-chip stride. So under a stride shorter than the chip, block sides from
    VAL_BLOCK chips down to VAL_BLOCK strides are drawn, and the one that leaves the most train
    chips taken, of those whose blocks fill at least half the validation share. Where every
    block holds more than the validation share (a few small scenes), single chips are drawn
    instead, and may overlap training chips; so too where no blocks leave a training chip (a
    small scene at a short stride: a 128 px scene in 64 px chips at stride 1 kept none of its
    4225). Whether blocks were drawn."""
    free = [r for r in rows if r["split"] is None]
    n_val = int(round(len(free) * options.val_fraction))
    spans = _block_spans(options.size, options.stride)
    best, best_kept = None, 0
    for k, span in enumerate(spans):
        val = _drawn_blocks(free, span, n_val, random.Random(options.seed))
        if len(val) * 2 >= n_val or (k == len(spans) - 1 and val and best is None):
            kept = len(free) - len(val) - _overlapping_val(free, val, options.size)
            if kept > best_kept:
                best, best_kept = val, kept
    if best is not None:
        for r in free:
            r["split"] = "val" if id(r) in best else "train"
        return True
    rng = random.Random(options.seed)  # every block is larger than the validation share
    rng.shuffle(free)
    for k, r in enumerate(free):
        r["split"] = "val" if k < n_val else "train"
    return False


def _overlapping_val(free: list[dict], val: set[int], size: int) -> int:
    """How many chips not in ``val`` overlap one that is, of their own scene (closer than a
    chip side in rows and in columns): the train chips those blocks would drop."""
    dropped, scenes = 0, {}
    for r in free:
        scenes.setdefault(r["scene_id"], []).append(r)
    for mine in scenes.values():
        held = np.array([(r["row"], r["col"]) for r in mine if id(r) in val], dtype=float).reshape(-1, 2)
        rest = np.array([(r["row"], r["col"]) for r in mine if id(r) not in val], dtype=float).reshape(-1, 2)
        if len(held) and len(rest):
            near = cKDTree(held).query(rest, k=1, p=np.inf, distance_upper_bound=size - 0.5)[0]
            dropped += int(np.isfinite(near).sum())
    return dropped


def _block_spans(size: int, stride: int) -> list[int]:
    """Validation block sides to try, largest first: VAL_BLOCK chips, halved down to VAL_BLOCK
    strides (one side when the stride is no shorter than a chip)."""
    spans, least = [max(size, stride) * VAL_BLOCK], stride * VAL_BLOCK
    while spans[-1] > least:
        spans.append(max(spans[-1] // 2, least))
    return spans


def _drawn_blocks(free: list[dict], span: int, n_val: int, rng: random.Random) -> set[int]:
    """The ids of the chips in blocks of side ``span`` (a scene's chips grouped by position)
    drawn at random while they fit in ``n_val`` chips."""
    blocks: dict[tuple, list[dict]] = {}
    for r in free:
        blocks.setdefault((r["scene_id"], r["row"] // span, r["col"] // span), []).append(r)
    keys = sorted(blocks)
    rng.shuffle(keys)
    chosen: set[int] = set()
    for key in keys:
        if len(chosen) + len(blocks[key]) <= n_val:
            chosen.update(id(r) for r in blocks[key])
    return chosen


def _overlaps(chip, other, size: int) -> bool:
    """Whether ``other`` covers at least one 2 m pixel's area of ``chip`` (a footprint ``size``
    10 m pixels a side): a border shared, or a reprojection's sliver, is no overlap."""
    return chip.intersects(other) and chip.intersection(other).area * (size * SCALE_FACTOR) ** 2 >= chip.area


def _drop_overlapping(rows: list[dict], held: str, others: tuple[str, ...], out_dir: Path,
                      summary: ChipSummary, size: int, other_scenes_only: bool = False) -> list[dict]:
    """A hold-out must be geographically separate: drop chips of the ``others`` splits that
    overlap a chip of the ``held`` split (test, then val), of any scene (footprints in the index's
    CRS), or with ``other_scenes_only`` of another scene than their own."""
    held_rows = [r for r in rows if r["split"] == held]
    held_geoms = [r["geometry"] for r in held_rows]
    if not held_geoms:
        return rows
    tree = STRtree(held_geoms)
    kept = []
    for r in rows:
        if r["split"] in others:
            hits = tree.query(r["geometry"])
            if any(_overlaps(r["geometry"], held_geoms[h], size)
                   and not (other_scenes_only and held_rows[h]["scene_id"] == r["scene_id"]) for h in hits):
                summary.skipped[f"overlaps_{held}"] += 1
                (out_dir / r["image"]).unlink(missing_ok=True)
                (out_dir / r["mask"]).unlink(missing_ok=True)
                continue
        kept.append(r)
    return kept


def _write_test_pair(prep: _Prepared, out_dir: Path) -> None:
    """The whole aligned pair of a test scene: the scene's six bands and its mask (2 m, or 10 m
    for a coarse label), window by window."""
    scene, f = prep.scene, (1 if prep.label_scale > 1 else SCALE_FACTOR)
    test_dir = out_dir / "test"
    test_dir.mkdir(exist_ok=True)
    image_path, mask_path = test_dir / f"{safe_name(prep.pair.id)}_image.tif", test_dir / f"{safe_name(prep.pair.id)}_mask.tif"
    step = 512
    with atomic_path(image_path) as itmp, atomic_path(mask_path) as mtmp:
        with SceneReader(scene) as reader, \
                rasterio.open(itmp, "w", **geotiff_profile((6, scene.height, scene.width), "uint16", scene.crs,
                                                           scene.transform, 0)) as img, \
                rasterio.open(mtmp, "w", **geotiff_profile((1, scene.height * f, scene.width * f), "uint8", scene.crs,
                                                           fine_transform(scene.transform, f), NODATA)) as msk:
            img.descriptions = BAND_NAMES
            for r in range(0, scene.height, step):
                for c in range(0, scene.width, step):
                    w = Window(c, r, min(step, scene.width - c), min(step, scene.height - r))
                    raw, valid10, keep10 = reader.read(w)
                    img.write(reflectance_to_dn(scene.reflectance(raw).astype(np.float64), valid10), window=w)
                    m, valid = _mask_window(prep, reader.window_transform(w), (int(w.height), int(w.width)), keep10)
                    msk.write(np.where(valid, m, NODATA).astype(np.uint8), 1,
                              window=Window(c * f, r * f, int(w.width) * f, int(w.height) * f))


def _test_manifest_rows(prepared, rows, options) -> list[dict]:
    out = []
    for prep in prepared:
        if prep.pair.id in options.test_ids or prep.pair.split == "test":
            sid = safe_name(prep.pair.id)
            out.append({"image": f"test/{sid}_image.tif", "mask": f"test/{sid}_mask.tif", "id": prep.pair.id})
    test_scene_ids = {p.pair.id for p in prepared if p.pair.id in options.test_ids or p.pair.split == "test"}
    for r in rows:  # chips held out by region
        if r["split"] == "test" and r["scene_id"] not in test_scene_ids:
            out.append({"image": r["image"], "mask": r["mask"], "id": Path(r["image"]).stem})
    return out


def _read_regions(path):
    import geopandas as gpd  # heavy, as for the index

    try:
        regions = gpd.read_file(path, layer=0)  # the first layer: _chip_pairs says so when there are more
    except Exception as exc:
        raise unreadable(path, exc) from exc
    if regions.empty or regions.crs is None:
        raise refuse("S2N-CHIP-TEST-REGIONS", path)
    return regions

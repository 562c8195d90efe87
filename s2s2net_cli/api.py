"""The library's face: what each command does, as one Python call.

    >>> import s2s2net_cli as s2n
    >>> result = s2n.predict("scene.tif", "water.tif", offset=-1000)
    >>> scores = s2n.evaluate([("scene.tif", "label.tif")], baselines=["ndwi"], degrade=5)
    >>> reaches = s2n.rivers("water.tif", "rivers.gpkg")
    >>> model, card = s2n.load_model()
    >>> s2n.calibrate("run/best.safetensors", "model.safetensors", manifests="labels.csv")

Options come as keywords, those of ``ModelOptions`` (weights, tile_size, overlap, batch_size,
device, precision, flips, threshold) and ``SceneOptions`` (bands, scale, offset, keep_clouds,
leave_out, bbox, aoi) alike; bad input raises an ``S2S2NetError`` whose ``.finding.code``
names the rule (``s2s2net checks`` lists them), and warnings are ``S2S2NetWarning``.
The command line calls these same functions.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import os
import tempfile
import typing
from dataclasses import fields, replace
from pathlib import Path
from typing import Callable

from .errors import S2S2NetError
from .inference.options import ModelOptions, PredictOptions
from .option_checks import check_kinds
from .rulebook import PYTHON_KEYWORDS, Finding, option, refuse, said_of, warn
from .sources.options import SceneOptions
from .world import World

__all__ = ["predict", "predict_scenes", "evaluate", "rivers", "occurrence", "load_model", "chip", "train", "calibrate",
           "gate", "synth"]


def _split(function: Callable, options: dict, *bundles) -> list[dict]:
    """``options`` (``function``'s ``**options``) shared out among the dataclasses ``bundles`` by
    field name; a keyword none of them takes is a TypeError, as Python words it, with the nearest
    name ``function`` takes."""
    names = [{f.name for f in fields(b)} for b in bundles]
    unknown = set(options) - set().union(*names)
    if unknown:
        given = sorted(unknown)[0]
        own = [p.name for p in inspect.signature(function).parameters.values() if p.kind is p.KEYWORD_ONLY]
        taken = set().union(*names, own) - {"explicit"}
        if PYTHON_KEYWORDS.get(given) in taken:  # the command line's name of a keyword (--mask: leave_out)
            hint = f"; the command line's --{given.replace('_', '-')} is {PYTHON_KEYWORDS[given]!r} here"
        else:
            near = difflib.get_close_matches(given, sorted(taken), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
        raise TypeError(f"{function.__name__}() got an unexpected keyword argument {given!r}{hint}")
    return [{k: v for k, v in options.items() if k in n} for n in names]


GEO_TABLE_KEYWORDS = ("aoi", "test_regions")  # vector files that a GeoDataFrame may stand for


def _takes_geo_tables(function: Callable) -> Callable:
    """``function`` taking its vector-file keywords (GEO_TABLE_KEYWORDS) as a GeoDataFrame or a
    GeoSeries too, as a notebook holds them: each written to a temporary GeoPackage named for its
    kind (GeoDataFrame.gpkg, as a mask's area_of_interest tag names it) and read as a file is;
    a refusal of that file names the keyword."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        tables = {k: v for k, v in kwargs.items()
                  if k in GEO_TABLE_KEYWORDS and type(v).__name__ in ("GeoDataFrame", "GeoSeries")}
        if not tables:
            return function(*args, **kwargs)
        with contextlib.ExitStack() as files:
            paths = {name: files.enter_context(_geo_table_file(table, option(name))) for name, table in tables.items()}
            return function(*args, **{**kwargs, **{name: str(path) for name, path in paths.items()}})

    return call


def _takes_band_datasets(function: Callable) -> Callable:
    """``function`` taking a scene (``scene``, ``scenes``, a pair's scene) as an
    ``xarray.Dataset`` of one variable per band too, as odc-stac's ``load`` gives it: each read as
    the DataArray of its bands (band_array)."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs)
        given = bound.arguments
        for name in ("scene", "scenes"):
            if name in given and _is_dataset(given[name]):
                given[name] = _band_array(given[name])
        pairs = given.get("pairs")
        if isinstance(pairs, (list, tuple)) and pairs:
            if len(pairs) == 2 and _is_dataset(pairs[0]):  # one pair
                given["pairs"] = (_band_array(pairs[0]), pairs[1])
            else:
                given["pairs"] = [(_band_array(p[0]), *p[1:]) if isinstance(p, (list, tuple)) and p and
                                  _is_dataset(p[0]) else p for p in pairs]
        return function(*bound.args, **bound.kwargs)

    return call


def _is_dataset(value) -> bool:
    return type(value).__name__ == "Dataset" and type(value).__module__.startswith("xarray")


def _band_array(dataset):
    from .inference.dataarray import band_array  # heavy: torch, xarray

    return band_array(dataset)


def _is_geo_table(value) -> bool:
    return type(value).__name__ in ("GeoDataFrame", "GeoSeries")


@contextlib.contextmanager
def _geo_table_file(table, name):
    """The polygons of ``table`` (a GeoDataFrame or GeoSeries with a CRS) in a temporary
    GeoPackage named for its kind (GeoDataFrame.gpkg, as a mask's area_of_interest tag names it),
    read as a file is; a refusal of that file is said of ``name`` (a keyword, pairs[k][j])."""
    import geopandas as gpd  # heavy

    if table.crs is None:  # written without one, it would be read so, and said of a temporary file
        raise refuse("S2N-GEO-TABLE-NO-CRS", name, kind=type(table).__name__)
    with tempfile.TemporaryDirectory(prefix="s2s2net-") as tmp:
        path = Path(tmp) / f"{type(table).__name__}.gpkg"
        gpd.GeoDataFrame(geometry=gpd.GeoSeries(table.geometry.values, crs=table.crs)).to_file(path)
        with said_of(name, path):
            yield path


PATH = "a path (str or Path)"
REFERENCE = "a reference: a path (str or Path), an xarray.DataArray or a GeoDataFrame with a CRS"
DATES = ("a scene: a path (str or Path) or a URL (DataArrays: as one (time, band, y, x) cube, "
         "xr.concat(dates, dim='time'))")
SCENE = "a scene: a path (str or Path), a URL or an xarray.DataArray with a CRS"
BACKGROUND = "a scene: a path (str or Path) or a URL (an xarray.DataArray: da.rio.to_raster('background.tif') first)"
PATH_OR_URL = "a scene: a path (str or Path) or a URL (an xarray.DataArray: predict(da, output), one at a time)"


def _is_path(value, dataarray: bool = False) -> bool:
    return isinstance(value, (str, os.PathLike)) or (dataarray and type(value).__name__ == "DataArray")


def _kind(value) -> str:
    """What a value is, for a message: "None", "a path", "a list", "a numpy.ndarray"."""
    if value is None:
        return "None"
    if _is_path(value):
        return "a path"
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
    return f"an {name}" if name[0].lower() in "aeiox" else f"a {name}"


def _check_path(value, name: str, wanted: str = PATH, dataarray: bool = False) -> None:
    """UsageError (S2N-SOURCE-TYPE) naming the keyword ``name`` when ``value`` is no path."""
    if not _is_path(value, dataarray):
        raise refuse("S2N-SOURCE-TYPE", None, name=name, kind=_kind(value), wanted=wanted)


def _paths(given, name: str, wanted: str = PATH, dataarray: bool = False) -> list:
    """``given`` as a list: one path (str or Path) is a list of one, not of its characters; what
    is no path (an array, None) is refused naming ``name`` (or ``name[k]``, one of a list)."""
    if _is_path(given, dataarray):
        return [given]
    if hasattr(given, "__array__") or not isinstance(given, typing.Iterable):  # an array is one thing, not its rows
        _check_path(given, name, wanted, dataarray)
    items = list(given)
    for k, item in enumerate(items):
        _check_path(item, f"{name}[{k}]", wanted, dataarray)
    return items


def _pairs(given, name: str = "pairs", dataarray: bool = False) -> list:
    """``given`` as a list of (scene, mask) pairs: one pair of two paths is a list of one (None,
    none); what is no pair of paths (or DataArrays, where ``dataarray``) is refused naming
    ``name[k]``."""
    if given is None:
        return []
    one = _is_path(given, dataarray) or not isinstance(given, typing.Iterable)
    given = [given] if one else list(given)
    if len(given) == 2 and _is_path(given[0], dataarray) and (
            _is_path(given[1], dataarray) or (dataarray and _is_geo_table(given[1]))):
        return [tuple(given)]
    for k, pair in enumerate(given):
        if _is_path(pair, dataarray) or not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise refuse("S2N-SOURCE-TYPE", None, name=f"{name}[{k}]", kind=_kind(pair),
                         wanted="a (scene, mask) pair")
        for j, path in enumerate(pair):
            if not (dataarray and j and _is_geo_table(path)):  # a reference's polygons held in a notebook
                _check_path(path, f"{name}[{k}][{j}]", (REFERENCE if j else SCENE) if dataarray else PATH, dataarray)
    return given


def _pairs_as_files(pairs: list, files: contextlib.ExitStack) -> tuple[list, dict[str, str]]:
    """``pairs`` (scene, reference) with each one held in memory (a DataArray; a reference's
    GeoDataFrame) written to a temporary file that lives as long as ``files``: the pairs of
    files, and each such file's name as a finding says it, ``pairs[k][j]`` (a refusal of it is
    said so)."""
    given, said = [], {}
    for k, pair in enumerate(pairs):
        paths = []
        for j, item in enumerate(pair):
            name = f"pairs[{k}][{j}]"
            if type(item).__name__ == "DataArray":
                from .inference.dataarray import mask_file, scene_file  # heavy: torch, xarray

                item = files.enter_context((mask_file if j else scene_file)(item, name))
                said[str(item)] = name
            elif _is_geo_table(item):
                item = files.enter_context(_geo_table_file(item, name))
                said[str(item)] = name
            paths.append(item)
        given.append(tuple(paths))
    return given, said


def _warn_all(findings: list[Finding]) -> None:
    for found in findings:
        warn(found)  # at the caller's line, also from a callback deep in a batch


@_takes_band_datasets
@_takes_geo_tables
def predict(scene, output=None, *, probability: bool = False, vector=None, rivers=None, cog: bool = False,
            creation_options: dict | None = None, overwrite: bool = False, **options):
    """Map water at 2 m in one scene, as ``s2s2net predict`` does.

    Args:
        scene: a GeoTIFF/VRT stack, a Sentinel-2 product (.SAFE, its metadata or .zip), a STAC
            item (file or URL), or an ``xarray.DataArray`` (band, y, x) with a CRS.
        output: the GeoTIFF to write (a DataArray's mask is returned instead when None).
        probability: write water probability (0-100) instead of a 0/1 mask.
        vector: also write the water polygons here (.gpkg, .geojson, .shp, .fgb).
        rivers: also write the river centrelines and widths here (.gpkg).
        cog: write a Cloud Optimized GeoTIFF.
        creation_options: GDAL creation options of the GeoTIFF.
        overwrite: replace existing outputs.
        **options: ModelOptions and SceneOptions fields (``weights``, ``tile_size``, ``offset``...).

    Returns:
        The scene's ``SceneResult`` (output, water_km2, warnings as findings, ...), or for a
        DataArray without ``output`` the mask as a DataArray on the exact 5x grid.
    """
    _split(predict, options, ModelOptions, SceneOptions)  # a keyword neither takes: named as predict's
    if output is None and type(scene).__name__ == "DataArray":
        from .inference.dataarray import predict_dataarray  # heavy: torch, xarray

        files = {"vector": vector, "rivers": rivers, "cog": cog, "creation_options": creation_options}
        given = [name for name, value in files.items() if value]
        if given:  # they shape or go beside a mask file, and none is written
            raise TypeError(f"predict() writes {', '.join(given)} with a mask file: give output for a DataArray")
        return predict_dataarray(scene, probability=probability, **options)
    _check_path(scene, "scene", f"{SCENE} (several: predict_scenes)", dataarray=True)
    if output is None:
        raise TypeError("predict() needs an output path for a scene file; for the mask in memory, give the scene "
                        "as an xarray.DataArray (rioxarray.open_rasterio(path)) without output")
    outputs = {"probability": probability, "vector": vector, "rivers": rivers, "cog": cog,
               "creation_options": creation_options, "overwrite": overwrite}
    if type(scene).__name__ == "DataArray":  # its mask written as a file's is, with what goes beside it
        from .inference.dataarray import DATAARRAY, said_of_scene, scene_file  # heavy: torch, xarray

        written = []
        with scene_file(scene) as path:
            _predict_batch([path], output, outputs, options, raise_failures=True, on_result=written.append,
                           said=lambda found: said_of_scene(found, path))
        return replace(written[0], scene=DATAARRAY) if written else None
    written = []
    _predict_batch([scene], output, outputs, options, raise_failures=True, on_result=written.append)
    return written[0] if written else None


@_takes_geo_tables
def predict_scenes(scenes: list, output, *, probability: bool = False, vector=None, rivers=None, cog: bool = False,
                   creation_options: dict | None = None, overwrite: bool = False, skip_existing: bool = False,
                   world: World | None = None, raise_failures: bool = False,
                   on_result: Callable | None = None, **options):
    """Map water in several scenes into a folder (``<name>_water.tif`` each), as ``s2s2net
    predict`` does with several scenes: a scene that fails is listed, the others go on.

    Args:
        scenes: the scenes (files or URLs ``predict`` takes; one path is one scene; a DataArray
            goes to ``predict(da, output)``, one at a time).
        output: a folder (or, for one scene, a GeoTIFF).
        skip_existing: skip a scene whose output already holds its mask.
        world: the ranks sharing the work (default: the launcher's, or one process).
        raise_failures: raise the first scene's error instead of listing it.
        on_result: called with each scene's ``SceneResult`` as it is written.
        probability: as ``predict``.
        vector: as ``predict``, beside each mask in a folder of masks.
        rivers: as ``predict``, beside each mask.
        cog: as ``predict``.
        creation_options: as ``predict``.
        overwrite: as ``predict``.
        **options: as ``predict``.

    Returns:
        A ``BatchSummary`` (``scenes``, ``skipped``, ``failures``, as JSON gives them), or None
        on a rank other than the first.
    """
    _split(predict_scenes, options, ModelOptions, SceneOptions)
    given = _paths(scenes, "scenes", PATH_OR_URL)  # a DataArray: predict(da, output), one date at a time
    outputs = {"probability": probability, "vector": vector, "rivers": rivers, "cog": cog,
               "creation_options": creation_options, "overwrite": overwrite}
    return _predict_batch(given, output, outputs, options, skip_existing, world, raise_failures, on_result)


def _predict_batch(scenes: list, output, outputs: dict, options: dict, skip_existing: bool = False,
                   world: World | None = None, raise_failures: bool = False, on_result: Callable | None = None,
                   said: Callable[[Finding], Finding] | None = None):
    """predict_scenes' work, ``outputs`` its keywords of what is written; each scene's result
    (its findings as ``said`` words them) warned of and handed to ``on_result``. The batch's
    summary."""
    from .inference.batch import predict_batch  # heavy: torch

    model, scene = _split(predict_scenes, options, ModelOptions, SceneOptions)
    predict_options = PredictOptions(**model, scene=SceneOptions(**scene), probability=outputs["probability"],
                                     cog=outputs["cog"], creation_options=outputs["creation_options"] or {},
                                     overwrite=outputs["overwrite"])

    def on_failure(exc):
        if raise_failures:
            raise exc

    def written(result):
        if said:
            result = replace(result, warnings=[said(w) for w in result.warnings])
        _warn_all(result.warnings)
        if on_result:
            on_result(result)

    return predict_batch(scenes, output, predict_options, outputs["vector"], outputs["rivers"], skip_existing,
                         world or World.from_environment(), on_result=written, on_failure=on_failure)


@_takes_band_datasets
@_takes_geo_tables
def evaluate(pairs=(), *, manifests=(), weights=(), baselines=(), nodata: float | None = None,
             degrade: int | None = None, save_predictions=None, plot=None, overwrite: bool = False,
             on_progress: Callable[[str, str], None] | None = None, **options):
    """Score models and baselines on the same pairs and pixels, as ``s2s2net compare`` does
    (``evaluate`` with one of them).

    Args:
        pairs: (scene, reference) pairs, or one such pair: a reference is a mask raster (water 1,
            land 0) or a vector file of water polygons. Either may be an ``xarray.DataArray`` with
            a CRS (a scene as ``predict`` takes it; a reference of one band), a reference a
            GeoDataFrame of water polygons, named ``pairs[k][j]`` in the scores and findings (or
            by the file it was read from).
        manifests: CSV manifests of pairs (image,mask[,id,split]).
        weights: weights files (or "default"); with neither weights nor baselines, the bundled model.
        baselines: water-index baselines by name (ndwi, mndwi, mndwi-bilinear, ...).
        nodata: a reference value that means nodata, besides its own.
        degrade: score by Wald's protocol, each scene degraded this many times (2-5).
        save_predictions: a folder to keep each 2 m prediction in.
        plot: a PNG of scenes, references and predictions.
        **options: ModelOptions and SceneOptions fields, the same for every model.

    Returns:
        One ``ModelScores`` a model: ``overall`` (pooled F1, IoU, precision, recall, boundary F1)
        and ``images``.
    """
    from .evaluation.compare import compare  # heavy: torch
    from .evaluation.evaluate import make_models
    from .manifest import pairs_from_options

    check_kinds({"nodata": nodata, "degrade": degrade, "overwrite": overwrite}, typing.get_type_hints(evaluate))
    model, scene = _split(evaluate, options, ModelOptions, SceneOptions)
    scene_options = SceneOptions(**scene)
    predict_options = PredictOptions(**model, scene=scene_options, overwrite=overwrite or save_predictions is None)
    weights = _paths(weights if weights is not None else (), "weights")
    baselines = [baselines] if isinstance(baselines, str) else list(baselines)
    models = make_models(weights, baselines, predict_options)
    with contextlib.ExitStack() as files:
        given, said = _pairs_as_files(_pairs(pairs, dataarray=True), files)  # scored as the same files would be
        results = compare(models, pairs_from_options(given, manifests), nodata, scene_options, save_predictions,
                          plot, on_progress, degrade, overwrite)
    if said:
        from .inference.dataarray import scores_said_of

        results = scores_said_of(results, said)
    _warn_all(list(dict.fromkeys(w for r in results for img in r.images for w in img["warnings"])))
    return results


def rivers(mask, output, *, overwrite: bool = False, on_progress: Callable[[int, int], None] | None = None,
           **options):
    """River centrelines and widths from a water mask, as ``s2s2net rivers`` does.

    Args:
        mask: a 2 m mask of ``predict`` (or its probability raster, the raster of
            ``occurrence()``, or any 0/1 raster with a projected CRS), as a file or as the
            DataArray ``predict`` returns for a DataArray.
        output: the GeoPackage to write (layers ``reaches`` and ``widths``).
        overwrite: replace an existing output.
        **options: RiverOptions fields (``spacing_m``, ``min_width_m``, ``max_width_m``,
            ``min_area_m2``, ``max_bridge_m``, ``window``, ``workers``: processes measuring
            windows at once, one per CPU core by default; ``min_occurrence``: for an occurrence
            raster, the percent of dates from which a pixel is water, its permanent water's by
            default).

    Returns:
        A ``RiverSummary`` (reaches, length_km, transects, width_median_m).
    """
    from .hydrology.rivers import RiverOptions, measure_rivers  # heavy: geopandas

    _check_path(mask, "mask", f"{PATH} or an xarray.DataArray", dataarray=True)
    _split(rivers, options, RiverOptions)
    if type(mask).__name__ == "DataArray":
        from .inference.dataarray import measure_dataarray

        return measure_dataarray(mask, lambda path: measure_rivers(path, output, RiverOptions(overwrite=overwrite,
                                                                                              **options),
                                                                   on_progress=on_progress))
    return measure_rivers(mask, output, RiverOptions(overwrite=overwrite, **options), on_progress=on_progress)


@_takes_band_datasets
@_takes_geo_tables
def occurrence(scenes: list, output, *, from_masks: bool = False, like=None, dates=None, classes: bool = False,
               strict: bool = False, cog: bool = False, creation_options: dict | None = None, overwrite: bool = False,
               world: World | None = None, on_progress: Callable[[int, int], None] | None = None, **options):
    """Water occurrence over many dates of one place, as ``s2s2net occurrence`` does.

    Args:
        scenes: scenes of one place (any source ``predict`` takes; a STAC ItemCollection file
            stands for its items), or with ``from_masks`` 2 m masks already predicted; one path
            is one scene. Or an ``xarray.DataArray`` (time, band, y, x), as odc-stac and
            stackstac give one: each date predicted as ``predict(cube.isel(time=k))`` predicts
            it, dated by its time and named ``DataArray.isel(time=k)``.
        output: the GeoTIFF to write (occurrence, water count, valid count, and class).
        like: count on this raster's grid (default: the first scene's 2 m grid).
        dates: for scenes whose metadata says no date: a CSV of scene,date, or a dict of scene
            (its path or file name) -> date (``datetime.date`` or ISO text).
        classes: add the class band (never water, seasonal, permanent, unseen).
        strict: stop at a date that fails (default: skip it and list it).
        cog: write a Cloud Optimized GeoTIFF.
        creation_options: GDAL creation options of the GeoTIFF.
        overwrite: replace an existing output.
        world: the ranks sharing the dates (default: the launcher's, or one process).
        **options: ModelOptions and SceneOptions fields, for the scenes predicted.

    Returns:
        An ``OccurrenceSummary`` (dates counted, skipped, ever and permanent water), or None on
        a rank other than the first.
    """
    from .hydrology.occurrence import OccurrenceOptions, water_occurrence
    from .hydrology.series import check_masks_options, dated_series, grid_date, series_grid

    model, scene = _split(occurrence, options, ModelOptions, SceneOptions)
    scene_options = SceneOptions(**scene)
    if from_masks:
        check_masks_options(ModelOptions(**model), scene_options)
    occurrence_options = OccurrenceOptions(classes=classes, strict=strict, cog=cog,
                                           creation_options=creation_options or {}, overwrite=overwrite)
    if type(scenes).__name__ == "DataArray":
        series, grid, predict = _cube_series(scenes, from_masks, dates, like, ModelOptions(**model), scene_options)
    else:
        series = dated_series(_paths(scenes, "scenes", PATH if from_masks else DATES), from_masks, dates)
        grid = series_grid(grid_date(series), like, scene_options)
        predict = None if from_masks else _date_predictor(ModelOptions(**model), scene_options)
    summary = water_occurrence(series, output, grid, occurrence_options, predict, world or World.from_environment(),
                               on_progress=on_progress)
    if summary is not None:  # the leading rank's: what each date's scene or name said
        _warn_all([w for d in [*summary.dates, *summary.skipped] for w in d.warnings])
    return summary


def _cube_series(cube, from_masks: bool, dates, like, model: ModelOptions, scene: SceneOptions):
    """The dates of a (time, band, y, x) cube (odc-stac's, stackstac's), dated by its time, the
    2 m grid of its pixels (or ``like``'s), and predict(name, mask_path) for each date."""
    from .grid import SCALE_FACTOR, fine_transform
    from .hydrology.occurrence import DateMask, Grid
    from .hydrology.series import series_grid
    from .inference.dataarray import cube_dates, cube_predictor, north_up_stack  # heavy: torch, xarray

    if from_masks or dates is not None:
        given = "from_masks" if from_masks else "dates"
        raise TypeError(f"occurrence() predicts a DataArray's dates, dated by its time coordinate: {given} is for "
                        "files")
    series = [DateMask(name, date) for name, date in cube_dates(cube)]
    if like:
        grid = series_grid(series[0], like)
    else:
        stack = north_up_stack(cube.isel(time=0))[0]
        grid = Grid(stack.rio.crs, fine_transform(stack.rio.transform()), stack.rio.width * SCALE_FACTOR,
                    stack.rio.height * SCALE_FACTOR)
    return series, grid, cube_predictor(cube, _date_model(model, scene))


def _date_model(model: ModelOptions, scene: SceneOptions):
    """The Predictor of occurrence's dates: each date's mask made by this rank alone."""
    from .inference.predictor import Predictor  # heavy: torch
    from .weights_header import default_weights

    return Predictor(model.weights or default_weights(), PredictOptions.of(model, scene=scene, overwrite=True), World())


def _date_predictor(model: ModelOptions, scene: SceneOptions) -> Callable:
    """predict(source, mask_path) -> its findings: one date's mask, made by this rank alone."""
    predictor = _date_model(model, scene)

    def predict(source: str, mask_path: Path) -> list[Finding]:
        return predictor.predict_scene(source, mask_path).warnings

    return predict


def load_model(weights=None, device: str = "cpu"):
    """The network of a weights file (the bundled model by default), in eval mode.

    Args:
        weights: a ``.safetensors`` file of s2s2net, or None / "default" for the bundled model.
        device: where to put it ("cpu", "cuda", "cuda:1", or "auto": a GPU where there is one).

    Returns:
        (model, card): the ``S2S2Net`` and its ``WeightsCard`` (bands, threshold, training record).
        The model maps (N, 6, H, W) normalised reflectance (``s2s2net_cli.bands.normalise`` of
        DN / ``card.bands.scale``, the bands in ``card.bands.names`` order) to (N, 1, 5H, 5W)
        water logits; water is where their sigmoid is at least ``card.threshold``.
    """
    from .checkpoint import load_model as load  # heavy: torch
    from .inference.options import is_device
    from .inference.runtime import resolve_device
    from .weights_header import weights_file

    if not is_device(device):
        raise refuse("S2N-DEVICE-UNKNOWN", option("device"), value=device)
    return load(weights_file(weights or "default"), resolve_device(device))


@_takes_geo_tables
@_takes_band_datasets
def chip(pairs=(), output=None, *, manifests=(), overwrite: bool = False, on_progress=None, **options):
    """Cut training chips from scenes and their masks, as ``s2s2net chip`` does.

    Args:
        pairs: (scene, mask) pairs, or one such pair: a mask is a raster (water 1, land 0) at
            any resolution, or a vector file of water polygons (exact 2 m truth). Either may be
            an ``xarray.DataArray`` with a CRS (a scene as ``predict`` takes it; a mask of one
            band), a mask a GeoDataFrame of water polygons, cut as the same files would be.
        manifests: CSV manifests of pairs (image,mask[,id,split]).
        output: the chips folder (chips and index.gpkg, split train, val and test).
        overwrite: replace the chips a folder holds.
        **options: ChipOptions fields (``size``, ``stride``, ``max_nodata``, ``test_ids``,
            ``test_regions``, ``val_fraction``, ``seed``, ``nodata``, ``degrade``) and
            SceneOptions fields.

    Returns:
        A ``ChipSummary`` (chips a split, skipped windows, warnings).
    """
    from .manifest import pairs_from_options
    from .training.chips import ChipOptions, chip_pairs

    if output is None:
        raise TypeError("chip() needs an output folder for the chips")
    chip_fields, scene = _split(chip, options, ChipOptions, SceneOptions)
    chip_fields.pop("scene", None)
    chip_options = ChipOptions(scene=SceneOptions(**scene), overwrite=overwrite, **chip_fields)
    with contextlib.ExitStack() as files:
        given, said = _pairs_as_files(_pairs(pairs, dataarray=True), files)  # cut as the same files would be
        try:
            summary = chip_pairs(pairs_from_options(given, manifests), output, chip_options, on_progress)
        except S2S2NetError as exc:
            _warn_all([_said_of_held(w, said) for w in getattr(exc, "warnings", ())])  # what may say why it stopped
            raise
    summary.warnings = [_said_of_held(w, said) for w in summary.warnings]
    _warn_all(summary.warnings)
    return summary


def _said_of_held(found: Finding, said: dict[str, str]) -> Finding:
    if not said:
        return found
    from .inference.dataarray import said_of_held  # heavy: torch, xarray

    return said_of_held(found, said)


def train(chips_dirs, run_dir, *, world: World | None = None, on_record: Callable[[dict], None] | None = None,
          **options):
    """Train the network on chips, as ``s2s2net train`` does (DeepSpeed ZeRO; every rank of a
    launcher calls it).

    Args:
        chips_dirs: one chips folder or several (the sources, drawn as ``source_weights`` say).
        run_dir: the run folder (checkpoints, metrics.jsonl, best.safetensors).
        world: the ranks (default: the launcher's, or one process).
        on_record: called with each record: train steps, validations, status lines
            (``kind`` "status": the first DeepSpeed op build, say) and warnings as the run
            starts (``kind`` "warning", its ``finding``; also warned when it ends).
        **options: TrainOptions fields (``max_steps``, ``batch_size``, ``lr``, ``init_weights``...).

    Returns:
        A ``TrainResult`` (steps, best F1, the weights written).
    """
    from .training.config import TrainOptions
    from .training.loop import train as run  # heavy: torch, deepspeed

    _check_path(run_dir, "run_dir")
    _split(train, options, TrainOptions)
    options.setdefault("explicit", frozenset(options))  # what a deepspeed_config given beside them may not contradict
    result = run(_paths(chips_dirs, "chips_dirs"), run_dir, TrainOptions(**options), on_record=on_record, world=world)
    _warn_all(result.warnings)
    return result


@_takes_band_datasets
@_takes_geo_tables
def calibrate(weights, output, *, pairs=(), manifests=(), gains=None, synthetic_scenes: int | None = None,
              synthetic_size: int | None = None, overwrite: bool = False,
              on_progress: Callable[[int, int], None] | None = None, **options):
    """Choose the water threshold and NDWI prior of weights and write them with them, as
    ``s2s2net weights calibrate`` does (after every fine-tune: ``train`` writes plain weights).

    Args:
        weights: the weights file to calibrate (a run's best.safetensors, say).
        output: the .safetensors file to write.
        pairs: (scene, label) pairs, pooled as one source, or one such pair; either may be held
            as an ``xarray.DataArray``, a label as a GeoDataFrame of water polygons.
        manifests: CSV manifests of pairs, each a source of its own.
        gains: the NDWI prior gains to try (0-100; 0: none; default 0, 4, 8, 16, 32).
        synthetic_scenes: synthetic validation scenes to score on besides (default 12).
        synthetic_size: their side in 10 m pixels (default 192, at least 32).
        overwrite: replace an existing output.
        on_progress: called with (scenes scored, scenes in all) as each scene is scored.
        **options: SceneOptions fields (``bands``, ``scale``, ``offset``, ``keep_clouds``,
            ``leave_out``, ``bbox``, ``aoi``): how the pairs' scenes are read, as ``predict`` reads them.

    Returns:
        A ``Calibration``: the ``threshold`` and ``gain`` chosen, every source's F1 at each
        threshold for each gain (``scores``), and the ``warnings`` (also warned: how a scene was
        read, as ``predict`` warns; the largest gain tried chosen, say).
    """
    from .evaluation.calibrate import calibrate_weights  # heavy: torch

    (scene,) = _split(calibrate, options, SceneOptions)

    given = {"gains": gains, "synthetic_scenes": synthetic_scenes, "synthetic_size": synthetic_size}
    with contextlib.ExitStack() as files:
        held, said = _pairs_as_files(_pairs(pairs, dataarray=True), files)  # scored as the same files would be
        found = calibrate_weights(weights, output, held, manifests, overwrite=overwrite, on_progress=on_progress,
                                  scene=SceneOptions(**scene), **{k: v for k, v in given.items() if v is not None})
    found.warnings = [_said_of_held(w, said) for w in found.warnings]
    _warn_all(found.warnings)
    return found


@_takes_band_datasets
@_takes_geo_tables
def gate(weights, output, *, scenes=(), synthetic_scenes: int | None = None, overwrite: bool = False, **options):
    """Fit a water gate to weights and write them with it, as ``s2s2net weights gate`` does
    (after calibrating: the gate is fitted at the weights' threshold).

    Args:
        weights: the weights file (calibrated).
        output: the .safetensors file to write.
        scenes: scenes to fit on besides the synthetic ones (any source ``predict`` takes, an
            ``xarray.DataArray`` too; no label needed), or one such scene.
        synthetic_scenes: synthetic scenes to fit on (default 40).
        overwrite: replace an existing output.
        **options: SceneOptions fields (``bands``, ``scale``, ``offset``, ...): how ``scenes`` are
            read, as ``predict`` reads them.

    Returns:
        A ``GateFit``: its margins, the share of cells the head runs on, the pixels the gate
        gets wrong on the fitting scenes, and the ``warnings`` of reading ``scenes`` (also warned).
    """
    from .training.gate import gate_weights  # heavy: torch

    (scene,) = _split(gate, options, SceneOptions)

    given = _paths(scenes, "scenes", SCENE, dataarray=True)
    with contextlib.ExitStack() as files:
        if any(type(s).__name__ == "DataArray" for s in given):
            from .inference.dataarray import scene_file  # heavy: xarray

            given = [files.enter_context(scene_file(s, f"scenes[{k}]")) if type(s).__name__ == "DataArray" else s
                     for k, s in enumerate(given)]
        fit = gate_weights(weights, output, tuple(given), synthetic_scenes, overwrite, scene=SceneOptions(**scene))
    _warn_all(fit.warnings)
    return fit


def synth(output, *, on_pair: Callable[[Path, Path, float], None] | None = None, **options):
    """Make synthetic Sentinel-2 scenes with exact 2 m water masks, as ``s2s2net synth`` does.

    Args:
        output: the folder to write into: ``synth_<seed>_scene.tif`` and ``_mask.tif`` a pair
            (and ``_rivers.gpkg``, the rivers drawn), and ``manifest.csv``.
        on_pair: called with (scene, mask, water share) as each pair is written.
        **options: SynthOptions fields: ``count``, ``size`` (10 m pixels a side), ``seed`` (pair
            i uses seed + i), ``level`` ("L1C", "L2A" or "mixed"), ``landscape`` ("mixed",
            "rivers" or "floods"), ``backgrounds`` (real scenes to paint the water into, in turn:
            one path or several), ``bands`` and ``offset`` (how they are read), ``manifest``,
            ``overwrite``.

    Returns:
        A ``SynthSummary``: the pairs written (``rows``: image, mask, id), the manifest and the
        ``warnings`` of how each background was read (also warned).
    """
    from .synthetic.sets import SynthOptions, make_synthetic_set  # heavy: scipy, the generator

    _check_path(output, "output")
    _split(synth, options, SynthOptions)
    if "backgrounds" in options:
        options["backgrounds"] = tuple(_paths(options["backgrounds"], "backgrounds", BACKGROUND))
    said: list[Finding] = []
    summary = make_synthetic_set(output, SynthOptions(**options), on_background=said.extend, on_pair=on_pair)
    _warn_all(said)
    return summary

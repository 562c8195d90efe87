"""Notebooks: a (band, y, x) ``xarray.DataArray`` in, the 2 m water mask as a DataArray out.

The input is what stackstac gives (a ``band`` dimension, a CRS and transform through
rioxarray's ``.rio``; one date of its (time, band, y, x) cubes, its time kept or not), or
odc-stac's Dataset of one variable per band made that DataArray (band_array). Bands are taken
by name when the ``band`` coordinate names them (B02 ... B12 or blue, green, red, nir, swir16,
swir22), else in the model's order, with a warning. What predict warns of (an offset left out,
the order assumed) is warned of (an ``S2S2NetWarning`` of the rulebook, its ``.finding.code``
the rule) and kept in the result's ``attrs["warnings"]`` (their codes in
``attrs["warning_codes"]``). The array goes through the same streaming predictor as ``s2s2net
predict`` (written to a temporary GeoTIFF, so a lazy dask array is computed window by window)
and comes back with ``.rio`` CRS and transform on the exact 5x sub-grid: transform x
Affine.scale(1/5). An array whose y runs south to north (or x east to west) is read north-up
and its mask handed back in the array's own order, lining up with it.

    >>> from s2s2net_cli.inference.dataarray import predict_dataarray
    >>> water = predict_dataarray(stack.sel(time=t), offset=-1000)
    >>> water.rio.to_raster("water.tif")
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import rasterio

from ..bands import BAND_NAMES
from ..rulebook import Finding, refuse, said_of, warn
from ..sources.dates import DATE_TAG, SOURCE_TAG
from ..sources.stac import ASSET_NAMES
from ..weights_header import default_weights
from .predictor import PredictOptions, Predictor

DATAARRAY = "DataArray"  # what a finding names in place of a file


def band_array(ds):
    """An ``xarray.Dataset`` of one variable per band (odc-stac's ``load``: red, green, ... or
    B02, B03, ..., each (time, y, x) or (y, x)) as the DataArray of its variables along a
    ``band`` dimension named by them, its CRS and its bands' one nodata value kept."""
    bands = [name for name, v in ds.data_vars.items() if v.ndim >= 2]
    if not bands:
        raise refuse("S2N-DATAARRAY-DIMS", DATAARRAY, dims=tuple(ds.dims))
    stacked = (getattr(ds[bands], "to_dataarray", None) or ds[bands].to_array)(dim="band")
    nodata = {ds[name].rio.nodata for name in bands}
    if len(nodata) == 1 and None not in nodata:
        stacked = stacked.rio.write_nodata(nodata.pop())
    if ds.rio.crs is not None and stacked.rio.crs is None:
        stacked = stacked.rio.write_crs(ds.rio.crs)
    return stacked


def select_bands(da):
    """``da`` with its six bands in the model's order (by name when the band coordinate names
    them), and whether they were chosen by name."""
    if "band" not in da.dims or da.ndim < 3:
        raise refuse("S2N-DATAARRAY-DIMS", DATAARRAY, dims=da.dims)
    check_spatial_dims(da)
    spatial = {"band", da.rio.y_dim, da.rio.x_dim}
    extra = [dim for dim in da.dims if dim not in spatial]
    several = next((dim for dim in extra if da.sizes[dim] > 1), None)
    if several is not None:  # a stack of dates, say: which one is the user's to say
        raise refuse("S2N-DATAARRAY-SEVERAL", DATAARRAY, dim=several, count=da.sizes[several])
    da = da.squeeze(extra, drop=True)  # one date of a stack (time of length 1) is that date's scene
    da = da.transpose("band", da.rio.y_dim, da.rio.x_dim)  # (y, x, band), as a stack of images is held, too
    names = [str(v) for v in da["band"].values] if "band" in da.coords else []
    if names and not all(n.isdigit() for n in names):
        order = []
        for band in BAND_NAMES:
            found = next((n for n in ASSET_NAMES[band] if n in names), None)
            if found is None:
                raise refuse("S2N-DATAARRAY-NO-BAND", DATAARRAY, band=band, looked_for=', '.join(ASSET_NAMES[band]), names=names)
            order.append(found)
        return da.sel(band=order), True
    if da.sizes["band"] != len(BAND_NAMES):
        raise refuse("S2N-DATAARRAY-BAND-COUNT", DATAARRAY, count=da.sizes['band'], needs=', '.join(BAND_NAMES))
    return da, False


def predict_dataarray(da, weights=None, probability: bool = False, **options):
    """The 2 m water mask (uint8 0/1, 255 nodata) or probability (0-100) of ``da``.

    ``options`` are those of PredictOptions (``threshold``, ``tile_size``, ``device``, ...) and
    of SceneOptions (``offset``, ``scale``, ...). Returns a DataArray (y, x) named ``water``."""
    import rioxarray  # noqa: F401  (registers .rio; heavy: xarray)

    date, source = date_of(da), da.encoding.get("source")
    stack, named, flipped = north_up_stack(da)
    predictor = Predictor(weights or default_weights(), PredictOptions.from_flat(probability=probability, **options))
    with tempfile.TemporaryDirectory(prefix="s2s2net-da-") as tmp:
        scene, out = Path(tmp) / "scene.tif", Path(tmp) / "water.tif"
        write_scene(stack, scene, named, date)
        with said_of(DATAARRAY):  # not of its temporary file
            said = [in_notebook_terms(w) for w in predictor.predict_scene(scene, out).warnings]
        result = rioxarray.open_rasterio(out, mask_and_scale=False).squeeze("band", drop=True).load()
    if flipped:  # back in the DataArray's own order, so that it lines up with it
        result = result.isel({result.rio.y_dim if dim == stack.rio.y_dim else result.rio.x_dim: slice(None, None, -1)
                              for dim in flipped})
        result = result.rio.write_transform(result.rio.transform(recalc=True))
    for found in said:  # what predict warns of on stderr (an offset left out, the band order assumed)
        warn(found)
    if date:  # lines up with the cube it came from (xr.concat over time)
        result = result.assign_coords(time=da["time"].values.reshape(()))
    if source:  # the file the array was read from, not its temporary copy
        result.attrs[SOURCE_TAG] = Path(source).name
    else:
        result.attrs.pop(SOURCE_TAG, None)
    result.name = "water"
    result.attrs["long_name"] = "water probability (percent)" if probability else "water (1), land (0)"
    result.attrs["warnings"] = [found.message("python") for found in said]
    result.attrs["warning_codes"] = [found.code for found in said]
    return result


def check_spatial_dims(da) -> None:
    """InputError unless rioxarray finds ``da``'s spatial dimensions (x and y, longitude and
    latitude): one of lat and lon, say, is told the line that renames them."""
    from rioxarray.exceptions import MissingSpatialDimensionError

    try:
        da.rio.x_dim, da.rio.y_dim
    except MissingSpatialDimensionError:
        others = [str(d) for d in da.dims if d not in ("band", "time")]
        x, y = (others[-1], others[-2]) if len(others) >= 2 else ("x", "y")
        raise refuse("S2N-DATAARRAY-SPATIAL-DIMS", DATAARRAY, dims=da.dims,
                     fix=f"da.rename({{{x!r}: 'x', {y!r}: 'y'}})") from None


def north_up_stack(da):
    """``da`` (one date) as a stack is read: its six bands in the model's order, north-up (its
    transform from its coordinates, not a stale cache), NaN as 0 (nodata); with whether the
    bands were chosen by name and the dimensions flipped to make it north-up."""
    if da.rio.crs is None:
        raise refuse("S2N-DATAARRAY-NO-CRS", DATAARRAY)
    stack, named = select_bands(da)
    stack, flipped = north_up(stack)
    stack = stack.fillna(0) if np.issubdtype(stack.dtype, np.floating) else stack
    return stack, named, flipped


def north_up(da):
    """``da`` with its rows from north to south and columns from west to east, as a GeoTIFF
    holds them (its transform from its coordinates, not a stale cache), and the dimensions
    flipped to make it so."""
    flipped = reversed_axes(da)
    if flipped:
        da = da.isel({dim: slice(None, None, -1) for dim in flipped})
        da = da.rio.write_transform(da.rio.transform(recalc=True))
    return da, flipped


def write_scene(stack, path: Path, named: bool, date: str | None) -> None:
    """``stack`` (north_up_stack's) written to the GeoTIFF ``path`` for the predictor, window by
    window (a lazy dask array computed so): its nodata, its band names when chosen by name (so
    that no order is assumed) and its date (so that its mask is dated, as a file's is)."""
    nodata = stack.rio.nodata if stack.rio.nodata is not None else 0
    stack.rio.write_nodata(nodata, inplace=False).rio.to_raster(path, tiled=True, windowed=True)
    with rasterio.open(path, "r+") as dst:
        if named:
            dst.descriptions = BAND_NAMES
        if date:
            dst.update_tags(**{DATE_TAG: date})


def cube_dates(cube) -> list[tuple[str, str | None]]:
    """The dates of a (time, band, y, x) cube, each named as it is taken from it,
    ``DataArray.isel(time=K)``, with its ISO day."""
    if "time" not in cube.dims:
        raise refuse("S2N-DATAARRAY-NO-TIME", DATAARRAY, what=f"has dimensions {cube.dims}")
    if not np.issubdtype(cube["time"].dtype, np.datetime64) or np.isnat(cube["time"].values).any():
        raise refuse("S2N-DATAARRAY-NO-TIME", DATAARRAY, what=f"its time holds {cube['time'].dtype} values, not "
                                                               "dates for each")
    return [(cube_date_name(k), date_of(cube.isel(time=k))) for k in range(cube.sizes["time"])]


def cube_date_name(k: int) -> str:
    return f"{DATAARRAY}.isel(time={k})"


def cube_predictor(cube, predictor: Predictor):
    """predict(name, mask_path) -> its findings, for occurrence: the cube's date ``name``
    (cube_dates') written beside its mask, predicted, and removed; what predict says of it,
    warnings and refusals, said of the date."""
    index = {cube_date_name(k): k for k in range(cube.sizes["time"])}

    def predict(name: str, mask_path: Path) -> list[Finding]:
        da = cube.isel(time=index[name])
        scene = mask_path.with_name(f"{mask_path.stem}_scene.tif")
        try:
            with said_of(name):
                stack, named, _ = north_up_stack(da)  # occurrence warps each mask onto its grid: no flip back
                write_scene(stack, scene, named, date_of(da))
                return [in_notebook_terms(w).at(name) for w in predictor.predict_scene(scene, mask_path).warnings]
        finally:
            scene.unlink(missing_ok=True)

    return predict


def measure_dataarray(mask, measure):
    """``measure(path)`` of the mask DataArray ``mask`` (predict_dataarray's, say) written to a
    temporary GeoTIFF, north-up; a refusal of that file is said of the DataArray."""
    with mask_file(mask) as path:
        return measure(path)


@contextmanager
def scene_file(da, name: str = DATAARRAY):
    """``da`` (one date) written to a temporary GeoTIFF for what predicts scene files, named as
    the file it was read from (else ``name``.tif, as the mask's source_scene tag says); a
    refusal of that file is said of ``name``."""
    date, source = date_of(da), da.encoding.get("source")
    with said_of(name, DATAARRAY):  # its own refusals (no CRS, its bands) too
        stack, named, _ = north_up_stack(da)  # a file is written north-up, whichever way the array runs
    with tempfile.TemporaryDirectory(prefix="s2s2net-da-") as tmp:
        path = Path(tmp) / f"{Path(source).stem if source else name}.tif"
        write_scene(stack, path, named, date)
        with said_of(name, path):
            yield path


@contextmanager
def mask_file(da, name: str = DATAARRAY):
    """The mask or label ``da`` ((y, x), or (band, y, x) of one band, as rioxarray reads a
    file; predict_dataarray's, say) written north-up to a temporary GeoTIFF with its nodata and
    its scalar attributes as tags, named as the file it was read from (else ``name``.tif); a
    refusal of that file is said of ``name``."""
    import rioxarray  # noqa: F401  (registers .rio; heavy: xarray)

    source = da.encoding.get("source")
    with said_of(name, DATAARRAY):
        if da.rio.crs is None:
            raise refuse("S2N-DATAARRAY-NO-CRS", DATAARRAY)
    written = north_up(da)[0].copy(deep=False)
    scalar = (str, int, float, np.generic)  # its tags: the lists of a mask's warnings are not
    written.attrs = {k: v for k, v in da.attrs.items() if isinstance(v, scalar)}
    with tempfile.TemporaryDirectory(prefix="s2s2net-da-") as tmp:
        path = Path(tmp) / f"{Path(source).stem if source else name}.tif"
        # blocks of 256, not those a file it was read from had (a 40 px label's 40 is no tile side)
        written.rio.to_raster(path, tiled=True, blockxsize=256, blockysize=256, compress="deflate")
        with said_of(name, path):
            yield path


def said_of_scene(found: Finding, path) -> Finding:
    """A finding of the temporary file ``path`` (scene_file's) said of the DataArray; one of
    another file (a --mask) as it is."""
    return in_notebook_terms(found) if str(found.path) == str(path) else found


def date_of(da) -> str | None:
    """The ISO date of ``da``'s one ``time`` (a scalar coordinate, or a dimension of length one,
    as one date of an odc-stac or stackstac cube has it); None without one."""
    if "time" not in da.coords or da["time"].size != 1 or not np.issubdtype(da["time"].dtype, np.datetime64):
        return None
    return str(np.datetime_as_string(da["time"].values.reshape(()), unit="D"))


def reversed_axes(da) -> list[str]:
    """The spatial dimensions of ``da`` that run against a GeoTIFF's order (y from south to
    north, as a DataArray sorted by ``sortby("y")`` has it; x from east to west)."""
    axes = []
    for dim, sign in ((da.rio.y_dim, -1), (da.rio.x_dim, 1)):
        values = np.asarray(da[dim].values) if dim in da.coords else np.arange(2)
        if values.size > 1 and np.sign(values[1] - values[0]) == -sign:
            axes.append(dim)
    return axes


def in_notebook_terms(found: Finding) -> Finding:
    """A finding of predict's said of the DataArray (not its temporary file); its bands, read in
    the model's order, are unnamed in its band coordinate rather than undescribed in a file."""
    if found.code == "S2N-BANDS-UNDESCRIBED":
        return Finding("S2N-DATAARRAY-BANDS-UNNAMED", DATAARRAY, found.values)
    return found.at(DATAARRAY)


def scores_said_of(results: list, said: dict[str, str]) -> list:
    """compare's ``results`` with the temporary files of what a notebook held (DataArrays,
    GeoDataFrames; ``said``: file -> name) named as given, in their images and in the findings
    of them."""
    for result in results:
        for image in result.images:
            for key in ("image", "reference"):
                image[key] = said.get(str(image[key]), image[key])
            image["warnings"] = [said_of_held(w, said) for w in image["warnings"]]
    return results


def said_of_held(found: Finding, said: dict[str, str]) -> Finding:
    """``found`` said of what a notebook held (``said``: temporary file -> its name, such as
    ``pairs[k][j]``) where it names the temporary file that stood for it."""
    if str(found.path) not in said:
        return found
    return in_notebook_terms(found).at(said[str(found.path)])

"""A series of one place, as occurrence counts it: the sources named (a STAC ItemCollection
standing for its items in date order), each with its date, and the 2 m grid they are counted on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..formats import check_exists, is_remote, raster_in_zip
from ..grid import SCALE_FACTOR, fine_transform, is_rotated
from ..option_checks import fields_set, options_said
from ..rulebook import Phrase, finding, option, refuse
from ..sources import stac
from ..sources.dates import read_dates, scene_date
from ..sources.options import SceneOptions
from .occurrence import DateMask, Grid, check_each_date_once


def dated_series(scenes, from_masks: bool = False, dates_csv=None) -> list[DateMask]:
    """A DateMask for each source of ``scenes`` (an ItemCollection's items named
    ``collection.json#ITEM_ID``), dated by ``dates_csv`` (a CSV of scene,date, or a mapping
    scene -> date: read_dates) where it names the source,
    else by its own name or metadata; with ``from_masks`` the sources are the masks."""
    sources = [str(s) for s in stac.expand_collections(scenes)]
    if not sources:  # none given, or an ItemCollection without items
        raise refuse("S2N-SCENES-MISSING")
    for s in sources:
        check_exists(s)  # a name that is no file is a mistake in the command, wherever it stands
    named = read_dates(dates_csv) if dates_csv else {}
    dates_named = option("dates") if isinstance(dates_csv, Mapping) else dates_csv
    series = [DateMask(s, _date_of(s, named), _given_mask(s) if from_masks else None) for s in sources]
    check_each_date_once(series)  # before any is read for the grid
    for d in series:
        if d.date is None and dates_csv:  # a row misspelt, or naming it another way
            d.warnings.append(finding("S2N-DATES-NOT-NAMED", d.source, csv=dates_named, name=Path(d.source).name))
        elif d.date is None:
            d.warnings.append(finding("S2N-OCCURRENCE-UNDATED", d.source))
    return series


def grid_date(series: list[DateMask]) -> DateMask:
    """The date whose grid a series is counted on: the earliest dated one (the first named when
    none has a date)."""
    dated = [d for d in series if d.date]
    return min(dated, key=lambda d: d.date) if dated else series[0]


def _given_mask(source: str) -> str | Path:
    """A mask given by the user as GDAL reads it: a local file as its Path, a GDAL path or URL as
    given (a Path would make its // one), a zip of one raster as that raster's /vsizip/ path."""
    return raster_in_zip(source) or (source if is_remote(source) else Path(source))


def _date_of(source: str, named: dict) -> str | None:
    """The date ``named`` gives ``source`` (by its path as given, its file name, or the same file
    named another way: ./a.tif, /data/a.tif), else its own."""
    for key in (source, Path(source).name):
        if key in named:
            return named[key]
    same = [date for key, date in named.items() if _same_file(key, source)]
    return same[0] if same else scene_date(source)


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).exists() and Path(a).samefile(b)
    except OSError:  # a STAC item's "#ID", a name that is no file
        return False


def series_grid(first: DateMask, like=None, scene_options: SceneOptions | None = None) -> Grid:
    """The grid the series is counted on: ``like``'s, else ``first``'s (grid_date: the earliest
    dated): its mask's grid, or its scene's 2 m grid (read with ``scene_options``)."""
    if like:
        return _like_grid(like)
    if first.mask is not None:
        grid = Grid.of(first.mask)
        if grid.crs is None:  # each date would fail on its way onto the grid
            raise refuse("S2N-MASK-NO-CRS", first.mask)
        return grid
    from ..sources.open import open_scene  # heavy: GDAL's drivers for products and items

    s = open_scene(first.source, scene_options or SceneOptions())
    return Grid(s.crs, fine_transform(s.transform), s.width * SCALE_FACTOR, s.height * SCALE_FACTOR)


def check_masks_options(*bundles) -> None:
    """UsageError when a series of masks already made (--from-masks) is given options of how
    scenes are read and predicted (ModelOptions, SceneOptions): none of them would apply
    (--bbox did not cut the count to its area, --threshold did not cut a mask)."""
    given = [options_said(b, names).template for b in bundles if (names := fields_set(b))]
    if given:
        raise refuse("S2N-OCCURRENCE-MASKS-OPTIONS", None, given=Phrase(", ".join(given)))


def _like_grid(path) -> Grid:
    """The grid of the raster ``path`` (--like): InputError when it has no CRS or is not north-up."""
    grid = Grid.of(path)
    if grid.crs is None:
        raise refuse("S2N-OCCURRENCE-LIKE-NO-GRID", path, why="it has no CRS")
    if is_rotated(grid.transform):
        raise refuse("S2N-OCCURRENCE-LIKE-NO-GRID", path, why="its transform is rotated or sheared")
    return grid

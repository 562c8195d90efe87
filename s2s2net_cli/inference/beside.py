"""What predict writes beside each mask when asked: its water polygons (``--vector``) and its
river centrelines and widths (``--rivers``), named after the mask in a folder of masks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..formats import POLYGONS_FILE, RIVERS_FILE
from ..io import check_output


@dataclass(frozen=True)
class Beside:
    """Where a mask's polygons and rivers go. ``vector`` and ``rivers`` are the paths given:
    themselves beside one mask file (``one_file``), else patterns for each mask of a folder."""

    vector: Path | None = None
    rivers: Path | None = None
    one_file: bool = True
    overwrite: bool = False

    def vector_path(self, mask) -> Path:
        """Beside one mask file: ``vector`` itself; else the mask's stem with its suffix (format)."""
        return Path(self.vector) if self.one_file else Path(mask).with_suffix(Path(self.vector).suffix)

    def rivers_path(self, mask) -> Path:
        """Beside one mask file: ``rivers`` itself; else ``<mask stem>_rivers.gpkg``."""
        return Path(self.rivers) if self.one_file else Path(mask).with_name(f"{Path(mask).stem}_rivers.gpkg")

    def paths(self, mask) -> list[Path]:
        """What is written beside ``mask``."""
        return [*([self.vector_path(mask)] if self.vector else []), *([self.rivers_path(mask)] if self.rivers else [])]

    def check(self, mask) -> None:
        """OutputExistsError for a file beside ``mask`` that exists, unless ``overwrite``; a
        UsageError for one named for another format than it is written in."""
        if self.vector:
            check_output(self.vector_path(mask), self.overwrite, kind=POLYGONS_FILE)
        if self.rivers:
            check_output(self.rivers_path(mask), self.overwrite, kind=RIVERS_FILE)

    def write(self, mask, missing_only: bool = False) -> dict[str, str]:
        """The polygons and rivers of ``mask``; with ``missing_only``, only those not there (beside
        a skipped mask, a run stopped between the mask and them). Where each went, by kind
        (``vector``, ``rivers``): those written now and those found there."""
        if self.vector and not (missing_only and self.vector_path(mask).exists()):
            from ..vectorize import write_water_polygons  # heavy: geopandas

            write_water_polygons(mask, self.vector_path(mask), overwrite=self.overwrite)
        if self.rivers and not (missing_only and self.rivers_path(mask).exists()):
            from ..hydrology.rivers import RiverOptions, measure_rivers  # heavy: geopandas

            measure_rivers(mask, self.rivers_path(mask), RiverOptions(overwrite=self.overwrite))
        return {**({"vector": str(self.vector_path(mask))} if self.vector else {}),
                **({"rivers": str(self.rivers_path(mask))} if self.rivers else {})}

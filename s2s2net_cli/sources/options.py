"""How to read a scene: the one home of the options every command that reads scenes shares."""

from __future__ import annotations

from dataclasses import dataclass

from ..bands import band_indexes
from ..option_checks import check_bounds, check_exclusive, check_types
from .aoi import check_bbox


@dataclass(frozen=True)
class SceneOptions:
    """How to read a scene: band indexes, scale and offset (stacks; products and items say
    their own), clouds, a raster of pixels to leave out, an area of interest."""

    bands: tuple[int, ...] | None = None  # 1-based indexes of B02, B03, B04, B08, B11, B12 in a stack
    scale: float | None = None  # None: 10000, or 1 for a float stack of reflectance (values 0-2)
    offset: float = 0.0  # added to a stack's DNs before dividing by scale
    keep_clouds: bool = False
    leave_out: str | None = None  # raster whose nonzero pixels, or polygons whose pixels, are left out (--mask)
    bbox: tuple[float, float, float, float] | None = None  # lon/lat W, S, E, N
    aoi: str | None = None  # vector file

    def __post_init__(self):
        if self.bands is not None:  # "1,2,3,4,5,6" as --bands takes them, or numbers
            object.__setattr__(self, "bands", band_indexes(self.bands))
        if self.bbox is not None:  # "W,S,E,N" as --bbox takes it, or four numbers
            object.__setattr__(self, "bbox", check_bbox(self.bbox))
        check_types(self)
        check_bounds(self, above={"scale": 0})
        check_exclusive(self, "bbox", "aoi")

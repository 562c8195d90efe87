"""Grid arithmetic: the exact 5x sub-grid of a scene, padding to a multiple of 32.

A 2 m output grid is the scene's affine transform times ``Affine.scale(1/5)``: same origin,
same CRS, exactly 5x the width and height. Coordinates are never rebuilt from bounds.
"""

from __future__ import annotations

from affine import Affine

SCALE_FACTOR = 5
PAD_MULTIPLE = 32


def fine_transform(transform: Affine, factor: int = SCALE_FACTOR) -> Affine:
    """The transform of the sub-grid that splits every pixel into ``factor`` x ``factor`` cells."""
    return transform @ Affine.scale(1.0 / factor)


def fine_shape(height: int, width: int, factor: int = SCALE_FACTOR) -> tuple[int, int]:
    return height * factor, width * factor


def padded_size(size: int, multiple: int = PAD_MULTIPLE) -> int:
    """The smallest multiple of ``multiple`` that holds ``size`` (at least one multiple)."""
    return max(multiple, -(-size // multiple) * multiple)


def is_rotated(transform: Affine) -> bool:
    """True for transforms with rotation or shear terms (north-up grids only are supported)."""
    return transform.b != 0 or transform.d != 0

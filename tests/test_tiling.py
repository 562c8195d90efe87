"""The tiling arithmetic on its own: where tiles lie, which 2 m rows are final when, seams and ranks' shares."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s2s2net_cli.tiling import TileGrid, blend_weights, planned_tile, scene_tile

grids = st.builds(TileGrid.for_scene, st.integers(1, 700), st.integers(1, 300), st.integers(8, 160),
                  st.integers(0, 64), st.integers(0, 64))


# per axis: number of tiles, scene size (10 m), a tile's output extent (2 m), where the output is final
AXES = {"rows": (lambda g: g.n_rows, lambda g: g.height, TileGrid.output_rows, TileGrid.final_bottom),
        "cols": (lambda g: g.n_cols, lambda g: g.width, TileGrid.output_cols, TileGrid.final_right)}


def covering(grid, pos2, axis="rows"):
    """Tiles along ``axis`` whose output box reaches 2 m position ``pos2``, by brute force."""
    n_tiles, _, extent, _ = AXES[axis]
    return [i for i in range(n_tiles(grid)) if extent(grid, i)[0] <= pos2 < extent(grid, i)[1]]


@pytest.mark.parametrize("axis", AXES)
@settings(max_examples=80, deadline=None)
@given(grid=grids)
def test_output_is_final_exactly_when_no_later_tile_reaches_it(grid, axis):
    n_tiles, size, _, final = AXES[axis]
    ends = [final(grid, i) for i in range(n_tiles(grid))]
    assert ends == sorted(ends) and ends[-1] == size(grid) * 5
    for pos2 in range(0, size(grid) * 5, 7):
        reached_by = covering(grid, pos2, axis)
        assert reached_by  # every 2 m row and column of the scene comes from some tile
        assert next(i for i, e in enumerate(ends) if pos2 < e) == max(reached_by)


@settings(max_examples=80, deadline=None)
@given(grids, st.integers(1, 12))
def test_rank_shares_and_seams_cover_every_2m_row_once(grid, world):
    H2 = grid.height * 5
    if not grid.can_share(world):
        assert world == 1 or world > grid.n_rows
        return
    shares = grid.rank_shares(world)
    assert len(shares) == world and shares[0][0] == 0 and shares[-1][1] == grid.n_rows
    assert all(last > first for first, last in shares) and all(a[1] == b[0] for a, b in zip(shares, shares[1:]))
    owner = np.zeros(H2, int)
    for first, last in shares:
        top, bottom = grid.share_rows(first, last)
        owner[top:bottom] += 1
        if first > 0:
            s0, s1 = grid.seam(first)
            owner[s0:s1] += 1
            for row2 in range(s0, s1):  # a seam row is reached by the two shares' tiles and no others
                assert set(covering(grid, row2)) == {first - 1, first}
        for row2 in range(top, bottom, 5):
            assert all(first <= i < last for i in covering(grid, row2))
    assert (owner == 1).all()


@settings(max_examples=60, deadline=None)
@given(grids)
def test_output_box_lies_in_the_read_window_around_the_core(grid):
    top, left, h, w = grid.output_box
    assert top >= 0 and top + h <= grid.read_size and (top, h) == (left, w)
    for i in (0, grid.n_rows - 1):
        win = grid.read_window(i, grid.n_cols - 1)
        assert win.row_off + grid.context == grid.core_rows(i)[0]
        assert grid.output_rows(i)[0] == 5 * (win.row_off + top)
        assert grid.output_rows(i)[1] - grid.output_rows(i)[0] == 5 * h == len(grid.row_weights[i])


@settings(max_examples=80, deadline=None)
@given(grids, st.integers(1, 4))
def test_a_batchs_box_is_the_output_box_cut_to_what_its_tiles_reach_of_the_scene(grid, batch):
    top, left, side, _ = grid.output_box
    for i in range(grid.n_rows):
        r0, r1 = grid.output_rows(i)
        for j0 in range(0, grid.n_cols, batch):
            cols = range(j0, min(j0 + batch, grid.n_cols))
            t, l, h, w = grid.box_of(i, cols)
            assert top <= t and t + h <= top + side and left <= l and l + w <= left + side
            # 2 m rows from the tile row's first: exactly those inside the scene
            assert (5 * (t - top), 5 * (t - top + h)) == (max(r0, 0) - r0, min(r1, 5 * grid.height) - r0)
            # columns from each tile's first: the widest of what each tile holds of the scene
            held = [(max(c0, 0) - c0, min(c1, 5 * grid.width) - c0) for c0, c1 in map(grid.output_cols, cols)]
            assert (5 * (l - left), 5 * (l - left + w)) == (min(a for a, _ in held), max(b for _, b in held))


def test_blend_is_held_within_context_and_half_a_tile():
    assert TileGrid.for_scene(100, 100, 64, 64, 8).blend == 8
    assert TileGrid.for_scene(100, 100, 64, 4, 8).blend == 4
    assert TileGrid.for_scene(100, 100, 10, 64, 8).blend == 5
    with pytest.raises(ValueError):
        TileGrid(100, 100, 64, 4, 8)


@pytest.mark.parametrize("size,tile,blend", [(100, 32, 8), (33, 32, 16), (500, 64, 0), (7, 32, 3)])
def test_weights_ramp_only_inside_seams(size, tile, blend):
    weights = blend_weights(size, tile, blend)
    for i, w in enumerate(weights):
        core = w[5 * 2 * blend: len(w) - 5 * 2 * blend]
        assert np.allclose(core, 1.0)  # away from the seams a pixel comes from one tile
        if i > 0 and blend:
            assert w[0] < 0.01  # and across a seam the weight ramps smoothly



@pytest.mark.parametrize("height, width, tile", [(64, 64, 64), (20, 20, 32), (545, 625, 320), (503, 515, 512),
                                                 (10980, 10980, 512), (1100, 300, 384), (512, 512, 512)])
def test_a_planned_tile_covers_the_scene_in_as_few_tiles_as_the_largest(height, width, tile):
    assert planned_tile(height, width, 512) == tile


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6000), st.integers(1, 6000), st.sampled_from([64, 256, 512, 1024]))
def test_a_planned_tile_is_the_smallest_that_needs_no_more_tiles(height, width, largest):
    tile = planned_tile(height, width, largest)
    count = lambda t: -(-height // t) * -(-width // t)  # noqa: E731
    assert tile % 32 == 0 and tile <= max(largest, 32)
    assert count(tile) == count(largest) or tile == largest  # as few tiles as the largest
    assert tile == 32 or count(tile - 32) > count(tile)  # and no smaller multiple covers it in as few


@pytest.mark.parametrize("height, width, given, tile", [(512, 512, 100000, 512), (40, 40, 1000, 64), (300, 1100, 2048, 1120),
                                                        (512, 512, 256, 256), (600, 600, 512, 512), (40, 40, None, 64)])
def test_a_tile_given_is_no_larger_than_the_one_that_covers_the_scene(height, width, given, tile):
    """A given tile is kept, but one larger than the scene read only the scene's reflection out to
    its side (100000 px: 112 GiB); none given, the tile is planned."""
    assert scene_tile(height, width, given, 512) == tile

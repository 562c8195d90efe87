import numpy as np
import rasterio
from affine import Affine

from s2s2net_cli.synthetic.scenes import BARE, SPECTRA, WATER_CLASSES, class_fractions, make_pair, write_pair


def block_mean(a, f=5):
    h, w = a.shape[0] // f, a.shape[1] // f
    return a.reshape(h, f, w, f).mean(axis=(1, 3))


def test_same_seed_same_pair_other_seed_other_pair():
    a, b, c = make_pair(64, seed=3), make_pair(64, seed=3), make_pair(64, seed=4)
    assert np.array_equal(a.scene, b.scene) and np.array_equal(a.mask, b.mask, equal_nan=True)
    assert not np.array_equal(a.scene, c.scene)


def test_mask_lines_up_with_scene_pixel_by_pixel():
    # With no blur, noise, texture or haze, each 10 m pixel is exactly the area average of its
    # 5 x 5 cells of 2 m landscape: its reflectance is the class fractions times the spectra,
    # and its water fraction is the mean of its 5 x 5 truth cells.
    for seed in range(6):
        p = make_pair(48, 40, seed=seed, level="L2A", sensor=BARE, nodata_margin=False)
        assert p.scene.shape == (6, 48, 40) and p.mask.shape == (240, 200)
        frac = class_fractions(p.classes, len(SPECTRA))
        expected = np.einsum("hwk,kb->bhw", frac, p.spectra)
        refl = p.scene.astype(np.float64) / 10000
        # B02..B08 are at 10 m; B11/B12 went through the 20 m pixel
        assert np.abs(refl[:4] - expected[:4]).max() <= 0.5e-4 + 1e-7
        water_fraction = frac[..., list(WATER_CLASSES)].sum(axis=-1)
        assert np.allclose(block_mean(p.mask), water_fraction)


def test_water_is_dark_in_nir_where_the_truth_says_water():
    p = make_pair(128, seed=11, level="L2A", nodata_margin=False)
    wf = block_mean(p.mask)
    nir = p.scene[3] / 10000
    assert (wf == 1).sum() > 50 and (wf == 0).sum() > 50
    assert np.median(nir[wf == 1]) < 0.08 < np.median(nir[wf == 0])


def test_written_pair_is_on_the_exact_five_times_grid(tmp_path):
    p = make_pair(40, 56, seed=2, nodata_margin=True)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    with rasterio.open(tmp_path / "s.tif") as s, rasterio.open(tmp_path / "m.tif") as m:
        assert s.crs == m.crs and s.crs.to_epsg() // 100 == 326
        assert m.transform == s.transform @ Affine.scale(1 / 5)
        assert (m.width, m.height) == (5 * s.width, 5 * s.height)
        assert s.nodata == 0 and s.dtypes[0] == "uint16" and s.count == 6
        scene, mask = s.read(), m.read(1)
    invalid = (scene == 0).all(axis=0)
    assert invalid.any()
    fine_invalid = np.repeat(np.repeat(invalid, 5, 0), 5, 1)
    assert np.array_equal(np.isnan(mask), fine_invalid)
    assert set(np.unique(mask[~fine_invalid])) <= {0.0, 1.0}


def test_the_smallest_scenes_synth_allows_are_made_for_any_seed():
    for seed in range(40):
        p = make_pair(8, 9, seed=seed)
        assert p.scene.shape == (6, 8, 9) and p.mask.shape == (40, 45)


def test_fragmented_floods_break_into_pools_and_ragged_edges():
    """The "floods" landscape's flood, on the same fields as the smooth extent of the mixed
    landscape's, leaves many small pools (under 400 m2) and more shore per flooded pixel."""
    from scipy import ndimage

    from s2s2net_cli.synthetic.scenes import _flood, _land_cover, fragmented_flood

    def pools_and_shore(before, after):
        flooded = before != after
        sizes = np.bincount(ndimage.label(flooded)[0].ravel())[1:]
        shore = flooded & ~ndimage.binary_erosion(flooded)
        return int((sizes < 100).sum()), shore.sum() / max(flooded.sum(), 1)

    smooth, fragmented = [], []
    for seed in range(8):
        fields = _land_cover(480, 480, np.random.default_rng(seed))
        a, b = fields.copy(), fields.copy()
        _flood(a, np.random.default_rng(100 + seed))
        fragmented_flood(b, np.random.default_rng(100 + seed))
        smooth.append(pools_and_shore(fields, a))
        fragmented.append(pools_and_shore(fields, b))
    assert sum(p for p, _ in fragmented) > 100 > 10 * sum(p for p, _ in smooth)
    assert np.mean([s for _, s in fragmented]) > 1.5 * np.mean([s for _, s in smooth])


def test_floods_landscape_is_the_mixed_landscape_under_a_flood():
    from s2s2net_cli.synthetic.scenes import CLASS

    pair = make_pair(48, seed=3, landscape="floods", nodata_margin=False)
    mixed = make_pair(48, seed=3, nodata_margin=False)
    flooded = pair.classes != mixed.classes
    assert flooded.mean() > 0.05
    assert np.isin(pair.classes[flooded], [CLASS["flood_water"], CLASS["flooded_vegetation"], CLASS["turbid_water"]]).all()
    assert np.array_equal(pair.mask == 1, np.isin(pair.classes, WATER_CLASSES))


def test_pairs_added_to_a_folder_are_listed_beside_those_there(tmp_path):
    """synth into a folder of pairs with another --seed rewrote manifest.csv with the new pairs
    alone, without --overwrite: the pairs there vanished from it. They are kept, a pair made
    again replaces its row, and a manifest.csv of other columns is refused before any pair is
    written."""
    import csv

    from ..conftest import refused, run_cli

    def listed(folder):
        with open(folder / "manifest.csv", newline="") as fh:
            return [row["id"] for row in csv.DictReader(fh)]

    assert run_cli("synth", tmp_path / "s", "--size", 8, "--count", 2).returncode == 0
    assert run_cli("synth", tmp_path / "s", "--size", 8, "--count", 2, "--seed", 10).returncode == 0
    assert listed(tmp_path / "s") == ["synth_0", "synth_1", "synth_10", "synth_11"]
    assert run_cli("synth", tmp_path / "s", "--size", 8, "--seed", 1, "--overwrite").returncode == 0
    assert sorted(listed(tmp_path / "s")) == ["synth_0", "synth_1", "synth_10", "synth_11"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.csv").write_text("scene,label\na.tif,b.tif\n")
    r = run_cli("synth", tmp_path / "other", "--size", 8)
    assert refused(r, "S2N-OUTPUT-EXISTS", 1, tmp_path / "other" / "manifest.csv")
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["manifest.csv"]


def test_a_scene_too_large_for_the_memory_free_is_refused_before_it_is_drawn(tmp_path):
    """``synth --size 10980`` (a whole tile, as a newcomer asks) drew 135 GB of 2 m landscape
    until the system killed it; the size is now weighed against the memory free, and the
    largest that fits is said."""
    import psutil

    from s2s2net_cli.synthetic.sets import MEMORY_SHARE, PAIR_BYTES_PER_PIXEL

    from ..conftest import codes, run_cli

    size = 20000  # 447 GB to draw
    assert size * size * PAIR_BYTES_PER_PIXEL > MEMORY_SHARE * psutil.virtual_memory().available
    r = run_cli("synth", tmp_path / "big", "--size", size, "--json")
    assert r.returncode == 1 and codes(r.stderr) == ["S2N-SYNTH-MEMORY"], r.stderr
    line = r.stderr.splitlines()[-1]
    assert line.startswith("Error: --size 20000: draws each scene whole at 2 m in memory, about 447 GB"), line
    largest = int(line.split("give --size ")[1].split()[0])
    assert 8 <= largest < size and largest * largest * PAIR_BYTES_PER_PIXEL <= psutil.virtual_memory().available
    assert not (tmp_path / "big").exists()
    # water painted into a scene smaller than --size draws the scene's pixels, not --size's
    write_pair(make_pair(32, seed=2), tmp_path / "bg.tif", tmp_path / "bg_mask.tif")
    r = run_cli("synth", tmp_path / "painted", "--background", tmp_path / "bg.tif", "--size", size)
    assert r.returncode == 0 and "S2N-SYNTH-MEMORY" not in r.stderr, r.stderr
    assert (tmp_path / "painted" / "synth_0_scene.tif").exists()

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from s2s2net_cli.training.data import ChipDataset, ChipRecord, weighted_order

from ..conftest import raises_rule, write_raster


def records(counts: dict) -> list[ChipRecord]:
    return [ChipRecord(Path(f"{s}{i}.tif"), Path(f"m{s}{i}.tif"), s) for s, n in counts.items() for i in range(n)]


def test_with_every_weight_one_the_order_is_distributed_samplers():
    recs = records({"synthetic": 7, "bolivia": 5})
    for epoch in (0, 3):
        sampler = DistributedSampler(range(len(recs)), num_replicas=1, rank=0, shuffle=True, seed=9, drop_last=True)
        sampler.set_epoch(epoch)
        assert weighted_order(recs, {}, 9, epoch) == list(iter(sampler))
        assert weighted_order(recs, {"bolivia": 1.0}, 9, epoch) == list(iter(sampler))


def test_a_weight_draws_a_source_that_many_times_an_epoch():
    recs = records({"synthetic": 10, "bolivia": 4})
    order = weighted_order(recs, {"bolivia": 2.5, "synthetic": 0.5}, 1, 0)
    drawn = np.bincount(order, minlength=len(recs))
    assert sorted(drawn[:10].tolist()) == [0] * 5 + [1] * 5  # a seeded half of the synthetic chips
    assert sorted(drawn[10:].tolist()) == [2, 2, 3, 3]  # every Bolivia chip twice and a half once more
    assert order == weighted_order(recs, {"bolivia": 2.5, "synthetic": 0.5}, 1, 0)  # repeatable
    assert order != weighted_order(recs, {"bolivia": 2.5, "synthetic": 0.5}, 1, 1)  # another epoch, another draw
    assert not set(weighted_order(recs, {"synthetic": 0}, 1, 0)) & set(range(10))  # weight 0: validation only


def test_a_mask_on_neither_grid_is_refused_naming_it(tmp_path):
    image = write_raster(tmp_path / "i.tif", np.full((6, 8, 8), 1500, "uint16"), nodata=0)
    mask = write_raster(tmp_path / "m.tif", np.zeros((20, 20), "uint8"), nodata=255)
    with raises_rule("S2N-CHIPS-MASK-SIZE", "m.tif: mask is 20 x 20 px"):
        ChipDataset([ChipRecord(image, mask)])[0]
    write_raster(mask, np.ones((8, 8), "uint8"), nodata=255)
    _, target, scale = ChipDataset([ChipRecord(image, mask)])[0]
    assert scale == 5 and target.shape == (1, 40, 40) and torch.all(target == 1)


def test_chips_folders_of_two_chip_sizes_are_refused_before_a_run_starts(tmp_path):
    """Two chips folders cut at two --size (16 and 20 px) stopped at the first mixed batch in
    torch.stack ("stack expects each tensor to be equal size"), after DeepSpeed had started and
    the run folder was made. Refused in one line now, naming both folders and sides."""
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    from ..conftest import refused, run_cli

    p = make_pair(64, seed=5, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    for name, size in (("a", 16), ("b", 20), ("c", 16)):
        r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / name, "--size", size)
        assert r.returncode == 0, r.stderr
    r = run_cli("train", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "run", "--max-steps", 1)
    assert refused(r, "S2N-CHIPS-SIDES", 1, f"{tmp_path / 'b'}: holds chips of 20 x 20 px, and {tmp_path / 'a'} "
                                           "chips of 16 x 16 px")
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()
    from s2s2net_cli.training.data import source_splits

    train, val = source_splits([tmp_path / "a", tmp_path / "c"])  # one size: as before
    assert {r.source for r in train} == {"a", "c"}


def test_a_chip_gone_from_its_folder_is_refused_before_a_run_starts(tmp_path):
    """Only the first train and val chips were looked for: a chips folder copied short (its
    last chips missing) trained until one of them was drawn. Every chip is looked for now."""
    from s2s2net_cli.synthetic.scenes import make_pair, write_pair

    from ..conftest import refused, run_cli

    p = make_pair(64, seed=5, nodata_margin=False)
    write_pair(p, tmp_path / "s.tif", tmp_path / "m.tif")
    r = run_cli("chip", "--pair", tmp_path / "s.tif", tmp_path / "m.tif", "-o", tmp_path / "c", "--size", 16)
    assert r.returncode == 0, r.stderr
    images = sorted((tmp_path / "c").rglob("*.tif"))
    assert len(images) >= 6
    gone = images[-3:]
    for path in gone:
        path.unlink()
    r = run_cli("train", tmp_path / "c", "-o", tmp_path / "run", "--max-steps", 1)
    assert refused(r, "S2N-CHIPS-CHIP-MISSING", 1)
    assert any(f"{path}: listed in index.gpkg but missing (and 2 more of its files)" in r.stderr for path in gone)
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()

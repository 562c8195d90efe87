"""Fitting the water gate: both bounds hold on the cells they were fitted to."""

import numpy as np
import torch

from s2s2net_cli.bands import BandSpec, normalise
from s2s2net_cli.inference.runtime import inference_network
from s2s2net_cli.model import S2S2Net
from s2s2net_cli.training.gate import CELL_PIXELS, cells_of, fit_gate


def _cells(threshold):
    """Fitting cells of a random network with a strong NDWI prior on scenes of land around
    ponds: the prior makes its answers land far from them, water inside them, mixed on shores."""
    torch.manual_seed(0)
    model = inference_network(S2S2Net(spec=BandSpec(), ndwi_prior=20.0).eval())
    rng = np.random.default_rng(1)
    cells = []
    for _ in range(3):
        reflectance = rng.uniform(0.05, 0.1, (6, 48, 56)).astype(np.float32)
        reflectance[3] += 0.2  # land: near infrared above green
        for _ in range(2):
            r, c, size = rng.integers(0, 40), rng.integers(0, 48), rng.integers(9, 20)
            reflectance[3, r: r + size, c: c + size] = 0.02  # a pond
        x = torch.from_numpy(normalise(reflectance, np.ones((48, 56), bool), BandSpec()))[None]
        cells.append(cells_of(model, x, threshold))
    return cells


def test_a_fitted_gate_skips_and_fills_only_what_its_margins_allow():
    """On its own fitting cells the gate's land bound skips no more water, and its water bound
    fills no more land, than MISSED_PIXELS of the pixels (here: none at all, they are few); the
    cells it fills are water throughout by the head's own answers, and keeping the best of
    more seeds never skips fewer cells."""
    threshold = 4.0
    cells = _cells(threshold)
    gate, fit = fit_gate(cells, threshold, seeds=(0,))
    assert gate.bounds == 2 and fit.missed_fraction == 0 and fit.wrong_water_fraction == 0
    assert fit.filled_fraction > 0.05 and fit.active_fraction < 0.5  # bounds that skip work
    with torch.no_grad():
        skipped, filled = [], []
        for c in cells:
            bounds = gate(c.features[None])[0]
            skipped.append((bounds[0] + c.prior_max < threshold).flatten())
            filled.append((~skipped[-1].view_as(c.water) & (bounds[1] + c.prior_min >= threshold)).flatten())
    skipped, filled = torch.cat(skipped), torch.cat(filled)
    water, land = (torch.cat([getattr(c, n).flatten() for c in cells]) for n in ("water", "land"))
    assert float(water[skipped].sum()) == 0 and float(land[filled].sum()) == 0
    assert fit.filled_fraction == float(filled.float().mean()) and fit.active_fraction == float((~skipped & ~filled).float().mean())
    assert abs(fit.water_fraction - float(water.sum()) / (water.numel() * CELL_PIXELS)) < 1e-9
    _, best = fit_gate(cells, threshold, seeds=(0, 1))
    assert best.active_fraction + best.filled_fraction <= fit.active_fraction + fit.filled_fraction

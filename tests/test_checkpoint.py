import json
import pickle
import struct

import pytest
import torch

from s2s2net_cli.checkpoint import WeightsCard, load_model, read_card, save_weights
from s2s2net_cli.model import S2S2Net

from .conftest import raises_rule


def test_round_trip_gives_identical_outputs(tmp_path):
    torch.manual_seed(1)
    model = S2S2Net().eval()
    path = save_weights(tmp_path / "w.safetensors", model.state_dict(), WeightsCard(training={"steps": 3}))
    loaded, card = load_model(path)
    x = torch.randn(1, 6, 33, 40)
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))
    assert card.training == {"steps": 3}
    assert card.bands.names == ("B02", "B03", "B04", "B08", "B11", "B12")
    assert not list(tmp_path.glob(".*tmp*"))


class _Payload:
    def __reduce__(self):
        import os

        return (os.system, (f"touch {_Payload.marker}",))


@pytest.mark.parametrize("name", ["evil.pt", "evil.ckpt", "evil.safetensors"])
def test_pickle_is_refused_without_running_its_payload(tmp_path, name):
    marker = tmp_path / "PWNED"
    _Payload.marker = marker
    path = tmp_path / name
    torch.save({"state_dict": _Payload()}, path)  # a zip pickle, like a Lightning .ckpt
    with raises_rule("S2N-WEIGHTS-ZIP-PICKLE"):
        load_model(path)
    raw = tmp_path / ("raw_" + name)
    raw.write_bytes(pickle.dumps(_Payload()))
    with raises_rule("S2N-WEIGHTS-PICKLE", raw):
        load_model(raw)
    assert not marker.exists()


def test_safetensors_without_our_metadata_is_refused(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "other.safetensors"
    save_file({"a": torch.zeros(2)}, str(path))
    with raises_rule("S2N-WEIGHTS-NOT-S2S2NET"):
        read_card(path)


def test_metadata_is_validated_before_use(tmp_path):
    model = S2S2Net()
    card = WeightsCard()
    path = save_weights(tmp_path / "w.safetensors", model.state_dict(), card)
    # rewrite the header with 4 band names for a 6-channel model
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = json.loads(header["__metadata__"]["s2s2net"])
    meta["bands"]["names"] = ["B02", "B03", "B04", "B08"]
    meta["bands"]["mean"] = meta["bands"]["mean"][:4]
    meta["bands"]["std"] = meta["bands"]["std"][:4]
    header["__metadata__"]["s2s2net"] = json.dumps(meta)
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", len(new)) + new + data[8 + n:])
    with raises_rule("S2N-WEIGHTS-METADATA-INVALID", bad):
        load_model(bad)


def test_missing_and_garbage_files(tmp_path):
    with raises_rule("S2N-WEIGHTS-NOT-FOUND"):
        load_model(tmp_path / "nope.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"hello world, not weights at all")
    with raises_rule("S2N-WEIGHTS-NOT-SAFETENSORS", junk):
        load_model(junk)


def test_a_network_with_water_index_inputs_round_trips_and_old_cards_read_as_without(tmp_path):
    from s2s2net_cli.bands import BandSpec
    from s2s2net_cli.model import ModelConfig

    torch.manual_seed(2)
    config = ModelConfig(water_indices=True)
    model = S2S2Net(config=config).eval()
    path = save_weights(tmp_path / "wi.safetensors", model.state_dict(), WeightsCard(model=config))
    loaded, card = load_model(path)
    assert card.model.water_indices and card.model.encoder_channels == 8
    x = torch.randn(1, 6, 33, 40)
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))
    old = ModelConfig().to_dict()
    old.pop("water_indices")  # weights written before the option existed
    assert ModelConfig.from_dict(old) == ModelConfig()
    # bands the indices cannot be computed from are refused as one line naming the file
    bad = WeightsCard(model=ModelConfig(in_channels=4), bands=BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4))
    data = bad.to_dict()
    data["model"]["water_indices"] = True
    from safetensors.torch import save_file

    other = tmp_path / "rgbn_wi.safetensors"
    save_file({"a": torch.zeros(1)}, str(other), metadata={"s2s2net": json.dumps(data)})
    with raises_rule("S2N-WEIGHTS-METADATA-INVALID", other):
        read_card(other)


def test_the_ndwi_prior_travels_in_the_card_and_old_cards_read_as_without(tmp_path):
    from safetensors.torch import save_file

    from s2s2net_cli.bands import BandSpec
    from s2s2net_cli.model import ModelConfig

    torch.manual_seed(5)
    model = S2S2Net().eval()
    path = save_weights(tmp_path / "prior.safetensors", model.state_dict(), WeightsCard(ndwi_prior=16.0))
    loaded, card = load_model(path)
    assert card.ndwi_prior == 16.0 and loaded.prior is not None and loaded.prior.gain == 16.0
    x = torch.randn(1, 6, 33, 40)
    with torch.no_grad():
        assert (loaded(x) - model(x)).abs().max() > 1  # the card, not the tensors, carries it
    old = WeightsCard().to_dict()
    old.pop("ndwi_prior")  # weights written before it existed
    assert WeightsCard.from_dict(old).ndwi_prior == 0.0
    for name, change, message in (("rgbn_prior", "bands", "NDWI prior needs the bands"),
                                  ("huge_prior", "gain", "ndwi_prior 500.0 is not in 0-100")):
        data = WeightsCard(ndwi_prior=8.0).to_dict()
        if change == "bands":
            data["model"] = ModelConfig(in_channels=4).to_dict()
            data["bands"] = BandSpec(("B02", "B03", "B04", "B08"), 10000, (0.1,) * 4, (0.1,) * 4).to_dict()
        else:
            data["ndwi_prior"] = 500
        bad = tmp_path / f"{name}.safetensors"
        save_file({"a": torch.zeros(1)}, str(bad), metadata={"s2s2net": json.dumps(data)})
        with raises_rule("S2N-WEIGHTS-METADATA-INVALID", bad):
            read_card(bad)


def test_int8_ranges_travel_in_the_card_and_bad_ones_are_refused(tmp_path):
    from safetensors.torch import save_file

    card = WeightsCard(int8_ranges=[(-0.3, 8.0), (-0.31, 16.0), (-0.31, 16.5), (-0.31, 12.0)])
    assert WeightsCard.from_dict(json.loads(json.dumps(card.to_dict()))).int8_ranges == card.int8_ranges
    assert "int8_ranges" not in WeightsCard().to_dict() and WeightsCard.from_dict(WeightsCard().to_dict()).int8_ranges is None
    for name, ranges in (("three", [[0, 1]] * 3), ("empty", [[0, 1], [0, 1], [2, 2], [0, 1]]),
                         ("infinite", [[0, 1], [0, 1], [0, float("inf")], [0, 1]])):
        data = WeightsCard().to_dict()
        data["int8_ranges"] = ranges
        bad = tmp_path / f"{name}.safetensors"
        save_file({"a": torch.zeros(1)}, str(bad), metadata={"s2s2net": json.dumps(data)})
        with raises_rule("S2N-WEIGHTS-METADATA-INVALID", bad):
            read_card(bad)

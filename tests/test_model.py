import pytest
import torch

from s2s2net_cli.model import S2S2Net, pad_to_multiple


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return S2S2Net(in_channels=6).eval()


@pytest.mark.parametrize("h,w", [(1, 33), (37, 45), (32, 32), (64, 48), (5, 1), (33, 97)])
def test_output_is_exactly_five_times_the_input(model, h, w):
    with torch.no_grad():
        out = model(torch.randn(2, 6, h, w))
    assert out.shape == (2, 1, 5 * h, 5 * w)
    assert torch.isfinite(out).all()


def test_activations_are_swish_and_mish():
    m = S2S2Net()
    kinds = {type(x).__name__ for x in m.modules()}
    assert "GELU" not in kinds and "ReLU" not in kinds
    assert "SiLU" in kinds and "Mish" in kinds
    assert sum(isinstance(x, torch.nn.Mish) for x in m.head.modules()) == 4


def test_padding_reflects_and_output_depends_on_real_pixels_only_at_the_crop(model):
    x = torch.randn(1, 6, 40, 40)
    padded = pad_to_multiple(x, 32)
    assert padded.shape[-2:] == (64, 64)
    assert torch.equal(padded[..., :40, :40], x)
    assert torch.equal(padded[..., 40, :40], x[..., 38, :])  # reflection, not zeros


def test_gradients_reach_the_encoder(model):
    m = S2S2Net().train()
    out = m(torch.randn(2, 6, 32, 32))
    out.mean().backward()
    assert m.encoder.patch_embed1.proj.weight.grad.abs().sum() > 0

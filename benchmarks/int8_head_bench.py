"""Whether 8-bit integers would speed up the head on this CPU: each of its steps as predict
runs it (the sub-pixel convolution of the bundled weights, fp32, channels-last) against the
same convolution in int8 (PyTorch's quantized convolution: weights per channel, activations per
tensor) and what int8 needs between steps that fp32 does not: the codes read out of the
quantized tensor, Mish as a 256-entry lookup table on them (compiled into one pass), and the
quantized pixel shuffle; fp32's Mish is predict's (compiled into one pass). Shapes: one 512 px
tile of a scene (the window predict gives the head, 528 px, and its margin), the head's x2.5
step as its groups of phases; the 1x1 logit after it, and the edges each step recomputes, are
left out on both sides.

    python benchmarks/int8_head_bench.py [--json]

For CPUs without bf16 (`--precision auto` runs int8 there where the CPU has VNNI, fp32 where
it has not: on an AMD EPYC Zen 1, AVX2 alone, the convolutions took 0.98x fp32's speed in int8
and the head 0.81x). On a CPU with AVX-512 run it as an AVX2 CPU would: ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2.
It compiles its lookup table in a fresh compiler cache (TORCHINDUCTOR_CACHE_DIR, unless set).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import warnings

import torch
import torch.nn.functional as F
from machine import describe
from timing import best_of
from torch.ao.nn.quantized import Conv2d as QuantizedConv2d

from s2s2net_cli.checkpoint import load_model
from s2s2net_cli.inference.runtime import inference_network
from s2s2net_cli.inference.subpixel_head import FusedMish
from s2s2net_cli.model import DECODER_STRIDE, HEAD_MARGIN
from s2s2net_cli.weights_header import weights_file

WINDOW = 528  # 10 m pixels of the window predict gives the head for a 512 px tile


def convolutions(head) -> list[tuple[str, torch.Tensor, torch.Tensor, int, int, int]]:
    """(name, weight, bias, stride, padding, input size) of each convolution the head runs."""
    size = WINDOW // DECODER_STRIDE + 2 * HEAD_MARGIN
    out = []
    for k, step in enumerate(head.steps):
        out.append((f"x2 step {k}", step.weight, step.bias, step.Q, step.pad, size))
        size *= 2
    for k, group in enumerate(head.last.groups):
        out.append((f"x2.5 group {k}", group.weight, group.bias, head.last.Q, 0, size))
    return out


def measure(name, weight, bias, stride, padding, size, mish: FusedMish) -> dict:
    x = F.mish(torch.randn(1, weight.shape[1], size, size)).contiguous(memory_format=torch.channels_last)
    fp32 = best_of(lambda: F.conv2d(x, weight, bias, stride=stride, padding=padding))
    scale = weight.abs().amax((1, 2, 3)).clamp_min(1e-8) / 127
    qweight = torch.quantize_per_channel(weight, scale, torch.zeros_like(scale, dtype=torch.long), 0, torch.qint8)
    conv = QuantizedConv2d(weight.shape[1], weight.shape[0], weight.shape[-1], stride=stride, padding=padding)
    conv.set_weight_bias(qweight, bias)
    y = F.conv2d(x, weight, bias, stride=stride, padding=padding)
    conv.scale, conv.zero_point = float(y.max() - y.min()) / 255, int(-y.min() / (float(y.max() - y.min()) / 255))
    qx = torch.quantize_per_tensor(x, float(x.max() - x.min()) / 255, int(-x.min() / (float(x.max() - x.min()) / 255)),
                                   torch.quint8)
    int8 = best_of(lambda: conv(qx))
    qy = conv(qx)
    codes = qy.int_repr()
    table = torch.arange(256, dtype=torch.uint8)  # a lookup table's cost does not depend on its entries
    # 256-bit vectors, as predict's compiled Mish uses on AVX-512 CPUs: the compiler reads the CPU, not
    # ATEN_CPU_CAPABILITY, and its 512-bit code for dynamic shapes crashed here (subpixel_head.compile_options)
    lookup = torch.compile(lambda c, t: t[c.to(torch.int32)], dynamic=True, options={"cpp.simdlen": 256})
    out = {"step": name, "input": list(x.shape), "output_channels": weight.shape[0],
           "fp32_conv_ms": 1e3 * fp32, "int8_conv_ms": 1e3 * int8,
           "int8_codes_ms": 1e3 * best_of(qy.int_repr),
           "int8_mish_table_ms": 1e3 * best_of(lambda: lookup(codes, table)),
           "fp32_mish_ms": 1e3 * best_of(lambda: mish(y))}
    if weight.shape[0] % 4 == 0 and name.startswith("x2 "):
        out["int8_shuffle_ms"] = 1e3 * best_of(lambda: F.pixel_shuffle(qy, 2))
        out["fp32_shuffle_ms"] = 1e3 * best_of(lambda: F.pixel_shuffle(y, 2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    # a fresh compiler cache, so that no kernel compiled under other ISA variables is read back
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="int8-bench-inductor-"))
    torch.backends.quantized.engine = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else "x86"
    model, _ = load_model(weights_file("default"), torch.device("cpu"))
    head = inference_network(model).head
    with torch.inference_mode():
        mish = FusedMish(enabled=True)  # predict's Mish on large scenes: compiled into one pass
        rows = [measure(*conv, mish) for conv in convolutions(head)]
    keys = ("fp32_conv_ms", "int8_conv_ms", "int8_codes_ms", "int8_mish_table_ms", "fp32_mish_ms",
            "int8_shuffle_ms", "fp32_shuffle_ms")
    total = {key: sum(row.get(key, 0.0) for row in rows) for key in keys}
    fp32 = total["fp32_conv_ms"] + total["fp32_mish_ms"] + total["fp32_shuffle_ms"]
    int8 = total["int8_conv_ms"] + total["int8_codes_ms"] + total["int8_mish_table_ms"] + total["int8_shuffle_ms"]
    report = {"machine": describe(), "torch": torch.__version__, "engine": torch.backends.quantized.engine,
              "threads": torch.get_num_threads(), "steps": rows, "total_ms": total,
              "fp32_head_ms": fp32, "int8_head_ms": int8, "int8_speedup": fp32 / int8}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for row in rows:
        print(f"{row['step']:>14}: conv fp32 {row['fp32_conv_ms']:6.0f} ms, int8 {row['int8_conv_ms']:6.0f} ms; "
              f"int8 also: codes {row['int8_codes_ms']:4.0f}, Mish table {row['int8_mish_table_ms']:4.0f} "
              f"(fp32 Mish {row['fp32_mish_ms']:4.0f})")
    print(f"head: fp32 {fp32:.0f} ms, int8 {int8:.0f} ms: {fp32 / int8:.2f}x "
          f"(convolutions alone {total['fp32_conv_ms'] / total['int8_conv_ms']:.2f}x), on {describe()}")


if __name__ == "__main__":
    main()

"""Whether Winograd's F(2x2, 3x3) would speed up the head's x2 steps on this CPU: each step's
sub-pixel convolution (3x3, stride 1, the bundled model's channels, one 512 px tile's map as
predict gives the head, 528 px and its margin) as PyTorch runs it (fp32, channels-last) against
the same convolution as Winograd's transform (Lavin & Gray 2016): 2.25x fewer multiplications,
16 batched matrix products in place of one convolution, and the input and output transforms as
tensor additions. The x2.5 step (stride 2) is left out.

    python benchmarks/winograd_bench.py [--json]

On a CPU with AVX-512 run it as an AVX2 CPU would: ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from machine import describe
from timing import best_of

# (input channels, output channels of the sub-pixel convolution: four phases each, input side)
STEPS = ((256, 512, 168), (128, 256, 336), (64, 128, 672))
G = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)


def winograd_weights(weight: torch.Tensor) -> torch.Tensor:
    """(out, in, 3, 3) -> (16, in, out): G w G^T for each of the 4 x 4 transformed taps."""
    u = torch.einsum("ai,kcij,bj->abck", G, weight.double(), G)
    return u.reshape(16, weight.shape[1], weight.shape[0]).to(weight.dtype).contiguous()


def winograd_conv(x: torch.Tensor, u: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """conv2d(x, w, bias, padding=1) for even sides, by F(2x2, 3x3) with ``u`` = winograd_weights(w)."""
    n, c, h, w = x.shape
    k = u.shape[-1]
    xp = F.pad(x, (1, 1, 1, 1)).permute(0, 2, 3, 1)  # n, h + 2, w + 2, c
    th, tw = h // 2, w // 2
    d = [[xp[:, i: i + 2 * th: 2, j: j + 2 * tw: 2, :] for j in range(4)] for i in range(4)]
    rows = [[d[0][j] - d[2][j], d[1][j] + d[2][j], d[2][j] - d[1][j], d[1][j] - d[3][j]] for j in range(4)]
    v = x.new_empty(16, n, th, tw, c)
    for i in range(4):  # B^T d B: the rows' transform, then the columns'
        r = [rows[j][i] for j in range(4)]
        torch.sub(r[0], r[2], out=v[4 * i]), torch.add(r[1], r[2], out=v[4 * i + 1])
        torch.sub(r[2], r[1], out=v[4 * i + 2]), torch.sub(r[1], r[3], out=v[4 * i + 3])
    m = torch.bmm(v.view(16, -1, c), u).view(4, 4, n, th, tw, k)
    out = x.new_empty(n, th, 2, tw, 2, k)
    for a, row in enumerate(([m[0][j] + m[1][j] + m[2][j] for j in range(4)],
                             [m[1][j] - m[2][j] - m[3][j] for j in range(4)])):  # A^T m A
        out[:, :, a, :, 0] = row[0] + row[1] + row[2]
        out[:, :, a, :, 1] = row[1] - row[2] - row[3]
    return (out.view(n, h, w, k) + bias).permute(0, 3, 1, 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    with torch.inference_mode():
        for c, k, side in STEPS:
            x = torch.randn(1, c, side, side).contiguous(memory_format=torch.channels_last)
            w, b = torch.randn(k, c, 3, 3) / (9 * c) ** 0.5, torch.randn(k)
            u = winograd_weights(w)
            direct = F.conv2d(x, w, b, padding=1)
            error = float((winograd_conv(x, u, b) - direct).abs().max() / direct.abs().max())
            direct_s = best_of(lambda: F.conv2d(x, w, b, padding=1))  # noqa: B023 - timed at once
            winograd_s = best_of(lambda: winograd_conv(x, u, b))  # noqa: B023
            matmul_s = best_of(lambda: torch.bmm(torch.empty(16, (side // 2) ** 2, c), u))  # noqa: B023
            rows.append({"in": c, "out": k, "side": side, "direct_ms": round(1e3 * direct_s, 1),
                         "winograd_ms": round(1e3 * winograd_s, 1), "matmuls_ms": round(1e3 * matmul_s, 1),
                         "speedup": round(direct_s / winograd_s, 2), "relative_error": error})
    result = {"steps": rows, "threads": torch.get_num_threads(), "machine": describe()}
    if args.json:
        print(json.dumps(result))
    else:
        for row in rows:
            print(row)


if __name__ == "__main__":
    main()

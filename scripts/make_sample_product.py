"""Make sample_data's small Sentinel-2 L2A product from the real Virginia crop.

    python scripts/make_sample_product.py

256 x 256 px (2.56 km) of the crop in ESA's SAFE layout, zipped: B02, B03, B04, B08 at 10 m,
B11, B12 at 20 m (the crop's own 20 m pixels), DNs stored as a processing baseline 05.09
product stores them (+1000, BOA_ADD_OFFSET -1000 in MTD_MSIL2A.xml), lossless JPEG 2000.
The pixels are the crop's L1C top-of-atmosphere values packaged as L2A. The scene
classification is made up: water (6) where MNDWI > 0, vegetation (4) elsewhere, and one
200 m block marked cloud (9) so that a prediction shows clouds left out.
"""

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.product_factory import read_stack, virginia_window, write_product  # noqa: E402


def main() -> None:
    data, transform, crs = read_stack(window=virginia_window(256, 129, 256))
    coarse = data[:, ::2, ::2].astype(np.float32)
    scl = np.where((coarse[1] - coarse[4]) / (coarse[1] + coarse[4]) > 0, 6, 4).astype(np.uint8)
    scl[10:20, 100:110] = 9
    with tempfile.TemporaryDirectory() as tmp:
        archive = write_product(tmp, data, transform, crs, level="L2A", baseline="05.09", scl=scl, as_zip=True)
        target = ROOT / "sample_data" / archive.name
        shutil.copyfile(archive, target)
    print(f"{target.relative_to(ROOT)}: {target.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()

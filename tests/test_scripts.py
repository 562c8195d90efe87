import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_score_real_says_so_and_exits_0_without_the_real_scenes(tmp_path):
    r = subprocess.run(["bash", "scripts/score_real.sh", str(tmp_path / "work")], cwd=ROOT, capture_output=True,
                       text=True, env={"PATH": subprocess.os.environ["PATH"], "REALDATA": str(tmp_path / "none")},
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "no real labelled scenes" in r.stdout and not (tmp_path / "work").exists()


def test_real_scenes_are_found_by_their_label(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from score_real import labelled_scenes

    for name in ("flood_s2_6band_10m.tif", "flood_water_10m.tif", "coast_a_l2a.tif", "coast_a_water.tif",
                 "lonely_s2.tif", "two_a.tif", "two_b.tif", "two_water.tif"):
        (tmp_path / name).write_bytes(b"")
    found = {name: (image.name, label.name) for name, image, label in labelled_scenes(tmp_path)}
    assert found == {"flood": ("flood_s2_6band_10m.tif", "flood_water_10m.tif"),
                     "coast_a": ("coast_a_l2a.tif", "coast_a_water.tif")}  # "two" is ambiguous: skipped

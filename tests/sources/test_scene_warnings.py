"""What predict says of a scene before it maps it: one in degrees, whose mask rivers will refuse,
and one so small that the network sees little around each pixel."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine

from ..conftest import codes, refused, run_cli, write_raster


def _scene(tmp_path, name, size, transform, crs):
    rng = np.random.default_rng(5)
    data = rng.integers(300, 3000, (6, size, size)).astype("uint16")
    return write_raster(tmp_path / name, data, transform=transform, crs=crs, nodata=0)


def test_a_scene_in_degrees_is_warned_of_with_its_utm_zone(tmp_path, random_weights):
    # about 10 m pixels at Beni, Bolivia (Sen1Floods11's chips are in EPSG:4326): UTM zone 20 south
    scene = _scene(tmp_path, "beni.tif", 160, Affine(9e-5, 0, -65.0, 0, -9e-5, -14.0), "EPSG:4326")
    r = run_cli("predict", scene, "-o", tmp_path / "w.tif", "--weights", random_weights, "--json")
    assert r.returncode == 0, r.stderr
    (result,) = json.loads(r.stdout)["scenes"]
    (found,) = [w for w in result["warnings"] if w["code"] == "S2N-SCENE-GEOGRAPHIC"]
    assert "EPSG:32720" in found["message"] and "rivers" in found["message"]
    assert "S2N-SCENE-GEOGRAPHIC" in codes(r.stderr)
    # the mask is in degrees: rivers refuses it, as the warning said
    rivers = run_cli("rivers", tmp_path / "w.tif", "-o", tmp_path / "r.gpkg")
    assert rivers.returncode == 1 and codes(rivers.stderr) == ["S2N-RIVERS-NOT-PROJECTED"]
    # its command, run as said, gives a mask rivers measures (rio comes with s2s2net)
    command = rivers.stderr.split("first: ")[1].split(" [S2N-")[0]
    assert command.startswith("rio warp") and "EPSG:32720" in command
    on_path = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, env=on_path)
    assert done.returncode == 0, done.stderr
    assert run_cli("rivers", tmp_path / "w_utm.tif", "-o", tmp_path / "r.gpkg").returncode == 0
    # and so does the scene warning's: the scene in UTM at 10 m draws no warning and its rivers are measured
    command = found["message"].split("first: ")[1]
    assert subprocess.run(command, shell=True, cwd=tmp_path, env=on_path).returncode == 0
    with rasterio.open(tmp_path / "beni_utm.tif") as src:
        assert src.crs.to_epsg() == 32720 and src.res == (10, 10)
    r = run_cli("predict", tmp_path / "beni_utm.tif", "-o", tmp_path / "w2.tif", "--rivers", tmp_path / "r2.gpkg",
                "--weights", random_weights, "--json")
    assert r.returncode == 0, r.stderr
    said = {w["code"] for w in json.loads(r.stdout)["scenes"][0]["warnings"]}
    assert not said & {"S2N-SCENE-GEOGRAPHIC", "S2N-PIXELS-NOT-10M"}, said
    # asked of predict, rivers refuses the scene before its mask or polygons are written
    out = tmp_path / "again"
    r = run_cli("predict", scene, "-o", out / "w.tif", "--vector", out / "w.gpkg", "--rivers", out / "r.gpkg",
                "--weights", random_weights)
    assert refused(r, "S2N-RIVERS-NOT-PROJECTED", 1, scene) and r.stderr.count("\n") == 1
    assert "beni_utm.tif --dst-crs EPSG:32720 --res 10 --resampling nearest" in r.stderr  # a scene: at 10 m
    assert not out.exists()
    # a notebook's DataArray in degrees is told the line that mends it, not a rio warp of its temporary file
    import rioxarray

    import s2s2net_cli as s2n

    mask = s2n.predict(rioxarray.open_rasterio(scene), weights=random_weights)
    (said,) = [w for w, c in zip(mask.attrs["warnings"], mask.attrs["warning_codes"]) if c == "S2N-SCENE-GEOGRAPHIC"]
    assert said.startswith("DataArray: ") and said.endswith(
        "first: da.rio.reproject('EPSG:32720', resolution=10, resampling=rasterio.enums.Resampling.nearest)")
    # in a batch, before the first scene is mapped
    utm = _scene(tmp_path, "utm.tif", 64, Affine(10, 0, 500000, 0, -10, 4000000), "EPSG:32633")
    r = run_cli("predict", utm, scene, "-o", out, "--rivers", "r.gpkg", "--weights", random_weights)
    assert refused(r, "S2N-RIVERS-NOT-PROJECTED", 1, scene) and not out.exists()


def bbox_within(scene, row0, col0, row1, col1) -> str:
    """--bbox W,S,E,N (degrees) of the scene's pixels rows row0..row1, columns col0..col1."""
    from rasterio.warp import transform_bounds

    with rasterio.open(scene) as src:
        (x0, y0), (x1, y1) = src.xy(row1, col0), src.xy(row0, col1)
        west, south, east, north = transform_bounds(src.crs, "EPSG:4326", x0, y0, x1, y1)
    return f"{west},{south},{east},{north}"


def test_a_small_scene_is_warned_of_and_a_large_one_is_not(tmp_path, random_weights):
    utm = Affine(10, 0, 500000, 0, -10, 4000000)
    small = _scene(tmp_path, "small.tif", 100, utm, "EPSG:32633")
    large = _scene(tmp_path, "large.tif", 128, utm, "EPSG:32633")
    r = run_cli("predict", small, large, "-o", tmp_path / "out", "--weights", random_weights, "--json")
    assert r.returncode == 0, r.stderr
    said = {s["scene"]: [w["code"] for w in s["warnings"]] for s in json.loads(r.stdout)["scenes"]}
    assert "S2N-SCENE-SMALL" in said[str(small)] and "S2N-SCENE-SMALL" not in said[str(large)]
    line = next(line for line in r.stderr.splitlines() if "S2N-SCENE-SMALL" in line)
    assert "100 x 100 px" in line and "128 px" in line
    # an area of interest of the large scene is not small: its tiles read their context beyond it
    r = run_cli("predict", large, "-o", tmp_path / "aoi.tif", "--bbox", bbox_within(large, 20, 20, 30, 30),
                "--weights", random_weights, "--json")
    assert r.returncode == 0, r.stderr
    (scene,) = json.loads(r.stdout)["scenes"]
    assert "S2N-SCENE-SMALL" not in [w["code"] for w in scene["warnings"]] and "S2N-SCENE-SMALL" not in r.stderr
    with rasterio.open(tmp_path / "aoi.tif") as out:
        assert max(out.width, out.height) < 5 * 64  # the window, not the scene, was mapped


def test_an_aoi_file_of_several_layers_is_read_from_its_first_with_one_warning(tmp_path, random_weights):
    import geopandas as gpd
    from shapely.geometry import box

    scene = _scene(tmp_path, "s.tif", 64, Affine(10, 0, 500000, 0, -10, 4000000), "EPSG:32633")
    aoi = tmp_path / "areas.gpkg"
    gpd.GeoDataFrame(geometry=[box(500000, 3999680, 500320, 4000000)], crs="EPSG:32633").to_file(aoi, layer="study")
    gpd.GeoDataFrame(geometry=[box(500000, 3999360, 500640, 4000000)], crs="EPSG:32633").to_file(aoi, layer="zone")
    r = run_cli("predict", scene, "-o", tmp_path / "w.tif", "--aoi", aoi, "--weights", random_weights, "--json")
    assert r.returncode == 0, r.stderr
    assert codes(r.stderr).count("S2N-VECTOR-LAYERS") == 1 and "the first, study, is read" in r.stderr
    assert "UserWarning" not in r.stderr  # pyogrio's own, about the same thing
    import rasterio

    with rasterio.open(tmp_path / "w.tif") as src:
        assert src.width == 32 * 5  # the study area's 32 px, not the zone's 64

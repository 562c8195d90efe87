import json

import numpy as np

from s2s2net_cli.sources import stac
from s2s2net_cli.sources.dates import scene_date

from ..conftest import write_raster


def test_a_scene_says_its_date_from_its_metadata_or_its_name(tmp_path):
    assert scene_date(tmp_path / "S2B_MSIL2A_20230823T155559_N0509_R122_T18SVG_20230823T184759.SAFE.zip") == "2023-08-23"
    item = tmp_path / "item.json"
    item.write_text(json.dumps({"type": "Feature", "id": "x", "properties": {"datetime": "2021-06-01T10:20:30Z"},
                                "assets": {}}))
    assert scene_date(item) == "2021-06-01"
    tagged = write_raster(tmp_path / "stack.tif", np.ones((6, 4, 4), "uint16"))
    import rasterio

    with rasterio.open(tagged, "r+") as dst:
        dst.update_tags(ACQUISITION_DATE="2020:07:04 10:00:00")
    assert scene_date(tagged) == "2020-07-04"
    assert scene_date(write_raster(tmp_path / "lake_2019-05-17.tif", np.ones((4, 4), "uint8"))) == "2019-05-17"
    assert scene_date(write_raster(tmp_path / "lake.tif", np.ones((4, 4), "uint8"))) is None
    # a folder of band files: its own name's date, else its B02 file's
    bands = tmp_path / "download"
    bands.mkdir()
    for band in ("B02", "B03"):
        write_raster(bands / f"T18SVG_20230823T155559_{band}_10m.tif", np.ones((4, 4), "uint16"))
    assert scene_date(bands) == "2023-08-23"
    assert scene_date(bands.rename(tmp_path / "lake_2024-01-02")) == "2024-01-02"
    assert scene_date(tmp_path / "scenes_without_bands") is None


def test_an_item_collection_stands_for_its_items_in_date_order(tmp_path):
    (tmp_path / "b.tif").write_bytes(b"")
    features = [{"type": "Feature", "id": f"item{k}", "properties": {"datetime": d},
                 "assets": {"blue": {"href": "b.tif"}}} for k, d in enumerate(["2022-03-01T00:00:00Z", "2022-01-01T00:00:00Z"])]
    collection = tmp_path / "search.json"
    collection.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    assert stac.is_item_collection(str(collection)) and not stac.is_item_collection(str(tmp_path / "b.tif"))
    paths = stac.collection_items(str(collection))
    assert paths == [f"{collection}#item1", f"{collection}#item0"] and not list(tmp_path.glob("*items*"))
    item = stac.read_item(paths[0])
    assert item.id == "item1" and item.assets["blue"].get_absolute_href() == str(tmp_path / "b.tif")
    assert scene_date(paths[0]) == "2022-01-01"

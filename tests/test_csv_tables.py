"""The CSV tables users write (manifests of pairs, dates of scenes) read as spreadsheets save
them: Excel's "CSV UTF-8" starts with a byte-order mark and ends lines with CRLF, many locales
separate columns with ';', and a header may be capitalised. Each was refused as lacking its
columns ("lacks column(s) image")."""

from pathlib import Path

import pytest

from s2s2net_cli.manifest import read_manifest
from s2s2net_cli.sources.dates import read_dates_csv

from .conftest import raises_rule

SAVED_AS = {
    "plain": ("image,mask,id\n{a},{b},one\n", "utf-8"),
    "excel utf-8": ("\ufeffimage,mask,id\r\n{a},{b},one\r\n", "utf-8"),
    "semicolons": ("image;mask;id\r\n{a};{b};one\r\n", "utf-8"),
    "tabs": ("image\tmask\tid\n{a}\t{b}\tone\n", "utf-8"),
    "capitalised": ("Image, Mask ,ID\n{a},{b},one\n", "utf-8"),
    "scene for image": ("scene,mask,id\n{a},{b},one\n", "utf-8"),  # as the dates table and the commands say
}


@pytest.mark.parametrize("saved_as", SAVED_AS)
def test_a_manifest_reads_the_same_however_a_spreadsheet_saved_it(tmp_path, saved_as):
    text, encoding = SAVED_AS[saved_as]
    manifest = tmp_path / "pairs.csv"
    manifest.write_bytes(text.format(a="s.tif", b="m.tif").encode(encoding))
    [pair] = read_manifest(manifest)
    assert (Path(pair.image), pair.mask, pair.id, pair.split) == (tmp_path / "s.tif", tmp_path / "m.tif", "one", None)


@pytest.mark.parametrize("saved_as", SAVED_AS)
def test_dates_read_the_same_however_a_spreadsheet_saved_them(tmp_path, saved_as):
    text, encoding = SAVED_AS[saved_as]
    text = text.replace("image", "scene").replace("Image", "Scene").replace("mask", "date").replace("Mask", "Date")
    dates = tmp_path / "dates.csv"
    dates.write_bytes(text.format(a="lake_0.tif", b="2021-03-15").encode(encoding))
    assert read_dates_csv(dates) == {"lake_0.tif": "2021-03-15"}


def test_a_table_without_its_columns_is_still_refused(tmp_path):
    manifest = tmp_path / "pairs.csv"
    manifest.write_text("scene;label\ns.tif;m.tif\n")
    with raises_rule("S2N-MANIFEST-COLUMNS", manifest) as refused:
        read_manifest(manifest)
    assert "lacks column(s) mask (needs image (or scene),mask" in str(refused.value)
    assert "its header is scene;label" in str(refused.value)
    with raises_rule("S2N-DATES-COLUMNS", manifest) as refused:
        read_dates_csv(manifest)
    assert "its header is scene;label" in str(refused.value)
    # a table without a header row: its first row of paths, cut
    manifest.write_text("/data/scenes/S2A_MSIL2A_20230607T024541.tif,/data/labels/label_20230607.tif\n")
    with raises_rule("S2N-MANIFEST-COLUMNS", manifest) as refused:
        read_manifest(manifest)
    assert "its header is /data/scenes/S2A_MSIL2A_20230607T024541.tif,/data/labels/...)" in str(refused.value)

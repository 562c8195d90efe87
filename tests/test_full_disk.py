"""A full disk, for real: each command writes onto a small tmpfs it cannot fill (mounted in a
private mount namespace, `unshare -rm`, so nothing is left mounted), fails with one line naming
the file and "No space left on device", exits 1, and leaves no file that looks finished: no
temporary file, and an existing output as it was."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from affine import Affine

from tests.conftest import codes, write_raster

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "virginia_shoreline_s2_6band_10m.tif"
NO_SPACE = "No space left on device"


def _can_mount() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


needs_mount = pytest.mark.skipif(not _can_mount(), reason="no private tmpfs can be mounted here (unshare -rm)")


def on_small_disk(tmp_path: Path, size: str, args: list, before: str = "") -> tuple[int, str, str, str]:
    """Run `s2s2net ARGS` with ``tmp_path/small`` a tmpfs of ``size`` (``before`` runs first, on
    it): the exit status, stdout, stderr, and a listing of what the tmpfs holds after (path,
    size and the first bytes of each file), taken before the namespace goes."""
    small = tmp_path / "small"
    small.mkdir(exist_ok=True)
    command = " ".join(shlex.quote(str(a)) for a in [sys.executable, "-m", "s2s2net_cli", *args])
    script = f"""
mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(small))} || exit 99
cd {shlex.quote(str(REPO))}
{before}
{command} > {shlex.quote(str(tmp_path / 'out.txt'))} 2> {shlex.quote(str(tmp_path / 'err.txt'))}
rc=$?
cd {shlex.quote(str(small))} && find . -type f -printf '%p %s\\n' | sort > {shlex.quote(str(tmp_path / 'files.txt'))}
exit $rc
"""
    done = subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode != 99, done.stderr
    read = lambda name: (tmp_path / name).read_text() if (tmp_path / name).exists() else ""  # noqa: E731
    return done.returncode, read("out.txt"), read("err.txt"), read("files.txt")


def _says_no_space(stderr: str, path) -> None:
    last = [line for line in stderr.splitlines() if line.strip()][-1]
    assert last.startswith("Error: ") and str(path) in last and NO_SPACE in last, stderr[-2000:]
    assert codes(last) == ["S2N-OUTPUT-WRITE-FAILED"]
    assert "Traceback" not in stderr


@needs_mount
def test_predict_on_a_full_disk_exits_1_and_leaves_nothing(tmp_path):
    out = tmp_path / "small" / "x.tif"
    rc, stdout, stderr, files = on_small_disk(tmp_path, "40k", ["predict", SAMPLE, "-o", out, "--json"])
    assert rc == 1
    _says_no_space(stderr, out)
    assert files == ""  # no mask, no temporary file
    document = json.loads(stdout)  # the one document --json promises, with the failure
    assert [f["code"] for f in document["failures"]] == ["S2N-OUTPUT-WRITE-FAILED"]


@needs_mount
def test_predict_overwrite_on_a_full_disk_keeps_the_old_mask(tmp_path):
    out = tmp_path / "small" / "x.tif"
    rc, _, stderr, files = on_small_disk(tmp_path, "40k", ["predict", SAMPLE, "-o", out, "--overwrite", "--cog"],
                                         before=f"printf 'the old mask' > {shlex.quote(str(out))}")
    assert rc == 1
    _says_no_space(stderr, out)
    assert files.split() == ["./x.tif", str(len("the old mask"))]


@needs_mount
def test_predict_vectors_on_a_full_disk(tmp_path):
    vector = tmp_path / "small" / "water.gpkg"
    rc, _, stderr, files = on_small_disk(tmp_path, "90k", ["predict", SAMPLE, "-o", tmp_path / "small" / "x.tif",
                                                           "--vector", vector])
    assert rc == 1
    assert NO_SPACE in stderr.splitlines()[-1] and codes(stderr.splitlines()[-1]) == ["S2N-OUTPUT-WRITE-FAILED"]
    assert ".tmp" not in files and "water.gpkg" not in files


@pytest.fixture(scope="module")
def virginia_mask(tmp_path_factory):
    from tests.conftest import run_cli

    mask = tmp_path_factory.mktemp("mask") / "virginia_mask.tif"
    r = run_cli("predict", SAMPLE, "-o", mask)
    assert r.returncode == 0, r.stderr
    return mask


@needs_mount
def test_rivers_on_a_full_disk(tmp_path, virginia_mask):
    out = tmp_path / "small" / "rivers.gpkg"
    rc, _, stderr, files = on_small_disk(tmp_path, "100k", ["rivers", virginia_mask, "-o", out])
    assert rc == 1
    _says_no_space(stderr, out)
    assert files == ""


@needs_mount
def test_occurrence_on_a_full_disk(tmp_path, virginia_mask):
    second = tmp_path / "second.tif"
    shutil.copy(virginia_mask, second)
    out = tmp_path / "small" / "occurrence.tif"
    rc, _, stderr, files = on_small_disk(tmp_path, "60k", ["occurrence", "--from-masks", virginia_mask, second,
                                                           "-o", out])
    assert rc == 1
    _says_no_space(stderr, out)
    assert files == ""


def _pair(tmp_path, size=96):
    rng = np.random.default_rng(3)
    transform = Affine(10, 0, 500000, 0, -10, 4000000)
    scene = write_raster(tmp_path / "scene.tif", rng.integers(200, 4000, (6, size, size)).astype("uint16"),
                         transform=transform, nodata=0)
    label = (rng.random((size * 5, size * 5)) > 0.5).astype("uint8")
    mask = write_raster(tmp_path / "label.tif", label[None], transform=Affine(2, 0, 500000, 0, -2, 4000000), nodata=255)
    return scene, mask


@needs_mount
def test_chip_on_a_full_disk_keeps_the_chips_it_had(tmp_path):
    scene, mask = _pair(tmp_path)
    chips = tmp_path / "small" / "chips"
    # a first run's 32 px chips fit; a second run, 16 px with a stride of 4, does not (at a stride of 8 its
    # chips fitted with GDAL 3.6, whose files are smaller)
    before = " ".join(shlex.quote(str(a)) for a in [sys.executable, "-m", "s2s2net_cli", "-q", "chip", "--pair",
                                                     scene, mask, "-o", chips, "--size", 32, "--stride", 32])
    rc, _, stderr, files = on_small_disk(tmp_path, "1600k", ["chip", "--pair", scene, mask, "-o", chips, "--size", 16,
                                                             "--stride", 4, "--overwrite"], before=before)
    assert rc == 1
    _says_no_space(stderr, "chips")
    names = [line.split()[0] for line in files.splitlines()]
    assert "./chips/index.gpkg" in names
    assert sum(n.startswith("./chips/images/") for n in names) == 9  # the first run's 3 x 3 chips, untouched
    assert not any(".tmp" in n for n in names)


@needs_mount
def test_train_on_a_full_disk_leaves_no_partial_checkpoint(tmp_path):
    from tests.conftest import run_cli

    scene, mask = _pair(tmp_path, size=64)
    chips = tmp_path / "chips"
    r = run_cli("-q", "chip", "--pair", scene, mask, "-o", chips, "--size", 32, "--stride", 32)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "small" / "run"
    rc, _, stderr, files = on_small_disk(tmp_path, "1m", ["train", chips, "-o", run, "--max-steps", 2,
                                                          "--batch-size", 2, "--precision", "32"])
    assert rc == 1
    _says_no_space(stderr, run / "checkpoints")
    names = [line.split()[0] for line in files.splitlines()]
    assert not any("/checkpoints/" in n for n in names), names  # no step folder, no `latest`
    assert not any(n.endswith(".safetensors") for n in names)


@needs_mount
def test_an_output_under_a_read_only_folder_is_refused_before_the_work(tmp_path):
    """`-o ro/sub/x.tif` under a folder that cannot be written was checked only where its own
    folder existed: predict ran, then failed making sub/ with a traceback. The nearest folder
    there is checked before the work."""
    small = tmp_path / "small"
    out = small / "sub" / "x.tif"
    rc, _, stderr, files = on_small_disk(tmp_path, "1m", ["predict", SAMPLE, "-o", out],
                                         before=f"mount -o remount,ro {shlex.quote(str(small))}")
    assert rc == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert codes(stderr) == ["S2N-OUTPUT-PERMISSION"] and str(out) in stderr and str(small) in stderr
    assert files == ""


NO_FILE_HERE = Path("/proc")  # a file system where no file can be made, even by root, and no byte is free


@pytest.mark.skipif(not (NO_FILE_HERE / "self").exists(), reason="no /proc here")
def test_an_output_where_no_file_can_be_made_is_one_line_with_the_systems_reason(tmp_path, virginia_mask):
    """Outputs in /proc: safetensors', GeoPackages' and mkdir's errors were tracebacks, and
    GDAL's "No such file or directory" was said as "No space left on device" (its file system
    has no free bytes, and none at all). Each is one line with the system's reason, before the
    work."""
    from tests.conftest import run_cli

    for args, out in [
        (["predict", SAMPLE, "-o", NO_FILE_HERE / "x.tif"], NO_FILE_HERE / "x.tif"),
        (["predict", SAMPLE, "-o", NO_FILE_HERE / "sub" / "x.tif"], NO_FILE_HERE / "sub" / "x.tif"),
        (["rivers", virginia_mask, "-o", NO_FILE_HERE / "r.gpkg"], NO_FILE_HERE / "r.gpkg"),
        (["weights", "annotate", "default", NO_FILE_HERE / "w.safetensors", "--threshold", "0.5"],
         NO_FILE_HERE / "w.safetensors"),
        (["synth", NO_FILE_HERE / "demo", "--count", "1", "--size", "64"], NO_FILE_HERE / "demo"),
        (["occurrence", SAMPLE, "-o", NO_FILE_HERE / "o.tif"], NO_FILE_HERE / "o.tif"),
        (["predict", SAMPLE, "-o", tmp_path / "x.tif", "--vector", NO_FILE_HERE / "v.shp"], NO_FILE_HERE / "v.shp"),
    ]:
        r = run_cli(*args, cwd=tmp_path)
        last = [line for line in r.stderr.splitlines() if line.strip()][-1]
        assert r.returncode == 1 and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
        assert codes(last) == ["S2N-OUTPUT-WRITE-FAILED"] and str(out) in last, (args, last)
        assert "No such file or directory" in last and NO_SPACE not in last, (args, last)
    # refused before the work: the mask beside the polygons (root may write anywhere, says
    # os.access) was written first, then the polygons failed
    assert not (tmp_path / "x.tif").exists()

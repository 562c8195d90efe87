import subprocess
import sys

from click.testing import CliRunner

from s2s2net_cli import __version__
from s2s2net_cli.cli.main import cli


def test_help_and_version():
    runner = CliRunner()
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0 and "synth" in result.output
    assert "--local_rank" not in result.output  # hidden
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_python_dash_m_is_the_same_cli_and_takes_the_launchers_local_rank(tmp_path):
    out = subprocess.run([sys.executable, "-m", "s2s2net_cli", "--local_rank=0", "synth", str(tmp_path), "--size", "16"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "synth_0_scene.tif").exists() and (tmp_path / "manifest.csv").exists()
    again = subprocess.run([sys.executable, "-m", "s2s2net_cli", "--local-rank", "1", "synth", str(tmp_path), "--size", "16"],
                           capture_output=True, text=True)
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [f"Error: {tmp_path / 'synth_0_scene.tif'}: already exists (use --overwrite to replace it)"]



GDAL_CACHE_PROBE = """
import ctypes, sys
import rasterio
from click.testing import CliRunner
import s2s2net_cli.cli.synth as synth_module
from s2s2net_cli.cli.main import cli

path = next(line.split()[-1] for line in open("/proc/self/maps") if "libgdal" in line)
gdal = ctypes.CDLL(path)
gdal.GDALGetCacheMax64.restype = ctypes.c_int64
seen = []
real_write_pair = synth_module.write_pair
def write_pair(*args):
    seen.append(gdal.GDALGetCacheMax64() // 2 ** 20)
    return real_write_pair(*args)
synth_module.write_pair = write_pair
before = gdal.GDALGetCacheMax64() // 2 ** 20
r = CliRunner().invoke(cli, ["synth", sys.argv[1], "--size", "8", "--no-manifest"])
print(r.exit_code, seen[0], gdal.GDALGetCacheMax64() // 2 ** 20 == before)
"""


def test_gdal_block_cache_is_capped_during_a_command_unless_the_user_sets_it(tmp_path):
    # GDAL's block cache defaults to 5 % of RAM: a command holds it at 256 MB (read from GDAL
    # itself while the command runs), a user's GDAL_CACHEMAX wins, and the process has its own
    # cache back afterwards.
    import os

    env = {k: v for k, v in os.environ.items() if k != "GDAL_CACHEMAX"}
    for user_value, expected in ((None, "256"), ("1024", "1024")):
        run_env = env if user_value is None else {**env, "GDAL_CACHEMAX": user_value}
        out = subprocess.run([sys.executable, "-c", GDAL_CACHE_PROBE, str(tmp_path / str(user_value))],
                             capture_output=True, text=True, env=run_env)
        assert out.stdout.split() == ["0", expected, "True"], out.stderr

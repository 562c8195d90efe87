"""What pyproject.toml promises a user who installs the package: the oldest Python it names
runs the code, and the tests."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_code_needs_no_python_newer_than_the_oldest_it_claims():
    """requires-python says 3.10, and every mask's tags were made with hashlib.file_digest, new
    in 3.11: predict failed on every scene there. vermin reads the code for the Python each of
    its calls and syntax needs (the tests and scripts too: a user runs them)."""
    claimed = re.search(r'requires-python\s*=\s*">=\s*(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text())
    assert claimed, "pyproject.toml names no oldest Python"
    floor = claimed.group(1)
    found = subprocess.run([sys.executable, "-c", "import sys; from vermin import main; sys.exit(main())",
                            f"--target={floor}-", "--violations", "--eval-annotations", "--no-tips",
                            "--no-parse-comments", *(str(ROOT / d) for d in ("s2s2net_cli", "tests", "scripts",
                                                                              "benchmarks"))],
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stdout + found.stderr

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


def _floors(requirements) -> dict[str, tuple[int, ...]]:
    """The oldest version each of ``requirements`` (pyproject's strings) names, by name."""
    floors = {}
    for text in requirements:
        found = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([\d.]+)", text)
        if found:
            floors[found.group(1).lower().replace("_", "-")] = tuple(int(p) for p in found.group(3).split("."))
    return floors


def test_the_floors_file_holds_each_dependency_at_the_version_pyproject_names():
    """`.ci/python PYTHON --floors` installs every dependency at its floor (.ci/floors.txt), as
    a user with an older environment has them: each floor pyproject.toml names is pinned there,
    in its first series (numpy>=1.24 as 1.24.x), at the test extra's where that is higher, and
    nothing is pinned that the package does not depend on."""
    text = (ROOT / "pyproject.toml").read_text()
    block = lambda name: re.search(name + r"\s*=\s*\[(.*?)\n\]", text, re.S).group(1)  # noqa: E731
    strings = lambda body: re.findall(r'"([^"]+)"', re.sub(r"#.*", "", body))  # noqa: E731
    dependencies = strings(block("dependencies"))
    floors = _floors(dependencies)
    for name, version in _floors(strings(re.search(r"test\s*=\s*\[(.*?)\]", text).group(1))).items():
        if name in floors:
            floors[name] = max(floors[name], version)
    names = {re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower().replace("_", "-") for d in dependencies}
    pins = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower()] = tuple(int(p) for p in version.strip().split("."))
    assert floors and set(pins) <= names, set(pins) - names
    for name, floor in floors.items():
        assert name in pins, f"{name} has no pin in .ci/floors.txt"
        assert pins[name][:len(floor)] == floor, (name, pins[name], floor)

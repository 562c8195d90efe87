"""What DeepSpeed's import and set-up print: to the log, not into a --json document."""

import logging
import os
import subprocess
import sys

import pytest

from s2s2net_cli.errors import S2S2NetError
from s2s2net_cli.rulebook import refuse
from s2s2net_cli.training.loop import output_to_log


class _Held(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.text = ""

    def emit(self, record):
        self.text += record.getMessage() + "\n"


def test_what_deepspeeds_set_up_prints_goes_to_the_log_unless_it_fails(capfd, monkeypatch):
    """With DeepSpeed 0.16 and torch 2.4, `train --json` printed "[INFO] Setting ds_accelerator
    to cpu" and ninja's "no work to do" on stdout before its document (which then did not parse),
    and torch's extension builder its five lines on stderr. Said by Python, by C below it or by a
    child process, they go to the log at debug; a failure unforeseen says them after all (what
    a failed build printed is its why); a refusal or an interrupt does not."""
    log, held = logging.getLogger("s2s2net_cli.training.loop"), _Held()
    monkeypatch.setattr(log, "propagate", False)  # an earlier in-process command's handlers say nothing here
    monkeypatch.setattr(log, "level", logging.DEBUG)
    log.addHandler(held)
    try:
        with output_to_log():
            print("[INFO] Setting ds_accelerator to cpu (override)")
            print("Using /tmp/ext as PyTorch extensions root...", file=sys.stderr)
            os.write(1, b"ninja: no work to do.\n")
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('c++ -O3 shm.cpp\\n')"], check=True)
    finally:
        log.removeHandler(held)
    assert capfd.readouterr() == ("", "")
    for said in ("Setting ds_accelerator", "PyTorch extensions root", "ninja: no work to do", "c++ -O3 shm.cpp"):
        assert said in held.text
    with pytest.raises(RuntimeError, match="build failed"):
        with output_to_log():
            os.write(2, b"shm.cpp:44: error: no member named 'x'\n")
            raise RuntimeError("build failed")
    assert "shm.cpp:44: error" in capfd.readouterr().err
    for stop in (refuse("S2N-TRAIN-CHECKPOINT-UNLOADABLE", "run"), KeyboardInterrupt()):
        with pytest.raises((S2S2NetError, KeyboardInterrupt)):
            with output_to_log():
                os.write(1, b"Building extension module deepspeed_shm_comm...\n")
                raise stop
        assert capfd.readouterr() == ("", "")
    print("after")  # the terminal's streams are back
    os.write(2, b"fd 2 back\n")
    assert capfd.readouterr() == ("after\n", "fd 2 back\n")


def test_deepspeeds_own_warnings_after_its_import_are_said_on_stderr():
    """DeepSpeed's logger writes to the stream stdout was as it was imported: quietened during
    the import, its warnings afterwards would have gone nowhere; before, they went to stdout,
    into a --json document. They are said on stderr, beside the tool's own."""
    script = ("import logging\nfrom s2s2net_cli.training.loop import import_deepspeed\nimport_deepspeed()\n"
              "logging.getLogger('DeepSpeed').warning('a warning of its own')\n"
              "logging.getLogger('DeepSpeed').info('an info line')\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "DS_ACCELERATOR": "cpu"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "a warning of its own" in r.stderr and "an info line" not in r.stderr, (r.stdout, r.stderr)

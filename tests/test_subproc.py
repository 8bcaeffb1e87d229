"""tests/subproc.run, the subprocess runner of the tests: a timeout ends the whole process
group, so a grandchild holding the captured pipes cannot make the wait endless."""

import os
import subprocess
import sys
import time

import pytest

import subproc

# a child that starts a grandchild sharing its stdout, prints both pids, then both sleep
FAMILY = ("import subprocess, sys, time; "
          "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
          "print(g.pid, flush=True); time.sleep(120)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (exited, not yet reaped) is not alive
        return f.read().split(")")[-1].split()[0] != "Z"


def test_timeout_ends_the_child_and_its_grandchild():
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as e:
        subproc.run([sys.executable, "-c", FAMILY], timeout=3, capture_output=True, text=True, grace=5)
    assert time.monotonic() - t0 < 3 + 5 + 5  # not the 120 s the grandchild would hold the pipe
    grandchild = int(e.value.stdout.split()[0])  # what the child printed before the timeout
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_like_subprocess_run_otherwise():
    ok = subproc.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                     timeout=60, capture_output=True, text=True)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "out\n", "err\n")
    with pytest.raises(subprocess.CalledProcessError) as e:
        subproc.run([sys.executable, "-c", "import sys; sys.exit(3)"], timeout=60, check=True)
    assert e.value.returncode == 3

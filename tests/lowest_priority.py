"""`python tests/lowest_priority.py CMD ARGS...`: run CMD below every other process in CPU priority.

`make test` runs the unit tests this way beside the smoke chapters. The chapters' chain 2 -> 3
-> 4 -> 5 (each reads the runs of the one before) is the critical path, and it leaves a core
idle for minutes that the unit tests can fill. They must not slow the chain down, so they yield.

`nice 19` alone does not do that on Linux with autogroup scheduling
(/proc/sys/kernel/sched_autogroup_enabled = 1, the default of most distributions). There every
session is one scheduling group, the groups share the CPU equally whatever their processes'
nice values, and every Jupyter kernel (each chapter's) starts a session of its own. Two CPU-bound
kernels in sessions of their own against two `nice 10` processes in the shell's session got
two thirds of a 2-core AMD EPYC, not 90%. So CMD also gets a session of its own, and that
session's group is niced to 19 (/proc/self/autogroup); then the two kernels got all of it.
Where a step is not possible (not Linux, no autogroups, already a session leader) it is skipped.
The unit tests' subprocesses stay in this session (tests/subproc.py); exec keeps the exit status.
"""

from __future__ import annotations

import os
import sys

LOWEST = 19


def lower_priority() -> None:
    """nice 19 for this process, and where Linux allows it a session of its own whose scheduling
    group is niced to 19 as well."""
    os.nice(LOWEST - os.nice(0))
    try:
        os.setsid()
    except OSError:  # already a process group leader: the session stays the caller's
        return
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(LOWEST))
    except OSError:  # not Linux, or a kernel without autogroups: nice is what counts there
        pass


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python tests/lowest_priority.py CMD [ARGS...]")
    lower_priority()
    os.execvp(sys.argv[1], sys.argv[1:])

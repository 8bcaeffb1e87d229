"""`run`: subprocess.run for tests, which cannot hang past its timeout.

subprocess.run(timeout=...) kills only the child it started, then waits for its pipes to close.
A grandchild that holds them keeps that wait going for ever: torchrun's workers run in their own
sessions and outlive a SIGKILLed agent, still writing to the captured stdout. Here the child
starts a process group of its own; on timeout the group gets SIGTERM (torchrun passes it on to
its workers), then SIGKILL, and the wait for the pipes is itself bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess

GRACE_S = 20  # after SIGTERM, before SIGKILL


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def run(cmd, *, timeout: float, check: bool = False, capture_output: bool = False, grace: float = GRACE_S,
        **kw) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, timeout=timeout, check=check, capture_output=capture_output, **kw),
    killing the child's whole process group when the timeout passes (then raising
    subprocess.TimeoutExpired with what it printed). `grace`: seconds between SIGTERM and SIGKILL,
    and the longest wait for the pipes after SIGKILL."""
    if capture_output:
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    with subprocess.Popen(cmd, start_new_session=True, **kw) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(p.pid, signal.SIGTERM)
            try:
                out, err = p.communicate(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(p.pid, signal.SIGKILL)
                try:
                    out, err = p.communicate(timeout=grace)
                except subprocess.TimeoutExpired:  # a process outside the group holds the pipes
                    out = err = None
            raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    if check and p.returncode:
        raise subprocess.CalledProcessError(p.returncode, cmd, out, err)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


# torchrun on one machine, talking over loopback only: a rendezvous store on a free port
# (--standalone), workers told to reach it at 127.0.0.1 rather than at this machine's FQDN, and
# gloo bound to `lo`. Name lookups of the host name can stall for minutes where DNS is unreachable.
LOCAL_TORCHRUN = ("--standalone", "--local-addr", "127.0.0.1")
LOCAL_GLOO_ENV = {"GLOO_SOCKET_IFNAME": "lo"}

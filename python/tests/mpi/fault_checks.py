"""A process that leaves a job mid-run stops every other process within seconds, with a
message naming it, and a checkpointed run restarts where it stopped. Run by scripts/test.sh:
    .venv/bin/python python/tests/mpi/fault_checks.py
(it starts the mpirun jobs itself; docs/distributed.md "When a process leaves")."""

import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PYTHON = sys.executable
# Well above the few seconds a stop takes, well below a hang.
TIMEOUT = 60
STOPS_WITHIN = 20


def mpirun(ranks, *args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    start = time.monotonic()
    try:
        done = subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), PYTHON, *args],
                              capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{args}: the job was still running after {TIMEOUT} s (a hang); "
                             f"output:\n{e.stdout}\n{e.stderr}") from None
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def check_a_process_that_leaves(how, names_it):
    code, out, seconds = mpirun(2, os.path.join(HERE, "leaving_worker.py"), how)
    assert code != 0, f"{how}: the job ended with 0 although process 1 left:\n{out}"
    assert seconds < STOPS_WITHIN, f"{how}: the job took {seconds:.1f} s to stop:\n{out}"
    assert re.search(names_it, out), f"{how}: no message matching {names_it!r}:\n{out}"
    print(f"process 1 leaving by {how}: the job stopped in {seconds:.1f} s, naming it")


def checksum_line(out):
    lines = [l for l in out.splitlines() if l.startswith("checksum")]
    assert lines, f"no checksum line:\n{out}"
    return lines[-1]


def check_restart_from_a_checkpoint():
    example = os.path.join(ROOT, "examples", "python", "data_parallel.py")
    code, out, _ = mpirun(2, example)
    assert code == 0, out
    uninterrupted = checksum_line(out)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "params.npz")
        code, out, _ = mpirun(2, example, "--checkpoint", ckpt, "--every", "8",
                              "--leave-at", "20")
        assert code != 0 and "process 1 left the job" in out, out
        assert os.path.exists(ckpt), f"no checkpoint written:\n{out}"
        code, out, _ = mpirun(2, example, "--checkpoint", ckpt, "--every", "8")
        assert code == 0, out
        assert "resuming after step 16" in out, out
        assert checksum_line(out) == uninterrupted, (checksum_line(out), uninterrupted)
    print("a run stopped at step 20 restarts from its step-16 checkpoint and ends with the "
          "uninterrupted run's parameters")


if __name__ == "__main__":
    left = r"process 1 left the job \(its program ended\)"
    check_a_process_that_leaves("exit", left)
    check_a_process_that_leaves("raise", left)
    check_a_process_that_leaves("kill", r"process rank 1 .* exited on signal 9")
    check_restart_from_a_checkpoint()

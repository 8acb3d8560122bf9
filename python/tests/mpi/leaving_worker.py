"""One process of a job that loses a member: every process sums in a loop, and process 1
leaves at step 5 in the way argv[1] says (exit: its program ends normally; raise: it stops on
an exception; kill: SIGKILL). Run by fault_checks.py under mpirun."""

import os
import signal
import sys
import time

import numpy as np
from jax import lax

import refjit
import refjit.distributed as dist

dist.bind_axis("data")
total = refjit.jit(lambda x: lax.psum(x, "data"))
how = sys.argv[1]
for step in range(100_000):
    if step == 5 and dist.rank() == 1:
        if how == "exit":
            sys.exit(0)
        if how == "raise":
            raise RuntimeError("process 1 stops on an error")
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
    total(np.ones(1000, np.float32))
    time.sleep(0.001)
print(f"process {dist.rank()} finished 100000 steps: the job did not stop")

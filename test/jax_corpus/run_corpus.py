#!/usr/bin/env python3
"""Runs refjit on the checked-in JAX corpus and compares with JAX's numbers (no JAX needed).

Usage: run_corpus.py REFJIT [--cases DIR] [--update-known-failures] [--only NAME...] [-v]

Each corpus program is checked in up to seven ways, each one a test:
  NAME:native NAME:interpret        the program, outputs against jax.jit(f)
  NAME.grad:native NAME.grad:interpret   JAX's printed gradient program against jax.grad(f)
  NAME.jvp:native                    JAX's printed JVP program against jax.jvp(f)
  NAME:refjit-grad                   refjit's own --grad of the program against jax.grad(f)
  NAME:refjit-grad-interpret         the same on the interpreter
A program whose manifest entry has refjit_grad_refuses passes its refjit-grad tests when
refjit stops with an error containing that phrase (the text lacks what JAX differentiates with).
Tests listed in known_failures.txt (with the reason) are expected to fail; one that passes
is reported, so the list only shrinks. Exit status 1 if any other test fails.
--update-known-failures rewrites the list from this run's failures.
"""
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_value(text):
    """Parses one value in refjit's CLI syntax into nested Python lists."""
    t = text.strip().replace("true", "1").replace("false", "0")
    t = t.replace("-inf", '"-inf"').replace("inf", '"inf"').replace("nan", '"nan"')
    t = t.replace('-"inf"', '"-inf"')

    def conv(x):
        if isinstance(x, list):
            return [conv(e) for e in x]
        if isinstance(x, str):
            return float(x)
        return float(x)

    return conv(json.loads(t))


def close(got, want, tol):
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            close(g, w, tol) for g, w in zip(got, want))
    if isinstance(got, list):
        return False
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want):
        return got == want
    return abs(got - want) <= tol * (1.0 + abs(want))


def run(refjit, args, timeout=120):
    try:
        p = subprocess.run([refjit] + args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out"
    return p.returncode, p.stdout, p.stderr


def compare_lines(lines, want, tol):
    if len(lines) != len(want):
        return f"{len(lines)} values printed, JAX has {len(want)}"
    for k, (line, w) in enumerate(zip(lines, want)):
        try:
            got = parse_value(line)
        except Exception:
            return f"value {k}: cannot read {line!r}"
        if not close(got, parse_value(w), tol):
            return f"value {k}: refjit {line.strip()[:200]} JAX {w[:200]}"
    return None


def check(refjit, case, kind, cases_dir):
    """Runs one test; returns None on success, else a one-line reason."""
    name, tol = case["name"], case["tol"]
    base = os.path.join(cases_dir, name)
    backend = ["--interpret"] if kind.endswith("interpret") else []
    if kind in ("native", "interpret"):
        rc, out, err = run(refjit, ["run"] + backend + [base + ".jaxpr"] + case["consts"] +
                           case["args"])
        want = case["outputs"]
        lines = out.splitlines()
    elif kind.startswith("grad:"):
        rc, out, err = run(refjit, ["run"] + backend + [base + ".grad.jaxpr"] +
                           case["grad_consts"] + case["args"])
        want = case["grad"]
        lines = out.splitlines()
    elif kind == "jvp:native":
        rc, out, err = run(refjit, ["run", base + ".jvp.jaxpr"] + case["jvp_consts"] +
                           case["args"] + case["jvp_args"])
        want = case["jvp"]  # primal outputs, then tangents
        lines = out.splitlines()
    else:  # refjit's own gradient
        wrt = ",".join(str(i) for i in case["grad_wrt"])
        rc, out, err = run(refjit, ["run", "--grad", f"--wrt={wrt}"] + backend + [base + ".jaxpr"] +
                           case["consts"] + case["args"])
        want = case["grad"]
        lines = [l.split(" = ", 1)[1] for l in out.splitlines() if l.startswith("grad ")]
        if "refjit_grad_refuses" in case:
            phrase = case["refjit_grad_refuses"]
            if rc != 0 and phrase in err:
                return None
            return f"should refuse ({phrase!r}); exit {rc}: {err.strip()[:200]}"
    if rc != 0:
        msg = (err.strip().splitlines() or ["(no message)"])[0]
        return f"exit {rc}: {msg[:240]}"
    return compare_lines(lines, want, tol)


KNOWN_HEADER = """\
# Corpus tests expected to fail today, one per line: TEST REASON. run_corpus.py fails CI when
# one of these starts passing (remove it here) or when any other test fails. Rewrite the list
# with `run_corpus.py REFJIT --update-known-failures`; what is missing is in issue 12's note.
"""


def short_reason(reason):
    """refjit's error without its file position and hints."""
    r = re.sub(r"^exit \d+: ", "", reason)
    r = re.sub(r"^\S+?(:\d+:\d+)?: error: ", "", r)
    return re.sub(r" \((docs/primitives.md|refjit has) [^)]*\)", "", r)


def tests_of(case):
    kinds = ["native", "interpret"]
    if "grad" in case:
        kinds += ["grad:native", "grad:interpret", "refjit-grad", "refjit-grad-interpret"]
    if "jvp" in case:
        kinds += ["jvp:native"]
    return kinds


def load_known_failures(path):
    known = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#"):
                test, _, reason = line.partition(" ")
                known[test] = reason.strip()
    return known


def main():
    argv = sys.argv[1:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    refjit = argv.pop(0)
    cases_dir = os.path.join(HERE, "cases")
    only, verbose, update = set(), False, False
    while argv:
        a = argv.pop(0)
        if a == "--cases":
            cases_dir = argv.pop(0)
        elif a == "--only":
            only.update(argv)
            argv = []
        elif a == "-v":
            verbose = True
        elif a == "--update-known-failures":
            update = True
    manifest = json.load(open(os.path.join(cases_dir, "manifest.json")))
    known_path = os.path.join(HERE, "known_failures.txt")
    own_corpus = os.path.abspath(cases_dir) == os.path.join(HERE, "cases")
    known = {} if update or not own_corpus else load_known_failures(known_path)
    failures = []
    passed = failed = expected = 0
    unexpected, fixed = [], []
    for case in manifest:
        if only and case["name"] not in only:
            continue
        for kind in tests_of(case):
            test = f"{case['name']}:{kind}"
            reason = check(refjit, case, kind, cases_dir)
            if reason is not None:
                failures.append((test, reason))
            if reason is None:
                passed += 1
                if test in known:
                    fixed.append(test)
                if verbose:
                    print(f"PASS {test}")
            elif test in known:
                expected += 1
                if verbose:
                    print(f"XFAIL {test}: {reason}")
            else:
                failed += 1
                unexpected.append(test)
                print(f"FAIL {test}: {reason}")
    if update:
        with open(known_path, "w") as fh:
            fh.write(KNOWN_HEADER)
            for test, reason in failures:
                fh.write(f"{test} {short_reason(reason)}\n")
        print(f"wrote {len(failures)} known failures to {known_path}")
        return 0
    for test in fixed:
        print(f"XPASS {test}: listed in known_failures.txt but passes; remove it from the list")
    print(f"jax corpus: {len(manifest)} programs, {passed + failed + expected} tests: "
          f"{passed} agree with JAX, {expected} known failures, {failed} unexpected failures")
    return 1 if failed or fixed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs JAX's own test files against the refjit package and says what fails, and how.

    .venv/bin/python test/jax_suite/run.py JAX_CHECKOUT [FILE ...] [options]

JAX_CHECKOUT is a JAX source tree (its ``tests/`` folder is used) or a ``tests/`` folder; it
is never part of this project. Each FILE (default: the four files of docs/testing.md, "JAX's
test suite") runs twice under pytest: once as it is (the baseline: which tests pass under JAX
on this machine; cached per file content and JAX version), and once with JAX's top-level
transformations replaced by refjit's (refjit_suite_plugin.py). A test counts for refjit when
it passes under JAX and calls refjit at least once; each such test that fails is put in one
class: gap, wrong-number, wrong-dtype, missing-error, different-error, internal-error, hang,
crash or other (refjit_suite_plugin.classify). A crash (the process dies) is recorded against
the test that was running, and the file goes on from the next test.

Prints a table of per-file counts and the failures grouped by class and message; writes every
outcome to OUT/report.json. Exits 1 when a wrong number, wrong dtype, crash, hang or internal
error was seen (the classes that must never happen), 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_FILES = ("lax_autodiff_test.py", "lax_control_flow_test.py", "mutable_array_test.py",
                 "state_test.py", "linalg_test.py")
MUST_NOT_HAPPEN = ("wrong-number", "wrong-dtype", "crash", "hang", "internal-error")
CLASSES = ("gap", "wrong-number", "wrong-dtype", "missing-error", "different-error",
           "internal-error", "hang", "crash", "other")


def tests_folder(checkout: Path) -> Path:
    if (checkout / "tests").is_dir():
        return checkout / "tests"
    if checkout.name == "tests" and checkout.is_dir():
        return checkout
    sys.exit(f"run.py: {checkout} is neither a JAX checkout nor its tests/ folder")


def read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut short by a crash
    return out


def run_file(tests: Path, name: str, mode: str, out: Path, args) -> dict[str, dict]:
    """Runs one test file in ``mode`` until every test has an outcome; returns id -> record."""
    results = out / f"{mode}-{name}.jsonl"
    skip = out / f"{mode}-{name}.skip"
    log = out / f"{mode}-{name}.log"
    for p in (results, skip, log):
        p.unlink(missing_ok=True)
    env = dict(os.environ)
    env.update(REFJIT_SUITE_RESULTS=str(results), REFJIT_SUITE_MODE=mode,
               REFJIT_SUITE_BACKEND=args.backend, REFJIT_SUITE_SKIP=str(skip),
               REFJIT_SUITE_TIMEOUT=str(args.timeout), REFJIT_SUITE_CHECKOUT=str(tests.parent))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "pytest", "-p", "refjit_suite_plugin", "-q", "--tb=no",
           "-p", "no:cacheprovider", "-c", str(HERE / "pytest.ini"), "--rootdir", str(tests),
           str(tests / name)]
    if args.k:
        cmd += ["-k", args.k]
    final: dict[str, dict] = {}
    while True:
        with open(log, "a") as logf:
            proc = subprocess.Popen(cmd, cwd=tests, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            hung = watch(proc, results, args.timeout + 60)
        records = read_records(results)
        started = None
        for r in records:
            if r["event"] == "start":
                started = r["id"]
            else:
                final[r["id"]] = r
                if started == r["id"]:
                    started = None
        if proc.returncode in (0, 1, 5) and not hung:
            return final
        if started is None:
            tail = "".join(open(log).readlines()[-30:])
            sys.exit(f"{tail}\nrun.py: pytest on {name} ({mode}) exited with {proc.returncode} "
                     f"outside any test; see {log}")
        how = "hang" if hung else f"crash (exit {proc.returncode})"
        final[started] = {"id": started, "event": "end", "outcome": "failed",
                          "kind": "hang" if hung else "crash", "calls": 1,
                          "message": how, "where": "", "phase": "call"}
        print(f"  {name}: {how} in {started}; going on after it", flush=True)
        with open(skip, "w") as f:
            f.write("\n".join(final) + "\n")
        # The crashed test's record is kept in `final`; the results file restarts empty.
        results.unlink(missing_ok=True)
        with open(results, "w") as f:
            for r in final.values():
                f.write(json.dumps(r) + "\n")


def watch(proc: subprocess.Popen, results: Path, quiet_limit: float) -> bool:
    """Waits for ``proc``; kills it (returning True) when ``results`` stops growing for
    ``quiet_limit`` seconds: a test stuck where the in-process alarm cannot reach it."""
    last_size, last_change = -1, time.monotonic()
    while proc.poll() is None:
        time.sleep(1.0)
        size = results.stat().st_size if results.exists() else 0
        if size != last_size:
            last_size, last_change = size, time.monotonic()
        elif time.monotonic() - last_change > quiet_limit:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
    return False


def baseline(tests: Path, name: str, out: Path, args) -> dict[str, dict]:
    import jax
    digest = hashlib.sha256((tests / name).read_bytes()).hexdigest()[:16]
    cached = out / "baseline" / f"{name}.{jax.__version__}.{digest}.{args.k or 'all'}.json"
    if cached.exists() and not args.fresh_baseline:
        return json.loads(cached.read_text())
    print(f"  {name}: baseline run under JAX {jax.__version__}", flush=True)
    records = run_file(tests, name, "jax", out, args)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(records))
    return records


def normalise(message: str) -> str:
    """A failure's message with its numbers, shapes and names blurred, to group alike ones."""
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"\b[a-z]+\d*\[[\d,]*\]", "T", first)
    first = re.sub(r"\d+(\.\d+)?", "N", first)
    first = re.sub(r"'[^']*'", "'…'", first)
    return first[:160]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--out", type=Path, default=Path("build/jax-suite"))
    parser.add_argument("--backend", choices=("native", "interpreter"), default="native")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("-k", default=None, help="pytest -k expression (both runs)")
    parser.add_argument("--fresh-baseline", action="store_true")
    parser.add_argument("--baseline-only", action="store_true",
                        help="only run (and cache) the files under JAX")
    parser.add_argument("--show", type=int, default=8,
                        help="message groups shown per failure class")
    args = parser.parse_args()
    tests = tests_folder(args.checkout.resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    args.out = args.out.resolve()

    report = {}
    rows = []
    groups: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    examples: dict[tuple[str, str], str] = {}
    for name in args.files:
        base = baseline(tests, name, args.out, args)
        if args.baseline_only:
            continue
        print(f"  {name}: refjit run ({args.backend})", flush=True)
        mine = run_file(tests, name, "refjit", args.out, args)
        counts = collections.Counter()
        failures = []
        for test_id, r in mine.items():
            b = base.get(test_id)
            if b is None or b["outcome"] != "passed":
                continue
            counts["jax passes"] += 1
            if r.get("calls", 0) == 0 and r["outcome"] == "passed":
                continue
            if r.get("calls", 0) == 0 and r["outcome"] != "passed" and r.get("kind") not in (
                    "crash", "hang"):
                counts["fails without reaching refjit"] += 1
                continue
            counts["reach refjit"] += 1
            if r["outcome"] == "passed":
                counts["pass"] += 1
            elif r["outcome"] == "skipped":
                counts["skipped by refjit run"] += 1
            else:
                kind = r.get("kind", "other")
                counts[kind] += 1
                failures.append(r)
                key = normalise(r.get("message", ""))
                groups[kind][key] += 1
                examples.setdefault((kind, key), test_id)
        reach = counts["reach refjit"]
        rows.append((name, len(mine), counts["jax passes"], reach, counts["pass"],
                     100.0 * counts["pass"] / reach if reach else 0.0, counts))
        report[name] = {"counts": dict(counts), "failures": failures}

    print()
    print(f"| file | tests | pass under JAX | reach refjit | pass | % | "
          f"{' | '.join(CLASSES)} |")
    print("|" + " --- |" * (6 + len(CLASSES)))
    total = collections.Counter()
    for name, n, jp, reach, ok, pct, counts in rows:
        print(f"| {name} | {n} | {jp} | {reach} | {ok} | {pct:.1f} | "
              + " | ".join(str(counts[c]) for c in CLASSES) + " |")
        total.update(counts)
        total["tests"] += n
    if len(rows) > 1:
        reach = total["reach refjit"]
        pct = 100.0 * total["pass"] / reach if reach else 0.0
        print(f"| all | {total['tests']} | {total['jax passes']} | {reach} | {total['pass']} | "
              f"{pct:.1f} | " + " | ".join(str(total[c]) for c in CLASSES) + " |")
    for kind in CLASSES:
        if not groups[kind]:
            continue
        print(f"\n{kind}: {sum(groups[kind].values())}")
        for key, n in groups[kind].most_common(args.show):
            print(f"  {n:4d}  {key}\n        e.g. {examples[(kind, key)]}")
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    print(f"\nevery outcome: {args.out / 'report.json'}")
    bad = sum(total[c] for c in MUST_NOT_HAPPEN)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

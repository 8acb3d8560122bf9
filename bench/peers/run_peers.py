#!/usr/bin/env python3
"""The peer benchmark: refjit against JAX on the programs of programs.py.

For each program this writes `jax.make_jaxpr(fn)(*args)` as NAME.jaxpr, then times, for the
forward row, `jax.jit(fn)` and `refjit bench NAME.jaxpr`, and for the grad row
`jax.jit(jax.value_and_grad(fn, argnums=wrt))` and `refjit bench --grad --wrt=...`: the same
jaxpr text in both. JAX runs on the seeded inputs of programs.py, refjit bench on its own
seeded random inputs of the same types, drawn the same way (uniform in [-1, 1)); --check
compares the values of small versions of the programs with `refjit run` instead. Each row
runs in rounds, refjit then JAX in each (measure_row).

    run_peers.py [--runs N] [--rounds R] [--only NAME,...] [--modes forward,grad]
                 [--refjit PATH] [--json OUT] [--svg OUT] [--out DIR] [--timeout S] [--tier T]
                 [--seed S] [--background-load N]
    run_peers.py --check [--only NAME,...] [--refjit PATH] [--out DIR]

Prints a Markdown table on stdout (progress on stderr). A program refjit refuses, crashes on
or times out on gets `n/a (reason)` in its refjit columns; the run goes on.
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from xml.sax.saxutils import escape

import numpy as np

import jax

from programs import programs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = ("forward", "grad")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, metavar="N",
                        help="timed calls per row (default 20)")
    parser.add_argument("--min-time", type=float, default=0.5, metavar="S",
                        help="more calls per row and round until they took S seconds "
                             "(default 0.5): a median over 20 calls of 0.2 ms fits inside a "
                             "burst of load")
    parser.add_argument("--rounds", type=int, default=3, metavar="R",
                        help="rounds per row, refjit then JAX in each (default 3); the ratio "
                             "is the median of the rounds' ratios, so a slow phase of the "
                             "machine meets both compilers")
    parser.add_argument("--only", metavar="NAME,...", help="only these programs")
    parser.add_argument("--modes", default=",".join(MODES), metavar="MODE,...",
                        help="forward,grad (default both)")
    parser.add_argument("--refjit", default=os.path.join(REPO, "build/release/bin/refjit"),
                        metavar="PATH", help="the refjit binary (default build/release/bin/refjit)")
    parser.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT")
    parser.add_argument("--svg", metavar="OUT", help="write a bar chart of refjit/JAX to OUT")
    parser.add_argument("--out", metavar="DIR", help="keep the jaxpr files in DIR")
    parser.add_argument("--timeout", type=float, default=600, metavar="S",
                        help="seconds per refjit invocation (default 600)")
    parser.add_argument("--tier", default="optimized", choices=("fast", "optimized"),
                        help="refjit bench --tier (default optimized)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="input seed (default 0)")
    parser.add_argument("--background-load", type=int, default=0, metavar="N",
                        help="keep N cores busy with spinning processes while JAX and refjit "
                             "are timed (a machine shared with other work; default 0)")
    parser.add_argument("--check", action="store_true",
                        help="instead of timing, compare refjit run with JAX on small versions")
    args = parser.parse_args(argv)
    args.modes = args.modes.split(",")
    if not set(args.modes) <= set(MODES):
        parser.error(f"--modes: expected a subset of {','.join(MODES)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def select(progs, only):
    """The programs named in --only (all of them without it), in table order."""
    if not only:
        return progs
    names = only.split(",")
    unknown = sorted(set(names) - {p.name for p in progs})
    if unknown:
        sys.exit(f"run_peers.py: unknown program(s) {', '.join(unknown)}; the programs are "
                 + ", ".join(p.name for p in progs))
    return [p for p in progs if p.name in names]


# --- the jaxpr and refjit's command line ------------------------------------------------------


def value_text(array):
    """An array in refjit's VALUE syntax (nested lists; floats round-trip through repr)."""
    return json.dumps(np.asarray(array).tolist())


def write_jaxpr(program, args, out_dir):
    """Writes NAME.jaxpr; returns its path and the VALUEs of its constvars (refjit takes them
    first, before the invars')."""
    closed = jax.make_jaxpr(program.fn)(*args)
    path = os.path.join(out_dir, program.name + ".jaxpr")
    with open(path, "w") as f:
        f.write(str(closed).rstrip("\n") + "\n")
    return path, [value_text(c) for c in closed.consts]


def invar_positions(args, argnums):
    """The 0-based jaxpr invar positions of the leaves of args[argnums], in argnums order
    (make_jaxpr's invars are the flattened arguments, in order)."""
    counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
    starts = np.cumsum([0] + counts)
    return [int(starts[i]) + k for i in argnums for k in range(counts[i])]


def modes_of(program, options):
    """The modes measured for `program`: no grad row for a program without `wrt`."""
    return [m for m in options.modes if m == "forward" or program.wrt]


def grad_options(program, args, mode):
    if mode == "forward":
        return []
    return ["--grad", "--wrt=" + ",".join(map(str, invar_positions(args, program.wrt)))]


def error_reason(stderr, returncode):
    """The first line of refjit's error, without its `FILE:LINE:COL: ` prefix."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    first = re.sub(r"^(\S+: )?error: ", "", lines[0]).strip() if lines else ""
    if returncode < 0:
        return f"killed by signal {-returncode}" + (f": {first}" if first else "")
    return first or f"exit code {returncode}"


def run_refjit(command, timeout):
    """Runs refjit; returns (stdout, None) on success or (None, reason) on failure."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout:g} s"
    except OSError as e:
        return None, str(e)
    if done.returncode != 0:
        return None, error_reason(done.stderr, done.returncode)
    return done.stdout, None


# --- timing -----------------------------------------------------------------------------------


def jax_function(program, mode):
    if mode == "forward":
        return jax.jit(program.fn)
    return jax.jit(jax.value_and_grad(program.fn, argnums=program.wrt))


def time_jax(program, mode, args, runs, min_time):
    """First call (trace + compile + run), one warm-up call, then timed calls: at least `runs`,
    and more until they took `min_time` seconds."""
    fn = jax_function(program, mode)
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first_ms = (time.perf_counter() - start) * 1e3
    jax.block_until_ready(fn(*args))
    times = []
    while len(times) < runs or sum(times) < min_time * 1e3:
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - start) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "first_call_ms": first_ms}


def time_refjit(options, program, args, mode, path, consts):
    """`refjit bench --json`: returns (its JSON object, None) or (None, reason)."""
    command = [options.refjit, "bench", "--json", f"--runs={options.runs}",
               f"--min-time={round(options.min_time * 1e3)}",
               f"--tier={options.tier}", f"--seed={options.seed}",
               *grad_options(program, args, mode), path, *consts]
    stdout, reason = run_refjit(command, options.timeout)
    if reason:
        return None, reason
    try:
        return json.loads(stdout), None
    except json.JSONDecodeError:
        return None, "unparseable output: " + (stdout.strip().splitlines() or [""])[0][:80]


def measure_row(options, program, args, mode, path, consts):
    """One row: `--rounds` rounds, each refjit's calls then JAX's, so that a slow phase of a
    shared machine (a neighbour's burst, the load's scheduling) meets both. Each compiler's
    median is the median of its rounds' medians; the ratio is the median of the rounds'
    ratios."""
    refjit_rounds, jax_rounds = [], []
    error = None
    for _ in range(options.rounds):
        # refjit first: JAX's worker threads spin for a while after its calls and would
        # take the second core from refjit's threads (the machine has two).
        if error is None:
            refjit_round, error = time_refjit(options, program, args, mode, path, consts)
            if refjit_round:
                refjit_rounds.append(refjit_round)
        jax_rounds.append(time_jax(program, mode, args, options.runs, options.min_time))
    jax_row = {"median_ms": statistics.median(r["median_ms"] for r in jax_rounds),
               "min_ms": min(r["min_ms"] for r in jax_rounds),
               "first_call_ms": jax_rounds[0]["first_call_ms"],
               "round_medians_ms": [r["median_ms"] for r in jax_rounds]}
    row = {"program": program.name, "mode": mode, "jax": jax_row, "refjit": None,
           "refjit_error": error, "ratio": None}
    if error is None:
        refjit_row = dict(refjit_rounds[0])
        refjit_row["median_ms"] = statistics.median(r["median_ms"] for r in refjit_rounds)
        refjit_row["min_ms"] = min(r["min_ms"] for r in refjit_rounds)
        refjit_row["round_medians_ms"] = [r["median_ms"] for r in refjit_rounds]
        row["refjit"] = refjit_row
        row["round_ratios"] = [r["median_ms"] / j["median_ms"]
                               for r, j in zip(refjit_rounds, jax_rounds)]
        row["ratio"] = statistics.median(row["round_ratios"])
    return row


def measure(options, out_dir):
    """Times every selected program and mode; returns the rows."""
    rows = []
    for program in select(programs(), options.only):
        args = jax.device_put(program.make_args(options.seed))
        path, consts = write_jaxpr(program, args, out_dir)
        for mode in modes_of(program, options):
            row = measure_row(options, program, args, mode, path, consts)
            print(progress(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def progress(row):
    refjit = (f"refjit {ms(row['refjit']['median_ms'])} ms" if row["refjit"]
              else f"refjit n/a ({row['refjit_error']})")
    return f"{row['program']} {row['mode']}: JAX {ms(row['jax']['median_ms'])} ms, {refjit}"


# --- correctness check ------------------------------------------------------------------------


def parse_value(text):
    """A number or nested list as refjit prints it."""
    names = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
    return np.asarray(json.loads(re.sub(r"-?inf|nan", lambda m: names[m.group()], text)),
                      dtype=np.float64)


def refjit_values(stdout, mode):
    """The output, then (grad mode) each `grad NAME = VALUE`, from `refjit run`'s stdout."""
    lines = stdout.splitlines()
    values = [parse_value(lines[0])]
    if mode == "grad":
        values += [parse_value(line.split(" = ", 1)[1]) for line in lines
                   if line.startswith("grad ")]
    return values


def jax_values(program, mode, args):
    if mode == "forward":
        return [np.asarray(program.fn(*args), dtype=np.float64)]
    value, grads = jax.value_and_grad(program.fn, argnums=program.wrt)(*args)
    return [np.asarray(v, dtype=np.float64) for v in jax.tree_util.tree_leaves((value, grads))]


def compare(expected, got, rtol=1e-4):
    """'ok' or what differs; the tolerance is relative to each array's largest magnitude."""
    if len(expected) != len(got):
        return f"MISMATCH: {len(got)} values, expected {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        if e.shape != g.shape:
            return f"MISMATCH: value {i} has shape {g.shape}, expected {e.shape}"
        err = float(np.max(np.abs(e - g), initial=0.0))
        if not err <= rtol * max(1.0, float(np.max(np.abs(e), initial=0.0))):
            return f"MISMATCH: value {i} max abs error {err:.3g}"
    return "ok"


def check(options, out_dir):
    """Runs small versions with `refjit run` on JAX's inputs; returns [(name, mode, result)]."""
    results = []
    for program in select(programs(small=True), options.only):
        args = program.make_args(options.seed)
        path, consts = write_jaxpr(program, args, out_dir)
        values = [value_text(leaf) for leaf in jax.tree_util.tree_leaves(args)]
        for mode in modes_of(program, options):
            command = [options.refjit, "run", *grad_options(program, args, mode), path,
                       *consts, *values]
            stdout, reason = run_refjit(command, options.timeout)
            result = (f"n/a ({reason})" if reason
                      else compare(jax_values(program, mode, args), refjit_values(stdout, mode)))
            print(f"{program.name} {mode}: {result}", file=sys.stderr, flush=True)
            results.append((program.name, mode, result))
    return results


# --- output -----------------------------------------------------------------------------------


def ms(value):
    """Milliseconds with about three significant digits."""
    for limit, digits in ((100, 0), (10, 1), (1, 2)):
        if value >= limit:
            return f"{value:.{digits}f}"
    return f"{value:.3f}"


def markdown_table(rows):
    lines = ["| program | mode | JAX median ms | refjit median ms | refjit/JAX "
             "| refjit compile ms |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for row in rows:
        jax_ms = ms(row["jax"]["median_ms"])
        if row["refjit"]:
            r = row["refjit"]
            cells = [ms(r["median_ms"]), f"{row['ratio']:.2f}", ms(r["compile_ms"])]
        else:
            cells = [f"n/a ({row['refjit_error']})", "", ""]
        cells = [c.replace("|", "\\|") for c in [row["program"], row["mode"], jax_ms, *cells]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def svg_chart(rows):
    """A horizontal bar per row from 1.0 to refjit/JAX on a log scale (left: refjit faster)."""
    label_w, plot_w, right_w, row_h, top = 260, 520, 70, 18, 40
    colors = {"forward": "#4878b0", "grad": "#e08030"}
    ratios = [row["ratio"] for row in rows if row.get("ratio")]
    # The axis spans half-decades, with at least a tenth of a decade beyond the extreme bars.
    lo = math.floor((math.log10(min(ratios + [1.0])) - 0.1) * 2) / 2
    hi = math.ceil((math.log10(max(ratios + [1.0])) + 0.1) * 2) / 2

    def x(ratio):
        return label_w + (math.log10(ratio) - lo) / (hi - lo) * plot_w

    height = top + len(rows) * row_h + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + right_w}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{label_w}" y="16" font-size="13">refjit time / JAX time (median, log '
           f'scale; left of 1: refjit faster)</text>']
    for i, (mode, color) in enumerate(colors.items()):
        out.append(f'<rect x="{label_w + i * 80}" y="24" width="10" height="10" fill="{color}"/>'
                   f'<text x="{label_w + i * 80 + 14}" y="33">{mode}</text>')
    for tick in ticks(lo, hi):
        tx = x(tick)
        out.append(f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{height - 25}" '
                   f'stroke="#ddd"/><text x="{tx:.1f}" y="{height - 12}" '
                   f'text-anchor="middle">{tick:g}x</text>')
    for i, row in enumerate(rows):
        y = top + i * row_h
        label = escape(f"{row['program']} {row['mode']}")
        out.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">{label}</text>')
        if not row.get("ratio"):
            out.append(f'<text x="{x(1.0) + 4:.1f}" y="{y + 13}" fill="#888">n/a</text>')
            continue
        x0, x1 = sorted((x(1.0), x(row["ratio"])))
        out.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 1):.1f}" height="12" '
                   f'fill="{colors[row["mode"]]}"/><text x="{x1 + 4:.1f}" y="{y + 13}">'
                   f'{row["ratio"]:.2f}</text>')
    out.append(f'<line x1="{x(1.0):.1f}" y1="{top - 4}" x2="{x(1.0):.1f}" y2="{height - 25}" '
               f'stroke="black"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def ticks(lo, hi):
    """1-2-5 ticks between 10^lo and 10^hi; only the powers of ten when the range is wide."""
    steps = (1,) if hi - lo > 2 else (1, 2, 5)
    candidates = (s * 10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1) for s in steps)
    return [t for t in candidates if lo <= math.log10(t) <= hi]


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            models = re.findall(r"^model name\s*:\s*(.*)$", f.read(), re.MULTILINE)
    except OSError:
        return ""
    return models[0] if models else ""


def environment(options):
    refjit_version = run_refjit([options.refjit, "--version"], 30)[0] or ""
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "jax_version": jax.__version__, "cpu_count": os.cpu_count(),
            "platform": platform.platform(), "cpu": cpu_model(),
            "refjit": options.refjit, "refjit_version": refjit_version.strip(),
            "runs": options.runs, "min_time_s": options.min_time, "rounds": options.rounds,
            "tier": options.tier,
            "seed": options.seed, "background_load": options.background_load}


@contextlib.contextmanager
def background_load(n):
    """N processes that each keep a core busy (at this process's priority) while inside."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(n)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main(argv):
    options = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = options.out or tmp
        os.makedirs(out_dir, exist_ok=True)
        if options.check:
            results = check(options, out_dir)
            print("| program | mode | refjit run vs JAX |\n| --- | --- | --- |")
            for name, mode, result in results:
                print(f"| {name} | {mode} | {result} |")
            return 1 if any(r.startswith("MISMATCH") for _, _, r in results) else 0
        with background_load(options.background_load):
            rows = measure(options, out_dir)
    if options.background_load:
        print(f"With {options.background_load} busy process(es) alongside, JAX's and refjit's "
              "calls alike.\n")
    print(markdown_table(rows))
    if options.json:
        write(options.json, json.dumps({**environment(options), "rows": rows}, indent=1) + "\n")
    if options.svg:
        write(options.svg, svg_chart(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What bench/conv2d_fuzz.py and bench/elementwise_fuzz.py share: the options, the loop of one worker
process (drawn cases for a time budget from a seed, or given cases), and the parent that starts
several workers (NVRTC compiles one program at a time in a process) and adds up their counts.

A fuzz script calls add_arguments(parser, seconds) and, after parsing, main(args, title, make_lib,
draw, run_case, describe, worker_args): draw(rng) -> case (a json-serializable dict), run_case(lib,
case) -> (ok, detail), describe(case) -> one line; worker_args are the script's own options, passed on
to its workers. A failing case prints `FAIL {json}`, which `--case` reruns; `--cases-file` reruns a
JSONL file of {"why": ..., "case": {...}} lines (the scripts' *_regressions.jsonl), in order.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

import torch


def add_arguments(ap, seconds):
    ap.add_argument("--lib", required=True, help="libcuinline.so (a shared build)")
    ap.add_argument("--seconds", type=float, default=seconds, help="each worker's time budget")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (seeds seed, seed + 1, ...)")
    ap.add_argument("--seed", type=int, default=None, help="the first worker's seed (default: random, printed)")
    ap.add_argument("--case", action="append", help="one case's JSON (from a FAIL line); repeatable")
    ap.add_argument("--cases-file", help="a JSONL file of cases to rerun, one {\"why\", \"case\"} a line")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def given_cases(args):
    """The cases of --case and --cases-file, in order; None where there are none (draw instead)."""
    if not args.case and not args.cases_file:
        return None
    cases = [json.loads(c) for c in args.case or []]
    if args.cases_file:
        with open(args.cases_file) as f:
            cases += [json.loads(line)["case"] for line in f if line.strip()]
    return cases


def worker(args, lib, draw, run_case, describe):
    """Runs the given cases, or drawn ones until the time budget is spent; returns the failures."""
    cases = given_cases(args)
    rng = random.Random(args.seed)
    done = fails = 0
    t0 = time.time()
    while True:
        if cases is not None:
            if not cases:
                break
            c = cases.pop(0)
        else:
            if time.time() - t0 > args.seconds:
                break
            c = draw(rng)
        t1 = time.time()
        try:
            ok, detail = run_case(lib, c)
        except Exception as e:  # noqa: BLE001 (an error on a valid call is a failure; report it)
            ok, detail = False, f"error: {str(e).splitlines()[0][:300] if str(e) else type(e).__name__}"
            torch.cuda.synchronize()
        done += 1
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {describe(c)}: {detail} ({time.time() - t1:.2f} s)", flush=True)
        if not ok:
            print("FAIL " + json.dumps(c), flush=True)
        torch.cuda.empty_cache()
    print(f"worker seed {args.seed}: {done} cases, {fails} failed", flush=True)
    return fails


def main(args, title, make_lib, draw, run_case, describe, worker_args=(), worker_extra=lambda i: ()):
    """One worker in this process (--worker, given cases, or --workers 1), or --workers processes of
    the calling script (worker i also given worker_extra(i)); exits 1 if any case failed."""
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    if args.worker or given_cases(args) is not None or args.workers <= 1:
        print(f"seed {args.seed}", flush=True)
        sys.exit(1 if worker(args, make_lib(), draw, run_case, describe) else 0)
    print(f"seeds {args.seed}..{args.seed + args.workers - 1}", flush=True)
    script = os.path.abspath(sys.argv[0])
    procs = [subprocess.Popen([sys.executable, script, "--lib", args.lib, "--seconds", str(args.seconds), "--seed",
                               str(args.seed + i), *worker_args, *worker_extra(i), "--worker"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(args.workers)]
    total = failed = 0
    for p in procs:
        out, _ = p.communicate()
        sys.stdout.write(out)
        counted = False
        for line in out.splitlines():
            if line.startswith("worker seed"):
                parts = line.split(": ")[1].split()
                total += int(parts[0])
                failed += int(parts[2])
                counted = True
        if p.returncode not in (0, 1) or not counted:
            failed += 1
            print(f"a worker exited with {p.returncode} (counted as a failure)")
    print(f"{title}: {total} cases, {failed} failed")
    sys.exit(1 if failed else 0)

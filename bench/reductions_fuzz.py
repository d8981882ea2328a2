"""Random row reductions through the C API (cuinline_rows_run) against PyTorch eager and float64.

Each case draws an op (softmax, log_softmax, rms_norm, add_rms_norm, layer_norm), a dtype (f32, f16,
bf16, f64), a shape (rank 1-4, rows of 1 to 2^20 + 3 elements, any number of rows, empty tensors
too), how each tensor lies (contiguous, rows padded to a longer stride, one element past an aligned
start, the output the input itself), the weight and bias present or not, eps (0 included), an
optional prologue (scalar steps and functions) and epilogue (scalar steps, functions, and products
with 1-2 extra tensors of the output's shape), the JIT policy of the call (async: the
generic kernel first, then the specialized one, which must give the same bits; sync; generic), and a
side stream or a torch.cuda.graph capture replayed on new data. Some rows hold NaN, ±inf, -0.0,
subnormals or large values; some rows are all -inf (softmax) or all zeros (the norms).

Checked, the output poisoned with NaN first: where PyTorch's eager result (prologue, op and
epilogue as eager ops in the dtype) is not finite, or ours is not, the two are the same (any NaN
matches any NaN); elsewhere, against float64 (the op in float64 on the prologue's dtype values, the
epilogue in float64), our relative L2 error is at most twice PyTorch's and our largest error over
its row's largest output at most four times PyTorch's, or under the dtype's floors;
add_rms_norm's residual equals prologue(x) + residual rounded to the dtype, bit for bit.
For rms_norm and add_rms_norm the non-finite places are those of the definition, x * rsqrt(mean(x^2)
+ eps) * w, as PyTorch's composite (CPU, channels-last) and its vectorized CUDA kernel compute it: a
row holding ±inf gives ±0 at its finite elements and NaN at its infinite ones. PyTorch's other CUDA
kernel (rows of a length not a multiple of 4, misaligned tensors, f64) takes Welford moments and
gives NaN for the whole row; its float64 reference is the definition too. For layer_norm with eps 0
a constant row (after the prologue) is the definition's 0 / 0, NaN, where eager's mean may be off
by a rounding and give finite outputs.

With several workers every fourth runs where no workspace can be had (`--no-workspace`:
CUINLINE_ROWS_CLUSTER=0 and CUINLINE_ROWS_WORKSPACE=0, set before the library loads): rows past the
block form on the looped form, the generic kernel's on its whole rows; its cases carry
"workspace": false, and a rerun of such cases takes the same setting.

A failing case prints `FAIL {json}`; `--case '{json}'` reruns it, and
bench/reductions_fuzz_regressions.jsonl (`--cases-file`) keeps the cases that once failed, with why.

Usage: reductions_fuzz.py --lib build-shared/libcuinline.so [--seconds 120] [--workers 4] [--seed S]
                          [--case JSON] [--no-workspace]
"""
import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

import fuzz_common
from reductions_peers import JitStats, Ops  # noqa: F401 (JitStats: the library's struct, for a debugger)

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
INT = {"f32": torch.int32, "f16": torch.int16, "bf16": torch.int16, "f64": torch.int64}
# (rel L2, largest error over its row's largest output) that any error within reaches, whatever eager's
FLOOR = {"f32": (1e-6, 1e-5), "f16": (1e-3, 4e-3), "bf16": (8e-3, 3e-2), "f64": (1e-13, 1e-12)}
OPS = ["softmax", "log_softmax", "rms_norm", "add_rms_norm", "layer_norm"]
POLICIES = {"async": 0, "sync": 1, "generic": 2}
LENGTHS = [1, 2, 3, 5, 7, 8, 31, 32, 33, 64, 100, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025, 2048,
           3000, 4095, 4096, 4100, 5000, 8192, 8193, 10000, 16384, 20000, 32767, 32768, 32769, 40000, 65536,
           100000, 131072, 200000, 262144, 524288, (1 << 20) + 3]
# (op text, PyTorch op on the running value). A prologue's result is the eager ops' bits, so it may
# hold any; an epilogue's steps act on an output that may differ from eager's by its rounding, so
# they keep a relative error relative (no sums that can cancel, no exp that multiplies it): EPI_FNS.
FUNCTIONS = [("relu", torch.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("silu", F.silu),
             ("gelu", F.gelu), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")), ("softplus", F.softplus),
             ("elu", F.elu), ("abs", torch.abs), ("neg", torch.neg),
             ("leaky_relu(0.2)", lambda t: F.leaky_relu(t, 0.2)), ("exp", torch.exp), ("hardswish", F.hardswish)]
EPI_FNS = ["relu", "sigmoid", "tanh", "silu", "gelu", "softplus", "abs", "neg", "leaky_relu(0.2)"]
PRO_SCALARS = ["mul(0.125)", "mul(0.08838834764831845)", "div(2)", "mul(3.0)", "add(1.5)", "sub(0.3)", "div(0.7)"]
EPI_SCALARS = ["mul(0.5)", "mul(2.0)", "div(3.0)", "mul(1.7)"]


# Set by --no-workspace (main): the process takes no workspace, and its cases say so.
NO_WORKSPACE = False


def draw(rng):
    dtype = rng.choice(["f32", "f32", "f16", "bf16", "bf16", "f64"])
    op = rng.choice(OPS)
    n = rng.choice(LENGTHS)
    budget = (1 << 22) if dtype != "f64" else (1 << 21)
    most_rows = max(1, budget // n)
    rows = rng.choice([1, 2, 3, 5, 8, 33, 100, 1000, 4099, 65536])
    rows = min(rows, most_rows)
    if rng.random() < 0.03:
        rows = 0  # an empty tensor: a no-op
    # The leading dimensions: the rows as 1-3 extents.
    lead = [rows]
    if rows > 1 and rng.random() < 0.4:
        f = next((d for d in (2, 3, 5, 4, 7) if rows % d == 0), 1)
        lead = [f, rows // f] if f > 1 else [rows]
    if rng.random() < 0.15:
        lead = [1] + lead
    if rng.random() < 0.1 and rows == 1:
        lead = []  # rank 1: one row
    layout = lambda: rng.choice(["contiguous", "contiguous", "padded", "offset"])
    pro, epi, extras = [], [], 0
    if rng.random() < 0.35:
        for _ in range(rng.randint(1, 2)):
            pro.append(rng.choice(PRO_SCALARS) if rng.random() < 0.6 else rng.choice(FUNCTIONS)[0])
    if rng.random() < 0.35:
        extras = rng.choice([0, 0, 1, 2])
        for k in range(1, extras + 1):
            epi.append(f"mul(in{k})")
        for _ in range(rng.randint(0 if extras else 1, 2)):
            epi.append(rng.choice(EPI_SCALARS) if rng.random() < 0.4 else rng.choice(EPI_FNS))
        rng.shuffle(epi)
    return dict(op=op, dtype=dtype, lead=lead, n=n, x=layout(), out=rng.choice(["contiguous", "padded", "in place"]),
                res=layout(), weight=rng.random() < 0.8, bias=rng.random() < 0.8,
                w_offset=rng.random() < 0.2, eps=rng.choice([1e-6, 1e-5, 0.0, 0.1]),
                prologue=pro, epilogue=epi, extras=extras, policy=rng.choice(["async", "async", "sync", "generic"]),
                side_stream=rng.random() < 0.15, graph=rng.random() < 0.1, specials=rng.random() < 0.5,
                seed=rng.randrange(1 << 30), workspace=not NO_WORKSPACE)


def values(rows, n, dt, g, op, specials):
    """[rows, n] normal values (scaled); with specials, some rows hold special values, one row may be
    all -inf (softmax) or all zeros (the norms)."""
    v = torch.randn(rows, n, device="cuda", generator=g, dtype=torch.float64) * 3
    if specials and rows * n > 0:
        special = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-40, -1e-40, 6e-8,
                                1e-310, 65504.0, 300.0, -300.0], device="cuda", dtype=torch.float64)
        hit = torch.rand(rows, device="cuda", generator=g) < 0.25
        for _ in range(2):
            cols = torch.randint(0, n, (rows,), device="cuda", generator=g)
            pick = special[torch.randint(0, len(special), (rows,), device="cuda", generator=g)]
            r = hit.nonzero().flatten()
            v[r, cols[r]] = pick[r]
        if rows > 1:
            row = int(torch.randint(0, rows, (1,), device="cuda", generator=g).item())
            v[row] = float("-inf") if op in ("softmax", "log_softmax") else 0.0
    return v.to(dt)


def placed(v, layout, g):
    """v ([rows, n]) in a tensor of the given layout: rows padded to a longer stride, or one element past
    an aligned start; the same values."""
    rows, n = v.shape
    if layout == "padded":
        pad = int(torch.randint(1, 9, (1,), device="cuda", generator=g).item())
        t = torch.empty(rows, n + pad, device="cuda", dtype=v.dtype)[:, :n]
    elif layout == "offset":
        t = torch.empty(rows * n + 1, device="cuda", dtype=v.dtype)[1:].view(rows, n)
    else:
        t = torch.empty(rows, n, device="cuda", dtype=v.dtype)
    t.copy_(v)
    return t


def shaped(t, lead, n):
    """The [rows, n] tensor t as lead + [n] (a view: the rows stay evenly spaced)."""
    return t.view(*lead, n) if lead else t.view(n)


def chain(steps, y, extras):
    fns = dict(FUNCTIONS)
    for s in steps:
        name, _, arg = s.partition("(")
        arg = arg[:-1]
        if name in ("add", "sub", "mul", "div") and arg:
            other = extras[int(arg[2:]) - 1] if arg.startswith("in") else float(arg)
            y = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[name](y, other)
        else:
            y = fns[s](y)
    return y


def rms_definition(z, w, eps):
    """x * rsqrt(mean(x^2) + eps) * w, in float for 16-bit z, rounded to z's dtype (PyTorch's composite)."""
    u = z.float() if z.dtype in (torch.float16, torch.bfloat16) else z
    y = u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)
    if w is not None:
        y = y * w
    return y.to(z.dtype)


def reference(c, x, w, b, res, extras, f64, definition=False):
    """(output, new residual or None): eager PyTorch in the dtype, or (f64) the op and epilogue in float64
    on the prologue's dtype values; rms_norm as its definition (rms_definition) in float64 or where
    `definition`."""
    n = c["n"]
    xp = chain(c["prologue"], x, [])
    z = None
    if c["op"] == "add_rms_norm":
        z = xp + res  # (the stored residual: rounded to the dtype, in both)
    if f64:
        xp = xp.double()
        w = None if w is None else w.double()
        b = None if b is None else b.double()
        extras = [e.double() for e in extras]
        if z is not None:
            z = z.double()
    op = c["op"]
    if op == "softmax":
        y = torch.softmax(xp, -1)
    elif op == "log_softmax":
        y = torch.log_softmax(xp, -1)
    elif op in ("rms_norm", "add_rms_norm"):
        u = xp if op == "rms_norm" else z
        y = rms_definition(u, w, c["eps"]) if f64 or definition else F.rms_norm(u, (n,), w, c["eps"])
    else:
        y = F.layer_norm(xp, (n,), w, b, c["eps"])
    return chain(c["epilogue"], y, extras), z


def compare(c, got, eager, ref64, expect):
    """(ok, detail): non-finite places equal to `expect`'s (eager's, or rms_norm's definition);
    elsewhere the error against float64 bounded, where eager's is finite too."""
    ints = INT[c["dtype"]]
    special = ~torch.isfinite(expect) | ~torch.isfinite(got)
    same = (got.view(ints) == expect.view(ints)) | (torch.isnan(got) & torch.isnan(expect))
    bad = special & ~same
    if bool(bad.any()):
        i = bad.flatten().nonzero()[:3].flatten().tolist()
        ex = "; ".join(f"[{k}] got {got.flatten()[k].item()!r} eager {expect.flatten()[k].item()!r}" for k in i)
        return False, f"{int(bad.sum())} non-finite places differ from eager's, e.g. {ex}"
    fin = ~special & torch.isfinite(ref64) & torch.isfinite(eager)
    if not bool(fin.any()):
        return True, "no finite output"
    ref = torch.where(fin, ref64, torch.zeros_like(ref64))
    row_scale = ref.abs().amax(dim=-1, keepdim=True).clamp_min(1e-300)
    ref_norm = max(float(ref.norm().item()), 1e-300)

    def err(t):
        d = torch.where(fin, t.double() - ref64, torch.zeros_like(ref64))
        return float(d.norm().item()) / ref_norm, float((d.abs() / row_scale).max().item())

    (l2, most), (l2_eager, most_eager) = err(got), err(eager)
    floor_l2, floor_most = FLOOR[c["dtype"]]
    ok = l2 <= max(2 * l2_eager, floor_l2) and most <= max(4 * most_eager, floor_most)
    return ok, f"rel L2 {l2:.2e} (eager {l2_eager:.2e}), largest {most:.2e} of its row's scale (eager {most_eager:.2e})"


def expected(c, x, w, b, res, extras, eager):
    """What the non-finite places are checked against: eager's, rms_norm's definition's for the rms ops;
    for layer_norm with eps 0 a constant row's outputs are the definition's 0 / 0 (NaN, through the
    epilogue), where eager's mean may be off by a rounding and give finite ones."""
    if c["op"] in ("rms_norm", "add_rms_norm"):
        return reference(c, x, w, b, res, extras, False, definition=True)[0]
    if c["op"] == "layer_norm" and c["eps"] == 0.0 and eager.numel() > 0:
        xp = chain(c["prologue"], x, []).reshape(-1, c["n"])
        constant = (xp == xp[:, :1]).all(dim=-1)  # (NaN != NaN: a row holding one is not constant)
        if bool(constant.any()):
            undefined = chain(c["epilogue"], torch.full_like(eager, float("nan")), extras)
            return torch.where(constant.reshape(*eager.shape[:-1], 1), undefined, eager)
    return eager


def bits_equal(a, b, ints):
    return bool(((a.view(ints) == b.view(ints)) | (torch.isnan(a) & torch.isnan(b))).all())


def run_case(ops, c):
    dt, n, lead = DT[c["dtype"]], c["n"], c["lead"]
    rows = math.prod(lead) if lead else 1
    g = torch.Generator(device="cuda").manual_seed(c["seed"])
    op = c["op"]
    xv = values(rows, n, dt, g, op, c["specials"])
    x2d = placed(xv, c["x"], g)
    x = shaped(x2d, lead, n)
    norm = op not in ("softmax", "log_softmax")

    def vec():
        t = torch.randn(n + (1 if c["w_offset"] else 0), device="cuda", generator=g, dtype=torch.float64).to(dt)
        return t[1:] if c["w_offset"] else t

    w = vec() if norm and c["weight"] else None
    b = vec() if op == "layer_norm" and c["bias"] else None
    res = shaped(placed(values(rows, n, dt, g, "rms_norm", False), c["res"], g), lead, n) \
        if op == "add_rms_norm" else None
    extras = [shaped(placed(values(rows, n, dt, g, "rms_norm", False), "contiguous", g), lead, n)
              for _ in range(c["extras"])]
    if c["out"] == "in place":
        out = x
    else:
        out = shaped(placed(torch.full((rows, n), float("nan"), device="cuda", dtype=dt), c["out"], g), lead, n)
    # References from the inputs as they are before the call (the call may write x and the residual).
    x0, res0 = x.clone(), None if res is None else res.clone()
    eager, z_eager = reference(c, x0, w, b, res0, extras, False)
    ref64, _ = reference(c, x0, w, b, res0, extras, True)
    expect = expected(c, x0, w, b, res0, extras, eager)
    pro = "|".join(c["prologue"]) or None
    epi = "|".join(c["epilogue"]) or None
    lib = ops.lib
    assert lib.cuinline_set_jit_policy(POLICIES[c["policy"]]) == 0
    ints = INT[c["dtype"]]
    detail = f"{c['policy']} "
    if c["graph"]:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with torch.cuda.graph(graph, stream=side):
                call_g = ops.rows_call(op, x, out, w, c["eps"], pro, epi, extras, b, res)
                call_g()
        torch.cuda.current_stream().wait_stream(side)
        # New inputs, then the replay.
        x.copy_(shaped(values(rows, n, dt, g, op, c["specials"]), lead, n))
        if res is not None:
            res.copy_(res0)
        if c["out"] != "in place":
            out.fill_(float("nan"))
        x0 = x.clone()
        eager, z_eager = reference(c, x0, w, b, res0, extras, False)
        ref64, _ = reference(c, x0, w, b, res0, extras, True)
        expect = expected(c, x0, w, b, res0, extras, eager)
        graph.replay()
        torch.cuda.synchronize()
        detail += "graph "
    else:
        stream = torch.cuda.Stream() if c["side_stream"] else torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call = ops.rows_call(op, x, out, w, c["eps"], pro, epi, extras, b, res)
            call()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        detail += "side-stream " if c["side_stream"] else ""
    if rows * n == 0:
        return True, detail + "empty"
    got = out.contiguous().clone()
    if res is not None and not bits_equal(res, z_eager, ints):
        return False, detail + "the residual written is not prologue(x) + residual in the dtype"
    ok, what = compare(c, got.reshape(rows, n), eager.reshape(rows, n), ref64.reshape(rows, n),
                       expect.reshape(rows, n))
    if not ok:
        return False, detail + what
    # async: the generic kernel served the first call; once the specialized kernel is in, the same call
    # gives the same bits (an f64 NaN's sign aside: any NaN matches any NaN here).
    if c["policy"] == "async" and not c["graph"]:
        assert lib.cuinline_wait_for_specializations() == 0
        x.copy_(x0)
        if res is not None:
            res.copy_(res0)
        if c["out"] != "in place":
            out.fill_(float("nan"))
        call = ops.rows_call(op, x, out, w, c["eps"], pro, epi, extras, b, res)
        call()
        torch.cuda.synchronize()
        if not bits_equal(out, got, ints):
            d = ((out.view(ints) != got.view(ints)) & ~(torch.isnan(out) & torch.isnan(got))).flatten()
            k = int(d.nonzero()[0].item())
            return False, (detail + f"{int(d.sum())} outputs changed when the specialized kernel came in, e.g. "
                           f"[{k}] {got.flatten()[k].item()!r} -> {out.flatten()[k].item()!r}")
        detail += "same bits specialized "
    return True, detail + what


def describe(c):
    shape = c["lead"] + [c["n"]]
    chains = ""
    if c["prologue"]:
        chains += f" pro [{'|'.join(c['prologue'])}]"
    if c["epilogue"]:
        chains += f" epi [{'|'.join(c['epilogue'])}]"
    parts = [c["x"]] + ([f"out {c['out']}"] if c["out"] != "contiguous" else [])
    if c["op"] == "add_rms_norm":
        parts.append(f"res {c['res']}")
    if c["op"] not in ("softmax", "log_softmax"):
        parts.append(("w" + (" offset" if c["w_offset"] else "")) if c["weight"] else "no w")
        parts.append(f"eps {c['eps']:g}")
    if c["op"] == "layer_norm":
        parts.append("b" if c["bias"] else "no b")
    where = "" if c.get("workspace", True) else " no workspace"
    return f"{c['op']} {c['dtype']} {shape} {', '.join(parts)}{chains}{' specials' if c['specials'] else ''}{where}"


def rerun_apart(args, given):
    """Runs the given cases with a workspace and those without in a process each (this script, one
    cases file each); returns 1 if any failed."""
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for without in (False, True):
            path = os.path.join(tmp, f"cases_{int(without)}.jsonl")
            with open(path, "w") as f:
                for c in given:
                    if (not c.get("workspace", True)) == without:
                        f.write(json.dumps({"why": "", "case": c}) + "\n")
            cmd = [sys.executable, os.path.abspath(sys.argv[0]), "--lib", args.lib, "--cases-file", path]
            print(f"cases {'without' if without else 'with'} a workspace:", flush=True)
            rc = subprocess.run(cmd + (["--no-workspace"] if without else [])).returncode
            status = max(status, 0 if rc == 0 else 1)
    return status


def main():
    global NO_WORKSPACE
    ap = argparse.ArgumentParser()
    fuzz_common.add_arguments(ap, seconds=120)
    ap.add_argument("--no-workspace", action="store_true",
                    help="run where no workspace can be had (CUINLINE_ROWS_CLUSTER=0, CUINLINE_ROWS_WORKSPACE=0)")
    args = ap.parse_args()
    given = fuzz_common.given_cases(args)
    if given:
        # Given cases run as they were drawn: with a workspace or without, in a process each (the
        # knobs that take it away are read once a process).
        without = {not c.get("workspace", True) for c in given}
        if len(without) > 1:
            sys.exit(rerun_apart(args, given))
        args.no_workspace = args.no_workspace or without.pop()
    if args.no_workspace and (args.worker or given is not None or args.workers <= 1):
        NO_WORKSPACE = True
        os.environ["CUINLINE_ROWS_CLUSTER"] = "0"  # (read once, at the library's first call)
        os.environ["CUINLINE_ROWS_WORKSPACE"] = "0"
    fuzz_common.main(args, "reductions fuzz", lambda: Ops(args.lib), draw, run_case, describe,
                     worker_extra=lambda i: ["--no-workspace"] if args.no_workspace or i % 4 == 3 else [])


if __name__ == "__main__":
    main()

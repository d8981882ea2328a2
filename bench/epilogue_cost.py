"""What an epilogue costs a conv2d: KernelBench L2-4's layer (64 x 64 x 256^2 -> 128, 3 x 3, bias) through
cuinline's C API with the bare conv and with each activation step (and chains of them, and expressions)
as its epilogue, beside PyTorch eager's conv and conv + the activation, in f16 and in f32 (tf32).
CUDA events, L2 flushed before each timed call, median of --samples; each epilogue's output checked
against float64 on the batch's first image (relative L2).

Usage: epilogue_cost.py --lib build-shared/libcuinline.so [--dtypes f16,f32] [--epilogues "mish|mish,gelu"]
       [--shape 64,64,256,256,128]
"""
import argparse
import sys

import torch
import torch.nn.functional as F

from conv2d_half_peers import time_ms
from kernelbench_conv import Lib, rel_l2

FNS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "gelu": F.gelu,
       "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "mish": F.mish, "softplus": F.softplus, "elu": F.elu,
       "selu": F.selu, "hardswish": F.hardswish, "exp": torch.exp, "logsigmoid": F.logsigmoid, "softsign": F.softsign,
       "tanhshrink": F.tanhshrink, "celu": F.celu}

# The elementwise kernels' formulas (log1pf, expm1f) as conv epilogues: what softplus, elu and
# logsigmoid cost a conv without the epilogue's short forms (--old-forms).
OLD_FORMS = ["expr(x > 20.0f ? x : log1pf(expf(x)))", "expr(x > 0.0f ? x : expm1f(x))",
             "expr((x < 0.0f ? x : 0.0f) - log1pf(expf(-fabsf(x))))"]


def torch_tail(epilogue):
    """The PyTorch ops of a chain of named steps (None for expressions)."""
    if not epilogue or epilogue.startswith("expr(") or any(s.strip() not in FNS for s in epilogue.split("|")):
        return None  # (steps with arguments: timed without an eager peer)
    fns = [FNS[s.strip()] for s in epilogue.split("|")]

    def tail(y):
        for f in fns:
            y = f(y)
        return y
    return tail


def fast_mish(v, div):
    """mish(v) = v * n / (n + 2), n = e^v (e^v + 2) (tanh(log1p(e^v)) in closed form), v above 20: v."""
    n = f"(expf({v}) * (expf({v}) + 2.0f))"
    q = f"__fdividef({n}, {n} + 2.0f)" if div == "fast" else f"({n} / ({n} + 2.0f))"
    return f"(({v}) > 20.0f ? ({v}) : ({v}) * {q})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--dtypes", default="f16,f32")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--shape", default="64,64,256,256,128")
    ap.add_argument("--epilogues", default="relu,sigmoid,tanh,silu,gelu,gelu_tanh,mish,softplus,elu,hardswish,mish|mish")
    ap.add_argument("--expr", action="append", default=[], help="extra epilogues given as text (expressions)")
    ap.add_argument("--fast-mish", action="store_true", help="also the closed-form mish twice as expressions")
    ap.add_argument("--old-forms", action="store_true", help="also softplus, elu and logsigmoid with log1pf / expm1f")
    args = ap.parse_args()
    if args.old_forms:
        args.expr.extend(OLD_FORMS)
    if args.fast_mish:
        for div in ("ieee", "fast"):
            args.expr.append("expr(" + fast_mish(fast_mish("x", div), div) + ")")
    lib = Lib(args.lib)
    n, cin, h, w, cout = (int(v) for v in args.shape.split(","))
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; conv {n}x{cin}x{h}x{w} -> {cout}, 3x3, "
          f"bias; L2 flushed, median of {args.samples}")
    print("| dtype | epilogue | cuinline ms | over the bare conv ms | eager conv + ops ms | vs eager | rel L2 vs float64 |")
    print("|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for dt_name in args.dtypes.split(","):
        dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dt_name]
        precision = "tf32" if dt == torch.float32 else "fp32"
        torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for convs
        m = torch.nn.Conv2d(cin, cout, 3).cuda().to(dt)
        x = torch.rand(n, cin, h, w, device="cuda", dtype=dt)
        y = torch.full((n, cout, h - 2, w - 2), float("nan"), device="cuda", dtype=dt)
        with torch.no_grad():
            ref_conv = F.conv2d(x[:1].double(), m.weight.double(), m.bias.double())
            bare = None
            for epi in [""] + args.epilogues.split(",") + args.expr:
                call = lib.conv(x, m.weight, m.bias, y, (1, 1), (0, 0), (1, 1), 1, epi, [], precision)
                call()
                torch.cuda.synchronize()
                tail = torch_tail(epi)
                err = "-"
                if tail is not None or epi == "":
                    ref = tail(ref_conv) if tail else ref_conv
                    err = f"{rel_l2(y[:1], ref):.1e}"
                ms = time_ms(call, flush, args.samples)
                if epi == "":
                    bare = ms
                eager = "-"
                vs = "-"
                if tail is not None or epi == "":
                    fn = (lambda: tail(m(x))) if tail else (lambda: m(x))
                    e_ms = time_ms(fn, flush, args.samples)
                    eager, vs = f"{e_ms:.3f}", f"{e_ms / ms:.2f}x"
                label = epi if epi else "(none: the bare conv)"
                print(f"| {dt_name} | `{label}` | {ms:.3f} | {ms - bare:+.3f} | {eager} | {vs} | {err} |", flush=True)
        del m, x, y, ref_conv
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""KernelBench's 2-D convolution problems through cuinline's C API (libcuinline.so), the way an
application would hand them over: PyTorch's modules, weights and inputs as KernelBench builds them
(nn.Conv2d's default init, torch.rand / torch.randn inputs, the problems' sizes), PyTorch tensors on
PyTorch's current stream, one cuinline call a conv with the elementwise tail fused as its epilogue
(per-channel parameters of shape (Cout, 1, 1) as channel operands: cuinline_conv2d_ex).

Level 1: the standard (square, asymmetric, dilated), depthwise, depthwise-separable and pointwise
2-D problems (50, 55, 56, 62, 63, 80, 82-87); X1-X6, real layers past the limits cuinline once had
(ViT-B/32's patch embedding, ASPP rate 18, FCN's padding 100, a 51 x 51 depthwise, a 1 x 251
filterbank, 8192 input channels). Level 2: the conv2d problems whose tail is elementwise
(1, 4, 31, 54, 57, 69, 71, 87). (Transposed, 1-D and 3-D convolutions and tails with reductions,
pooling or normalization are not cuinline ops.)

For each problem: correctness as KernelBench checks it (torch.allclose, atol = rtol = 1e-2, against
the module's own output) and the relative L2 error against the module in float64; then the time of
cuinline fp32 (exact fp32 products) and tf32 (TF32 tensor cores, as PyTorch's default for convs),
PyTorch eager with TF32 off and with its default (cudnn.allow_tf32 = True), and torch.compile
(--compile; default settings) — CUDA events, L2 flushed before every timed call, median.

With --dtype f16 / bf16 the same problems in half precision (module, parameters and input converted,
as an engine would run them): cuinline (fp32 accumulation on tensor cores, the epilogue in fp32,
rounded once) beside PyTorch eager and torch.compile in that dtype; correct = allclose(atol=rtol=1e-2)
against the module in that dtype, plus the relative L2 error of both against float64.

Usage: kernelbench_conv.py --lib build-shared/libcuinline.so [--out kb.md] [--compile] [--samples 10]
       [--only 63,L2-54] [--dtype f32|f16|bf16] [--channels-last]
"""
import argparse
import ctypes
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from conv2d_half_peers import time_ms  # (L2 flushed before each timed call, median)
from torch_capi_check import Tensor, desc  # (a cuinline_tensor of a torch tensor)


# name, N, Cin, H, W, Cout, (KH, KW), stride, padding, dilation, groups, bias, input ("randn"/"rand")
LEVEL1 = [
    ("50 AlexNet conv1 11x11 s4", 256, 3, 224, 224, 96, (11, 11), (4, 4), (2, 2), (1, 1), 1, True, "randn"),
    ("55 asymmetric input", 8, 64, 512, 1024, 128, (3, 3), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
    ("56 asymmetric 5x7", 8, 64, 512, 256, 128, (5, 7), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
    ("62 5x9 kernel", 8, 32, 512, 512, 64, (5, 9), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
    ("63 square 1024^2", 16, 16, 1024, 1024, 128, (3, 3), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
    ("80 5x9 dilated (2,3) padded", 8, 32, 512, 512, 64, (5, 9), (1, 1), (2, 4), (2, 3), 1, False, "randn"),
    ("82 depthwise 3x3", 16, 64, 512, 512, 64, (3, 3), (1, 1), (0, 0), (1, 1), 64, False, "randn"),
    ("83 depthwise 3x1", 64, 8, 512, 512, 8, (3, 1), (1, 1), (0, 0), (1, 1), 8, False, "randn"),
    ("84 depthwise 256x512", 64, 128, 256, 512, 128, (3, 3), (1, 1), (0, 0), (1, 1), 128, False, "randn"),
    ("85 depthwise 3x7", 32, 128, 128, 256, 128, (3, 7), (1, 1), (0, 0), (1, 1), 128, False, "randn"),
    ("87 pointwise 1x1", 16, 64, 1024, 1024, 128, (1, 1), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
]

# Real layers past the limits cuinline once had (filters <= 31, stride / dilation <= 16, padding <= 64,
# channels <= 4096): not KernelBench's, run the same way (--only X1,X2,...).
PAST_LIMITS = [
    ("X1 ViT-B/32 patch embedding", 64, 3, 224, 224, 768, (32, 32), (32, 32), (0, 0), (1, 1), 1, True, "randn"),
    ("X2 DeepLabv3 ASPP rate 18", 2, 2048, 33, 33, 256, (3, 3), (1, 1), (18, 18), (18, 18), 1, False, "randn"),
    ("X3 FCN-8s conv1_1 pad 100", 1, 3, 500, 500, 64, (3, 3), (1, 1), (100, 100), (1, 1), 1, True, "randn"),
    ("X4 SLaK 51x51 depthwise", 8, 128, 56, 56, 128, (51, 51), (1, 1), (25, 25), (1, 1), 128, True, "randn"),
    ("X5 SincNet 1x251 filterbank", 32, 1, 1, 16000, 80, (1, 251), (1, 1), (0, 125), (1, 1), 1, False, "randn"),
    ("X6 8192 -> 2048 1x1", 8, 8192, 7, 7, 2048, (1, 1), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
]

# Deep channels on small images (ResNet-50's last stage at batch 32): long reductions over few pixels
# (--only Y1,Y2,Y3).
DEEP_SMALL = [
    ("Y1 ResNet-50 layer4 1x1 2048 -> 512", 32, 2048, 7, 7, 512, (1, 1), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
    ("Y2 ResNet-50 layer4 3x3 512", 32, 512, 7, 7, 512, (3, 3), (1, 1), (1, 1), (1, 1), 1, False, "randn"),
    ("Y3 ResNet-50 layer4 1x1 512 -> 2048", 32, 512, 7, 7, 2048, (1, 1), (1, 1), (0, 0), (1, 1), 1, False, "randn"),
]

# Level 2: nn.Conv2d(Cin, Cout, 3) with bias, torch.rand input; the tail as PyTorch runs it and as a
# cuinline epilogue (op text) with its per-channel operands (names of the module's parameters).
LEVEL2 = [
    ("L2-1 Conv2D_ReLU_BiasAdd", 128, 64, 128, 128, 128, "relu|add(in1)", ["bias2"],
     lambda y, p: torch.relu(y) + p["bias2"]),
    ("L2-4 Conv2d_Mish_Mish", 64, 64, 256, 256, 128, "mish|mish", [],
     lambda y, p: F.mish(F.mish(y))),
    ("L2-31 Conv2d_Min_Add_Multiply", 128, 64, 128, 128, 128,
     "expr([x, b] ((x != x ? x : fminf(x, 0.5f)) + b) * 2.0f)", ["bias2"],
     lambda y, p: (torch.min(y, torch.tensor(0.5, device=y.device)) + p["bias2"]) * 2.0),
    ("L2-54 Conv2d_Multiply_LeakyReLU_GELU", 64, 64, 256, 256, 64, "mul(in1)|leaky_relu(0.01)|gelu", ["multiplier"],
     lambda y, p: F.gelu(F.leaky_relu(y * p["multiplier"], 0.01))),
    ("L2-57 Conv2d_ReLU_HardSwish", 128, 8, 128, 128, 64,
     "expr(fmaxf(x, 0.0f) * fminf(fmaxf((fmaxf(x, 0.0f) + 3.0f) / 6.0f, 0.0f), 1.0f))", [],
     lambda y, p: (lambda r: r * torch.clamp((r + 3) / 6, 0, 1))(torch.relu(y))),
    ("L2-69 Conv2d_HardSwish_ReLU", 128, 8, 128, 128, 64, "hardswish|relu", [],
     lambda y, p: torch.relu(F.hardswish(y))),
    ("L2-71 Conv2d_Divide_LeakyReLU", 128, 8, 128, 128, 64, "div(2)|leaky_relu(0.01)", [],
     lambda y, p: F.leaky_relu(y / 2, 0.01)),
    ("L2-87 Conv2d_Subtract_Subtract_Mish", 128, 8, 256, 256, 64, "sub(0.5)|sub(0.2)|mish", [],
     lambda y, p: F.mish(y - 0.5 - 0.2)),
]


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.cuinline_last_error.restype = ctypes.c_char_p
        self.lib.cuinline_conv2d_ex.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
            ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]

    def conv(self, x, w, b, y, stride, pad, dil, groups, epilogue, operands, precision):
        """A callable running y = epilogue(conv2d(x, w, b) [, operands]) on the current stream."""
        dx, dw, dy = desc(x), desc(w), desc(y)
        db = desc(b) if b is not None else None
        keep = [desc(t) for t in operands]  # (the shape arrays of ops' descriptors live in these)
        ops = (Tensor * len(keep))(*keep) if keep else None
        st, pd, dl = (ctypes.c_int * 2)(*stride), (ctypes.c_int * 2)(*pad), (ctypes.c_int * 2)(*dil)
        epi, prec = epilogue.encode(), precision.encode()

        def run():
            rc = self.lib.cuinline_conv2d_ex(dx, dw, db, None, dy, st, pd, dl, groups, epi, ops, len(operands), prec,
                                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if rc != 0:
                raise RuntimeError(self.lib.cuinline_last_error().decode())
        run._keep = (dx, dw, dy, db, ops, keep, st, pd, dl)
        return run


def rel_l2(a, ref):
    return ((a.double() - ref).norm() / ref.norm()).item()


def allclose(a, b):
    """torch.allclose(a, b, atol=rtol=1e-2) an image at a time (outputs of several GB)."""
    return all(torch.allclose(a[i], b[i], atol=1e-2, rtol=1e-2) for i in range(a.shape[0]))


def run_problem(lib, name, conv_mods, x, tail, params, epilogue, operands, out_shape, flush, args, lines):
    """conv_mods: nn.Conv2d modules applied in turn (the separable problem has two); the last one's
    output gets `tail` (PyTorch) / `epilogue` (cuinline)."""
    t0 = time.time()

    def eager():
        y = x
        for m in conv_mods:
            y = m(y)
        return tail(y, params) if tail else y

    with torch.no_grad():
        # The accuracy reference: the module in float64 on the batch's first two images.
        yd = x[:2].double()
        for m in conv_mods:
            yd = F.conv2d(yd, m.weight.double(), m.bias.double() if m.bias is not None else None, m.stride,
                          m.padding, m.dilation, m.groups)
        ref64 = tail(yd, {k: v.double() for k, v in params.items()}) if tail else yd
        del yd
        # The module as KernelBench runs it (PyTorch's default: TF32 convs), and with TF32 off.
        torch.backends.cudnn.allow_tf32 = True
        ref_default = eager()
        err_eager_tf32 = rel_l2(ref_default[:2], ref64)
        torch.backends.cudnn.allow_tf32 = False
        err_eager = rel_l2(eager()[:2], ref64)
        t, ok, err = {}, {}, {}
        precisions = tuple(args.precisions.split(",")) if x.dtype == torch.float32 else ("fp32",)
        for precision in precisions:
            outs, calls = [], []
            cur = x
            for i, m in enumerate(conv_mods):
                last = i == len(conv_mods) - 1
                shape = out_shape if last else (x.shape[0], m.out_channels) + tuple(conv_out(cur.shape[2:], m))
                o = torch.full(shape, float("nan"), device="cuda", dtype=x.dtype)  # poisoned
                if args.channels_last:
                    o = o.to(memory_format=torch.channels_last)
                calls.append(lib.conv(cur, m.weight, m.bias, o, m.stride, m.padding, m.dilation, m.groups,
                                      epilogue if last else "", operands if last else [], precision))
                outs.append(o)
                cur = o

            def ours(calls=calls):
                for c in calls:
                    c()
            ours()
            torch.cuda.synchronize()
            ok[precision] = allclose(outs[-1], ref_default)
            err[precision] = rel_l2(outs[-1][:2], ref64)
            t[precision] = time_ms(ours, flush, args.samples)
            del outs, calls, cur, o
        del ref_default
        torch.cuda.empty_cache()
        t["eager"] = time_ms(eager, flush, args.samples)
        torch.backends.cudnn.allow_tf32 = True
        t["eager_tf32"] = time_ms(eager, flush, args.samples) if x.dtype == torch.float32 else None
        t["compile"] = None
        if args.compile:
            torch._dynamo.reset()
            comp = torch.compile(eager)
            t["compile"] = time_ms(comp, flush, args.samples)
        torch.backends.cudnn.allow_tf32 = False
    comp_s = f"{t['compile']:.3f}" if t["compile"] is not None else "-"
    if x.dtype != torch.float32:  # (one mode; PyTorch's TF32 switch does not apply)
        row = (f"| {name} | {'ok' if ok['fp32'] else 'FAIL'} | {t['fp32']:.4f} | {t['eager']:.4f} | {comp_s} | "
               f"{t['eager'] / t['fp32']:.2f}x | {err['fp32']:.1e} | {err_eager:.1e} |")
        lines.append(row)
        print(row + f"  ({time.time() - t0:.0f} s)", flush=True)
        return ok["fp32"]
    def cell(p, fmt):  # (a precision not run: --precisions)
        return fmt(p) if p in t else "-"
    ok_s = cell("fp32", lambda p: "ok" if ok[p] else "FAIL") + " / " + cell("tf32", lambda p: "ok" if ok[p] else "FAIL")
    ms = [cell(p, lambda q: f"{t[q]:.3f}") for p in ("fp32", "tf32")]
    vs = [cell("fp32", lambda q: f"{t['eager'] / t[q]:.2f}x"), cell("tf32", lambda q: f"{t['eager_tf32'] / t[q]:.2f}x")]
    errs = [cell(p, lambda q: f"{err[q]:.1e}") for p in ("fp32", "tf32")]
    row = (f"| {name} | {ok_s} | {ms[0]} | {ms[1]} | {t['eager']:.3f} | {t['eager_tf32']:.3f} | {comp_s} | {vs[0]} | "
           f"{vs[1]} | {errs[0]} / {errs[1]} | {err_eager:.1e} / {err_eager_tf32:.1e} |")
    lines.append(row)
    print(row + f"  ({time.time() - t0:.0f} s)", flush=True)
    return all(ok.values())


def conv_out(hw, m):
    return [(hw[i] + 2 * m.padding[i] - m.dilation[i] * (m.kernel_size[i] - 1) - 1) // m.stride[i] + 1 for i in range(2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--compile", action="store_true", help="torch.compile peers (a compile a problem)")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--only", help="comma-separated problem numbers / names (e.g. 63,L2-54)")
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"))
    ap.add_argument("--precisions", default="fp32,tf32", help="cuinline's modes for f32 tensors (fp32, tf32)")
    ap.add_argument("--channels-last", action="store_true",
                    help="input, modules and cuinline's outputs in torch.channels_last (the level-1 / X / Y problems)")
    args = ap.parse_args()
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    lib = Lib(args.lib)
    torch.backends.cuda.matmul.allow_tf32 = False
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4 + (1 << 20), device="cuda")
    want = [s.strip() for s in args.only.split(",")] if args.only else None

    def wanted(name):
        return want is None or any(name.split()[0] == w for w in want)

    lines = [f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, L2 flushed before every timed call, "
             f"median of {args.samples}; {args.dtype} tensors (KernelBench's, converted); correct = "
             "torch.allclose(atol=rtol=1e-2) against the module" +
             (" with PyTorch's default (TF32 convs)" if dt == torch.float32 else f" in {args.dtype}"), ""]
    if dt == torch.float32:
        lines += ["| problem | correct fp32 / tf32 | cuinline fp32 ms | cuinline tf32 ms | eager TF32 off ms | eager default "
                  "(TF32) ms | torch.compile ms | fp32 vs eager off | tf32 vs eager default | rel L2 cuinline fp32 / tf32 | "
                  "rel L2 eager off / default |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
    else:
        lines += ["| problem | correct | cuinline ms | eager ms | torch.compile ms | vs eager | rel L2 cuinline | "
                  "rel L2 eager |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    failures = 0
    for (name, n, cin, h, w, cout, k, stride, pad, dil, groups, bias, dist) in LEVEL1 + PAST_LIMITS + DEEP_SMALL:
        if not wanted(name):
            continue
        torch.manual_seed(0)
        m = nn.Conv2d(cin, cout, k, stride=stride, padding=pad, dilation=dil, groups=groups, bias=bias).cuda().to(dt)
        x = (torch.randn if dist == "randn" else torch.rand)(n, cin, h, w, device="cuda").to(dt)
        if args.channels_last:
            m = m.to(memory_format=torch.channels_last)
            x = x.to(memory_format=torch.channels_last)
        out_shape = (n, cout) + tuple(conv_out((h, w), m))
        try:
            failures += not run_problem(lib, name, [m], x, None, {}, "", [], out_shape, flush, args, lines)
        except RuntimeError as e:
            failures += 1
            print(f"| {name} | ERROR {e} |", flush=True)
        del m, x
        torch.cuda.empty_cache()
    if wanted("86"):  # depthwise 3x3 pad 1, then pointwise 64 -> 128: two calls
        torch.manual_seed(0)
        dwm = nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False).cuda().to(dt)
        pw = nn.Conv2d(64, 128, 1, bias=False).cuda().to(dt)
        x = torch.randn(16, 64, 512, 512, device="cuda").to(dt)
        failures += not run_problem(lib, "86 depthwise-separable (2 calls)", [dwm, pw], x, None, {}, "", [],
                                    (16, 128, 512, 512), flush, args, lines)
        del dwm, pw, x
        torch.cuda.empty_cache()
    for (name, n, cin, h, w, cout, epilogue, pnames, tail) in LEVEL2:
        if not wanted(name):
            continue
        torch.manual_seed(0)
        m = nn.Conv2d(cin, cout, 3).cuda().to(dt)
        params = {p: torch.randn(cout, 1, 1, device="cuda").to(dt) for p in pnames}  # KernelBench: randn(shape)
        x = torch.rand(n, cin, h, w, device="cuda").to(dt)
        out_shape = (n, cout, h - 2, w - 2)
        try:
            failures += not run_problem(lib, name, [m], x, tail, params, epilogue, [params[p] for p in pnames],
                                        out_shape, flush, args, lines)
        except RuntimeError as e:
            failures += 1
            print(f"| {name} | ERROR {e} |", flush=True)
        del m, x, params
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"{'all problems correct' if failures == 0 else f'{failures} problem(s) FAILED'}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

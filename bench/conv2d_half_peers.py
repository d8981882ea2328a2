#!/usr/bin/env python3
"""f16 / bf16 conv2d -> divide by 2 -> LeakyReLU(0.01): cuinline beside PyTorch eager (cuDNN conv and
the two elementwise ops) and torch.compile, in one process, on the same buffers (issue 19).

Usage: conv2d_half_peers.py --lib build/bench/libcuinline_bench_capi.so [--out half.md] [--no-compile]
                            [--samples 40] [--dtypes f16,bf16] [--shapes seed,resnet,unet]

--dtypes f32 times the same calls in f32 (precision fp32: exact fp32 products; PyTorch with TF32 off
for its convolutions, as the issue's fp32 figures): NCHW on the f32 kernels, channels-last on them
between transposing copies.

Shapes: the seed 128x8x128^2 -> 64 3x3; ResNet-like 32x64x56^2 -> 64 3x3 pad 1; UNet-like
8x128x128^2 -> 128 3x3 pad 1; each in f16 and bf16, NCHW and channels-last (input, weight and output
all channels-last, as model.to(memory_format=torch.channels_last) gives). Every timed call is
preceded by a 256 MiB write (the L2 flushed, as KernelBench does); CUDA events around the call alone,
median of --samples after warm-up. cuinline gets torch's data pointers and stream through ctypes.
Correctness: cuinline and eager each against F.conv2d in float64 (relative L2), cuinline's output
poisoned with NaN first.
"""
import argparse
import ctypes
import math
import sys
import time

import torch
import torch.nn.functional as F
from gpu_timing import l2_flush_buffer, time_ms

SHAPES = [  # name, N, Cin, H=W, Cout, K, stride, padding
    ("seed", 128, 8, 128, 64, 3, 1, 0),
    ("resnet", 32, 64, 56, 64, 3, 1, 1),
    ("unet", 8, 128, 128, 128, 3, 1, 1),
]
KERNELS = {0: "fp32 direct", 1: "tf32 mma", 2: "winograd", 3: "general direct", 4: "f16/bf16 mma"}
DTYPES = {"f16": (torch.float16, 1), "bf16": (torch.bfloat16, 2), "f32": (torch.float32, 0)}


def load_lib(path):
    lib = ctypes.CDLL(path)
    lib.cuinline_conv2d_any.restype = ctypes.c_int
    lib.cuinline_conv2d_any.argtypes = [ctypes.c_void_p] * 4 + [
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ctypes.c_double, ctypes.c_double, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    lib.cuinline_conv2d_last_error.restype = ctypes.c_char_p
    return lib


def model(x, w, b, stride, pad):
    return F.leaky_relu(F.conv2d(x, w, b, stride, pad) / 2.0, 0.01)


class Case:
    def __init__(self, shape, dtype_name, nhwc):
        self.name, self.n, self.cin, self.hw, self.cout, self.k, self.stride, self.pad = shape
        self.dtype_name, self.nhwc = dtype_name, nhwc
        dt, self.dt_code = DTYPES[dtype_name]
        g = torch.Generator(device="cuda").manual_seed(1)
        fmt = torch.channels_last if nhwc else torch.contiguous_format
        bound = 1.0 / math.sqrt(self.cin * self.k * self.k)
        self.x = torch.randn(self.n, self.cin, self.hw, self.hw, device="cuda", generator=g).to(dt)
        self.w = ((torch.rand(self.cout, self.cin, self.k, self.k, device="cuda", generator=g) * 2 - 1) * bound).to(dt)
        self.b = ((torch.rand(self.cout, device="cuda", generator=g) * 2 - 1) * bound).to(dt)
        self.x = self.x.contiguous(memory_format=fmt)
        self.w = self.w.contiguous(memory_format=fmt)
        self.o = (self.hw + 2 * self.pad - self.k) // self.stride + 1
        self.y = torch.empty(self.n, self.cout, self.o, self.o, device="cuda", dtype=dt).contiguous(memory_format=fmt)
        self.shape_arr = (ctypes.c_int64 * 7)(self.n, self.cin, self.hw, self.hw, self.cout, self.k, self.k)
        self.params_arr = (ctypes.c_int * 6)(self.stride, self.stride, self.pad, self.pad, 1, 1)
        self.layouts = 7 if nhwc else 0
        self.kernel = ctypes.c_int(-1)

    def label(self):
        return (f"{self.name} {self.n}x{self.cin}x{self.hw}² → {self.cout} k{self.k} s{self.stride} p{self.pad} "
                f"{self.dtype_name} {'NHWC' if self.nhwc else 'NCHW'}")

    def eager(self):
        return model(self.x, self.w, self.b, self.stride, self.pad)

    def cuinline(self, lib, kernel=None):
        stream = torch.cuda.current_stream().cuda_stream
        rc = lib.cuinline_conv2d_any(self.x.data_ptr(), self.w.data_ptr(), self.b.data_ptr(), self.y.data_ptr(),
                                     self.shape_arr, self.params_arr, self.dt_code, self.layouts, 1, 2.0, 0.01,
                                     stream, kernel)
        if rc != 0:
            raise RuntimeError(lib.cuinline_conv2d_last_error().decode())
        return self.y

    def reference(self):
        # float64, contiguous (cuDNN's double kernels are NCHW); compared elementwise whatever the layout.
        d = torch.float64
        x, w = self.x.to(d).contiguous(), self.w.to(d).contiguous()
        return F.leaky_relu(F.conv2d(x, w, self.b.to(d), self.stride, self.pad) / 2.0, 0.01)


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--dtypes", default="f16,bf16", help="comma-separated: f16, bf16, f32")
    ap.add_argument("--shapes", default="seed,resnet,unet", help="comma-separated: seed, resnet, unet")
    args = ap.parse_args()
    dtypes = [d for d in args.dtypes.split(",") if d]
    shapes = [sh for sh in SHAPES if sh[0] in args.shapes.split(",")]
    for d in dtypes:
        if d not in DTYPES:
            sys.exit(f"unknown dtype {d} (f16, bf16, f32)")
    # f32: exact fp32 convolutions in PyTorch too (its default allows TF32 in cuDNN convolutions).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    lib = load_lib(args.lib)
    flush = l2_flush_buffer()
    lines = [f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, L2 flushed before every timed call, "
             f"median of {args.samples}",
             "",
             "| shape | cuinline kernel | cuinline ms | eager ms | torch.compile ms (compile s) | vs eager | "
             "vs compile | rel L2 cuinline | rel L2 eager |",
             "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for shape in shapes:
        for dtype_name in dtypes:
            for nhwc in (False, True):
                case = Case(shape, dtype_name, nhwc)
                case.y.fill_(float("nan"))
                got = case.cuinline(lib, ctypes.byref(case.kernel)).clone()
                ref = case.reference()
                err = rel_l2(got, ref)
                err_eager = rel_l2(case.eager(), ref)
                del ref
                t_cu = time_ms(lambda: case.cuinline(lib), flush, args.samples, warmup=5)
                t_eager = time_ms(case.eager, flush, args.samples, warmup=5)
                t_comp, comp_s = None, None
                if not args.no_compile:
                    try:
                        # A fresh compile a case, static shapes: dynamo's per-function recompile limit
                        # (8) and its automatic dynamic shapes would otherwise change what is timed.
                        torch._dynamo.reset()
                        compiled = torch.compile(model, dynamic=False)
                        t0 = time.time()
                        compiled(case.x, case.w, case.b, case.stride, case.pad)
                        torch.cuda.synchronize()
                        comp_s = time.time() - t0
                        t_comp = time_ms(lambda: compiled(case.x, case.w, case.b, case.stride, case.pad), flush, args.samples, warmup=5)
                    except Exception as e:  # noqa: BLE001 - a peer that does not run is reported, not fatal
                        print(f"torch.compile failed: {str(e).splitlines()[0][:100]}", file=sys.stderr)
                comp = f"{t_comp:.4f} ({comp_s:.0f})" if t_comp is not None else "-"
                vs_comp = f"{t_comp / t_cu:.2f}x" if t_comp is not None else "-"
                line = (f"| {case.label()} | {KERNELS.get(case.kernel.value % 10, '?')}{' + transposes' if case.kernel.value >= 10 else ''} | {t_cu:.4f} | {t_eager:.4f} | "
                        f"{comp} | {t_eager / t_cu:.2f}x | {vs_comp} | {err:.2e} | {err_eager:.2e} |")
                print(line, flush=True)
                lines.append(line)
                del case
                torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

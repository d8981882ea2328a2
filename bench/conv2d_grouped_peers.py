"""Grouped and depthwise conv2d (F.conv2d's groups) through the C API (libcuinline.so,
cuinline_conv2d_grouped) on PyTorch tensors and PyTorch's current stream, beside PyTorch eager
(cuDNN conv + relu) and torch.compile, with the L2 flushed before every timed call (median of
--samples after warm-up), and the error of each against float64.

Usage: conv2d_grouped_peers.py --lib build-shared/libcuinline.so [--out grouped.md] [--no-compile]
"""
import argparse
import ctypes
import sys

import torch
import torch.nn.functional as F

from conv2d_half_peers import time_ms  # (L2 flushed before each timed call, median)
from torch_capi_check import Tensor, desc  # (a cuinline_tensor of a torch tensor)

SHAPES = [  # name, N, Cin, H=W, Cout, K, stride, padding, groups
    ("MobileNetV2 dw", 32, 144, 56, 144, 3, 1, 1, 144),
    ("MobileNetV2 dw s2", 32, 144, 56, 144, 3, 2, 1, 144),
    ("MobileNetV2 dw", 32, 384, 14, 384, 3, 1, 1, 384),
    ("EfficientNet dw 5x5", 32, 240, 28, 240, 5, 1, 2, 240),
    ("ConvNeXt dw 7x7", 32, 96, 56, 96, 7, 1, 3, 96),
    ("ResNeXt g32", 32, 256, 28, 256, 3, 1, 1, 32),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_conv2d_grouped.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
        ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4 + (1 << 20), device="cuda")
    lines = [f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, L2 flushed before every timed call, "
             f"median of {args.samples}; epilogue relu (eager: F.relu(F.conv2d(...)))", "",
             "| shape | dtype | layout | cuinline ms | eager ms | torch.compile ms | vs eager | vs compile | "
             "rel L2 cuinline | rel L2 eager |", "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name, n, c, hw, k, kk, stride, pad, groups in SHAPES:
        for dt in (torch.float32, torch.float16):
            for fmt in (torch.contiguous_format, torch.channels_last):
                g = torch.Generator(device="cuda").manual_seed(3)
                x = torch.randn(n, c, hw, hw, device="cuda", generator=g).to(dt).contiguous(memory_format=fmt)
                w = (torch.randn(k, c // groups, kk, kk, device="cuda", generator=g) * 0.2).to(dt)
                w = w.contiguous(memory_format=fmt)
                b = torch.randn(k, device="cuda", generator=g).to(dt)
                o = (hw + 2 * pad - kk) // stride + 1
                y = torch.empty(n, k, o, o, device="cuda", dtype=dt).contiguous(memory_format=fmt)
                st, pd, one = (ctypes.c_int * 2)(stride, stride), (ctypes.c_int * 2)(pad, pad), (ctypes.c_int * 2)(1, 1)
                dx, dw, db, dy = desc(x), desc(w), desc(b), desc(y)

                def ours():
                    rc = lib.cuinline_conv2d_grouped(dx, dw, db, None, dy, st, pd, one, groups, b"relu", b"fp32",
                                                     ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
                    if rc != 0:
                        raise RuntimeError(lib.cuinline_last_error().decode())

                def eager():
                    return F.relu(F.conv2d(x, w, b, stride, pad, 1, groups))

                ours()
                ref = F.relu(F.conv2d(x.double(), w.double(), b.double(), stride, pad, 1, groups))
                err = ((y.double() - ref).norm() / ref.norm()).item()
                err_e = ((eager().double() - ref).norm() / ref.norm()).item()
                t_ours = time_ms(ours, flush, args.samples)
                t_eager = time_ms(eager, flush, args.samples)
                t_comp = None
                if not args.no_compile and dt == torch.float16:  # (f16 only: a compile per case)
                    torch._dynamo.reset()  # (a fresh compile a case: no recompile limit across shapes)
                    comp = torch.compile(eager)
                    t_comp = time_ms(comp, flush, args.samples)
                layout = "NHWC" if fmt == torch.channels_last else "NCHW"
                comp_s = f"{t_comp:.4f}" if t_comp is not None else "-"
                vs_comp = f"{t_comp / t_ours:.2f}x" if t_comp is not None else "-"
                line = (f"| {name} {n}x{c}x{hw}² → {k} k{kk} s{stride} g{groups} | {str(dt)[6:]} | {layout} | "
                        f"{t_ours:.4f} | {t_eager:.4f} | {comp_s} | {t_eager / t_ours:.2f}x | {vs_comp} | "
                        f"{err:.2e} | {err_e:.2e} |")
                print(line, flush=True)
                lines.append(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())

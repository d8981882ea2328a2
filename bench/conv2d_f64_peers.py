"""float64 conv2d through cuinline's C API beside PyTorch's own float64 conv (cuDNN) and a
device-to-device copy of the output's bytes, L2 flushed before every timed call (CUDA events, median).

Each row: the conv + bias + LeakyReLU(0.01) on float64 tensors, NCHW or channels-last; PyTorch eager
is F.leaky_relu(F.conv2d(...)) (two kernels); the rel L2 error of each against the other in the same
row (both compute in double). torch.compile is not measured: for float64 it calls the same cuDNN
convolution and fuses only the activation.

Usage: conv2d_f64_peers.py --lib build-shared/libcuinline.so [--out f64.md] [--repeat 30]
"""
import argparse
import ctypes

import torch
import torch.nn.functional as F

from torch_capi_check import Tensor, desc  # (a cuinline_tensor of a torch tensor)

SHAPES = [
    # name, N, Cin, H, W, Cout, K, stride, pad, groups
    ("seed 3x3 (N=32)", 32, 8, 128, 128, 64, 3, 1, 0, 1),
    ("ResNet-like 3x3 pad 1", 32, 64, 56, 56, 64, 3, 1, 1, 1),
    ("1x1 256 -> 64", 16, 256, 28, 28, 64, 1, 1, 0, 1),
    ("depthwise 3x3 (MobileNet)", 32, 64, 56, 56, 64, 3, 1, 1, 64),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_conv2d_ex.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
        ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    one = (ctypes.c_int * 2)(1, 1)

    def timed(fn):
        for _ in range(3):
            fn()
        times = []
        for _ in range(args.repeat):
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        return times[len(times) // 2]

    rows = [f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, float64, L2 flushed, median of "
            f"{args.repeat} (ms)", "",
            "| shape | layout | cuinline | PyTorch eager (cuDNN + leaky_relu) | D2D copy of the output | rel L2 between them |",
            "|---|---|---|---|---|---|"]
    for name, n, c, h, w, k, kk, stride, pad, groups in SHAPES:
        for cl in (False, True):
            fmt = torch.channels_last if cl else torch.contiguous_format
            x = torch.randn(n, c, h, w, device="cuda", dtype=torch.float64).contiguous(memory_format=fmt)
            wt = (torch.randn(k, c // groups, kk, kk, device="cuda", dtype=torch.float64) * 0.2).contiguous(
                memory_format=fmt)
            bias = torch.randn(k, device="cuda", dtype=torch.float64)
            ref = F.leaky_relu(F.conv2d(x, wt, bias, stride, pad, 1, groups), 0.01)
            out = torch.full_like(ref, float("nan")).contiguous(memory_format=fmt)
            copy_dst = torch.empty_like(out)
            dx, dw, db, dy = desc(x), desc(wt), desc(bias), desc(out)
            st, pd = (ctypes.c_int * 2)(stride, stride), (ctypes.c_int * 2)(pad, pad)

            def ours():
                rc = lib.cuinline_conv2d_ex(dx, dw, db, None, dy, st, pd, one, groups, b"leaky_relu(0.01)", None, 0,
                                            b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
                if rc != 0:
                    raise RuntimeError(lib.cuinline_last_error().decode())

            ours()
            torch.cuda.synchronize()
            err = ((out - ref).norm() / ref.norm()).item()
            t_ours = timed(ours)
            t_eager = timed(lambda: F.leaky_relu(F.conv2d(x, wt, bias, stride, pad, 1, groups), 0.01))
            t_copy = timed(lambda: copy_dst.copy_(out))
            row = (f"| {name} {n}x{c}x{h}x{w} -> {k} | {'channels-last' if cl else 'NCHW'} | {t_ours:.4f} | "
                   f"{t_eager:.4f} | {t_copy:.4f} | {err:.2e} |")
            print(row, flush=True)
            rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

"""1 x 1 convolutions (NCHW input, stride 1: cuinline's pointwise form) against their peers, same run:
relu(conv2d(x, w, b)) in f16, bf16 and f32 (cuinline tf32 on the form; fp32 on its FMA kernels) beside
PyTorch eager in that dtype (f32: TF32 off and on; cudnn.benchmark on), optionally torch.compile, and a device-to-device copy that moves
the same bytes (the input read and the output written: the memory floor). L2 flushed before each
timed call (64 MiB zeroed), CUDA events, median of --samples after 5 warm-up calls. Correctness:
relative L2 error against float64 (first two images) beside eager's.

Usage: pointwise_peers.py --lib build-shared/libcuinline.so [--out pw.md] [--compile] [--tag label]
(run it again with CUINLINE_CONV2D_POINTWISE=0 and another --tag for the kernels it replaced)
"""
import argparse
import ctypes
import sys

import torch
import torch.nn.functional as F

from conv2d_half_peers import time_ms  # (L2 flushed before each timed call, median)
from torch_capi_check import Tensor, desc  # (a cuinline_tensor of a torch tensor)

# name, N, Cin, H, W, Cout
SHAPES = [
    ("KernelBench 87 pointwise", 16, 64, 1024, 1024, 128),
    ("ResNet-50 conv2 reduce 256->64", 32, 256, 56, 56, 64),
    ("ResNet-50 conv2 expand 64->256", 32, 64, 56, 56, 256),
    ("ResNet-50 conv3 reduce 512->128", 32, 512, 28, 28, 128),
    ("ResNet-50 conv4 expand 256->1024", 32, 256, 14, 14, 1024),
    ("MobileNetV2 project 144->24", 32, 144, 56, 56, 24),
    ("UNet-like 1x1 128->128", 8, 128, 128, 128, 128),
]
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--tag", default="cuinline")
    ap.add_argument("--only", help="comma-separated indices into SHAPES")
    ap.add_argument("--dtypes", default="f16,bf16,f32")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_conv2d_ex.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
        ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    one, zero = (ctypes.c_int * 2)(1, 1), (ctypes.c_int * 2)(0, 0)
    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True  # (cuDNN's fastest algorithm for each shape, as KernelBench's runs)
    dev = torch.cuda.get_device_name(0)
    lines = [f"# 1x1 conv2d ({args.tag}; {dev}; torch {torch.__version__}; L2 flushed, median of {args.samples})", "",
             "| shape | dtype | mode | cuinline ms | eager ms | eager TF32 ms | torch.compile ms | copy floor ms | "
             "vs eager | of floor | rel L2 cuinline / eager |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    ok_all = True
    shapes = SHAPES if not args.only else [SHAPES[int(i)] for i in args.only.split(",")]
    for name, n, cin, h, w, cout in shapes:
        for dname in args.dtypes.split(","):
            dt = DTYPES[dname]
            g = torch.Generator(device="cuda").manual_seed(7)
            x = torch.randn(n, cin, h, w, device="cuda", generator=g).to(dt)
            wt = (torch.randn(cout, cin, 1, 1, device="cuda", generator=g) / cin ** 0.5).to(dt)
            b = torch.randn(cout, device="cuda", generator=g).to(dt)
            y = torch.full((n, cout, h, w), float("nan"), device="cuda", dtype=dt)
            copy_src = torch.empty((x.numel() + y.numel()) * x.element_size() // 2, dtype=torch.uint8, device="cuda")
            copy_dst = torch.empty_like(copy_src)
            ref = torch.relu(F.conv2d(x[:2].double(), wt.double(), b.double()))

            def eager():
                return torch.relu(F.conv2d(x, wt, b))
            err_eager = ((eager()[:2].double() - ref).norm() / ref.norm()).item()
            t_eager = time_ms(eager, flush, args.samples)
            t_eager_tf32 = None
            if dt == torch.float32:
                torch.backends.cudnn.allow_tf32 = True
                t_eager_tf32 = time_ms(eager, flush, args.samples)
                torch.backends.cudnn.allow_tf32 = False
            t_comp = None
            if args.compile:
                torch._dynamo.reset()
                comp = torch.compile(eager)
                t_comp = time_ms(comp, flush, args.samples)
            t_copy = time_ms(lambda: copy_dst.copy_(copy_src), flush, args.samples)
            dx, dw, db, dy = desc(x), desc(wt), desc(b), desc(y)
            for mode in (("fp32", "tf32") if dt == torch.float32 else ("fp32",)):
                y.fill_(float("nan"))
                prec = mode.encode()

                def ours():
                    rc = lib.cuinline_conv2d_ex(dx, dw, db, None, dy, one, zero, one, 1, b"relu", None, 0, prec,
                                                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
                    if rc != 0:
                        raise RuntimeError(lib.cuinline_last_error().decode())
                ours()
                torch.cuda.synchronize()
                err = ((y[:2].double() - ref).norm() / ref.norm()).item()
                bound = {"f16": 2e-3, "bf16": 1.6e-2}.get(dname, 2e-3 if mode == "tf32" else 1e-5)
                ok = err < max(bound, 2.5 * err_eager) and not torch.isnan(y).any().item()
                ok_all &= ok
                t = time_ms(ours, flush, args.samples)
                tf32_s = f"{t_eager_tf32:.4f}" if t_eager_tf32 is not None else "-"
                comp_s = f"{t_comp:.4f}" if t_comp is not None else "-"
                peer = t_eager_tf32 if mode == "tf32" else t_eager
                row = (f"| {name} {n}x{cin}x{h}x{w}->{cout} | {dname} | {mode if dt == torch.float32 else '-'} | "
                       f"{t:.4f} | {t_eager:.4f} | {tf32_s} | {comp_s} | {t_copy:.4f} | {peer / t:.2f}x | "
                       f"{100 * t_copy / t:.0f} % | {err:.1e} / {err_eager:.1e}{'' if ok else ' FAIL'} |")
                lines.append(row)
                print(row, flush=True)
            del x, wt, b, y, copy_src, copy_dst, ref
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    print("all correct" if ok_all else "SOME FAILED", flush=True)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())

"""The activation steps as elementwise ops, through cuinline's C API (cuinline_apply) on PyTorch tensors and
PyTorch's current stream, beside PyTorch eager, torch.compile and a device copy of the same bytes, in the
same run: each step alone and after a bias row (the fused bias + activation of a linear layer), f32 / bf16
/ f16 on 8192 x 8192. CUDA events, L2 flushed (a 256 MiB write) before each timed call, median of 20.
Every output is also compared with eager's bit for bit (the "same bits" column).

Usage: activation_peers.py --lib build-shared/libcuinline.so [--compile] [--ops gelu,silu] [--dtypes f32,bf16]
"""
import argparse
import ctypes
import sys

import torch
import torch.nn.functional as F

from conv2d_half_peers import time_ms  # (L2 flushed before each timed call, median)
from torch_capi_check import Tensor, bits_equal, desc

OPS = {
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "mish": F.mish, "softplus": F.softplus, "elu": F.elu,
    "hardswish": F.hardswish, "softsign": F.softsign, "tanhshrink": F.tanhshrink, "logsigmoid": F.logsigmoid,
    "hardshrink": F.hardshrink, "softshrink": F.softshrink, "selu": F.selu, "celu": F.celu,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--ops", default="sigmoid,tanh,silu,gelu,gelu_tanh,mish,softplus,elu,hardswish")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_apply.argtypes = [ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.POINTER(Tensor),
                                   ctypes.c_int, ctypes.c_void_p]

    def call(text, ins, outs):
        ia = (Tensor * len(ins))(*[desc(t) for t in ins])
        oa = (Tensor * len(outs))(*[desc(t) for t in outs])
        keep = (ia, oa)

        def run():
            st = lib.cuinline_apply(text.encode(), keep[0], len(ins), keep[1], len(outs),
                                    ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if st != 0:
                raise RuntimeError(lib.cuinline_last_error().decode())
        return run

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; 8192 x 8192, L2 flushed, median of 20")
    print("| op | dtype | cuinline ms | of the copy's bandwidth | eager ms | torch.compile ms | vs eager | vs compile | "
          "same bits as eager |")
    print("|---|---|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for dt_name in args.dtypes.split(","):
        dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dt_name]
        x = torch.randn(8192, 8192, device="cuda", dtype=dt) * 3
        row = torch.randn(8192, device="cuda", dtype=dt)
        y = torch.full_like(x, float("nan"))
        copy = time_ms(lambda: y.copy_(x), flush, 20)
        for name in args.ops.split(","):
            fn = OPS[name]
            for text, ins, eager in ((name, [x], lambda: fn(x)), (f"add(in1)|{name}", [x, row], lambda: fn(x + row))):
                y.fill_(float("nan"))
                run = call(text, ins, [y])
                run()
                torch.cuda.synchronize()
                bad, _ = bits_equal(y, eager())
                ours = time_ms(run, flush, 20)
                e_ms = time_ms(eager, flush, 20)
                c_ms = None
                if args.compile:
                    torch._dynamo.reset()
                    comp = torch.compile(eager)
                    c_ms = time_ms(comp, flush, 20)
                c_s = f"{c_ms:.4f}" if c_ms is not None else "-"
                vs_c = f"{c_ms / ours:.2f}x" if c_ms is not None else "-"
                # The copy moves x once each way; a bias row adds 32 KiB, nothing at this size.
                print(f"| `{text}` | {dt_name} | {ours:.4f} | {100 * copy / ours:.0f} % | {e_ms:.4f} | {c_s} | "
                      f"{e_ms / ours:.2f}x | {vs_c} | {'yes' if bad == 0 else f'NO ({bad})'} |", flush=True)
        del x, y, row
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

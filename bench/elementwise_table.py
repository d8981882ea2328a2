"""The bf16 table form of the elementwise kernels (docs/ops-families.md, "The bf16 table form") through
cuinline's C API (cuinline_apply) on PyTorch tensors and PyTorch's current stream: each chain's
generic kernel (policy generic) and specialized kernel (policy sync) beside a device copy of one
tensor, and with --peers PyTorch eager and torch.compile, in one process. CUDA events, L2 flushed
before each timed call, median of 30. Input 0 starts with every bf16 bit pattern (the values outside
the table), then torch.randn; `add(in1)` adds a row, `mul(in1)` a column. Each row ends with the
SHA-256 of the specialized output (16 hex digits) and whether the generic output has the same bits:
run it on two libraries (each in its own process) and compare the digests to see that a change kept
the bits.

Usage: elementwise_table.py --lib build-shared/libcuinline.so [--tag new] [--peers]
           [--ops gelu,add(in1)|gelu] [--shapes 8192x28672,4096x4096] [--dtypes bf16,f16]
"""
import argparse
import ctypes
import hashlib

import torch
import torch.nn.functional as F

from gpu_timing import time_ms
from torch_capi_check import Tensor, desc

ASYNC, SYNC, GENERIC = 0, 1, 2

# op -> (inputs: "x", "row" or "col" after x, the PyTorch peer)
CHAINS = {
    "gelu": ((), F.gelu),
    "add(in1)|gelu": (("row",), lambda a, r: F.gelu(a + r)),
    "add(in1)|mul(2)|gelu": (("row",), lambda a, r: F.gelu((a + r) * 2)),
    "mul(in1)|silu": (("col",), lambda a, c: F.silu(a * c)),
    "mish": ((), F.mish),
    "softplus": ((), F.softplus),
    "elu": ((), F.elu),
    "selu": ((), F.selu),
    "logsigmoid": ((), F.logsigmoid),
    "log": ((), torch.log),
    "silu|tanh": ((), lambda a: torch.tanh(F.silu(a))),
    "gelu_tanh": ((), lambda a: F.gelu(a, approximate="tanh")),
    "silu": ((), F.silu),
    "sigmoid": ((), torch.sigmoid),
    "tanh": ((), torch.tanh),
    "exp": ((), torch.exp),
    "softsign": ((), F.softsign),
    "tanhshrink": ((), F.tanhshrink),
    "relu": ((), torch.relu),
}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tag", default="")
    ap.add_argument("--peers", action="store_true", help="PyTorch eager and torch.compile beside each chain")
    ap.add_argument("--ops", default=",".join(CHAINS))
    ap.add_argument("--shapes", default="8192x28672,4096x4096")
    ap.add_argument("--dtypes", default="bf16")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_apply.argtypes = [ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.POINTER(Tensor),
                                   ctypes.c_int, ctypes.c_void_p]

    def apply(op, ins, outs):
        ia = (Tensor * len(ins))(*[desc(t) for t in ins])
        oa = (Tensor * len(outs))(*[desc(t) for t in outs])
        st = lib.cuinline_apply(op.encode(), ia, len(ins), oa, len(outs),
                                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if st != 0:
            raise RuntimeError(f"cuinline_apply({op}): {lib.cuinline_last_error().decode()}")

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    ops = [o for o in args.ops.split(",") if o]
    for o in ops:
        if o not in CHAINS:
            raise SystemExit(f"--ops: unknown chain {o!r} (known: {', '.join(CHAINS)})")
    torch.manual_seed(0)
    print(f"{'tag':<6} {'shape':<11} {'dtype':<5} {'op':<22} {'copy':>7} {'generic':>16} {'specialized':>16} "
          f"{'eager':>7} {'compile':>7}  sha / generic == specialized")
    for name in args.dtypes.split(","):
        dtype = DTYPES[name]
        for shape in args.shapes.split(","):
            rows, cols = (int(d) for d in shape.split("x"))
            a = torch.randn(rows, cols, device="cuda", dtype=dtype)
            if rows * cols >= 65536:
                a.view(-1)[:65536] = torch.arange(65536, device="cuda", dtype=torch.int32).to(torch.int16).view(dtype)
            operands = {"row": torch.randn(cols, device="cuda", dtype=dtype),
                        "col": torch.randn(rows, 1, device="cuda", dtype=dtype)}
            out, ref = torch.empty_like(a), torch.empty_like(a)
            t_copy = time_ms(lambda: out.copy_(a), flush, samples=30)
            for op in ops:
                extra, peer = CHAINS[op]
                ins = [a] + [operands[e] for e in extra]
                assert lib.cuinline_set_jit_policy(GENERIC) == 0
                apply(op, ins, [out])
                t_gen = time_ms(lambda: apply(op, ins, [out]), flush, samples=30)
                assert lib.cuinline_set_jit_policy(SYNC) == 0
                apply(op, ins, [ref])
                t_spec = time_ms(lambda: apply(op, ins, [ref]), flush, samples=30)
                torch.cuda.synchronize()
                same = bool((out.view(torch.int16) == ref.view(torch.int16)).all())
                digest = hashlib.sha256(ref.view(torch.int16).cpu().numpy().tobytes()).hexdigest()[:16]
                t_e = t_c = float("nan")
                if args.peers:
                    t_e = time_ms(lambda: peer(*ins), flush, samples=30)
                    compiled = torch.compile(peer)
                    compiled(*ins)
                    t_c = time_ms(lambda: compiled(*ins), flush, samples=30)
                pct = lambda t: f"{t:.4f} ({t_copy / t * 100:3.0f}%)"
                print(f"{args.tag:<6} {shape:<11} {name:<5} {op:<22} {t_copy:7.4f} {pct(t_gen):>16} {pct(t_spec):>16} "
                      f"{t_e:7.4f} {t_c:7.4f}  {digest} {'yes' if same else 'NO'}", flush=True)
            del a, out, ref, operands
            torch.cuda.empty_cache()
    assert lib.cuinline_set_jit_policy(ASYNC) == 0


if __name__ == "__main__":
    main()

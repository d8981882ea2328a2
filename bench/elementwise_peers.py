#!/usr/bin/env python3
"""cuinline's elementwise ops beside PyTorch, on the same buffers, in one process.

Loads libcuinline_bench_capi.so (bench/capi_elementwise.cpp) with ctypes and passes torch tensors'
data_ptr() and torch's current stream, so both run in the same primary context on the same memory.

  1. exactness: cuinline vs torch bit for bit (random data + NaN, ±Inf, ±0, subnormals, largest
     finite), f32/f16/bf16/f64, odd sizes, pointer offsets, in place, strided views;
  2. bandwidth at 4096 x 393216 (f32, f16, bf16): device-to-device copy (the ceiling), torch relu /
     leaky_relu / two-pass div+leaky, cuinline relu / leaky_relu / div_leaky_relu (CUDA events
     after warm-up, medians, candidates interleaved round-robin);
  3. a size sweep 2^10 ... 2^31 (f32 relu; rotating buffers larger than L2 for small sizes) and a
     PNG plot of bandwidth vs size;
  4. host cost per call at 1024 elements: cuinline (C++ loop), raw cuLaunchKernel, torch.relu.

Writes a markdown table to --table and the plot to --plot; the log goes to stdout.
--selftest checks the ctypes signatures against the library without a GPU; --dry-run runs the
whole script on the CPU with a stand-in for cuinline (checks the script, not cuinline).
"""
import argparse
import ctypes
import sys

DTYPE_CODES = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3}
CHAIN = "add(0.5)|sub(0.25)|mul(3)|div(3)|relu|sub(1)|leaky_relu(0.1)|clamp(-0.05,6)"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default="build-gpu/bench/libcuinline_bench_capi.so")
    p.add_argument("--table", help="markdown output file")
    p.add_argument("--plot", help="PNG output file")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=393216)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--min-log2", type=int, default=10)
    p.add_argument("--max-log2", type=int, default=31)
    p.add_argument("--sections", default="exact,host,bandwidth,sweep",
                   help="comma-separated subset of exact,host,bandwidth,sweep")
    p.add_argument("--selftest", action="store_true", help="check the ctypes bindings only (no GPU)")
    p.add_argument("--dry-run", action="store_true", help="CPU stand-in for cuinline and CUDA (script check)")
    args = p.parse_args(argv)
    if not args.selftest and not args.table:
        p.error("--table is required")
    args.sections = set(x.strip() for x in args.sections.split(",") if x.strip())
    if not args.sections <= {"exact", "host", "bandwidth", "sweep"}:
        p.error("bad --sections")
    if not 1 <= args.min_log2 <= args.max_log2 <= 34:
        p.error("bad --min-log2/--max-log2")
    return args


def log(*a):
    print(*a, flush=True)


class Cuinline:
    """ctypes bindings of bench/capi_elementwise.cpp."""

    def __init__(self, path, stream_fn):
        c = ctypes
        lib = c.CDLL(path)
        vp, i, ll, d = c.c_void_p, c.c_int, c.c_longlong, c.c_double
        sig = {
            "cuinline_ew_last_error": (c.c_char_p, []),
            "cuinline_ew_op_new": (vp, [c.c_char_p]),
            "cuinline_ew_op_free": (None, [vp]),
            "cuinline_ew_apply": (i, [vp, i, vp, vp, ll, vp]),
            "cuinline_ew_apply_strided": (i, [vp, i, vp, vp, i, c.POINTER(ll), c.POINTER(ll), c.POINTER(ll), vp]),
            "cuinline_ew_relu": (i, [i, vp, vp, ll, vp]),
            "cuinline_ew_leaky_relu": (i, [i, vp, vp, ll, d, vp]),
            "cuinline_ew_div_leaky_relu": (i, [i, vp, vp, ll, d, d, vp]),
            "cuinline_ew_describe": (i, [vp, i, vp, vp, ll, c.c_char_p, i]),
            "cuinline_ew_host_cost": (i, [i, i, vp, vp, ll, vp, i, i, c.POINTER(d)]),
            "cuinline_ew_stats": (None, [c.POINTER(c.c_ulonglong)]),
            "cuinline_ew_kernel_info": (i, [vp, i, vp, vp, ll, c.POINTER(i)]),
        }
        for name, (res, argtypes) in sig.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = argtypes
        self.lib = lib
        self.stream_fn = stream_fn
        self.ops = {}

    def check(self, rc, what):
        if rc != 0:
            raise RuntimeError("%s: %s" % (what, self.lib.cuinline_ew_last_error().decode()))

    def op(self, text):
        if text not in self.ops:
            h = self.lib.cuinline_ew_op_new(text.encode())
            if not h:
                raise RuntimeError("op %r: %s" % (text, self.lib.cuinline_ew_last_error().decode()))
            self.ops[text] = h
        return self.ops[text]

    def describe(self, text, code, pin, pout, n):
        buf = ctypes.create_string_buffer(256)
        self.check(self.lib.cuinline_ew_describe(self.op(text), code, pin, pout, n, buf, 256), "describe")
        return buf.value.decode()

    # Tensor-level calls.
    def apply(self, text, x, y):
        self.check(self.lib.cuinline_ew_apply(self.op(text), code_of(x), x.data_ptr(), y.data_ptr(), x.numel(),
                                              self.stream_fn()), "apply " + text)

    def apply_strided(self, text, x, y):
        ll = ctypes.c_longlong * max(1, x.dim())
        self.check(self.lib.cuinline_ew_apply_strided(
            self.op(text), code_of(x), x.data_ptr(), y.data_ptr(), x.dim(), ll(*x.shape), ll(*x.stride()),
            ll(*y.stride()), self.stream_fn()), "apply_strided " + text)

    def bound(self, which, x, y, a=0.0, b=0.0):
        """A zero-argument callable running one named op on fixed buffers (no per-call Python work
        beyond the ctypes call)."""
        code, px, py, n, s = code_of(x), x.data_ptr(), y.data_ptr(), x.numel(), self.stream_fn()
        lib, check = self.lib, self.check
        if which == "relu":
            return lambda: check(lib.cuinline_ew_relu(code, px, py, n, s), "relu")
        if which == "leaky_relu":
            return lambda: check(lib.cuinline_ew_leaky_relu(code, px, py, n, a, s), "leaky_relu")
        if which == "div_leaky_relu":
            return lambda: check(lib.cuinline_ew_div_leaky_relu(code, px, py, n, a, b, s), "div_leaky_relu")
        raise ValueError(which)

    def host_cost(self, which, x, y, calls=200, batches=31):
        out = ctypes.c_double()
        self.check(self.lib.cuinline_ew_host_cost(which, code_of(x), x.data_ptr(), y.data_ptr(), x.numel(),
                                                  self.stream_fn(), calls, batches, ctypes.byref(out)), "host_cost")
        return out.value

    def kernel_info(self, text, x, y):
        """(registers, local bytes, static shared bytes, max threads, blocks of 256 per SM)."""
        arr = (ctypes.c_int * 5)()
        self.check(self.lib.cuinline_ew_kernel_info(self.op(text), code_of(x), x.data_ptr(), y.data_ptr(),
                                                    x.numel(), arr), "kernel_info")
        return tuple(arr)

    def stats(self):
        arr = (ctypes.c_ulonglong * 3)()
        self.lib.cuinline_ew_stats(arr)
        return tuple(arr)


def code_of(t):
    import torch
    return DTYPE_CODES[{torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                        torch.float64: "f64"}[t.dtype]]


def selftest(args):
    """Bindings against the real library, no GPU: plans on fake pointers, errors, counters."""
    cu = Cuinline(args.lib, lambda: None)
    fake_in, fake_out = 0x7F0000000000, 0x7F1000000000
    d = cu.describe("relu", 0, fake_in + 4, fake_out + 4, 1001)
    assert d.startswith("relu<f32,v4,i32> head=3"), d
    d = cu.describe(CHAIN, 1, fake_in, fake_out, 2**31 + 3)
    assert "<f16,v8,i64>" in d, d
    d = cu.describe("expr(x > 0 ? x : x * s; s=0.01)", 2, fake_in, fake_out + 2, 77)
    assert "<bf16,v1,i32>" in d, d
    assert not cu.lib.cuinline_ew_op_new(b"nonsense(")
    assert "nonsense" in cu.lib.cuinline_ew_last_error().decode()
    rc = cu.lib.cuinline_ew_relu(0, None, fake_out, 10, None)
    assert rc == 1 and "null" in cu.lib.cuinline_ew_last_error().decode(), rc
    assert cu.lib.cuinline_ew_relu(0, None, None, 0, None) == 0  # 0 elements: nothing, no error
    rc = cu.lib.cuinline_ew_leaky_relu(0, fake_in, fake_in + 4, 10, 0.01, None)
    assert rc == 1 and "overlaps" in cu.lib.cuinline_ew_last_error().decode(), rc
    ll = ctypes.c_longlong * 2
    rc = cu.lib.cuinline_ew_apply_strided(cu.op("relu"), 0, None, fake_out, 2, ll(3, 4), ll(1, 3), ll(4, 1), None)
    assert rc == 1, rc
    assert len(cu.stats()) == 3
    arr = (ctypes.c_int * 5)()
    assert cu.lib.cuinline_ew_kernel_info(cu.op("relu"), 0, None, fake_out, 10, arr) == 1
    log("selftest: ctypes bindings OK (%s)" % args.lib)


def main(argv):
    args = parse_args(argv)
    if args.selftest:
        selftest(args)
        return 0
    import elementwise_peers_run as run  # the measurement sections (bench/elementwise_peers_run.py)
    return run.main(args, Cuinline)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The first call of a never-seen variant, and the generic kernels against the specialized ones, through
libcuinline.so's C API on PyTorch tensors and PyTorch's current stream (docs/jit.md).

  first calls  wall time of call + synchronize for never-seen elementwise chains under each policy (a
               fresh process with an empty cache: run with CUINLINE_CACHE_DIR pointing at a new
               directory), then 100 new chains back to back (the slowest single call), and when the
               specialized kernels were all swapped in (jit_stats)
  bandwidth    [8192, 28672] f32 and bf16: a device copy, the generic kernel, the specialized kernel,
               PyTorch eager and torch.compile on relu, add(in1)|gelu, mul(k)|leaky_relu; CUDA events,
               L2 flushed before each timed call, medians
  correctness  generic == specialized bit for bit on the bandwidth shapes (NaN == NaN)
  conv2d       the first call of never-seen conv2d variants under async and sync, and the generic conv2d
               kernel's time against the specialized one's (CUDA events, medians; the largest
               difference of their outputs relative to the largest output) on 2x12x50² -> 20 3x3 f32,
               8x64x40² -> 96 3x3 f16 channels-last, a depthwise 3x3 bf16 channels-last and the seed
               model's 128x8x128² -> 64 3x3 f32

Usage: CUINLINE_CACHE_DIR=$(mktemp -d) python3 bench/jit_first_call.py path/to/libcuinline.so [--no-compile-peer]
"""
import ctypes
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from gpu_timing import time_ms

F32, F16, BF16, F64 = 0, 1, 2, 3
DTYPES = {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16, torch.float64: F64}
ASYNC, SYNC, GENERIC = 0, 1, 2


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


class JitStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("generic_launches", "submitted", "pending", "swaps", "background_failures", "sync_waits")]


def desc(t):
    shape = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.dim(), 1))(*t.stride())
    d = Tensor(t.data_ptr(), DTYPES[t.dtype], t.dim(), shape, strides)
    d._keep = (shape, strides)
    return d


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_apply.argtypes = [ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.POINTER(Tensor),
                                   ctypes.c_int, ctypes.c_void_p]
    ip2 = ctypes.c_int * 2
    lib.cuinline_conv2d_grouped.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ip2, ip2, ip2, ctypes.c_int,
                                                                             ctypes.c_char_p, ctypes.c_char_p,
                                                                             ctypes.c_void_p]
    compile_peer = "--no-compile-peer" not in sys.argv
    dev = torch.cuda.get_device_name(0)
    print(f"device {dev}, torch {torch.__version__}, cache {os.environ.get('CUINLINE_CACHE_DIR')}")

    def apply(op, ins, outs):
        ia = (Tensor * len(ins))(*[desc(t) for t in ins])
        oa = (Tensor * len(outs))(*[desc(t) for t in outs])
        st = lib.cuinline_apply(op.encode(), ia, len(ins), oa, len(outs),
                                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if st != 0:
            raise RuntimeError(f"cuinline_apply({op}): {lib.cuinline_last_error().decode()}")

    def stats():
        s = JitStats()
        assert lib.cuinline_get_jit_stats(ctypes.byref(s)) == 0
        return s

    # ---- first calls ------------------------------------------------------------------------------
    # The process's driver and PyTorch are warm (as in an application); NVRTC is prewarmed at start-up
    # as docs/jit.md advises (prewarm runs on a background thread).
    lib.cuinline_prewarm()
    x = torch.randn(64, 4096, device="cuda")
    y = torch.empty_like(x)
    b = torch.randn(4096, device="cuda")
    xb = x.to(torch.bfloat16)
    yb = torch.empty_like(xb)
    torch.cuda.synchronize()
    time.sleep(1.0)  # let prewarm finish: the figure below is the call, not NVRTC's start-up
    seq = [0]

    def fresh(tail):
        seq[0] += 1
        return f"mul({1.0 + seq[0] * 1e-6:.7f})|{tail}"

    def first_call(policy, op, ins, outs):
        assert lib.cuinline_set_jit_policy(policy) == 0
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        apply(op, ins, outs)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    print("\nfirst call of a never-seen variant (call + synchronize, ms)")
    print(f"{'variant':<34} {'async':>8} {'sync':>8}")
    for name, tail, ins, outs in [("unary f32 mul(k)|leaky_relu(0.02)", "leaky_relu(0.02)", [x], [y]),
                                  ("unary bf16 mul(k)|gelu", "gelu", [xb], [yb]),
                                  ("2-input f32 add(in1)|mul(k)|gelu", None, [x, b], [y])]:
        row = []
        for policy in (ASYNC, SYNC):
            op = fresh(tail) if tail else f"add(in1)|mul({1.0 + (seq[0] + 1) * 1e-6:.7f})|gelu"
            if not tail:
                seq[0] += 1
            row.append(first_call(policy, op, ins, outs))
        print(f"{name:<34} {row[0]:8.2f} {row[1]:8.2f}")

    lib.cuinline_wait_for_specializations()
    assert lib.cuinline_set_jit_policy(ASYNC) == 0
    before = stats()
    t_start = time.perf_counter()
    worst = 0.0
    calls = []
    for i in range(100):
        op = fresh(["gelu", "leaky_relu(0.1)", "sigmoid|mul(2)", "silu"][i % 4])
        t0 = time.perf_counter()
        apply(op, [x], [y])
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) * 1e3
        calls.append(dt)
        worst = max(worst, dt)
    t_served = time.perf_counter()
    lib.cuinline_wait_for_specializations()
    t_done = time.perf_counter()
    after = stats()
    print(f"\n100 never-seen chains back to back (async): slowest call {worst:.2f} ms, median "
          f"{statistics.median(calls):.3f} ms, all served in {(t_served - t_start) * 1e3:.1f} ms; specialized "
          f"kernels all loaded {(t_done - t_start) * 1e3:.0f} ms after the first call "
          f"(swaps +{after.swaps - before.swaps}, failures +{after.background_failures - before.background_failures},"
          f" generic launches +{after.generic_launches - before.generic_launches})")

    # ---- conv2d: first calls, generic vs specialized -------------------------------------------------
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    conv_section(lib, stats, flush)

    # ---- bandwidth: generic vs specialized ---------------------------------------------------------

    def timed(fn, reps=30):
        return time_ms(fn, flush, samples=reps)

    def bits_equal(a, b):
        if a.dtype == torch.bfloat16 or a.dtype == torch.float16:
            ai, bi = a.view(torch.int16), b.view(torch.int16)
        else:
            ai, bi = a.view(torch.int32), b.view(torch.int32)
        both_nan = torch.isnan(a) & torch.isnan(b)
        return bool(((ai == bi) | both_nan).all())

    print("\n[8192, 28672]: ms (share of a device copy's bandwidth)")
    print(f"{'op':<28} {'copy':>7} {'generic':>16} {'specialized':>16} {'eager':>16} {'compile':>16}  generic==spec")
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(8192, 28672, device="cuda", dtype=dtype)
        row_b = torch.randn(28672, device="cuda", dtype=dtype)
        out = torch.empty_like(a)
        ref = torch.empty_like(a)
        t_copy = timed(lambda: out.copy_(a))
        cases = [("relu", "relu", [a], lambda: torch.relu(a)),
                 ("add(in1)|gelu", "add(in1)|gelu", [a, row_b], lambda: F.gelu(a + row_b)),
                 ("mul(0.5)|leaky_relu(0.02)", "mul(0.5)|leaky_relu(0.02)", [a],
                  lambda: F.leaky_relu(a * 0.5, 0.02))]
        for name, op, ins, eager in cases:
            assert lib.cuinline_set_jit_policy(GENERIC) == 0
            t_gen = timed(lambda: apply(op, ins, [out]))
            apply(op, ins, [out])
            assert lib.cuinline_set_jit_policy(SYNC) == 0
            apply(op, ins, [ref])
            t_spec = timed(lambda: apply(op, ins, [ref]))
            torch.cuda.synchronize()
            same = bits_equal(out, ref)
            t_eager = timed(eager)
            t_comp = float("nan")
            if compile_peer:
                comp = torch.compile(eager)
                t_comp = timed(comp)
            pct = lambda t: f"{t:7.3f} ({t_copy / t * 100:4.0f}%)"
            print(f"{name + ' ' + str(dtype).replace('torch.', ''):<28} {t_copy:7.3f} {pct(t_gen):>16} "
                  f"{pct(t_spec):>16} {pct(t_eager):>16} {pct(t_comp):>16}  {'yes' if same else 'NO'}")
        del a, out, ref
        torch.cuda.empty_cache()
    assert lib.cuinline_set_jit_policy(ASYNC) == 0


def conv_section(lib, stats, flush):
    def conv(x, w, b, y, pad, groups, epilogue):
        st = lib.cuinline_conv2d_grouped(ctypes.byref(desc(x)), ctypes.byref(desc(w)), ctypes.byref(desc(b)), None,
                                         ctypes.byref(desc(y)), (ctypes.c_int * 2)(1, 1),
                                         (ctypes.c_int * 2)(pad, pad), (ctypes.c_int * 2)(1, 1), groups,
                                         epilogue.encode(), None, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if st != 0:
            raise RuntimeError(f"cuinline_conv2d_grouped({epilogue}): {lib.cuinline_last_error().decode()}")

    def timed(fn, reps=30):
        return time_ms(fn, flush, samples=reps)

    # (name, n, cin, h = w, cout, groups, dtype, channels-last, padding); the last: the seed model's conv
    shapes = [("2x12x50^2 -> 20 3x3 f32", 2, 12, 50, 20, 1, torch.float32, False, 1),
              ("8x64x40^2 -> 96 3x3 f16 NHWC", 8, 64, 40, 96, 1, torch.float16, True, 1),
              ("8x96x56^2 dw 3x3 bf16 NHWC", 8, 96, 56, 96, 96, torch.bfloat16, True, 1),
              ("seed 128x8x128^2 -> 64 3x3 f32", 128, 8, 128, 64, 1, torch.float32, False, 0)]
    seq = [0]

    def fresh():
        seq[0] += 1
        return f"mul({1.0 + seq[0] * 2.0 ** -20:.9f})|leaky_relu(0.01)"

    print("\nconv2d: first call of a never-seen variant (call + synchronize, ms); generic vs specialized kernel "
          "(CUDA events, L2 flushed, median ms)")
    print(f"{'shape':<32} {'async':>8} {'sync':>8} {'generic':>9} {'specialized':>12} {'ratio':>6} {'max diff':>9}")
    for name, n, cin, hw, cout, groups, dtype, nhwc, pad in shapes:
        mf = torch.channels_last if nhwc else torch.contiguous_format
        x = torch.randn(n, cin, hw, hw, device="cuda", dtype=dtype).to(memory_format=mf)
        w = torch.randn(cout, cin // groups, 3, 3, device="cuda", dtype=dtype).to(memory_format=mf)
        b = torch.randn(cout, device="cuda", dtype=dtype)
        ohw = hw + 2 * pad - 2
        y = torch.empty(n, cout, ohw, ohw, device="cuda", dtype=dtype).to(memory_format=mf)
        ref = torch.empty_like(y)
        row = []
        for policy in (ASYNC, SYNC):
            ep = fresh()
            assert lib.cuinline_set_jit_policy(policy) == 0
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            conv(x, w, b, y, pad, groups, ep)
            torch.cuda.synchronize()
            row.append((time.perf_counter() - t0) * 1e3)
        lib.cuinline_wait_for_specializations()
        ep = fresh()
        assert lib.cuinline_set_jit_policy(GENERIC) == 0
        t_gen = timed(lambda: conv(x, w, b, y, pad, groups, ep))
        assert lib.cuinline_set_jit_policy(SYNC) == 0
        conv(x, w, b, ref, pad, groups, ep)
        t_spec = timed(lambda: conv(x, w, b, ref, pad, groups, ep))
        torch.cuda.synchronize()
        diff = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        print(f"{name:<32} {row[0]:8.2f} {row[1]:8.2f} {t_gen:9.4f} {t_spec:12.4f} {t_gen / t_spec:6.2f} {diff:9.1e}")
    assert lib.cuinline_set_jit_policy(ASYNC) == 0
    print(f"(jit_stats: generic launches {stats().generic_launches}, swaps {stats().swaps})")


if __name__ == "__main__":
    main()

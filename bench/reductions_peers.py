"""The row reductions (softmax, log_softmax, rms_norm, add_rms_norm, layer_norm) from Python through
the C API (ctypes, include/cuinline/cuinline.h) on PyTorch tensors: checks, then timings beside
PyTorch eager and torch.compile in the same process and a device copy of the same bytes.

Checks (CHECK ok/FAIL; exit 1 on any FAIL):
  - each op in each dtype over row lengths 1 .. 2^20 + 3 (warp, block and looped forms) and a strided
    input: the error against float64 is at most twice PyTorch's own error (or the dtype's floor);
    add_rms_norm's residual bit for bit torch's x + residual;
  - special values: a row with NaN, a row with +inf, a row all -inf: NaN where torch.softmax has NaN;
  - a call captured in torch.cuda.graph, replayed on new data, equal to the eager call.
Timings: CUDA events, the L2 flushed (a 256 MiB write) before each timed call, median of 30 after
warm-up; torch.compile (static shapes) in bf16 only, its compile per op and shape being the cost; GB/s counts the bytes each op must move (x read, y written; add_rms_norm also the residual
read and written).
Fused chains (cuinline_rows_run): softmax with prologue "mul(0.125)" and rms_norm with epilogue
"mul(in1)" (a gate tensor) against the plain op, checked against PyTorch's two eager ops, timed as
above: the fused call's time over the plain call's, and its GB/s over the plain op's (the gate is
one more tensor to read) — the chain's cost; and the unfused pair (the plain op, then torch's mul).
Liger-Kernel (--liger, the liger-kernel package installed): its Triton forward of each op but
log_softmax (LigerSoftmaxFunction, LigerRMSNormFunction with casting mode "llama",
LigerFusedAddRMSNormFunction, LigerLayerNormFunction) in one more column, timed the same way.
QuACK (--quack, the quack-kernels package and its CuTe DSL installed): its forward of each op but
log_softmax (quack.softmax._softmax_fwd; quack.rmsnorm._rmsnorm_fwd for rms_norm, add_rms_norm with
residual and residual_out, and layer_norm with is_layernorm), into buffers made once, in one more
column timed the same way; its result's error against float64 is printed beside ours once a cell.
The timings run under the sync JIT policy (CUINLINE_JIT_POLICY, unless set): every call runs the
specialized kernel.
--jit (alone, in a fresh process with an empty CUINLINE_CACHE_DIR): the JIT's no-wait path
(docs/jit.md): the first call of never-seen variants (a new prologue constant each) under async and
sync, wall time of call + synchronize; then each op's generic kernel (the generic policy, before the
specialized one exists in the process) against its specialized kernel (sync), CUDA events as above,
and whether their outputs are the same bits.
Usage: python3 bench/reductions_peers.py --lib path/to/libcuinline.so [--table out.md] [--no-compile]
       [--fused-only | --no-fused] [--liger] [--quack] [--jit] [--shapes ROWSxN,...] [--dtypes bf16,f32]
       [--ops softmax,...] [--no-checks] [--no-eager]
"""
import argparse
import ctypes
import os
import sys
import time

import torch
import torch.nn.functional as F
from gpu_timing import l2_flush_buffer, time_ms

DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}
ASYNC, SYNC, GENERIC = 0, 1, 2
failures = 0
os.environ.setdefault("CUINLINE_JIT_POLICY", "sync")  # read once, at the library's first use


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


def desc(t):
    if t is None:
        return None
    shape = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.dim(), 1))(*t.stride())
    d = Tensor(t.data_ptr(), DTYPES[t.dtype], t.dim(), shape, strides)
    d._keep = (shape, strides)
    return ctypes.byref(d), d


def check(name, ok, detail=""):
    global failures
    print(f"CHECK {'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        failures += 1


class RowsParams(ctypes.Structure):
    T = ctypes.POINTER(Tensor)
    _fields_ = [("size", ctypes.c_size_t), ("op", ctypes.c_char_p), ("input", T), ("output", T), ("weight", T),
                ("bias", T), ("residual", T), ("eps", ctypes.c_double), ("prologue", ctypes.c_char_p),
                ("epilogue", ctypes.c_char_p), ("num_epilogue_inputs", ctypes.c_int), ("epilogue_inputs", T),
                ("stream", ctypes.c_void_p)]


class Ops:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.cuinline_last_error.restype = ctypes.c_char_p
        T, D, S = ctypes.POINTER(Tensor), ctypes.c_double, ctypes.c_void_p
        sigs = {"cuinline_softmax": [T, T, S], "cuinline_log_softmax": [T, T, S],
                "cuinline_rms_norm": [T, T, T, D, S], "cuinline_add_rms_norm": [T, T, T, T, D, S],
                "cuinline_layer_norm": [T, T, T, T, D, S]}
        for name, args in sigs.items():
            getattr(self.lib, name).argtypes = args
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.cuinline_rows_run.argtypes = [ctypes.POINTER(RowsParams)]
        self.lib.cuinline_rows_run.restype = ctypes.c_int

    def _call(self, name, *args):
        keep = [desc(a) if isinstance(a, torch.Tensor) or a is None else a for a in args]
        cargs = [k[0] if isinstance(k, tuple) else k for k in keep]
        rc = getattr(self.lib, name)(*cargs, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"{name}: {rc} {self.lib.cuinline_last_error().decode()}")

    def run(self, op, x, out, w=None, b=None, res=None, eps=1e-6):
        if op == "softmax":
            self._call("cuinline_softmax", x, out)
        elif op == "log_softmax":
            self._call("cuinline_log_softmax", x, out)
        elif op == "rms_norm":
            self._call("cuinline_rms_norm", x, w, out, ctypes.c_double(eps))
        elif op == "add_rms_norm":
            self._call("cuinline_add_rms_norm", x, res, w, out, ctypes.c_double(eps))
        else:
            self._call("cuinline_layer_norm", x, w, b, out, ctypes.c_double(eps))

    def rows_call(self, op, x, out, w=None, eps=1e-6, prologue=None, epilogue=None, extras=(), b=None, res=None):
        """A call of cuinline_rows_run with its parameters built once (so a timing holds the call only)."""
        ds = [desc(t)[1] if t is not None else None for t in (x, out, w, b, res)]
        exs = [desc(t)[1] for t in extras]
        arr = (Tensor * max(len(exs), 1))(*exs)
        P = lambda d: ctypes.pointer(d) if d is not None else None
        p = RowsParams(ctypes.sizeof(RowsParams), op.encode(), P(ds[0]), P(ds[1]), P(ds[2]),
                       P(ds[3]), P(ds[4]), eps, prologue.encode() if prologue else None,
                       epilogue.encode() if epilogue else None, len(exs),
                       ctypes.cast(arr, ctypes.POINTER(Tensor)) if exs else None,
                       torch.cuda.current_stream().cuda_stream)
        keep = (ds, exs, arr, p)

        def call():
            rc = self.lib.cuinline_rows_run(ctypes.byref(keep[3]))
            if rc != 0:
                raise RuntimeError(f"cuinline_rows_run: {rc} {self.lib.cuinline_last_error().decode()}")
        return call


def torch_op(op, x, w=None, b=None, res=None, eps=1e-6):
    """PyTorch's result (add_rms_norm: (normalized, new residual), as vLLM's unfused reference)."""
    n = x.shape[-1]
    if op == "softmax":
        return torch.softmax(x, -1)
    if op == "log_softmax":
        return torch.log_softmax(x, -1)
    if op == "rms_norm":
        return F.rms_norm(x, (n,), w, eps)
    if op == "add_rms_norm":
        z = x + res
        return F.rms_norm(z, (n,), w, eps), z
    return F.layer_norm(x, (n,), w, b, eps)


OPS = ["softmax", "log_softmax", "rms_norm", "add_rms_norm", "layer_norm"]


def inputs(op, rows, n, dt, stride_pad=0):
    base = torch.randn(rows, n + stride_pad, device="cuda", dtype=dt) * 3
    x = base[:, :n]
    w = torch.randn(n, device="cuda", dtype=dt) if op not in ("softmax", "log_softmax") else None
    b = torch.randn(n, device="cuda", dtype=dt) if op == "layer_norm" else None
    res = torch.randn(rows, n, device="cuda", dtype=dt) if op == "add_rms_norm" else None
    return x, w, b, res


def max_err(got, ref):
    d = (got.double() - ref).abs() / (ref.abs() + 1e-3)
    d = torch.where(torch.isnan(ref) & torch.isnan(got.double()), torch.zeros_like(d), d)
    return float(d.max().item()) if d.numel() else 0.0


def checks(ops):
    floors = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float64: 1e-12}
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        for rows, n, pad in ((5, 1, 0), (33, 7, 0), (64, 1000, 0), (16, 4096, 8), (4, 16384, 0), (3, 32768, 0),
                             (2, (1 << 20) + 3, 0)):
            for op in OPS:
                torch.manual_seed(rows * 1000 + n)
                x, w, b, res = inputs(op, rows, n, dt, pad)
                out = torch.full((rows, n), float("nan"), device="cuda", dtype=dt)
                eps = 1e-5
                ref64 = torch_op(op, x.double(), None if w is None else w.double(), None if b is None else b.double(),
                                 None if res is None else res.double(), eps)
                theirs = torch_op(op, x, w, b, res, eps)
                res_before = None if res is None else res.clone()
                ops.run(op, x, out, w, b, res, eps)
                torch.cuda.synchronize()
                name = f"{op} {str(dt).split('.')[-1]} [{rows}, {n}]{' strided' if pad else ''}"
                if op == "add_rms_norm":
                    z = x + res_before
                    check(name + " residual", torch.equal(res, z))
                    ref64 = torch_op("rms_norm", z.double(), w.double(), eps=eps)
                    theirs = theirs[0]
                e_ours, e_torch = max_err(out, ref64), max_err(theirs, ref64)
                check(name, e_ours <= max(2 * e_torch, floors[dt]), f"err {e_ours:.2e} (torch {e_torch:.2e})")
    # Special values: NaN exactly where torch.softmax has it.
    for dt in (torch.float32, torch.bfloat16):
        for n in (100, 3000, 70000):
            x = torch.randn(4, n, device="cuda", dtype=dt)
            x[0, n // 3] = float("nan")
            x[1, n // 2] = float("inf")
            x[2, :] = float("-inf")
            x[3, ::2] = float("-inf")
            for op in ("softmax", "log_softmax"):
                out = torch.empty_like(x)
                ops.run(op, x, out)
                ref = torch_op(op, x)
                torch.cuda.synchronize()
                same_nan = torch.equal(out.isnan(), ref.isnan())
                fin = ~ref.isnan()
                check(f"{op} special values {str(dt).split('.')[-1]} n={n}",
                      same_nan and torch.allclose(out[fin].double(), ref[fin].double(), rtol=2e-2, atol=1e-6))
    # torch.cuda.graph: capture (the variant's first call inside it), replay on new data.
    for op in OPS:
        x, w, b, res = inputs(op, 64, 5000, torch.bfloat16)
        out = torch.empty(64, 5000, device="cuda", dtype=torch.bfloat16)
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                ops.run(op, x, out, w, b, res, 1e-5)
        torch.cuda.current_stream().wait_stream(s)
        x.copy_(torch.randn_like(x))
        res0 = None if res is None else res.clone()
        out.fill_(float("nan"))
        g.replay()
        expect = torch.empty_like(out)
        res1 = None if res0 is None else res0.clone()
        ops.run(op, x, expect, w, b, res1, 1e-5)
        torch.cuda.synchronize()
        check(f"{op} torch.cuda.graph replay", torch.equal(out, expect) and (res is None or torch.equal(res, res1)))


def liger_op(op):
    """Liger-Kernel's forward for op (Triton), or None where it has none (log_softmax) or is not installed."""
    try:
        from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except ImportError:
        return None
    if op == "softmax":
        return lambda x, w, b, res, eps: LigerSoftmaxFunction.apply(x)
    if op == "rms_norm":
        return lambda x, w, b, res, eps: LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)
    if op == "add_rms_norm":
        return lambda x, w, b, res, eps: LigerFusedAddRMSNormFunction.apply(x, res, w, eps)
    if op == "layer_norm":
        return lambda x, w, b, res, eps: LigerLayerNormFunction.apply(x, w, b, eps)
    return None


def quack_op(op, x, w, b, res):
    """QuACK's forward for op (CuTe DSL) as (call, output), writing into buffers made here; None where
    it has none (log_softmax) or is not importable (the reason printed once)."""
    global quack_missing
    try:
        from quack.rmsnorm import _rmsnorm_fwd
        from quack.softmax import _softmax_fwd
    except Exception as err:  # ImportError, or the DSL's own start-up failing
        if not quack_missing:
            print(f"QuACK not importable: {type(err).__name__}: {err}", flush=True)
        quack_missing = True
        return None
    out = torch.empty_like(x)
    if op == "softmax":
        return (lambda: _softmax_fwd(x, out)), out
    if op == "rms_norm":
        return (lambda: _rmsnorm_fwd(x, w, out, None, None, None, None, None, 1e-5, False)), out
    if op == "add_rms_norm":
        res_out = torch.empty_like(res)
        return (lambda: _rmsnorm_fwd(x, w, out, None, None, None, res, res_out, 1e-5, False)), out
    if op == "layer_norm":
        return (lambda: _rmsnorm_fwd(x, w, out, b, None, None, None, None, 1e-5, True)), out
    return None


quack_missing = False
DEFAULT_SHAPES = [(65536, 128), (16384, 1024), (4096, 8192), (1024, 32768), (4, 1 << 22)]


def bench(ops, compile_too, liger=False, dtypes=(torch.bfloat16, torch.float32), shapes=DEFAULT_SHAPES,
          quack=False, op_names=OPS, eager_too=True):
    flush = l2_flush_buffer()
    lines = ["| op | dtype | shape | copy GB/s | cuinline GB/s | eager GB/s | torch.compile GB/s |"
             + (" Liger-Kernel GB/s |" if liger else "") + (" QuACK GB/s |" if quack else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if liger else "") + ("---|" if quack else "")]
    print("\n".join(lines), flush=True)
    for dt in dtypes:
        for rows, n in shapes:
            for op in op_names:
                x, w, b, res = inputs(op, rows, n, dt)
                out = torch.empty_like(x)
                y = torch.empty_like(x)
                nbytes = x.numel() * x.element_size() * (4 if op == "add_rms_norm" else 2)
                copy = time_ms(lambda: y.copy_(x), flush)
                ours = time_ms(lambda: ops.run(op, x, out, w, b, res, 1e-5), flush)
                fn = lambda: torch_op(op, x, w, b, res, 1e-5)
                eager = time_ms(fn, flush) if eager_too else float("nan")
                comp = float("nan")
                if compile_too and dt == torch.bfloat16:  # one dtype: a compile per op and shape
                    compiled = torch.compile(fn)
                    comp = time_ms(compiled, flush)
                lig = float("nan")
                lf = liger_op(op) if liger else None
                if lf is not None:
                    try:
                        with torch.no_grad():
                            lig = time_ms(lambda: lf(x, w, b, res, 1e-5), flush)
                    except RuntimeError as err:  # Liger refuses rows past its Triton block (65536)
                        print(f"Liger-Kernel {op} [{rows}, {n}]: {str(err).splitlines()[0][:120]}", flush=True)
                qk = float("nan")
                qf = quack_op(op, x, w, b, res) if quack else None
                if qf is not None:
                    try:
                        qcall, qout = qf
                        qcall()
                        ops.run(op, x, out, w, b, None if res is None else res.clone(), 1e-5)
                        ref = torch_op(op, x.double(), None if w is None else w.double(),
                                       None if b is None else b.double(), None if res is None else res.double(), 1e-5)
                        ref = ref[0] if isinstance(ref, tuple) else ref
                        print(f"error against float64, {op} [{rows}, {n}]: QuACK {max_err(qout, ref):.2e}, "
                              f"cuinline {max_err(out, ref):.2e}", flush=True)
                        del ref
                        qk = time_ms(qcall, flush)
                    except Exception as err:  # QuACK refuses a shape or dtype, or its compile fails
                        print(f"QuACK {op} [{rows}, {n}]: {type(err).__name__}: {str(err).splitlines()[0][:160]}",
                              flush=True)
                gbs = lambda ms, b=nbytes: b / ms / 1e6
                copy_gbs = 2 * x.numel() * x.element_size() / copy / 1e6
                line = (f"| {op} | {str(dt).split('.')[-1]} | {rows}x{n} | {copy_gbs:.0f} | {gbs(ours):.0f} | "
                        f"{gbs(eager):.0f} | {gbs(comp):.0f} |" + (f" {gbs(lig):.0f} |" if liger else "")
                        + (f" {gbs(qk):.0f} |" if quack else ""))
                lines.append(line)
                print(line, flush=True)
            torch.cuda.empty_cache()
    return lines


def fused(ops):
    """Fused prologue / epilogue against the plain op: checks, then times (see the module's text)."""
    flush = l2_flush_buffer()
    lines = ["| op | chain | dtype | shape | plain ms | fused ms | fused / plain time | fused / plain GB/s | "
             "plain + torch mul ms |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    # The scale 0.125 is a 16-bit storage value (one f16 / bf16 instruction a pair of elements, the
    # variant's layouts those of the plain op); 1 / sqrt(128) is not (a float product and a rounding).
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        for rows, n in ((65536, 128), (16384, 1024), (4096, 8192), (1024, 32768), (4, 1 << 22)):
            for op, pro, epi in (("softmax", "mul(0.125)", None), ("softmax", f"mul({128 ** -0.5!r})", None),
                                 ("rms_norm", None, "mul(in1)")):
                x, w, _, _ = inputs(op, rows, n, dt)
                gate = torch.randn(rows, n, device="cuda", dtype=dt) if epi else None
                extras = (gate,) if epi else ()
                out, plain = torch.empty_like(x), torch.empty_like(x)
                run_plain = ops.rows_call(op, x, plain, w, 1e-5)
                run_fused = ops.rows_call(op, x, out, w, 1e-5, pro, epi, extras)
                run_fused()
                if op == "softmax":
                    scale = float(pro[4:-1])
                    ref64, theirs = torch.softmax(x.double() * scale, -1), torch.softmax(x * scale, -1)
                else:
                    ref64 = F.rms_norm(x.double(), (n,), w.double(), 1e-5) * gate.double()
                    theirs = F.rms_norm(x, (n,), w, 1e-5) * gate
                torch.cuda.synchronize()
                floor = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3.2e-2}[dt]
                e_ours, e_torch = max_err(out, ref64), max_err(theirs, ref64)
                name = f"{op} {pro or epi} {str(dt).split('.')[-1]} [{rows}, {n}]"
                check(name, e_ours <= max(2 * e_torch, floor), f"err {e_ours:.2e} (torch {e_torch:.2e})")
                t_plain = time_ms(run_plain, flush)
                t_fused = time_ms(run_fused, flush)
                t_pair = float("nan")
                if epi:
                    t_pair = time_ms(lambda: (run_plain(), torch.mul(plain, gate)), flush)
                es = x.element_size() * x.numel()
                gbs_ratio = (es * (3 if epi else 2) / t_fused) / (es * 2 / t_plain)
                line = (f"| {op} | {pro or epi} | {str(dt).split('.')[-1]} | {rows}x{n} | {t_plain:.4f} | {t_fused:.4f} | "
                        f"{t_fused / t_plain:.3f} | {gbs_ratio:.3f} | {t_pair:.4f} |")
                lines.append(line)
                print(line, flush=True)
            torch.cuda.empty_cache()
    return lines


class JitStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("generic_launches", "submitted", "pending", "swaps", "background_failures", "sync_waits")]


def jit(ops):
    """First calls under async and sync, then the generic kernels against the specialized ones."""
    lib = ops.lib
    lib.cuinline_prewarm()
    torch.cuda.synchronize()
    time.sleep(1.0)  # NVRTC's start-up done: the figures are the calls'
    seq = [0]

    def fresh():
        seq[0] += 1
        return f"mul({1.0 + seq[0] * 2.0 ** -20:.9f})"

    def stats():
        st = JitStats()
        assert lib.cuinline_get_jit_stats(ctypes.byref(st)) == 0
        return st

    print("\nfirst call of a never-seen variant (a new prologue constant; call + synchronize, ms)")
    print(f"{'variant':<40} {'async':>8} {'sync':>8}")
    for op, dt, rows, n in (("rms_norm", torch.bfloat16, 4096, 4096), ("softmax", torch.float32, 4096, 1024),
                            ("layer_norm", torch.bfloat16, 16384, 1024), ("add_rms_norm", torch.float16, 256, 8192),
                            ("softmax", torch.bfloat16, 4, 1 << 22)):
        x, w, b, res = inputs(op, rows, n, dt)
        out = torch.empty_like(x)
        row = []
        for policy in (ASYNC, SYNC):
            call = ops.rows_call(op, x, out, w, 1e-5, fresh(), None, (), b, res)
            assert lib.cuinline_set_jit_policy(policy) == 0
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            call()
            torch.cuda.synchronize()
            row.append((time.perf_counter() - t0) * 1e3)
        name = f"{op} {str(dt).split('.')[-1]} [{rows}, {n}]"
        print(f"{name:<40} {row[0]:8.2f} {row[1]:8.2f}", flush=True)
    lib.cuinline_wait_for_specializations()
    st = stats()
    print(f"(jit_stats: generic launches {st.generic_launches}, swaps {st.swaps}, failures {st.background_failures})")

    flush = l2_flush_buffer()
    lines = ["| op | dtype | shape | copy GB/s | generic GB/s (% of copy) | specialized GB/s (% of copy) | "
             "generic / specialized time | same bits |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for dt in (torch.bfloat16, torch.float32):
        for rows, n in ((65536, 128), (16384, 1024), (4096, 8192), (1024, 32768), (4, 1 << 22)):
            for op in OPS:
                x, w, b, res = inputs(op, rows, n, dt)
                out, ref = torch.empty_like(x), torch.empty_like(x)
                y = torch.empty_like(x)
                nbytes = x.numel() * x.element_size() * (4 if op == "add_rms_norm" else 2)
                copy = time_ms(lambda: y.copy_(x), flush)
                r0 = res.clone() if res is not None else None
                assert lib.cuinline_set_jit_policy(GENERIC) == 0
                t_gen = time_ms(lambda: ops.run(op, x, out, w, b, res, 1e-5), flush)
                if res is not None:
                    res.copy_(r0)
                ops.run(op, x, out, w, b, res, 1e-5)  # each from the same residual, for the bits below
                assert lib.cuinline_set_jit_policy(SYNC) == 0
                if res is not None:
                    res.copy_(r0)
                ops.run(op, x, ref, w, b, res, 1e-5)
                torch.cuda.synchronize()
                iv = {2: torch.int16, 4: torch.int32}[x.element_size()]
                same = bool(((out.view(iv) == ref.view(iv)) | (torch.isnan(out) & torch.isnan(ref))).all())
                t_spec = time_ms(lambda: ops.run(op, x, ref, w, b, res, 1e-5), flush)
                gbs = lambda ms, b=nbytes: b / ms / 1e6
                copy_gbs = 2 * x.numel() * x.element_size() / copy / 1e6
                line = (f"| {op} | {str(dt).split('.')[-1]} | {rows}x{n} | {copy_gbs:.0f} | "
                        f"{gbs(t_gen):.0f} ({gbs(t_gen) / copy_gbs * 100:.0f} %) | "
                        f"{gbs(t_spec):.0f} ({gbs(t_spec) / copy_gbs * 100:.0f} %) | {t_gen / t_spec:.2f} | "
                        f"{'yes' if same else 'no'} |")
                lines.append(line)
                print(line, flush=True)
            torch.cuda.empty_cache()
    assert lib.cuinline_set_jit_policy(SYNC) == 0
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--table")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--checks-only", action="store_true")
    ap.add_argument("--no-checks", action="store_true", help="timings only (an A/B of knobs)")
    ap.add_argument("--no-eager", action="store_true", help="no PyTorch eager column")
    ap.add_argument("--ops", default=",".join(OPS), help="the timed ops")
    ap.add_argument("--fused-only", action="store_true", help="only the fused chains' checks and timings")
    ap.add_argument("--no-fused", action="store_true", help="no fused chains")
    ap.add_argument("--dtypes", default="bf16,f32", help="the timed dtypes (bf16, f16, f32)")
    ap.add_argument("--liger", action="store_true", help="Liger-Kernel's forward beside (liger-kernel installed)")
    ap.add_argument("--quack", action="store_true", help="QuACK's forward beside (quack-kernels installed)")
    ap.add_argument("--jit", action="store_true", help="only the JIT's first calls and generic kernels")
    ap.add_argument("--shapes", help="the timed shapes, ROWSxN,... (default: "
                    + ",".join(f"{r}x{n}" for r, n in DEFAULT_SHAPES) + ")")
    args = ap.parse_args()
    ops = Ops(args.lib)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    if args.jit:
        lines = jit(ops)
        if args.table:
            with open(args.table, "w") as f:
                f.write("\n".join(lines) + "\n")
        return
    if not args.fused_only and not args.no_checks:
        checks(ops)
    print(f"checks: {failures} failed", flush=True)
    if not args.checks_only:
        dtypes = [{"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[d] for d in args.dtypes.split(",")]
        shapes = DEFAULT_SHAPES if not args.shapes else [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        lines = [] if args.fused_only else bench(ops, not args.no_compile, args.liger, dtypes, shapes, args.quack,
                                                        args.ops.split(","), not args.no_eager)
        if not args.no_fused:
            lines += [""] + fused(ops)
        print(f"checks: {failures} failed", flush=True)
        if args.table:
            with open(args.table, "w") as f:
                f.write("\n".join(lines) + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

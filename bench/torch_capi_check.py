"""cuinline from Python the way an engine calls it: libcuinline.so through ctypes (the C API,
include/cuinline/cuinline.h) on PyTorch tensors and PyTorch's current stream.

Checks (each prints CHECK ok/FAIL; exit 1 on any FAIL):
  - ops on torch tensors bit-identical to torch (relu, leaky_relu, SwiGLU-free chains, bias add);
  - f16 / bf16 NCHW conv2d (the staged path) on a side stream and in torch.cuda.graph;
  - the same ops captured inside torch.cuda.graph (global capture mode, PyTorch's default), first
    call of a variant inside the capture included, replayed on new data, equal to eager;
  - misuse: a CPU tensor, a tensor of another GPU (when there are two) → CUINLINE_ERROR_INVALID_ARGUMENT
    with a message, nothing launched, and the next correct call works (the context is intact);
  - conv2d + bias + residual + relu against F.conv2d (TF32 off);
  - fp32 3x3 conv2d with 8 input channels (Winograd, tensor-core products) with special values, NCHW
    and channels-last, eager and in torch.cuda.graph replayed on new data;
  - f32 channels-last conv2d (the NCHW kernels between transposing copies) on the current stream, a
    side stream and in torch.cuda.graph, bit for bit the NCHW call's;
  - grouped and depthwise conv2d (cuinline_conv2d_grouped) in every dtype, NCHW and channels-last,
    against float64, and in torch.cuda.graph; groups that do not divide the channels refused;
  - with two GPUs, f32 channels-last and f16 NCHW conv2d (a workspace from cuda:1's pool) on tensors
    of cuda:1 and its current stream, eager and in torch.cuda.graph;
  - the activation / math steps (sigmoid, tanh, silu, gelu, gelu_tanh, mish, softplus, elu, selu, celu,
    hardswish, hardsigmoid, hardtanh, relu6, exp, log, sqrt, abs, neg, softsign, tanhshrink, logsigmoid,
    hardshrink, softshrink, threshold, rrelu in evaluation mode) and chains of them bit for bit
    against PyTorch's kernels in every dtype, special values included; after a bias row; in
    torch.cuda.graph; as conv2d epilogues against float64.
Usage: python3 bench/torch_capi_check.py path/to/libcuinline.so
"""
import ctypes
import sys

import torch
import torch.nn.functional as F

F32, F16, BF16, F64 = 0, 1, 2, 3
DTYPES = {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16, torch.float64: F64}
failures = 0


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


def desc(t):
    shape = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.dim(), 1))(*t.stride())
    d = Tensor(t.data_ptr(), DTYPES[t.dtype], t.dim(), shape, strides)
    d._keep = (shape, strides)
    return d


def check(name, ok, detail=""):
    global failures
    print(f"CHECK {'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        failures += 1


LIB = None  # the library under test (main)


def specialized(lib):
    """Waits for the background compiles the eager calls queued (the default `async` policy): the
    eager calls after it run the specialized kernels a graph capture records. Before that a conv2d's
    first calls ran on its generic kernel, whose sums are in another order (elementwise ops' generic
    kernels give the same bits; conv2d's are checked against float64 instead)."""
    if lib.cuinline_wait_for_specializations() != 0:
        raise RuntimeError(lib.cuinline_last_error().decode())


def replays_match(g, x, out, eager):
    """Replays graph g three times, each on new data in x with out poisoned first, and compares out
    with eager(expect) run after it on the same data, once the specialized kernels are loaded. (expect
    is a new tensor: for an output view, another variant than the captured call's, whose first call
    also queues its specialized kernel.)"""
    eager(torch.full_like(out, float("nan")))
    specialized(LIB)
    same = True
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        g.replay()
        expect = torch.full_like(out, float("nan"))
        eager(expect)
        torch.cuda.synchronize()
        same = same and torch.equal(out, expect)
    return same


def bits_equal(out, ref):
    """(mismatches, detail): elements whose bits differ, NaN matching any NaN."""
    ints = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float64: torch.int64}[out.dtype]
    both_nan = out.isnan() & ref.isnan()
    bad = (out.view(ints) != ref.view(ints)) & ~both_nan
    n = int(bad.sum().item())
    detail = ""
    if n:
        idx = bad.nonzero()[:3].flatten().tolist()
        detail = f"{n} of {out.numel()} differ, e.g. " + "; ".join(
            f"got {out.flatten()[i].item()!r} want {ref.flatten()[i].item()!r}" for i in idx)
    return n, detail


def check_functions(lib, apply, apply_ok, conv_ex):
    fns = [("sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("silu", F.silu), ("swish", F.silu), ("gelu", F.gelu),
           ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")), ("mish", F.mish), ("softplus", F.softplus),
           ("softplus(2, 5)", lambda t: F.softplus(t, beta=2, threshold=5)), ("elu", F.elu),
           ("elu(0.3)", lambda t: F.elu(t, 0.3)), ("selu", F.selu), ("celu(1.7)", lambda t: F.celu(t, 1.7)),
           ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid), ("hardtanh", F.hardtanh),
           ("hardtanh(-0.5, 2)", lambda t: F.hardtanh(t, -0.5, 2.0)), ("relu6", F.relu6), ("exp", torch.exp),
           ("log", torch.log), ("sqrt", torch.sqrt), ("abs", torch.abs), ("neg", torch.neg),
           ("softsign", F.softsign), ("tanhshrink", F.tanhshrink), ("logsigmoid", F.logsigmoid),
           ("hardshrink", F.hardshrink), ("hardshrink(0.1)", lambda t: F.hardshrink(t, 0.1)),
           ("softshrink", F.softshrink), ("softshrink(0.3)", lambda t: F.softshrink(t, 0.3)),
           ("threshold(0.1, 20)", lambda t: F.threshold(t, 0.1, 20.0)),
           ("threshold(-1, 0.3)", lambda t: F.threshold(t, -1.0, 0.3)), ("rrelu", lambda t: F.rrelu(t, training=False)),
           ("rrelu(0.1, 0.3)", lambda t: F.rrelu(t, 0.1, 0.3, training=False))]
    chains = [("mish|mish", lambda t: F.mish(F.mish(t))),
              ("add(0.5)|gelu|mul(2)|sigmoid", lambda t: torch.sigmoid(F.gelu(t + 0.5) * 2)),
              ("exp|hardswish|tanh", lambda t: torch.tanh(F.hardswish(torch.exp(t)))),
              ("gelu_tanh|softplus|selu", lambda t: F.selu(F.softplus(F.gelu(t, approximate="tanh")))),
              ("sub(1)|silu|neg|exp", lambda t: torch.exp(-F.silu(t - 1))),
              ("softshrink|logsigmoid|mul(3)|softsign", lambda t: F.softsign(F.logsigmoid(F.softshrink(t)) * 3)),
              ("tanhshrink|threshold(0.5, -1)|gelu", lambda t: F.gelu(F.threshold(F.tanhshrink(t), 0.5, -1.0)))]
    special = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 2.999, -2.999, 20.0, 19.99,
               20.01, 88.5, 89.0, -88.5, -104.0, 9.0, -9.0, 1e-3, -1e-3, 1e-40, -1e-40, 6e-8, -6e-8, 1e-310,
               0.5, -0.5, 0.1, -0.1, 0.3, -0.3, 0.25, -0.25, 2048.0, -2048.0, 3000.0, 65504.0]
    torch.manual_seed(10)
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        n = (1 << 20) + 3  # a scalar tail
        x = torch.cat([torch.tensor(special, dtype=torch.float64), torch.randn(n // 2, dtype=torch.float64) * 4,
                       torch.empty(n - n // 2 - len(special), dtype=torch.float64).uniform_(-30, 30)]).to(dt).cuda()
        for text, fn in fns + chains:
            out = torch.full_like(x, float("nan"))
            apply_ok(text, [x], [out])
            bad, detail = bits_equal(out, fn(x))
            check(f"{text} {dt} == PyTorch bit for bit ({x.numel()} elements, specials included)", bad == 0, detail)
    # A bias row, then the activation (the fused bias + GELU of a linear layer), and gating.
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.randn(1024, 1536, device="cuda", dtype=dt) * 3
        b = torch.randn(1536, device="cuda", dtype=dt)
        g = torch.randn(1024, 1536, device="cuda", dtype=dt)
        o = torch.full_like(a, float("nan"))
        apply_ok("add(in1)|gelu", [a, b], [o])
        bad, detail = bits_equal(o, F.gelu(a + b))
        check(f"add(in1)|gelu {dt} == F.gelu(a + bias) bit for bit", bad == 0, detail)
        apply_ok("add(in1)|silu|mul(in2)", [a, b, g], [o])
        bad, detail = bits_equal(o, F.silu(a + b) * g)
        check(f"add(in1)|silu|mul(in2) {dt} == F.silu(a + bias) * g bit for bit", bad == 0, detail)
    # In torch.cuda.graph: a variant first compiled inside the capture, replayed on new data.
    a = torch.randn(4096, 1024, device="cuda")
    b = torch.randn(1024, device="cuda")
    o = torch.full_like(a, float("nan"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        st = apply("add(in1)|mish|hardsigmoid", [a, b], [o])
    same = st == 0
    for _ in range(3):
        a.copy_(torch.randn_like(a) * 4)
        o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        same = same and bits_equal(o, F.hardsigmoid(F.mish(a + b)))[0] == 0
    check("add(in1)|mish|hardsigmoid in torch.cuda.graph, 3 replays on new data == PyTorch bit for bit", same)
    # A conv2d epilogue (KernelBench's Conv2d_Mish_Mish, Conv2d_GELU, ..., computed in fp32 on the
    # accumulator, rounded once): against float64, PyTorch's own error beside it.
    torch.backends.cudnn.allow_tf32 = False
    for dt, bound in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        for text, fn in (("mish|mish", lambda t: F.mish(F.mish(t))), ("gelu", F.gelu), ("hardswish", F.hardswish),
                         ("sigmoid", torch.sigmoid), ("selu", F.selu), ("softsign", F.softsign),
                         ("logsigmoid|tanhshrink", lambda t: F.tanhshrink(F.logsigmoid(t)))):
            xi = torch.randn(4, 32, 30, 34, device="cuda", dtype=dt)
            wt = (torch.randn(48, 32, 3, 3, device="cuda") * 0.06).to(dt)
            bi = torch.randn(48, device="cuda", dtype=dt)
            out = torch.full((4, 48, 28, 32), float("nan"), device="cuda", dtype=dt)
            st = conv_ex(xi, wt, bi, out, 1, 0, 1, text.encode(), [])
            msg = "" if st == 0 else lib.cuinline_last_error().decode()
            torch.cuda.synchronize()
            ref = fn(F.conv2d(xi.double(), wt.double(), bi.double()))
            err = ((out.double() - ref).norm() / ref.norm()).item()
            theirs = ((fn(F.conv2d(xi, wt, bi)).double() - ref).norm() / ref.norm()).item()
            check(f"conv2d + {text} epilogue {dt} vs float64 (PyTorch {theirs:.2e})",
                  st == 0 and err < bound and not out.isnan().any().item(), f"rel L2 {err:.2e} {msg}")


def main():
    global LIB
    lib = ctypes.CDLL(sys.argv[1])
    LIB = lib
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_version.restype = ctypes.c_char_p
    lib.cuinline_apply.argtypes = [ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.POINTER(Tensor),
                                   ctypes.c_int, ctypes.c_void_p]
    lib.cuinline_conv2d.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]
    lib.cuinline_conv2d_grouped.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
        ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]
    lib.cuinline_conv2d_ex.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
        ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    print("cuinline", lib.cuinline_version().decode(), "torch", torch.__version__, torch.cuda.get_device_name(0))

    def apply(op, ins, outs, stream=None):
        stream = torch.cuda.current_stream().cuda_stream if stream is None else stream
        ia = (Tensor * len(ins))(*[desc(t) for t in ins])
        oa = (Tensor * len(outs))(*[desc(t) for t in outs])
        return lib.cuinline_apply(op.encode(), ia, len(ins), oa, len(outs), ctypes.c_void_p(stream))

    def apply_ok(op, ins, outs):
        st = apply(op, ins, outs)
        if st != 0:
            raise RuntimeError(f"cuinline_apply({op}): status {st}: {lib.cuinline_last_error().decode()}")

    torch.manual_seed(0)
    x = torch.randn(4096, 1000, device="cuda")
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -0.0, 1e-40])
    y = torch.empty_like(x)
    # 1. eager, on torch's current stream, bit-identical to torch.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y.fill_(float("nan"))
        apply_ok("relu", [x], [y])
        ref = torch.relu(x)
    s.synchronize()
    check("relu on a side stream (torch.cuda.stream) == torch.relu", torch.equal(y.nan_to_num(7), ref.nan_to_num(7)))
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.randn(512, 768, device="cuda", dtype=dt)
        b = torch.randn(768, device="cuda", dtype=dt)
        o = torch.empty_like(a)
        apply_ok("add(in1)|relu", [a, b], [o])
        check(f"bias add + relu {dt} == torch.relu(a + b)", torch.equal(o, torch.relu(a + b)))
        apply_ok("div(2)|leaky_relu(0.01)", [a], [o])
        check(f"div_leaky_relu {dt} == F.leaky_relu(a / 2, 0.01)", torch.equal(o, F.leaky_relu(a / 2, 0.01)))

    # 2. inside torch.cuda.graph (global mode), a variant first used in the capture included.
    a = torch.randn(2048, 1024, device="cuda")
    b = torch.randn(1024, device="cuda")
    r = torch.randn(2048, 1024, device="cuda")
    out1, out2 = torch.empty_like(a), torch.empty_like(a)
    apply_ok("add(in1)|mul(in2)", [a, b, r], [out1])  # warm one variant
    g = torch.cuda.CUDAGraph()
    slope = 0.0123456789
    with torch.cuda.graph(g):
        st1 = apply("add(in1)|mul(in2)", [a, b, r], [out1])
        st2 = apply(f"leaky_relu({slope})", [a], [out2])  # compiled inside the capture
    check("capture: both calls returned success", st1 == 0 and st2 == 0, lib.cuinline_last_error().decode())
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        r.copy_(torch.randn_like(r))
        out1.fill_(float("nan"))
        out2.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check("graph replay (new data) == eager torch", torch.equal(out1, (a + b) * r) and
              torch.equal(out2, F.leaky_relu(a, slope)))

    # 3. misuse: nothing launched, a clear error, and the next call works.
    cpu = torch.randn(1000)
    st = apply("relu", [cpu], [cpu])
    msg = lib.cuinline_last_error().decode()
    check("a CPU tensor is refused", st == 1 and "not memory the CUDA driver knows" in msg, msg)
    if torch.cuda.device_count() > 1:
        other = torch.randn(1000, device="cuda:1")
        o = torch.empty_like(other)
        st = apply("relu", [other], [o])  # torch's current stream is on cuda:0
        msg = lib.cuinline_last_error().decode()
        check("a tensor of cuda:1 on cuda:0's stream is refused", st == 1 and "device 1" in msg, msg)
        with torch.cuda.device(1):
            apply_ok("relu", [other], [o])
            torch.cuda.synchronize()
            check("the same call on cuda:1's current stream works", torch.equal(o, torch.relu(other)))
    apply_ok("relu", [x], [y])
    torch.cuda.synchronize()
    check("the context works after the refused calls", torch.equal(y.nan_to_num(7), torch.relu(x).nan_to_num(7)))

    # 4. conv2d + bias + residual + relu against F.conv2d (TF32 off).
    torch.backends.cudnn.allow_tf32 = False
    xi = torch.randn(8, 64, 56, 56, device="cuda")
    w = torch.randn(64, 64, 3, 3, device="cuda") * 0.05
    bias = torch.randn(64, device="cuda")
    res = torch.randn(8, 64, 56, 56, device="cuda")
    out = torch.empty_like(res)
    one = (ctypes.c_int * 2)(1, 1)
    st = lib.cuinline_conv2d(desc(xi), desc(w), desc(bias), desc(res), desc(out), one, one, one, b"relu", b"fp32",
                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    ref = torch.relu(F.conv2d(xi.double(), w.double(), bias.double(), padding=1) + res.double())
    err = ((out.double() - ref).norm() / ref.norm()).item()
    check("conv2d + bias + residual + relu vs float64", st == 0 and err < 1e-5, f"rel L2 {err:.2e}")

    # 4b. fp32 3x3 with 8 input channels (the seed's kind: Winograd F(2x2, 3x3), products on tensor cores
    # in 3xTF32) with a div|leaky_relu epilogue, NCHW and channels-last (input and output), special
    # values in the input, on the current stream and inside torch.cuda.graph replayed on new data.
    xw = torch.randn(16, 8, 66, 70, device="cuda")
    xw.view(-1)[::997] = float("nan")
    xw.view(-1)[5::1009] = float("inf")
    xw.view(-1)[7::1013] = -0.0
    ww = torch.randn(64, 8, 3, 3, device="cuda") * 0.2
    bw = torch.randn(64, device="cuda")
    ref_w = F.leaky_relu(F.conv2d(xw.double(), ww.double(), bw.double()) / 2, 0.01)
    for layout in ("nchw", "nhwc"):
        xl = xw if layout == "nchw" else xw.contiguous(memory_format=torch.channels_last)
        ow = torch.full_like(ref_w, float("nan"), dtype=torch.float32)
        if layout == "nhwc":
            ow = ow.contiguous(memory_format=torch.channels_last)
        st = lib.cuinline_conv2d(desc(xl), desc(ww), desc(bw), None, desc(ow), one, None, one,
                                 b"div(2)|leaky_relu(0.01)", b"fp32",
                                 ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        torch.cuda.synchronize()
        finite = torch.isfinite(ref_w)
        same_nonfinite = torch.equal(torch.isnan(ow), torch.isnan(ref_w)) and torch.equal(
            torch.isinf(ow) & ~torch.isnan(ow), torch.isinf(ref_w))
        err = ((ow.double()[finite] - ref_w[finite]).norm() / ref_w[finite].norm()).item()
        check(f"f32 Winograd-shaped conv2d ({layout}) with NaN/Inf/-0 inputs vs float64",
              st == 0 and err < 1e-5 and same_nonfinite, f"rel L2 {err:.2e} over finite outputs; "
              f"non-finite where the reference has them: {same_nonfinite}")
        og = torch.full_like(ow, float("nan"))
        xg = xl.clone()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            stg = lib.cuinline_conv2d(desc(xg), desc(ww), desc(bw), None, desc(og), one, None, one,
                                      b"div(2)|leaky_relu(0.01)", b"fp32",
                                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        g.replay()
        specialized(lib)
        oe = torch.full_like(ow, float("nan"))
        lib.cuinline_conv2d(desc(xl), desc(ww), desc(bw), None, desc(oe), one, None, one,
                            b"div(2)|leaky_relu(0.01)", b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        torch.cuda.synchronize()
        check(f"f32 Winograd-shaped conv2d ({layout}) in torch.cuda.graph == eager",
              stg == 0 and torch.equal(og.nan_to_num(7), oe.nan_to_num(7)))
        xg.copy_(torch.randn_like(xg))
        g.replay()
        torch.cuda.synchronize()
        ref_new = F.leaky_relu(F.conv2d(xg.double(), ww.double(), bw.double()) / 2, 0.01)
        err = ((og.double() - ref_new).norm() / ref_new.norm()).item()
        check(f"f32 Winograd-shaped conv2d ({layout}) graph replayed on new data vs float64",
              stg == 0 and err < 1e-5, f"rel L2 {err:.2e}")

    # 5. The same block in f16 / bf16 on a model and input moved to torch.channels_last (cuinline reads
    # the layout from the strides: no copy), eagerly and inside torch.cuda.graph, against float64 from
    # the same rounded tensors; PyTorch's own error on the same data beside it.
    for dt, bound in ((torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        name = str(dt).replace("torch.", "")
        xh = xi.to(dt).contiguous(memory_format=torch.channels_last)
        wh = w.to(dt).contiguous(memory_format=torch.channels_last)
        bh, rh = bias.to(dt), res.to(dt).contiguous(memory_format=torch.channels_last)
        oh = torch.empty_like(rh)  # channels-last like the residual
        oh.fill_(float("nan"))
        st = lib.cuinline_conv2d(desc(xh), desc(wh), desc(bh), desc(rh), desc(oh), one, one, one, b"relu", b"fp32",
                                 ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        ref = torch.relu(F.conv2d(xh.double(), wh.double(), bh.double(), padding=1) + rh.double())
        err = ((oh.double() - ref).norm() / ref.norm()).item()
        torch_out = torch.relu(F.conv2d(xh, wh, bh, padding=1) + rh)
        torch_err = ((torch_out.double() - ref).norm() / ref.norm()).item()
        check(f"{name} channels-last conv2d + bias + residual + relu vs float64", st == 0 and err < bound,
              f"rel L2 {err:.2e} (PyTorch {torch_err:.2e}); output channels-last: {oh.is_contiguous(memory_format=torch.channels_last)}")
        og = torch.full_like(oh, float("nan"))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            stg = lib.cuinline_conv2d(desc(xh), desc(wh), desc(bh), desc(rh), desc(og), one, one, one, b"relu",
                                      b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        g.replay()
        specialized(lib)
        oe = torch.full_like(oh, float("nan"))
        lib.cuinline_conv2d(desc(xh), desc(wh), desc(bh), desc(rh), desc(oe), one, one, one, b"relu", b"fp32",
                            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        torch.cuda.synchronize()
        check(f"{name} channels-last conv2d in torch.cuda.graph == eager", stg == 0 and torch.equal(og, oe))

    # 6. f16 / bf16 NCHW tensors (PyTorch's default layout), and a channels-last input with an NCHW
    # weight: cuinline stages channels-last copies in a stream-ordered workspace, then runs the
    # tensor-core kernel. On a side stream made current with torch.cuda.stream, and inside
    # torch.cuda.graph (the workspace becomes the graph's allocation node) replayed on new data.
    side = torch.cuda.Stream()
    for dt, bound in ((torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        name = str(dt).replace("torch.", "")
        for layout in ("nchw", "x:nhwc w:nchw"):
            xh = xi.to(dt)
            if layout != "nchw":
                xh = xh.contiguous(memory_format=torch.channels_last)
            wh, bh, rh = w.to(dt), bias.to(dt), res.to(dt)
            if layout != "nchw":
                rh = rh.contiguous(memory_format=torch.channels_last)
            oh = torch.full_like(rh, float("nan"))
            with torch.cuda.stream(side):
                st = lib.cuinline_conv2d(desc(xh), desc(wh), desc(bh), desc(rh), desc(oh), one, one, one, b"relu",
                                         b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            side.synchronize()
            ref = torch.relu(F.conv2d(xh.double(), wh.double(), bh.double(), padding=1) + rh.double())
            err = ((oh.double() - ref).norm() / ref.norm()).item()
            torch_err = ((torch.relu(F.conv2d(xh, wh, bh, padding=1) + rh).double() - ref).norm() / ref.norm()).item()
            check(f"{name} {layout} conv2d + bias + residual + relu on a side stream vs float64",
                  st == 0 and err < bound, f"rel L2 {err:.2e} (PyTorch {torch_err:.2e})")
            xs, og = xh.clone(), torch.full_like(oh, float("nan"))
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                stg = lib.cuinline_conv2d(desc(xs), desc(wh), desc(bh), desc(rh), desc(og), one, one, one, b"relu",
                                          b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            same = replays_match(g, xs, og, lambda e: lib.cuinline_conv2d(
                desc(xs), desc(wh), desc(bh), desc(rh), desc(e), one, one, one, b"relu", b"fp32",
                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
            check(f"{name} {layout} conv2d in torch.cuda.graph, 3 replays on new data == eager", stg == 0 and same)
    # 7. Up to 8 input channels (the seed, an RGB stem): the halo form reads any layout as it is
    # (no staging copy). The seed's block (8 -> 64 channels, 3 x 3, / 2 -> leaky_relu) on PyTorch's
    # current stream and in torch.cuda.graph replayed on new data; an RGB channels-last input with a 5 x 3
    # filter, padding (2, 1), dilation (1, 2) into an NCHW output on a side stream; against float64.
    zero = (ctypes.c_int * 2)(0, 0)
    for dt, bound in ((torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        name = str(dt).replace("torch.", "")
        xs = torch.randn(16, 8, 64, 128, device="cuda").to(dt)
        ws = (torch.randn(64, 8, 3, 3, device="cuda") * 0.1).to(dt)
        bs = torch.randn(64, device="cuda").to(dt)
        os_ = torch.full((16, 64, 62, 126), float("nan"), device="cuda", dtype=dt)
        epi = b"div(2)|leaky_relu(0.01)"
        st = lib.cuinline_conv2d(desc(xs), desc(ws), desc(bs), None, desc(os_), one, zero, one, epi, b"fp32",
                                 ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        ref = F.leaky_relu(F.conv2d(xs.double(), ws.double(), bs.double()) / 2, 0.01)
        err = ((os_.double() - ref).norm() / ref.norm()).item()
        torch_err = ((F.leaky_relu(F.conv2d(xs, ws, bs) / 2, 0.01).double() - ref).norm() / ref.norm()).item()
        check(f"{name} 8-channel NCHW conv2d / 2 -> leaky_relu (halo form) vs float64", st == 0 and err < bound,
              f"rel L2 {err:.2e} (PyTorch {torch_err:.2e})")
        xg, og = xs.clone(), torch.full_like(os_, float("nan"))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            stg = lib.cuinline_conv2d(desc(xg), desc(ws), desc(bs), None, desc(og), one, zero, one, epi, b"fp32",
                                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        same = replays_match(g, xg, og, lambda e: lib.cuinline_conv2d(
            desc(xg), desc(ws), desc(bs), None, desc(e), one, zero, one, epi, b"fp32",
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
        check(f"{name} 8-channel NCHW conv2d in torch.cuda.graph, 3 replays on new data == eager", stg == 0 and same)
        xr = torch.randn(4, 3, 96, 120, device="cuda").to(dt).contiguous(memory_format=torch.channels_last)
        wr = (torch.randn(24, 3, 5, 3, device="cuda") * 0.2).to(dt)
        pad, dil = (ctypes.c_int * 2)(2, 1), (ctypes.c_int * 2)(1, 2)
        oh, ow = 96, 120 + 2 - 4
        orr = torch.full((4, 24, oh, ow), float("nan"), device="cuda", dtype=dt)
        with torch.cuda.stream(side):
            st = lib.cuinline_conv2d(desc(xr), desc(wr), None, None, desc(orr), one, pad, dil, b"relu", b"fp32",
                                     ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        side.synchronize()
        ref = torch.relu(F.conv2d(xr.double(), wr.double(), padding=(2, 1), dilation=(1, 2)))
        err = ((orr.double() - ref).norm() / ref.norm()).item()
        check(f"{name} RGB channels-last 5x3 conv2d into NCHW on a side stream (halo form) vs float64",
              st == 0 and err < bound, f"rel L2 {err:.2e}")
    # 8. f32 on a model and input moved to torch.channels_last: cuinline runs its f32 NCHW kernels
    # between transposing copies in a stream-ordered workspace. The seed's block (Winograd) and the
    # ResNet block with a channels-last residual (direct kernel), on PyTorch's current stream, on a
    # side stream, and inside torch.cuda.graph replayed on new data; against float64, and bit for bit
    # against the same call on NCHW copies of the tensors.
    torch.backends.cudnn.allow_tf32 = False
    cl = torch.channels_last
    xs = torch.randn(16, 8, 64, 128, device="cuda").contiguous(memory_format=cl)
    ws = (torch.randn(64, 8, 3, 3, device="cuda") * 0.1).contiguous(memory_format=cl)
    bs = torch.randn(64, device="cuda")
    os_ = torch.full((16, 64, 62, 126), float("nan"), device="cuda").contiguous(memory_format=cl)
    epi = b"div(2)|leaky_relu(0.01)"
    st = lib.cuinline_conv2d(desc(xs), desc(ws), desc(bs), None, desc(os_), one, zero, one, epi, b"fp32",
                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    ref = F.leaky_relu(F.conv2d(xs.double(), ws.double(), bs.double()) / 2, 0.01)
    err = ((os_.double() - ref).norm() / ref.norm()).item()
    o_nchw = torch.full((16, 64, 62, 126), float("nan"), device="cuda")
    lib.cuinline_conv2d(desc(xs.contiguous()), desc(ws.contiguous()), desc(bs), None, desc(o_nchw), one, zero, one, epi,
                        b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    check("f32 channels-last conv2d / 2 -> leaky_relu (seed block) vs float64, == the NCHW call",
          st == 0 and err < 1e-5 and torch.equal(os_, o_nchw) and os_.is_contiguous(memory_format=cl),
          f"rel L2 {err:.2e}")
    x32, r32 = xi.contiguous(memory_format=cl), res.contiguous(memory_format=cl)
    w32 = w.contiguous(memory_format=cl)
    o32 = torch.full_like(r32, float("nan"))
    with torch.cuda.stream(side):
        st = lib.cuinline_conv2d(desc(x32), desc(w32), desc(bias), desc(r32), desc(o32), one, one, one, b"relu",
                                 b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    side.synchronize()
    ref = torch.relu(F.conv2d(x32.double(), w32.double(), bias.double(), padding=1) + r32.double())
    err = ((o32.double() - ref).norm() / ref.norm()).item()
    check("f32 channels-last conv2d + bias + channels-last residual + relu on a side stream vs float64",
          st == 0 and err < 1e-5, f"rel L2 {err:.2e}")
    xg, og = xs.clone(memory_format=cl), torch.full_like(os_, float("nan"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        stg = lib.cuinline_conv2d(desc(xg), desc(ws), desc(bs), None, desc(og), one, zero, one, epi, b"fp32",
                                  ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    same = replays_match(g, xg, og, lambda e: lib.cuinline_conv2d(
        desc(xg), desc(ws), desc(bs), None, desc(e), one, zero, one, epi, b"fp32",
        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
    check("f32 channels-last conv2d in torch.cuda.graph, 3 replays on new data == eager", stg == 0 and same)

    # 8b. grouped and depthwise conv2d (cuinline_conv2d_grouped: F.conv2d's groups; the general kernel) in
    # f32 / f16 / bf16, NCHW and channels-last, on PyTorch's current stream against float64 (PyTorch's own
    # error beside it), and a depthwise call inside torch.cuda.graph replayed on new data.
    for dt, bound in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        name = str(dt).replace("torch.", "")
        for (n, c, h, w, k, kk, groups, stride, padding), fmt in (
                ((8, 32, 56, 56, 32, 3, 32, 1, 1), torch.contiguous_format),   # depthwise (MobileNet)
                ((4, 24, 30, 30, 48, 5, 24, 2, 2), cl),                        # depthwise, multiplier 2
                ((2, 64, 20, 20, 128, 3, 8, 1, 1), torch.contiguous_format),   # grouped (ResNeXt)
                ((2, 64, 20, 20, 128, 3, 8, 1, 1), cl)):
            x = torch.randn(n, c, h, w, device="cuda").to(dt).contiguous(memory_format=fmt)
            wt = (torch.randn(k, c // groups, kk, kk, device="cuda") * 0.2).to(dt).contiguous(memory_format=fmt)
            bias = torch.randn(k, device="cuda").to(dt)
            ref = F.relu(F.conv2d(x.double(), wt.double(), bias.double(), stride, padding, 1, groups))
            out = torch.full(ref.shape, float("nan"), device="cuda", dtype=dt).contiguous(memory_format=fmt)
            st_pad = (ctypes.c_int * 2)(stride, stride), (ctypes.c_int * 2)(padding, padding)
            st = lib.cuinline_conv2d_grouped(desc(x), desc(wt), desc(bias), None, desc(out), st_pad[0], st_pad[1], one,
                                             groups, b"relu", b"fp32",
                                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            torch.cuda.synchronize()
            err = ((out.double() - ref).norm() / ref.norm()).item()
            torch_err = ((F.relu(F.conv2d(x, wt, bias, stride, padding, 1, groups)).double() - ref).norm()
                         / ref.norm()).item()
            layout = "channels-last" if fmt == cl else "NCHW"
            msg = lib.cuinline_last_error().decode() if st != 0 else ""
            check(f"{name} {layout} conv2d groups={groups} ({c}->{k}, {kk}x{kk}, s{stride}) + relu vs float64",
                  st == 0 and err < bound, f"rel L2 {err:.2e} (PyTorch {torch_err:.2e}) {msg}")
        xg = torch.randn(4, 32, 28, 28, device="cuda").to(dt)
        wg = (torch.randn(32, 1, 3, 3, device="cuda") * 0.3).to(dt)
        og = torch.full((4, 32, 28, 28), float("nan"), device="cuda", dtype=dt)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            stg = lib.cuinline_conv2d_grouped(desc(xg), desc(wg), None, None, desc(og), one, one, one, 32,
                                              b"leaky_relu(0.1)", b"fp32",
                                              ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        same = replays_match(g, xg, og, lambda e: lib.cuinline_conv2d_grouped(
            desc(xg), desc(wg), None, None, desc(e), one, one, one, 32, b"leaky_relu(0.1)", b"fp32",
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
        ref = F.leaky_relu(F.conv2d(xg.double(), wg.double(), None, 1, 1, 1, 32), 0.1)
        err = ((og.double() - ref).norm() / ref.norm()).item()
        check(f"{name} depthwise conv2d in torch.cuda.graph, 3 replays on new data == eager, vs float64",
              stg == 0 and same and err < bound, f"rel L2 {err:.2e}")
    bad = lib.cuinline_conv2d_grouped(desc(xg), desc(wg), None, None, desc(og), one, one, one, 3, b"relu", b"fp32",
                                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    check("groups that do not divide the channels are refused with a message", bad != 0,
          lib.cuinline_last_error().decode())

    # 8c. epilogues over per-channel operands (cuinline_conv2d_ex: nn.Parameter(torch.randn(C, 1, 1)) as
    # KernelBench's conv + multiplier / bias chains hold them) in every dtype, NCHW and channels-last, on
    # PyTorch's current stream against float64 (PyTorch's own error beside it); inside torch.cuda.graph
    # replayed on new data; an operand of the wrong shape refused with a message and nothing written.
    def conv_ex(x, wt, bias, out, stride, padding, groups, epi, operands, precision=b"fp32"):
        keep = [desc(t) for t in operands]
        arr = (Tensor * len(keep))(*keep) if keep else None
        st_pad = (ctypes.c_int * 2)(stride, stride), (ctypes.c_int * 2)(padding, padding)
        return lib.cuinline_conv2d_ex(desc(x), desc(wt), desc(bias) if bias is not None else None, None, desc(out),
                                      st_pad[0], st_pad[1], one, groups, epi, arr, len(keep), precision,
                                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    gelu_epi = (b"expr([x, m] ((x * m > 0.0f ? x * m : x * m * 0.01f)) * 0.5f * (1.0f + erff(((x * m > 0.0f ? x * m"
                b" : x * m * 0.01f)) * 0.70710678118654752f)))")
    for dt, bound in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        name = str(dt).replace("torch.", "")
        for (n, c, h, k, groups, padding), fmt in (((4, 8, 66, 64, 1, 0), torch.contiguous_format),  # seed-like
                                                   ((4, 8, 66, 64, 1, 0), cl),
                                                   ((2, 64, 28, 40, 1, 1), torch.contiguous_format),  # 40: padded tile
                                                   ((2, 64, 28, 64, 64, 1), cl)):                     # depthwise
            x = torch.rand(n, c, h, h, device="cuda").to(dt).contiguous(memory_format=fmt)
            wt = (torch.randn(k, c // groups, 3, 3, device="cuda") * 0.2).to(dt).contiguous(memory_format=fmt)
            bias = torch.randn(k, device="cuda").to(dt)
            m = torch.randn(k, 1, 1, device="cuda").to(dt)
            b2 = torch.randn(k, 1, 1, device="cuda").to(dt)
            for chan_epi, ops, f in ((b"relu|add(in1)", [b2], lambda y, m=m, b2=b2: torch.relu(y) + b2),
                                     (gelu_epi, [m], lambda y, m=m, b2=b2: F.gelu(F.leaky_relu(y * m, 0.01)))):
                conv = lambda xx, ww, bb: F.conv2d(xx, ww, bb, 1, padding, 1, groups)
                ref = f(conv(x.double(), wt.double(), bias.double()), m.double(), b2.double())
                out = torch.full(ref.shape, float("nan"), device="cuda", dtype=dt).contiguous(memory_format=fmt)
                st = conv_ex(x, wt, bias, out, 1, padding, groups, chan_epi, ops)
                msg = lib.cuinline_last_error().decode() if st != 0 else ""
                torch.cuda.synchronize()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                torch_err = ((f(conv(x, wt, bias), m, b2).double() - ref).norm() / ref.norm()).item()
                layout = "channels-last" if fmt == cl else "NCHW"
                check(f"{name} {layout} conv2d {c}->{k} g{groups} epilogue {chan_epi.decode()[:22]} with (C,1,1) operands "
                      "vs float64", st == 0 and err < bound, f"rel L2 {err:.2e} (PyTorch {torch_err:.2e}) {msg}")
        xg = torch.rand(4, 8, 40, 40, device="cuda").to(dt)
        wg = (torch.randn(64, 8, 3, 3, device="cuda") * 0.2).to(dt)
        mg = torch.randn(64, 1, 1, device="cuda").to(dt)
        og = torch.full((4, 64, 38, 38), float("nan"), device="cuda", dtype=dt)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            stg = conv_ex(xg, wg, None, og, 1, 0, 1, gelu_epi, [mg])
        same = replays_match(g, xg, og, lambda e: conv_ex(xg, wg, None, e, 1, 0, 1, gelu_epi, [mg]))
        ref = F.gelu(F.leaky_relu(F.conv2d(xg.double(), wg.double()) * mg.double(), 0.01))
        err = ((og.double() - ref).norm() / ref.norm()).item()
        check(f"{name} conv2d with a per-channel multiplier in torch.cuda.graph, 3 replays on new data == eager, "
              "vs float64", stg == 0 and same and err < bound, f"rel L2 {err:.2e}")
    og.fill_(float("nan"))
    bad = conv_ex(xg, wg, None, og, 1, 0, 1, gelu_epi, [torch.randn(64, device="cuda", dtype=og.dtype).view(1, 64)])
    torch.cuda.synchronize()
    check("a per-channel operand of shape (1, 64) is refused with a message, nothing written",
          bad != 0 and bool(og.isnan().all()), lib.cuinline_last_error().decode())
    bad = conv_ex(xg, wg, None, og, 1, 0, 1, gelu_epi, [])
    check("an epilogue's operands missing are refused with a message", bad != 0, lib.cuinline_last_error().decode())

    # 8c'. float64 (F.conv2d on double tensors: the general kernel in double) in NCHW, channels-last, grouped,
    # depthwise, with a per-channel operand and a strided input view (read through a compact copy), on
    # PyTorch's current stream against PyTorch's own float64 conv; special values in the input; inside
    # torch.cuda.graph replayed on new data.
    for (n, c, h, w, k, kk, groups, stride, padding), fmt, view in (
            ((4, 8, 66, 64, 64, 3, 1, 1, 0), torch.contiguous_format, False),   # seed-like
            ((2, 32, 28, 28, 48, 3, 1, 1, 1), cl, False),
            ((2, 32, 28, 28, 64, 5, 8, 2, 2), torch.contiguous_format, False),  # grouped
            ((2, 32, 28, 28, 32, 3, 32, 1, 1), cl, False),                      # depthwise
            ((2, 16, 30, 30, 24, 3, 1, 1, 1), torch.contiguous_format, True)):  # a strided view
        if view:  # every other column of a wider tensor: strides (C*H*2W, H*2W, 2W, 2)
            x = torch.randn(n, c, h, 2 * w, device="cuda", dtype=torch.float64)[..., ::2]
        else:
            x = torch.randn(n, c, h, w, device="cuda", dtype=torch.float64).contiguous(memory_format=fmt)
        x[torch.rand_like(x) < 0.0005] = float("nan")
        x[torch.rand_like(x) < 0.0005] = float("-inf")
        x[torch.rand_like(x) < 0.01] = -0.0
        x[torch.rand_like(x) < 0.01] = 1e-310  # subnormal
        wt = (torch.randn(k, c // groups, kk, kk, device="cuda", dtype=torch.float64) * 0.2).contiguous(memory_format=fmt)
        bias = torch.randn(k, device="cuda", dtype=torch.float64)
        m = torch.randn(k, 1, 1, device="cuda", dtype=torch.float64)
        ref = F.gelu(F.conv2d(x, wt, bias, stride, padding, 1, groups) * m)
        out = torch.full(ref.shape, float("nan"), device="cuda", dtype=torch.float64).contiguous(memory_format=fmt)
        st = conv_ex(x, wt, bias, out, stride, padding, groups, b"mul(in1)|gelu", [m])
        msg = lib.cuinline_last_error().decode() if st != 0 else ""
        torch.cuda.synchronize()
        fin = ref.isfinite()
        err = ((out[fin] - ref[fin]).norm() / ref[fin].norm()).item()
        inf = ref.isinf()
        same_nan = bool((out.isnan() == ref.isnan()).all()) and bool((out[inf] == ref[inf]).all())
        layout = "a strided view" if view else "channels-last" if fmt == cl else "NCHW"
        check(f"float64 {layout} conv2d {c}->{k} {kk}x{kk} g{groups} s{stride} + mul(in1)|gelu vs PyTorch's float64 "
              "conv", st == 0 and err < 1e-12 and same_nan, f"rel L2 {err:.2e}, NaN / inf where PyTorch's: {same_nan} {msg}")
    xg = torch.randn(4, 8, 40, 40, device="cuda", dtype=torch.float64)
    wg = torch.randn(64, 8, 3, 3, device="cuda", dtype=torch.float64) * 0.2
    mg = torch.randn(64, 1, 1, device="cuda", dtype=torch.float64)
    og = torch.full((4, 64, 38, 38), float("nan"), device="cuda", dtype=torch.float64)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        stg = conv_ex(xg, wg, None, og, 1, 0, 1, b"mul(in1)|gelu", [mg])
    same = replays_match(g, xg, og, lambda e: conv_ex(xg, wg, None, e, 1, 0, 1, b"mul(in1)|gelu", [mg]))
    ref = F.gelu(F.conv2d(xg, wg) * mg)
    err = ((og - ref).norm() / ref.norm()).item()
    check("float64 conv2d in torch.cuda.graph, 3 replays on new data == eager, vs PyTorch's float64 conv",
          stg == 0 and same and err < 1e-12, f"rel L2 {err:.2e}")

    # 8d. f32 in precision tf32 with at least 16 input channels (KernelBench's kind of layer: a 5 x 7 filter
    # over 32 channels, a 3 x 3 over 64 into 128, channels-last, a residual, per-channel operands): an
    # implicit GEMM on wgmma with TF32 operands, after a staging copy that rounds to TF32. On PyTorch's
    # current stream against float64 beside PyTorch's own TF32 conv (cudnn.allow_tf32) on the same data;
    # special values in the input; an output 4 bytes off its allocation; inside torch.cuda.graph replayed
    # on new data.
    def conv_tf32(x, wt, bias, res, out, padding, epi, operands):
        keep = [desc(t) for t in operands]
        arr = (Tensor * len(keep))(*keep) if keep else None
        st, pd = (ctypes.c_int * 2)(1, 1), (ctypes.c_int * 2)(*padding)
        return lib.cuinline_conv2d_ex(desc(x), desc(wt), desc(bias) if bias is not None else None,
                                      desc(res) if res is not None else None, desc(out), st, pd, one, 1, epi, arr,
                                      len(keep), b"tf32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    def torch_tf32(fn):
        torch.backends.cudnn.allow_tf32 = True
        try:
            return fn()
        finally:
            torch.backends.cudnn.allow_tf32 = False

    for (n, c, h, w, k, kh, kw, pad), fmt, with_res, special in (
            ((2, 32, 40, 48, 64, 5, 7, (1, 2)), torch.contiguous_format, False, False),
            ((2, 64, 30, 30, 128, 3, 3, (1, 1)), cl, True, False),
            ((2, 24, 33, 47, 64, 3, 3, (0, 0)), torch.contiguous_format, True, True)):
        x = torch.randn(n, c, h, w, device="cuda").contiguous(memory_format=fmt)
        if special:
            x[0, 0, 5, 5] = float("nan")
            x[1, 3, 10, 10] = float("inf")
            x[1, 5, 20, 20] = -0.0
            x[0, 7, 1, 1] = 1e-40  # a subnormal
        wt = (torch.randn(k, c, kh, kw, device="cuda") / (c * kh * kw) ** 0.5).contiguous(memory_format=fmt)
        bias = torch.randn(k, device="cuda")
        b2 = torch.randn(k, 1, 1, device="cuda")
        oh, ow = h + 2 * pad[0] - kh + 1, w + 2 * pad[1] - kw + 1
        res = torch.randn(n, k, oh, ow, device="cuda").contiguous(memory_format=fmt) if with_res else None

        def f(y, b2=b2, res=res):
            return torch.relu(y + (res.to(y.dtype) if res is not None else 0)) + b2.to(y.dtype)
        ref = f(F.conv2d(x.double(), wt.double(), bias.double(), 1, pad))
        torch_out = torch_tf32(lambda: f(F.conv2d(x, wt, bias, 1, pad)))
        out = torch.full(ref.shape, float("nan"), device="cuda").contiguous(memory_format=fmt)
        stc = conv_tf32(x, wt, bias, res, out, pad, b"relu|add(in1)", [b2])
        msg = lib.cuinline_last_error().decode() if stc != 0 else ""
        torch.cuda.synchronize()
        fin = torch.isfinite(ref)
        same_nonfinite = torch.equal(torch.isnan(out), torch.isnan(ref)) and torch.equal(
            torch.isinf(out) & ~torch.isnan(ref), torch.isinf(ref))
        err = ((out.double() - ref)[fin].norm() / ref[fin].norm()).item()
        terr = ((torch_out.double() - ref)[fin].norm() / ref[fin].norm()).item()
        close = torch.allclose(out[fin], torch_out[fin], atol=1e-2, rtol=1e-2)
        layout = "channels-last" if fmt == cl else "NCHW"
        check(f"f32 tf32 {layout} conv2d {c}->{k} {kh}x{kw}{' + residual' if with_res else ''}"
              f"{' with NaN/Inf/-0/subnormal inputs' if special else ''} vs float64 and PyTorch TF32",
              stc == 0 and err < max(2.5 * terr, 1.5e-3) and close and same_nonfinite,
              f"rel L2 {err:.2e} (PyTorch TF32 {terr:.2e}) non-finite positions equal {same_nonfinite} {msg}")
    # An output 4 bytes off its allocation (one float a store).
    x = torch.randn(2, 32, 20, 21, device="cuda")
    wt = torch.randn(64, 32, 3, 3, device="cuda") * 0.1
    ref = F.conv2d(x.double(), wt.double(), None, 1, 1)
    flat = torch.full((ref.numel() + 1,), float("nan"), device="cuda")
    out = flat[1:].view(ref.shape)
    stc = conv_tf32(x, wt, None, None, out, (1, 1), b"", [])
    torch.cuda.synchronize()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    check("f32 tf32 conv2d into an output 4 bytes off its allocation", stc == 0 and err < 1e-3 and
          bool(flat[:1].isnan().all()), f"rel L2 {err:.2e}")
    # In torch.cuda.graph, replayed on new data.
    xg = torch.randn(2, 32, 36, 36, device="cuda")
    wg = torch.randn(64, 32, 5, 5, device="cuda") * 0.05
    og = torch.full((2, 64, 32, 32), float("nan"), device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        stg = conv_tf32(xg, wg, None, None, og, (0, 0), b"relu", [])
    same = replays_match(g, xg, og, lambda e: conv_tf32(xg, wg, None, None, e, (0, 0), b"relu", []))
    ref = torch.relu(F.conv2d(xg.double(), wg.double()))
    err = ((og.double() - ref).norm() / ref.norm()).item()
    check("f32 tf32 conv2d (staging copy + wgmma) in torch.cuda.graph, 3 replays on new data == eager, vs float64",
          stg == 0 and same and err < 1e-3, f"rel L2 {err:.2e}")

    # 8e. 1 x 1 convolutions on NCHW inputs (ResNet's bottleneck layers, KernelBench's pointwise
    # problem): the pointwise form (f16, bf16, f32 in tf32), a GEMM whose tiles are copied from the
    # tensors as they are; f32 in fp32 and tf32x3 on their kernels; NCHW and channels-last outputs, a
    # residual, per-channel operands;
    # special values; an output 4 bytes off; torch.cuda.graph replays. Against float64 beside PyTorch's
    # own conv in that dtype (TF32 for tf32) on the same data.
    def conv_pw(x, wt, bias, res, out, epi, operands, precision):
        keep = [desc(t) for t in operands]
        arr = (Tensor * len(keep))(*keep) if keep else None
        return lib.cuinline_conv2d_ex(desc(x), desc(wt), desc(bias) if bias is not None else None,
                                      desc(res) if res is not None else None, desc(out), one, zero, one, 1, epi, arr,
                                      len(keep), precision, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    for dt, precision, out_fmt, with_res, special in (
            (torch.float16, b"fp32", torch.contiguous_format, False, False),
            (torch.bfloat16, b"fp32", cl, True, False),
            (torch.float16, b"fp32", torch.contiguous_format, True, True),
            (torch.float32, b"fp32", torch.contiguous_format, False, True),
            (torch.float32, b"tf32", cl, True, False),
            (torch.float32, b"tf32x3", torch.contiguous_format, True, False)):
        n, c, h, w, k = 2, 64, 40, 48, 136
        x = torch.randn(n, c, h, w, device="cuda", dtype=dt)
        if special:
            x[0, 0, 5, 5] = float("nan")
            x[1, 3, 10, 10] = float("inf")
            x[1, 5, 20, 20] = -0.0
            x[0, 7, 1, 1] = 1e-40 if dt == torch.float32 else 1e-6  # a subnormal
        wt = (torch.randn(k, c, 1, 1, device="cuda") / c ** 0.5).to(dt)
        bias = torch.randn(k, device="cuda", dtype=dt)
        b2 = torch.randn(k, 1, 1, device="cuda", dtype=dt)
        res = torch.randn(n, k, h, w, device="cuda", dtype=dt).contiguous(memory_format=out_fmt) if with_res else None

        def f(y, b2=b2, res=res):
            return torch.relu(y + (res.to(y.dtype) if res is not None else 0)) + b2.to(y.dtype)
        ref = f(F.conv2d(x.double(), wt.double(), bias.double()))
        if precision == b"tf32":
            torch_out = torch_tf32(lambda: f(F.conv2d(x, wt, bias)))
        else:
            torch_out = f(F.conv2d(x, wt, bias))
        out = torch.full(ref.shape, float("nan"), device="cuda", dtype=dt).contiguous(memory_format=out_fmt)
        stc = conv_pw(x, wt, bias, res, out, b"relu|add(in1)", [b2], precision)
        msg = lib.cuinline_last_error().decode() if stc != 0 else ""
        torch.cuda.synchronize()
        fin = torch.isfinite(ref)
        same_nonfinite = torch.equal(torch.isnan(out), torch.isnan(ref)) and torch.equal(
            torch.isinf(out) & ~torch.isnan(ref), torch.isinf(ref))
        err = ((out.double() - ref)[fin].norm() / ref[fin].norm()).item()
        terr = ((torch_out.double() - ref)[fin].norm() / ref[fin].norm()).item()
        bound = {b"fp32": 1e-5, b"tf32x3": 1e-5, b"tf32": 1.5e-3}[precision] if dt == torch.float32 else (
            2e-3 if dt == torch.float16 else 1.6e-2)
        name = str(dt).replace("torch.", "") + ("" if dt != torch.float32 else " " + precision.decode())
        layout = "channels-last" if out_fmt == cl else "NCHW"
        form = " (pointwise form)" if dt != torch.float32 or precision == b"tf32" else ""
        check(f"{name} 1x1 conv2d {c}->{k}{form}, {layout} output{' + residual' if with_res else ''}"
              f"{' with NaN/Inf/-0/subnormal inputs' if special else ''} vs float64 and PyTorch",
              stc == 0 and err < max(2.5 * terr, bound) and same_nonfinite,
              f"rel L2 {err:.2e} (PyTorch {terr:.2e}) non-finite positions equal {same_nonfinite} {msg}")
    # An output 4 bytes off its allocation (one float a store), f32.
    x = torch.randn(2, 32, 16, 24, device="cuda")
    wt = torch.randn(40, 32, 1, 1, device="cuda") * 0.2
    ref = F.conv2d(x.double(), wt.double())
    flat = torch.full((ref.numel() + 1,), float("nan"), device="cuda")
    out = flat[1:].view(ref.shape)
    stc = conv_pw(x, wt, None, None, out, b"", [], b"tf32")
    torch.cuda.synchronize()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    check("f32 tf32 1x1 conv2d (pointwise form) into an output 4 bytes off its allocation",
          stc == 0 and err < 1e-3 and bool(flat[:1].isnan().all()), f"rel L2 {err:.2e}")
    # In torch.cuda.graph, replayed on new data (f16).
    xg = torch.randn(2, 64, 32, 32, device="cuda", dtype=torch.float16)
    wg = (torch.randn(96, 64, 1, 1, device="cuda") * 0.1).half()
    og = torch.full((2, 96, 32, 32), float("nan"), device="cuda", dtype=torch.float16)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        stg = conv_pw(xg, wg, None, None, og, b"relu", [], b"fp32")
    same = replays_match(g, xg, og, lambda e: conv_pw(xg, wg, None, None, e, b"relu", [], b"fp32"))
    ref = torch.relu(F.conv2d(xg.double(), wg.double()))
    err = ((og.double() - ref).norm() / ref.norm()).item()
    check("f16 1x1 conv2d (pointwise form) in torch.cuda.graph, 3 replays on new data == eager, vs float64",
          stg == 0 and same and err < 2e-3, f"rel L2 {err:.2e}")

    # 8f. tensors of other strides, as F.conv2d takes them: a sliced input
    # (x[:, :, 1:-1, 2:]), a permuted weight, a bias of every other element, an expanded residual and
    # an output that is a slice of a wider tensor's channels (NCHW and channels-last), in every dtype,
    # on PyTorch's current stream against float64 — nothing written outside the output's view — and
    # inside torch.cuda.graph (the copies' workspace made in the capture), replayed on new data.
    for dt, bound in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        name = str(dt).replace("torch.", "")
        for fmt in (torch.contiguous_format, cl):
            layout = "channels-last" if fmt == cl else "NCHW"
            xb = torch.randn(4, 16, 36, 40, device="cuda").to(dt).contiguous(memory_format=fmt)
            x = xb[:, :, 1:-1, 2:]
            wt = (torch.randn(48, 3, 3, 16, device="cuda") * 0.1).to(dt).permute(0, 3, 2, 1)  # [48, 16, 3, 3] view
            bias = torch.randn(96, device="cuda").to(dt)[::2]
            res = torch.randn(1, 48, 34, 38, device="cuda").to(dt).expand(4, 48, 34, 38)
            ob = torch.full((4, 64, 34, 38), float("nan"), device="cuda", dtype=dt).contiguous(memory_format=fmt)
            out = ob[:, 8:56]

            def run(o, x=x, wt=wt, bias=bias, res=res):
                return lib.cuinline_conv2d(desc(x), desc(wt), desc(bias), desc(res), desc(o), one, one, one, b"relu",
                                           b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            st = run(out)
            msg = lib.cuinline_last_error().decode() if st != 0 else ""
            torch.cuda.synchronize()
            ref = torch.relu(F.conv2d(x.double(), wt.double(), bias.double(), 1, 1) + res.double())
            err = ((out.double() - ref).norm() / ref.norm()).item()
            kept = bool(ob[:, :8].isnan().all()) and bool(ob[:, 56:].isnan().all())
            check(f"{name} conv2d + bias + residual + relu on strided views ({layout} base) vs float64, nothing "
                  "written outside the output's view", st == 0 and err < bound and kept,
                  f"rel L2 {err:.2e} outside kept {kept} {msg}")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                stg = run(out)
            same = replays_match(g, xb, out, run)
            check(f"{name} conv2d on strided views ({layout} base) in torch.cuda.graph, 3 replays on new data == eager",
                  stg == 0 and same and bool(ob[:, :8].isnan().all()), lib.cuinline_last_error().decode() if stg else "")
    # F.conv2d's unbatched form: x [C, H, W] -> [Cout, OH, OW] (f32 and f16, a channels-last-strided
    # image too), on PyTorch's current stream against float64.
    for dt, bound in ((torch.float32, 1e-5), (torch.float16, 2e-3)):
        for cl_image in (False, True):
            x3 = torch.randn(16, 34, 40, device="cuda").to(dt)
            if cl_image:
                x3 = x3.permute(1, 2, 0).contiguous().permute(2, 0, 1)  # [C, H, W] stored [H][W][C]
            w3 = (torch.randn(24, 16, 3, 3, device="cuda") * 0.1).to(dt)
            b3 = torch.randn(24, device="cuda").to(dt)
            ref = torch.relu(F.conv2d(x3.double(), w3.double(), b3.double(), 1, 1))
            o3 = torch.full(ref.shape, float("nan"), device="cuda", dtype=dt)
            st = lib.cuinline_conv2d(desc(x3), desc(w3), desc(b3), None, desc(o3), one, one, one, b"relu", b"fp32",
                                     ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            msg = lib.cuinline_last_error().decode() if st != 0 else ""
            torch.cuda.synchronize()
            err = ((o3.double() - ref).norm() / ref.norm()).item()
            check(f"{str(dt)[6:]} unbatched conv2d ([C, H, W]{', stored [H][W][C]' if cl_image else ''}) vs float64",
                  st == 0 and err < bound, f"rel L2 {err:.2e} {msg}")
    # An output whose elements share memory (expanded) is refused, nothing launched.
    xs = torch.randn(2, 8, 10, 10, device="cuda")
    ws_ = torch.randn(4, 8, 3, 3, device="cuda")
    oe = torch.full((1, 4, 8, 8), float("nan"), device="cuda")
    bad = lib.cuinline_conv2d(desc(xs), desc(ws_), None, None, desc(oe.expand(2, 4, 8, 8)), one, zero, one, b"relu",
                              b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    check("an expanded output (elements sharing memory) is refused with a message, nothing written",
          bad != 0 and bool(oe.isnan().all()), lib.cuinline_last_error().decode())

    # 9. the second GPU (when there are two): the calls that take a workspace from a device's pool
    # (f32 channels-last between transposing copies, f16 NCHW staged, f32 tf32 on the TF32 wgmma kernel
    # with a per-channel operand), and a 1 x 1 on the pointwise form, with tensors on cuda:1 and
    # cuda:1's current stream, eager and inside torch.cuda.graph; against float64.
    if torch.cuda.device_count() > 1:
        epi = b"div(2)|leaky_relu(0.01)"  # (the seed's; its reference below)
        with torch.cuda.device(1):
            for name, dt, fmt, bound in (("f32 channels-last", torch.float32, cl, 1e-5),
                                         ("f16 NCHW (staged)", torch.float16, torch.contiguous_format, 2e-3)):
                x1 = torch.randn(16, 8, 64, 128, device="cuda:1", dtype=dt).contiguous(memory_format=fmt)
                w1 = (torch.randn(64, 8, 3, 3, device="cuda:1", dtype=dt) * 0.1).contiguous(memory_format=fmt)
                b1 = torch.randn(64, device="cuda:1", dtype=dt)
                o1 = torch.full((16, 64, 62, 126), float("nan"), device="cuda:1", dtype=dt).contiguous(memory_format=fmt)
                st = lib.cuinline_conv2d(desc(x1), desc(w1), desc(b1), None, desc(o1), one, zero, one, epi, b"fp32",
                                         ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
                msg = lib.cuinline_last_error().decode() if st != 0 else ""
                torch.cuda.synchronize()
                ref = F.leaky_relu(F.conv2d(x1.double(), w1.double(), b1.double()) / 2, 0.01)
                err = ((o1.double() - ref).norm() / ref.norm()).item()
                check(f"{name} conv2d / 2 -> leaky_relu on cuda:1's current stream vs float64",
                      st == 0 and err < bound and o1.is_contiguous(memory_format=fmt), f"rel L2 {err:.2e} {msg}")
                og1 = torch.full_like(o1, float("nan"))
                g1 = torch.cuda.CUDAGraph()
                # torch.cuda.graph's default capture stream is made once, on the device current at
                # the first capture (cuda:0 here): capture on a stream of cuda:1.
                with torch.cuda.graph(g1, stream=torch.cuda.Stream(device=1)):
                    stg = lib.cuinline_conv2d(desc(x1), desc(w1), desc(b1), None, desc(og1), one, zero, one, epi,
                                              b"fp32", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
                same = replays_match(g1, x1, og1, lambda e: lib.cuinline_conv2d(
                    desc(x1), desc(w1), desc(b1), None, desc(e), one, zero, one, epi, b"fp32",
                    ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
                msg = lib.cuinline_last_error().decode() if stg != 0 else ""
                check(f"{name} conv2d on cuda:1 in torch.cuda.graph, 3 replays on new data == eager",
                      stg == 0 and same, msg)
            # tf32 on the TF32 wgmma kernel (its staging copy's workspace from cuda:1's pool) with a
            # per-channel operand, eager and in torch.cuda.graph on a stream of cuda:1.
            x1 = torch.randn(4, 32, 40, 44, device="cuda:1")
            w1 = torch.randn(64, 32, 3, 3, device="cuda:1") * 0.06
            b1 = torch.randn(64, device="cuda:1")
            m1 = torch.randn(64, 1, 1, device="cuda:1")
            ref = torch.relu(F.conv2d(x1.double(), w1.double(), b1.double(), 1, 1)) + m1.double()
            o1 = torch.full(ref.shape, float("nan"), device="cuda:1")
            st = conv_tf32(x1, w1, b1, None, o1, (1, 1), b"relu|add(in1)", [m1])
            msg = lib.cuinline_last_error().decode() if st != 0 else ""
            torch.cuda.synchronize(1)
            err = ((o1.double() - ref).norm() / ref.norm()).item()
            check("f32 tf32 (TF32 wgmma, staged) conv2d with a (C,1,1) operand on cuda:1's current stream vs float64",
                  st == 0 and err < 1.5e-3, f"rel L2 {err:.2e} {msg}")
            og1 = torch.full_like(o1, float("nan"))
            g1 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g1, stream=torch.cuda.Stream(device=1)):
                stg = conv_tf32(x1, w1, b1, None, og1, (1, 1), b"relu|add(in1)", [m1])
            same = replays_match(g1, x1, og1, lambda e: conv_tf32(x1, w1, b1, None, e, (1, 1), b"relu|add(in1)", [m1]))
            check("f32 tf32 (TF32 wgmma) conv2d on cuda:1 in torch.cuda.graph, 3 replays on new data == eager",
                  stg == 0 and same, lib.cuinline_last_error().decode() if stg != 0 else "")
            # A 1 x 1 on the pointwise form (bf16, a residual, channels-last output) on cuda:1.
            x1 = torch.randn(2, 64, 24, 40, device="cuda:1", dtype=torch.bfloat16)
            w1 = (torch.randn(136, 64, 1, 1, device="cuda:1") * 0.125).to(torch.bfloat16)
            r1 = torch.randn(2, 136, 24, 40, device="cuda:1", dtype=torch.bfloat16).contiguous(memory_format=cl)
            m1 = torch.randn(136, 1, 1, device="cuda:1", dtype=torch.bfloat16)
            ref = torch.relu(F.conv2d(x1.double(), w1.double()) + r1.double()) + m1.double()
            o1 = torch.full(ref.shape, float("nan"), device="cuda:1", dtype=torch.bfloat16).contiguous(memory_format=cl)
            st = conv_pw(x1, w1, None, r1, o1, b"relu|add(in1)", [m1], b"fp32")
            msg = lib.cuinline_last_error().decode() if st != 0 else ""
            torch.cuda.synchronize(1)
            err = ((o1.double() - ref).norm() / ref.norm()).item()
            check("bf16 1x1 conv2d (pointwise form) + residual on cuda:1's current stream vs float64",
                  st == 0 and err < 1.6e-2, f"rel L2 {err:.2e} {msg}")
            og1 = torch.full_like(o1, float("nan"))
            g1 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g1, stream=torch.cuda.Stream(device=1)):
                stg = conv_pw(x1, w1, None, r1, og1, b"relu|add(in1)", [m1], b"fp32")
            same = replays_match(g1, x1, og1, lambda e: conv_pw(x1, w1, None, r1, e, b"relu|add(in1)", [m1], b"fp32"))
            check("bf16 1x1 conv2d (pointwise form) on cuda:1 in torch.cuda.graph, 3 replays on new data == eager",
                  stg == 0 and same, lib.cuinline_last_error().decode() if stg != 0 else "")
    # 10. the activation / math steps (sigmoid ... neg) against PyTorch's own kernels, bit for bit: every
    # step in every dtype on randn * 4 and uniform(-30, 30) data with the special values in front (NaN,
    # ±inf, ±0, subnormals, hardswish's ±3, softplus's threshold, exp's overflow), outputs poisoned; NaN
    # where PyTorch has NaN, every other element the same bits (the sign of zero included). Chains
    # against the PyTorch ops in sequence, a bias row, torch.cuda.graph replays, a conv epilogue.
    check_functions(lib, apply, apply_ok, conv_ex)
    print(f"{'all checks passed' if failures == 0 else str(failures) + ' checks FAILED'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

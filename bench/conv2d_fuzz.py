"""Random conv2d problems through the C API, the way an engine hands them over, against PyTorch.

Each case draws a valid F.conv2d call — channels 1-1024 (log-uniform), images 1-512 per side, filters
1-11 per side, stride 1-4, padding 0-5, dilation 1-4, groups (plain, depthwise with a multiplier,
grouped; one draw in twenty past the limits cuinline once had: ViT's 32-64 patch filters of stride
their size, ASPP's dilation 17-48, FCN's padding 65-120, strides 17-64, 4097-9000 channels, 33-51
depthwise filters, 1-D audio filters of 32-400 taps), bias or not, a residual or not, an epilogue (a chain or an expression, some with per-channel
operands), f32 (fp32 / tf32 / tf32x3), f16, bf16 or f64 (in --kinds), each tensor NCHW or channels-last on its own, some
views of other strides (rows padded, stored [N][H][C][W], every other channel, a weight or residual
expanded, a bias or operand of every other element: what F.conv2d takes) — as PyTorch tensors, and runs it through cuinline_conv2d_ex on PyTorch's current stream (a side stream in
some cases; captured in torch.cuda.graph with the variant's first call inside the capture in others,
then replayed on new data), the output poisoned with NaN first. Checked:
  - no error (every valid input has a kernel);
  - relative L2 error against F.conv2d + the tail in float64 within
    max(2.5 x PyTorch's own error in that dtype / precision, a floor: fp32 1e-5, tf32x3 5e-5,
    tf32 2e-3, f16 1e-3, bf16 8e-3) — PyTorch's error measured on the same data in the same case;
  - every output written (a NaN left from the poison fails the L2 check), and nothing outside a strided
    output's view (its padding keeps the poison);
  - graph cases: the replay equal bit for bit to an eager call on the same new data.

A failing case prints one line `FAIL {json}`; `--case '{json}'` reruns it alone, and
bench/conv2d_fuzz_regressions.jsonl (`--cases-file`) keeps the cases that once failed, with why.

Usage: conv2d_fuzz.py --lib build-shared/libcuinline.so [--seconds 240] [--workers 8] [--seed S]
                      [--max-macs 4e8] [--kinds f32/tf32x3,f16] [--case JSON ...]
"""
import argparse
import ctypes
import math

import torch
import torch.nn.functional as F

import fuzz_common
from torch_capi_check import Tensor, desc  # (a cuinline_tensor of a torch tensor)

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
FLOOR = {"fp32": 1e-5, "tf32x3": 5e-5, "tf32": 2e-3, "f16": 1e-3, "bf16": 8e-3, "f64": 1e-12}
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float64: torch.int64}

# (epilogue text, channel operands it reads, the tail as PyTorch ops on y and the operands' list)
TAILS = [
    ("", 0, lambda y, o: y),
    ("relu", 0, lambda y, o: torch.relu(y)),
    ("div(2)|leaky_relu(0.01)", 0, lambda y, o: F.leaky_relu(y / 2, 0.01)),
    ("gelu", 0, lambda y, o: F.gelu(y)),
    ("gelu_tanh", 0, lambda y, o: F.gelu(y, approximate="tanh")),
    ("mish", 0, lambda y, o: F.mish(y)),
    ("mish|mish", 0, lambda y, o: F.mish(F.mish(y))),
    ("silu", 0, lambda y, o: F.silu(y)),
    ("sigmoid", 0, lambda y, o: torch.sigmoid(y)),
    ("tanh", 0, lambda y, o: torch.tanh(y)),
    ("hardswish|relu", 0, lambda y, o: torch.relu(F.hardswish(y))),
    ("elu", 0, lambda y, o: F.elu(y)),
    ("selu", 0, lambda y, o: F.selu(y)),
    ("softplus", 0, lambda y, o: F.softplus(y)),
    ("relu6", 0, lambda y, o: F.relu6(y)),
    ("clamp(-0.5, 0.25)", 0, lambda y, o: y.clamp(-0.5, 0.25)),
    ("sub(0.5)|sub(0.2)|mish", 0, lambda y, o: F.mish(y - 0.5 - 0.2)),
    ("relu|add(in1)", 1, lambda y, o: torch.relu(y) + o[0]),
    ("mul(in1)|leaky_relu(0.01)|gelu", 1, lambda y, o: F.gelu(F.leaky_relu(y * o[0], 0.01))),
    ("expr([x, a, b] x * a + b)", 2, lambda y, o: y * o[0] + o[1]),
    ("expr([x, b] ((x != x ? x : fminf(x, 0.5f)) + b) * 2.0f)", 1,
     lambda y, o: (torch.clamp(y, max=0.5) + o[0]) * 2.0),
]


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.cuinline_last_error.restype = ctypes.c_char_p
        self.lib.cuinline_conv2d_ex.argtypes = [ctypes.POINTER(Tensor)] * 5 + [ctypes.POINTER(ctypes.c_int)] * 3 + [
            ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]

    def conv(self, x, w, b, r, y, c, epilogue, operands):
        """A callable running y = epilogue(conv2d(x, w, b) [+ r], operands) on the current stream."""
        dx, dw, dy = desc(x), desc(w), desc(y)
        db = desc(b) if b is not None else None
        dr = desc(r) if r is not None else None
        keep = [desc(t) for t in operands]
        ops = (Tensor * len(keep))(*keep) if keep else None
        st = (ctypes.c_int * 2)(c["sh"], c["sw"])
        pd = (ctypes.c_int * 2)(c["ph"], c["pw"])
        dl = (ctypes.c_int * 2)(c["dh"], c["dw"])
        epi, prec = epilogue.encode(), c["prec"].encode()

        def run():
            rc = self.lib.cuinline_conv2d_ex(dx, dw, db, dr, dy, st, pd, dl, c["groups"], epi, ops, len(keep), prec,
                                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if rc != 0:
                raise RuntimeError(self.lib.cuinline_last_error().decode())
        run._keep = (dx, dw, dy, db, dr, ops, keep, st, pd, dl)
        return run


def out_extent(i, k, s, p, d):
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


def log_int(rng, lo, hi):
    return min(hi, max(lo, int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 0.999)) - 0.499)))))


def draw(rng, max_macs, kinds):
    """One valid F.conv2d call (a dict; json-serializable) of one of `kinds` ("f32/tf32x3", "f16", ...)."""
    while True:
        kind = rng.choice(kinds)
        dtype = kind.split("/")[0]
        prec = kind.split("/")[1] if "/" in kind else "fp32"
        mode = rng.random()
        if mode < 0.25:  # a CNN's layer: power-of-two channels, square images and filters, "same" padding
            groups = 1
            cin = rng.choice([3, 16, 32, 64, 128, 256, 512, 1024])
            cout = rng.choice([16, 32, 64, 128, 256, 512, 1024])
            h = w = rng.choice([7, 14, 28, 56, 112, 128, 224, 256, 512])
            kh = kw = rng.choice([1, 3, 3, 3, 5, 7])
            sh = sw = rng.choice([1, 1, 1, 2])
            ph, pw, dh, dw = kh // 2, kw // 2, 1, 1
        elif mode < 0.72:
            groups, cin, cout = 1, log_int(rng, 1, 1024), log_int(rng, 1, 1024)
        elif mode < 0.86:  # depthwise (a channel multiplier of 1 or 2)
            cin = log_int(rng, 1, 512)
            groups, cout = cin, cin * rng.choice([1, 1, 2])
        elif mode < 0.95:
            groups = rng.choice([2, 3, 4, 8, 16, 32])
            cin, cout = groups * log_int(rng, 1, 64), groups * log_int(rng, 1, 64)
        else:  # past the limits cuinline once had (filters <= 31, stride/dilation <= 16, padding <= 64, channels <= 4096)
            big = rng.choice(["patch", "dilated", "padded", "strided", "channels", "filter"])
            groups, cin, cout = 1, log_int(rng, 1, 64), log_int(rng, 1, 256)
            h, w = log_int(rng, 8, 256), log_int(rng, 8, 256)
            kh = kw = rng.choice([1, 3, 3, 5])
            sh = sw = rng.choice([1, 1, 2])
            ph, pw, dh, dw = kh // 2, kw // 2, 1, 1
            if big == "patch":  # ViT's patch embedding: a filter of stride its size
                kh = kw = sh = sw = rng.choice([32, 32, 40, 48, 64])
                h, w = max(h, kh), max(w, kw)
                ph = pw = 0
                cin = rng.choice([1, 3, 3, 4])
            elif big == "dilated":  # DeepLab's ASPP: dilation 17-48, padding its dilation
                dh = dw = rng.randint(17, 48)
                ph = pw = dh if rng.random() < 0.8 else rng.randint(0, 80)
            elif big == "padded":  # FCN's first conv: padding 100
                ph = rng.randint(65, 120)
                pw = ph if rng.random() < 0.6 else rng.randint(0, 120)
                h, w = min(h, 48), min(w, 48)
            elif big == "strided":
                sh = rng.randint(17, 64)
                sw = sh if rng.random() < 0.5 else rng.randint(1, 64)
            elif big == "channels":
                h, w = log_int(rng, 1, 8), log_int(rng, 1, 8)
                if rng.random() < 0.5:
                    cin = rng.randint(4097, 9000)
                else:
                    cout = rng.randint(4097, 9000)
            else:  # filters past 31 (a depthwise large kernel, or a 1-D audio filter)
                if rng.random() < 0.5:
                    kh = kw = rng.choice([33, 41, 51])
                    ph = pw = kh // 2
                    h, w = max(min(h, 64), kh), max(min(w, 64), kw)
                    groups = cin = cout = rng.choice([4, 8, 16])
                else:
                    h, kh, ph = 1, 1, 0
                    w, kw = rng.randint(2000, 40000), rng.randint(32, 400)
                    sw, pw = rng.choice([1, 2, 4, 10]), kw // 2
                    cin = rng.choice([1, 1, 2])
        if mode >= 0.25 and mode < 0.95:
            h, w = log_int(rng, 1, 512), log_int(rng, 1, 512)
            ks = [1, 1, 3, 3, 3, 5, 7]
            kh = rng.choice(ks) if rng.random() < 0.8 else rng.randint(1, 11)
            kw = kh if rng.random() < 0.6 else (rng.choice(ks) if rng.random() < 0.5 else rng.randint(1, 11))
            sh = rng.choice([1, 1, 1, 2, 2, 3, 4])
            sw = sh if rng.random() < 0.7 else rng.randint(1, 4)
            ph = rng.choice([0, 0, kh // 2, rng.randint(0, 5)])
            pw = rng.choice([0, 0, kw // 2, rng.randint(0, 5)])
            dh = 1 if rng.random() < 0.7 else rng.randint(2, 4)
            dw = 1 if rng.random() < 0.7 else rng.randint(2, 4)
        oh, ow = out_extent(h, kh, sh, ph, dh), out_extent(w, kw, sw, pw, dw)
        if oh < 1 or ow < 1:
            continue
        n = rng.choice([1, 1, 2, 3, 4, 8, 16, 32])
        per_image = cout * oh * ow * (cin // groups) * kh * kw
        while n > 1 and (n * per_image > max_macs or n * max(cin * h * w, cout * oh * ow) > 2.5e7):
            n //= 2
        if n * per_image > max_macs or n * max(cin * h * w, cout * oh * ow) > 2.5e7:
            continue
        tail = rng.randrange(len(TAILS))
        if dtype == "f64" and "f)" in TAILS[tail][0]:  # (an expression of float functions and literals)
            tail = 0
        return dict(dtype=dtype, prec=prec, n=n, cin=cin, h=h, w=w, cout=cout, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph,
                    pw=pw, dh=dh, dw=dw, groups=groups, bias=rng.random() < 0.6, residual=rng.random() < 0.25,
                    tail=tail, x_cl=rng.random() < 0.5, w_cl=rng.random() < 0.5, y_cl=rng.random() < 0.5,
                    r_cl=rng.random() < 0.5, side_stream=rng.random() < 0.25, graph=rng.random() < 0.1,
                    seed=rng.randrange(1 << 30), x_view=rng.choice(VIEWS), w_view=rng.choice(VIEWS + ["expand"]),
                    y_view=rng.choice(VIEWS), r_view=rng.choice(VIEWS + ["expand"]),
                    b_view=rng.choice([None, None, "step"]), o_view=rng.choice([None, None, "step", "expand"]))


VIEWS = [None, None, None, None, "pad", "perm", "step"]


def restride(t, form):
    """t's values as a view with other strides (what F.conv2d takes); padding holds NaN. Returns (view,
    base) — base the whole storage, for checking what a write left outside the view."""
    if form is None:
        return t, None
    nan = float("nan")
    if form == "pad":  # rows padded: a slice of a wider image (any rank: the last axis)
        base = torch.full(t.shape[:-1] + (t.shape[-1] + 3,), nan, dtype=t.dtype, device=t.device)
        base[..., :t.shape[-1]] = t
        return base[..., :t.shape[-1]], base
    if form == "perm":  # stored [N][H][C][W]
        base = t.permute(0, 2, 1, 3).contiguous()
        return base.permute(0, 2, 1, 3), base
    if form == "step":  # every other element of twice as many: the channels (axis 1 of a 4-D tensor, else 0)
        axis = 1 if t.dim() == 4 else 0
        shape = list(t.shape)
        shape[axis] *= 2
        base = torch.full(shape, nan, dtype=t.dtype, device=t.device)
        idx = [slice(None)] * t.dim()
        idx[axis] = slice(None, None, 2)
        base[tuple(idx)] = t
        return base[tuple(idx)], base
    if form == "expand":  # one entry of axis 0 repeated (stride 0): a weight or residual
        return t[:1].expand(t.shape), None
    raise ValueError(form)


def rel_l2(a, ref):
    d = (a.double() - ref).norm().item()
    r = ref.norm().item()
    return d / r if r > 0 else d


def run_case(lib, c):
    """Returns (ok, detail)."""
    dt = DT[c["dtype"]]
    g = torch.Generator(device="cuda").manual_seed(c["seed"])
    fmt = lambda cl: torch.channels_last if cl else torch.contiguous_format  # noqa: E731
    oh, ow = out_extent(c["h"], c["kh"], c["sh"], c["ph"], c["dh"]), out_extent(c["w"], c["kw"], c["sw"], c["pw"], c["dw"])
    fan_in = c["cin"] // c["groups"] * c["kh"] * c["kw"]
    bound = 1.0 / math.sqrt(fan_in)
    x = torch.randn(c["n"], c["cin"], c["h"], c["w"], device="cuda", generator=g).to(dt).contiguous(
        memory_format=fmt(c["x_cl"]))
    wt = ((torch.rand(c["cout"], c["cin"] // c["groups"], c["kh"], c["kw"], device="cuda", generator=g) * 2 - 1)
          * bound).to(dt).contiguous(memory_format=fmt(c["w_cl"]))
    b = ((torch.rand(c["cout"], device="cuda", generator=g) * 2 - 1) * bound).to(dt) if c["bias"] else None
    r = (torch.randn(c["n"], c["cout"], oh, ow, device="cuda", generator=g).to(dt).contiguous(
        memory_format=fmt(c["r_cl"])) if c["residual"] else None)
    text, nops, tail = TAILS[c["tail"]]
    ops = [torch.randn(c["cout"], 1, 1, device="cuda", generator=g).to(dt) for _ in range(nops)]
    y = torch.empty(c["n"], c["cout"], oh, ow, device="cuda", dtype=dt).contiguous(memory_format=fmt(c["y_cl"]))
    # Views of other strides (older cases have none).
    x, _ = restride(x, c.get("x_view"))
    wt, _ = restride(wt, c.get("w_view"))
    if r is not None:
        r, _ = restride(r, c.get("r_view"))
    if b is not None:
        b, _ = restride(b, c.get("b_view"))
    ops = [restride(o, c.get("o_view"))[0] for o in ops]
    y, y_base = restride(y, c.get("y_view"))
    y.fill_(float("nan"))
    run = lib.conv(x, wt, b, r, y, c, text, ops)
    conv_args = ((c["sh"], c["sw"]), (c["ph"], c["pw"]), (c["dh"], c["dw"]), c["groups"])

    def reference(xx, dtype, tf32, ww=None):
        ww = wt if ww is None else ww
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = tf32
        try:
            yy = F.conv2d(xx.to(dtype), ww.to(dtype), b.to(dtype) if b is not None else None, *conv_args)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
        if r is not None:
            yy = yy + r.to(dtype)
        return tail(yy, [o.to(dtype) for o in ops])

    detail = ""
    if c["graph"]:
        # The variant's first call inside the capture (compile and load during capture), then replays
        # on new data against an eager call on the same data.
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        x.copy_(torch.randn(x.shape, device="cuda", generator=g).to(dt))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        replayed = y.clone()
        y.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        same = torch.equal(replayed.view(BITS[dt]), y.view(BITS[dt]))
        if not same:
            return False, "graph replay differs from the eager call"
        detail = "graph "
    else:
        stream = torch.cuda.Stream() if c["side_stream"] else torch.cuda.current_stream()
        if c["side_stream"]:
            stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        detail = "side-stream " if c["side_stream"] else ""
    if y_base is not None:  # nothing written outside the output's view (its padding holds NaN)
        outside = torch.ones(y_base.numel(), dtype=torch.bool, device="cuda")
        outside.as_strided(y.shape, y.stride(), y.storage_offset() - y_base.storage_offset()).fill_(False)
        if not torch.isnan(y_base.reshape(-1)[outside]).all():
            return False, detail + "bytes outside the output's view were written"
    ref = reference(x, torch.float64, False)
    theirs = reference(x, dt, c["prec"] == "tf32")
    err, err_pt = rel_l2(y, ref), rel_l2(theirs, ref)
    floor = FLOOR[c["prec"]] if c["dtype"] == "f32" else FLOOR[c["dtype"]]
    limit = max(2.5 * err_pt, floor)
    ok = err <= limit  # (NaN fails)
    detail = f"{detail}rel L2 {err:.3g} (PyTorch {err_pt:.3g}, limit {limit:.3g})"
    if not ok and c["dtype"] == "f32" and c["prec"] == "tf32":
        # cuDNN runs some small problems without TF32 (PyTorch's error is then fp32's) while the output's
        # norm may rest on a few values that cancel (a bias of -0.12 under a relu leaving 0.008): the
        # TF32 kernels' rounding of the input and weight (cvt.rna.tf32) is then nearly all the error.
        # Against float64 on the input and weight rounded as the kernels round them only the fp32 sums'
        # error remains (a rounding error or a wrong value still fails).
        err_r = rel_l2(y, reference(tf32_rna(x), torch.float64, False, tf32_rna(wt)))
        ok = err_r <= 1e-4
        detail += f"; against the TF32-rounded operands rel L2 {err_r:.3g} (limit 1e-4)"
    return ok, detail


def tf32_rna(t):
    """t (f32) rounded to TF32 as cvt.rna.tf32.f32 rounds: to nearest, ties away from zero."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).reshape(t.shape)


def describe(c):
    t = TAILS[c["tail"]][0] or "none"
    lay = "".join("C" if c[k] else "N" for k in ("x_cl", "w_cl", "y_cl"))
    views = [f"{k[0]}:{c[k]}" for k in ("x_view", "w_view", "y_view", "r_view", "b_view", "o_view") if c.get(k)]
    if views:
        lay += " " + ",".join(views)
    return (f"{c['dtype']}/{c['prec']} {c['n']}x{c['cin']}x{c['h']}x{c['w']} -> {c['cout']} {c['kh']}x{c['kw']} "
            f"s{c['sh']}x{c['sw']} p{c['ph']}x{c['pw']} d{c['dh']}x{c['dw']} g{c['groups']}"
            f"{' bias' if c['bias'] else ''}{' res' if c['residual'] else ''} {lay} [{t}]")


def main():
    ap = argparse.ArgumentParser()
    fuzz_common.add_arguments(ap, seconds=240)
    ap.add_argument("--max-macs", type=float, default=4e8, help="multiply-adds a case at most")
    ap.add_argument("--kinds", default="f32/fp32,f32/tf32,f32/tf32x3,f16,f16,f16,bf16,bf16,bf16",
                    help="dtypes / precisions drawn from (repeats weigh)")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    fuzz_common.main(args, "conv2d fuzz", lambda: Lib(args.lib), lambda rng: draw(rng, args.max_macs, kinds), run_case,
                     describe, ["--max-macs", str(args.max_macs), "--kinds", args.kinds])


if __name__ == "__main__":
    main()

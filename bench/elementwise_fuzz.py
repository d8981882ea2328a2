"""Random fused elementwise chains through the C API (cuinline_apply), bit for bit against PyTorch eager.

Each case draws a dtype (f32, f16, bf16, f64), an output shape (rank 1-5, odd and power-of-two
extents, up to 2^22 elements), 1-4 input tensors broadcast as PyTorch broadcasts them (the whole
shape, a bias row, a column, a scalar, any dimensions of 1, fewer leading dimensions), each laid out
its own way (contiguous, permuted strides, every other element, expanded with stride 0, one element
past an aligned start), and a chain of 1-5 steps: the tensor operands (add / sub / mul / div with
in1..in3), selections (`where(in1, in2)`, `where(in1, 0.5)`: torch.where(in1 != 0, x, ...)),
scalar arithmetic and torch.nn's activations. The inputs mix normal values with NaN, ±inf,
±0, subnormals and large values. The output is contiguous, strided, or (where the shapes and
strides allow) the first input itself (in place). cuinline_apply runs the chain in one kernel on
PyTorch's current stream (a side stream in some cases; in torch.cuda.graph, replayed on new data, in
others); the reference is the same chain as PyTorch ops on the same tensors, each rounding to the
dtype as eager PyTorch does. Checked: every output element's bits equal PyTorch's (any NaN matches
any NaN), the output poisoned with NaN first.

A failing case prints `FAIL {json}`; `--case '{json}'` reruns it, and
bench/elementwise_fuzz_regressions.jsonl (`--cases-file`) keeps the cases that once failed, with why.

Usage: elementwise_fuzz.py --lib build-shared/libcuinline.so [--seconds 120] [--workers 4] [--seed S]
                           [--case JSON]
"""
import argparse
import ctypes
import math

import torch
import torch.nn.functional as F

import fuzz_common
from torch_capi_check import Tensor, desc

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
INT = {"f32": torch.int32, "f16": torch.int16, "bf16": torch.int16, "f64": torch.int64}

# (op text, PyTorch op on the running value)
FUNCTIONS = [
    ("relu", torch.relu), ("leaky_relu(0.2)", lambda t: F.leaky_relu(t, 0.2)), ("sigmoid", torch.sigmoid),
    ("tanh", torch.tanh), ("silu", F.silu), ("gelu", F.gelu), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")),
    ("mish", F.mish), ("softplus", F.softplus), ("softplus(2, 5)", lambda t: F.softplus(t, beta=2, threshold=5)),
    ("elu", F.elu), ("selu", F.selu), ("celu(1.7)", lambda t: F.celu(t, 1.7)), ("hardswish", F.hardswish),
    ("hardsigmoid", F.hardsigmoid), ("hardtanh", F.hardtanh), ("relu6", F.relu6), ("exp", torch.exp),
    ("abs", torch.abs), ("neg", torch.neg), ("softsign", F.softsign), ("tanhshrink", F.tanhshrink),
    ("logsigmoid", F.logsigmoid), ("hardshrink(0.3)", lambda t: F.hardshrink(t, 0.3)),
    ("softshrink", F.softshrink), ("threshold(0.1, 20)", lambda t: F.threshold(t, 0.1, 20.0)),
    ("clamp(-1.5, 0.75)", lambda t: t.clamp(-1.5, 0.75)), ("sqrt", torch.sqrt), ("log", torch.log),
]
SCALARS = [0.5, 2.0, -3.0, 0.1, 1e-3, 7.0, 0.3]
EXTENTS = [1, 1, 2, 3, 4, 5, 7, 8, 16, 31, 33, 64, 100, 128, 257, 1000, 1024, 4099]


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.cuinline_last_error.restype = ctypes.c_char_p
        self.lib.cuinline_apply.argtypes = [ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int,
                                            ctypes.POINTER(Tensor), ctypes.c_int, ctypes.c_void_p]

    def apply(self, op, ins, outs):
        """A callable running outs = op(ins) on the current stream."""
        di = [desc(t) for t in ins]
        do = [desc(t) for t in outs]
        ia, oa = (Tensor * len(di))(*di), (Tensor * len(do))(*do)
        text = op.encode()

        def run():
            st = self.lib.cuinline_apply(text, ia, len(di), oa, len(do),
                                         ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if st != 0:
                raise RuntimeError(f"status {st}: {self.lib.cuinline_last_error().decode()}")
        run._keep = (di, do, ia, oa, text)
        return run


def draw(rng):
    dtype = rng.choice(list(DT))
    while True:
        rank = rng.randint(1, 5)
        shape = [rng.choice(EXTENTS) for _ in range(rank)]
        if math.prod(shape) <= (1 << 22):
            break
    n_inputs = rng.choice([1, 1, 2, 2, 3, 4])
    inputs = []
    for k in range(n_inputs):
        if k == 0:
            kind = rng.choice(["full", "full", "full", "row", "column"]) if n_inputs > 1 else "full"
        else:
            kind = rng.choice(["full", "full", "row", "column", "scalar", "ones", "leading"])
        if kind == "full":
            s = list(shape)
        elif kind == "row":
            s = [shape[-1]]
        elif kind == "column":
            s = list(shape[:-1]) + [1]
        elif kind == "scalar":
            s = rng.choice([[], [1]])
        elif kind == "ones":
            s = [d if rng.random() < 0.5 else 1 for d in shape]
        else:
            s = list(shape[rng.randint(0, rank - 1):])
        layout = rng.choice(["contiguous", "contiguous", "permuted", "sliced", "offset", "expanded"])
        inputs.append({"shape": s, "layout": layout})
    # The chain: every extra input used at least once, in a random order among the other steps.
    steps = []
    for k in range(1, n_inputs):
        steps.append(f"{rng.choice(['add', 'sub', 'mul', 'div'])}(in{k})")
    for _ in range(rng.randint(1 if n_inputs == 1 else 0, 3)):
        r = rng.random() if n_inputs > 1 else rng.random() * 0.8
        if r < 0.6:
            steps.append(rng.choice(FUNCTIONS)[0])
        elif r < 0.8:
            steps.append(f"{rng.choice(['add', 'sub', 'mul', 'div'])}({rng.choice(SCALARS)})")
        elif n_inputs > 1 and rng.random() < 0.5:
            steps.append(f"{rng.choice(['add', 'sub', 'mul', 'div'])}(in{rng.randint(1, n_inputs - 1)})")
        elif n_inputs > 1:  # a selection: the condition an input, the other value an input or a scalar
            cond = rng.randint(1, n_inputs - 1)
            other = f"in{rng.randint(1, n_inputs - 1)}" if rng.random() < 0.5 else str(rng.choice(SCALARS + [0.0, -0.0]))
            steps.append(f"where(in{cond}, {other})")
    rng.shuffle(steps)
    # The output has the inputs' broadcast shape (apply's rule, as PyTorch's).
    rank_b = max(len(i["shape"]) for i in inputs)
    shape = [max([1] + [i["shape"][d - rank_b + len(i["shape"])] for i in inputs if d - rank_b + len(i["shape"]) >= 0])
             for d in range(rank_b)] or [1]
    out_layout = rng.choice(["contiguous", "contiguous", "permuted", "sliced"])
    if inputs[0]["shape"] == shape and inputs[0]["layout"] in ("contiguous", "permuted") and rng.random() < 0.2:
        out_layout = "in place"
    return dict(dtype=dtype, shape=shape, inputs=inputs, steps=steps, out=out_layout,
                side_stream=rng.random() < 0.2, graph=rng.random() < 0.1, seed=rng.randrange(1 << 30))


def values(shape, dt, g):
    """Normal values (scaled) with special values sprinkled in."""
    n = max(1, math.prod(shape))
    v = torch.randn(n, device="cuda", generator=g, dtype=torch.float64) * 3
    special = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-40, -1e-40, 6e-8, 1e-310,
                            65504.0, 3.0, -3.0, 20.0, 0.5, -0.1], device="cuda", dtype=torch.float64)
    pick = torch.randint(0, n, (max(1, n // 50),), device="cuda", generator=g)
    v[pick] = special[torch.randint(0, len(special), pick.shape, device="cuda", generator=g)]
    return v.to(dt).reshape(shape)


def laid_out(t, layout, g):
    """The same values as `t` in a view of the given layout."""
    if layout == "contiguous" or t.dim() == 0:
        return t.contiguous()
    if layout == "permuted":
        perm = list(range(t.dim()))[::-1]
        return t.permute(perm).contiguous().permute(perm)  # strides reversed
    if layout == "sliced":
        big = torch.empty(list(t.shape[:-1]) + [2 * t.shape[-1]], device="cuda", dtype=t.dtype)
        view = big[..., ::2]
        view.copy_(t)
        return view
    if layout == "offset":
        flat = torch.empty(t.numel() + 1, device="cuda", dtype=t.dtype)
        view = flat[1:].view(t.shape)
        view.copy_(t)
        return view
    # expanded: a dimension of extent > 1 read with stride 0 (its values repeated)
    dims = [d for d in range(t.dim()) if t.shape[d] > 1]
    if not dims:
        return t.contiguous()
    d = dims[0]
    base = t.narrow(d, 0, 1).contiguous()
    t.copy_(base.expand(t.shape))  # (the reference reads the same repeated values)
    return base.expand(t.shape)


def torch_chain(steps, ins):
    y = ins[0]
    fns = dict(FUNCTIONS)
    for s in steps:
        name, _, arg = s.partition("(")
        arg = arg[:-1]
        if name == "where":
            cond, other = (a.strip() for a in arg.split(","))
            o = ins[int(other[2:])] if other.startswith("in") else float(other)
            y = torch.where(ins[int(cond[2:])] != 0, y, o)
        elif name in ("add", "sub", "mul", "div"):
            other = ins[int(arg[2:])] if arg.startswith("in") else float(arg)
            y = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[name](y, other)
        else:
            y = fns[s](y)
    return y


def run_case(lib, c):
    dt = DT[c["dtype"]]
    g = torch.Generator(device="cuda").manual_seed(c["seed"])
    ins = [laid_out(values(i["shape"], dt, g), i["layout"], g) for i in c["inputs"]]
    shape = c["shape"]
    ref = torch_chain(c["steps"], ins).expand(shape).contiguous()  # (a chain of broadcast inputs only)
    if c["out"] == "in place":
        out = ins[0]
    elif c["out"] == "contiguous":
        out = torch.empty(shape, device="cuda", dtype=dt)
    else:
        out = laid_out(torch.empty(shape, device="cuda", dtype=dt), c["out"], g)
    op = "|".join(c["steps"])
    detail = ""
    if c["graph"]:
        if c["out"] == "in place":
            return True, "skipped (in place in a graph)"
        run = lib.apply(op, ins, [out])
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        for t, i in zip(ins, c["inputs"]):
            if i["layout"] != "expanded":
                t.copy_(values(list(t.shape), dt, g))
        ref = torch_chain(c["steps"], ins).expand(shape).contiguous()
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        detail = "graph "
    else:
        if c["out"] != "in place":
            out.fill_(float("nan"))
        run = lib.apply(op, ins, [out])
        stream = torch.cuda.Stream() if c["side_stream"] else torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        detail = "side-stream " if c["side_stream"] else ""
    got = out.contiguous()
    ints = INT[c["dtype"]]
    bad = (got.view(ints) != ref.view(ints)) & ~(got.isnan() & ref.isnan())
    n = int(bad.sum().item())
    if n:
        i = bad.flatten().nonzero()[:3].flatten().tolist()
        ex = "; ".join(f"got {got.flatten()[k].item()!r} want {ref.flatten()[k].item()!r}" for k in i)
        return False, f"{detail}{n} of {got.numel()} differ, e.g. {ex}"
    return True, f"{detail}{got.numel()} elements bit for bit"


def describe(c):
    ins = ", ".join(f"{i['shape']}{'' if i['layout'] == 'contiguous' else ' ' + i['layout']}" for i in c["inputs"])
    return f"{c['dtype']} {c['shape']} <- {ins} [{'|'.join(c['steps'])}] out {c['out']}"


def main():
    ap = argparse.ArgumentParser()
    fuzz_common.add_arguments(ap, seconds=120)
    args = ap.parse_args()
    fuzz_common.main(args, "elementwise fuzz", lambda: Lib(args.lib), draw, run_case, describe)


if __name__ == "__main__":
    main()

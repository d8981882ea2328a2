#!/usr/bin/env python3
"""conv2d on the layers of real networks: every distinct convolution of ResNet-50 v1.5 and of a UNet
encoder/decoder, each as the network runs it after folding batch norm (conv + bias, + the residual
where the block adds it, + ReLU where the block has one) in one cuinline call, beside PyTorch eager
(cuDNN, then its elementwise ops) and torch.compile, in one process, on the same buffers.

Usage: conv2d_networks.py --lib build-shared/libcuinline.so [--nets resnet50,unet,small_planes] [--dtypes f16,bf16]
                          [--batches 1,8,32] [--compile-batches 32] [--samples 30] [--out networks.md]
                          [--only SUBSTRING] [--generic | --generic-only]

Every tensor channels-last (model.to(memory_format=torch.channels_last)). The L2 is flushed (a
256 MiB write) before every timed call; CUDA events around the call alone, median of --samples after
warm-up. cuinline gets torch's data pointers and stream through the C API (cuinline_conv2d_run),
under the sync JIT policy (the specialized kernel is what is timed). Correctness: cuinline's output
is poisoned with NaN first; cuinline and eager are each compared with the same network computed in
float64 (relative L2). The summary gives, per net, dtype and batch, the geometric mean of
faster-peer / cuinline, how many configurations are at or ahead of the faster peer, and the lowest.
torch.compile is timed for the batches in --compile-batches (each configuration a fresh compile:
static shapes); elsewhere the faster peer is eager. --generic also times each configuration on the
generic conv2d kernel (the `generic` JIT policy: what a never-seen variant runs on while its
specialized kernel compiles, docs/jit.md) and checks its output the same way; the summary then adds
the geometric mean and the largest generic / specialized time. --generic-only times the generic
kernel alone (no specialized kernel compiled, no peer): one line a configuration, for comparing
generic kernels across builds or CUINLINE_CONV2D_GENERIC_* settings, one process each.
"""
import argparse
import ctypes
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from gpu_timing import l2_flush_buffer, time_ms

F32, F16, BF16 = 0, 1, 2
DTYPES = {"f16": (torch.float16, F16), "bf16": (torch.bfloat16, BF16)}


def resnet50():
    """ResNet-50 v1.5 at 224 x 224: (name, Cin, H, Cout, K, stride, pad, epilogue) where epilogue is
    'relu', 'res+relu' (the block's last 1 x 1: + identity, then ReLU) or 'none' (the projection
    shortcut: conv + bias only). Distinct shapes only."""
    layers = [("stem 7x7", 3, 224, 64, 7, 2, 3, "relu")]
    cin = 64
    for stage, (width, hw, stride) in enumerate([(64, 56, 1), (128, 56, 2), (256, 28, 2), (512, 14, 2)], 1):
        out = width * 4
        ohw = hw // stride
        layers.append((f"L{stage} 1x1 {cin}->{width}", cin, hw, width, 1, 1, 0, "relu"))
        layers.append((f"L{stage} 3x3 {width} s{stride}", width, hw, width, 3, stride, 1, "relu"))
        if stride != 1:
            layers.append((f"L{stage} 3x3 {width}", width, ohw, width, 3, 1, 1, "relu"))
        layers.append((f"L{stage} 1x1 {width}->{out} +res", width, ohw, out, 1, 1, 0, "res+relu"))
        layers.append((f"L{stage} proj {cin}->{out} s{stride}", cin, hw, out, 1, stride, 0, "none"))
        layers.append((f"L{stage} 1x1 {out}->{width}", out, ohw, width, 1, 1, 0, "relu"))
        cin = out
    return layers


def unet():
    """A UNet (Ronneberger et al., 3 x 3 convs with padding 1, ReLU) at 256 x 256 with channels 64-1024:
    the encoder's convs, the decoder's first conv of each level (its input the concatenation of the
    upsampled path and the skip: twice the level's channels) and the 1 x 1 head. The decoder's second
    conv of a level has the encoder's shape and is not repeated."""
    layers = []
    cin = 3
    for level, (ch, hw) in enumerate([(64, 256), (128, 128), (256, 64), (512, 32), (1024, 16)]):
        layers.append((f"enc{level} 3x3 {cin}->{ch} @{hw}", cin, hw, ch, 3, 1, 1, "relu"))
        layers.append((f"enc{level} 3x3 {ch} @{hw}", ch, hw, ch, 3, 1, 1, "relu"))
        cin = ch
    for level, (ch, hw) in enumerate([(512, 32), (256, 64), (128, 128), (64, 256)]):
        layers.append((f"dec{level} 3x3 {2 * ch}->{ch} @{hw}", 2 * ch, hw, ch, 3, 1, 1, "relu"))
    layers.append(("head 1x1 64->2 @256", 64, 256, 2, 1, 1, 0, "none"))
    return layers


def small_planes():
    """Deep 3 x 3 layers on small planes (7 x 7 to 12 x 12: 49 to 144 output pixels an image), 256 and
    512 channels: where an image's plane fills less than one tile and the reduction is long."""
    return [(f"3x3 {c} @{hw}", c, hw, c, 3, 1, 1, "relu") for c in (256, 512) for hw in (7, 8, 9, 10, 11, 12)]


NETS = {"resnet50": resnet50, "unet": unet, "small_planes": small_planes}


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


class Conv2dParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("input", ctypes.POINTER(Tensor)), ("weight", ctypes.POINTER(Tensor)),
                ("output", ctypes.POINTER(Tensor)), ("bias", ctypes.POINTER(Tensor)),
                ("residual", ctypes.POINTER(Tensor)), ("stride", ctypes.POINTER(ctypes.c_int)),
                ("padding", ctypes.POINTER(ctypes.c_int)), ("dilation", ctypes.POINTER(ctypes.c_int)),
                ("groups", ctypes.c_int), ("num_channel_operands", ctypes.c_int),
                ("channel_operands", ctypes.POINTER(Tensor)), ("epilogue", ctypes.c_char_p),
                ("precision", ctypes.c_char_p), ("stream", ctypes.c_void_p)]


def desc(t, code):
    shape = (ctypes.c_int64 * t.dim())(*t.shape)
    strides = (ctypes.c_int64 * t.dim())(*t.stride())
    d = Tensor(t.data_ptr(), code, t.dim(), shape, strides)
    d._keep = (shape, strides)
    return d


def model(x, w, b, r, stride, pad, epilogue):
    y = F.conv2d(x, w, b, stride, pad)
    if epilogue == "none":
        return y
    if r is not None:
        y = y + r
    return F.relu(y)


class Case:
    def __init__(self, layer, batch, dtype_name, lib):
        self.name, self.cin, self.hw, self.cout, self.k, self.stride, self.pad, self.epilogue = layer
        self.batch, self.dtype_name, self.lib = batch, dtype_name, lib
        dt, code = DTYPES[dtype_name]
        g = torch.Generator(device="cuda").manual_seed(1)
        cl = torch.channels_last
        bound = 1.0 / math.sqrt(self.cin * self.k * self.k)
        self.x = torch.randn(batch, self.cin, self.hw, self.hw, device="cuda", generator=g).to(dt).contiguous(memory_format=cl)
        self.w = ((torch.rand(self.cout, self.cin, self.k, self.k, device="cuda", generator=g) * 2 - 1) * bound).to(dt)
        self.w = self.w.contiguous(memory_format=cl)
        self.b = ((torch.rand(self.cout, device="cuda", generator=g) * 2 - 1) * bound).to(dt)
        self.o = (self.hw + 2 * self.pad - self.k) // self.stride + 1
        out_shape = (batch, self.cout, self.o, self.o)
        self.y = torch.empty(out_shape, device="cuda", dtype=dt).contiguous(memory_format=cl)
        self.r = None
        if self.epilogue == "res+relu":
            self.r = torch.randn(out_shape, device="cuda", generator=g).to(dt).contiguous(memory_format=cl)
        self.descs = [desc(self.x, code), desc(self.w, code), desc(self.y, code), desc(self.b, code)]
        if self.r is not None:
            self.descs.append(desc(self.r, code))
        self.stride_arr = (ctypes.c_int * 2)(self.stride, self.stride)
        self.pad_arr = (ctypes.c_int * 2)(self.pad, self.pad)
        p = Conv2dParams()
        p.size = ctypes.sizeof(Conv2dParams)
        p.input, p.weight, p.output, p.bias = (ctypes.pointer(d) for d in self.descs[:4])
        if self.r is not None:
            p.residual = ctypes.pointer(self.descs[4])
        p.stride, p.padding = self.stride_arr, self.pad_arr
        p.epilogue = None if self.epilogue == "none" else b"relu"
        self.params = p

    def label(self):
        return f"{self.name} ({self.batch}x{self.cin}x{self.hw}² → {self.cout}, k{self.k} s{self.stride}) {self.dtype_name}"

    def macs(self):
        return self.batch * self.cout * self.o * self.o * self.cin * self.k * self.k

    def eager(self):
        return model(self.x, self.w, self.b, self.r, self.stride, self.pad, self.epilogue)

    def cuinline(self):
        self.params.stream = torch.cuda.current_stream().cuda_stream
        if self.lib.cuinline_conv2d_run(ctypes.byref(self.params)) != 0:
            raise RuntimeError(self.lib.cuinline_last_error().decode())
        return self.y

    def reference(self):
        d = torch.float64
        r = self.r.to(d) if self.r is not None else None
        return model(self.x.to(d).contiguous(), self.w.to(d).contiguous(), self.b.to(d), r, self.stride, self.pad,
                     self.epilogue)


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--nets", default="resnet50,unet")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--compile-batches", default="32", help="batches timed under torch.compile too ('' none)")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--only", default="", help="only layers whose name contains this")
    ap.add_argument("--generic", action="store_true", help="time the generic conv2d kernel too")
    ap.add_argument("--generic-only", action="store_true", help="time the generic conv2d kernel alone")
    args = ap.parse_args()
    args.generic = args.generic or args.generic_only
    os.environ.setdefault("CUINLINE_JIT_POLICY", "sync")
    lib = ctypes.CDLL(args.lib)
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_conv2d_run.argtypes = [ctypes.POINTER(Conv2dParams)]
    if lib.cuinline_set_jit_policy(1) != 0:
        sys.exit(lib.cuinline_last_error().decode())
    nets = [n for n in args.nets.split(",") if n]
    for n in nets:
        if n not in NETS:
            sys.exit(f"unknown net {n} ({', '.join(NETS)})")
    batches = [int(b) for b in args.batches.split(",") if b]
    compile_batches = {int(b) for b in args.compile_batches.split(",") if b}
    flush = l2_flush_buffer()
    lines = [f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, channels-last, L2 flushed before "
             f"every timed call, median of {args.samples}", "",
             "| layer | epilogue | cuinline ms | eager ms | torch.compile ms | faster peer / cuinline | "
             "rel L2 cuinline | rel L2 eager |" + (" generic ms | generic / cuinline | rel L2 generic |"
                                                  if args.generic else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|---|" if args.generic else "")]
    print("\n".join(lines), flush=True)
    summary, generic_ratios = {}, {}
    # --generic: every configuration on the generic kernel first, while its variant is new to the
    # process (a variant does not include the batch): under `generic` a variant without a loaded
    # specialized kernel runs on the generic one and nothing compiles; once a sync call has loaded
    # the specialized kernel, that one serves.
    generic_runs = {}

    def generic_launches():
        stats = (ctypes.c_uint64 * 6)()  # cuinline_jit_stats: generic_launches first
        assert lib.cuinline_get_jit_stats(stats) == 0
        return stats[0]

    def configs():
        for net in nets:
            for dtype_name in [d for d in args.dtypes.split(",") if d]:
                for batch in batches:
                    for layer in NETS[net]():
                        if not args.only or args.only in layer[0]:
                            yield net, dtype_name, batch, Case(layer, batch, dtype_name, lib)

    if args.generic:
        launches = generic_launches()
        assert lib.cuinline_set_jit_policy(2) == 0
        if args.generic_only:
            lines = ["| net | dtype | batch | layer | generic ms | rel L2 generic |", "|---|---|---|---|---|---|"]
            print("\n".join(lines), flush=True)
        for net, dtype_name, batch, case in configs():
            case.y.fill_(float("nan"))
            got = case.cuinline().clone()
            err_gen = rel_l2(got, case.reference())
            del got
            generic_runs[(net, dtype_name, batch, case.name)] = (time_ms(case.cuinline, flush, args.samples, warmup=5), err_gen)
            if args.generic_only:
                t, _ = generic_runs[(net, dtype_name, batch, case.name)]
                lines.append(f"| {net} | {dtype_name} | {batch} | {case.name} | {t:.4f} | {err_gen:.2e} |")
                print(lines[-1], flush=True)
            del case
            torch.cuda.empty_cache()
        assert lib.cuinline_set_jit_policy(1) == 0
        print(f"generic pass: {len(generic_runs)} configurations, {generic_launches() - launches} generic launches "
              f"(each configuration: {args.samples + 6} calls)", flush=True)
        if args.generic_only:
            if args.out:
                with open(args.out, "w") as f:
                    f.write("\n".join(lines) + "\n")
            return
    for net, dtype_name, batch, case in configs():
        generic = ""
        case.y.fill_(float("nan"))
        got = case.cuinline().clone()
        ref = case.reference()
        err, err_eager = rel_l2(got, ref), rel_l2(case.eager(), ref)
        del ref, got
        t_cu = time_ms(case.cuinline, flush, args.samples, warmup=5)
        t_eager = time_ms(case.eager, flush, args.samples, warmup=5)
        t_comp = None
        if batch in compile_batches:
            try:
                torch._dynamo.reset()
                compiled = torch.compile(model, dynamic=False)
                run = lambda: compiled(case.x, case.w, case.b, case.r, case.stride, case.pad, case.epilogue)
                run()
                t_comp = time_ms(run, flush, args.samples, warmup=5)
            except Exception as e:  # noqa: BLE001 - a peer that does not run is reported
                print(f"torch.compile failed: {str(e).splitlines()[0][:100]}", file=sys.stderr)
        if args.generic:
            t_gen, err_gen = generic_runs[(net, dtype_name, batch, case.name)]
            generic_ratios.setdefault((net, dtype_name, batch), []).append((t_gen / t_cu, case.name))
            generic = f" {t_gen:.4f} | {t_gen / t_cu:.2f} | {err_gen:.2e} |"
        peer = min(t_eager, t_comp) if t_comp is not None else t_eager
        ratio = peer / t_cu
        summary.setdefault((net, dtype_name, batch), []).append((ratio, case.name, err <= err_eager * 1.0 + 1e-12))
        comp = f"{t_comp:.4f}" if t_comp is not None else "-"
        line = (f"| {case.label()} | {case.epilogue} | {t_cu:.4f} | {t_eager:.4f} | {comp} | "
                f"{ratio:.2f}x | {err:.2e} | {err_eager:.2e} |" + generic)
        print(line, flush=True)
        lines.append(line)
        del case
        torch.cuda.empty_cache()
    lines += ["", "| net | dtype | batch | configs | geomean faster peer / cuinline | at or ahead | lowest | "
              "error ≤ eager's |", "|---|---|---|---|---|---|---|---|"]
    everything = []
    for (net, dtype_name, batch), rows in summary.items():
        ratios = [r for r, _, _ in rows]
        everything += ratios
        low = min(rows)
        lines.append(f"| {net} | {dtype_name} | {batch} | {len(rows)} | {geomean(ratios):.2f}x | "
                     f"{sum(r >= 1.0 for r in ratios)} | {low[0]:.2f}x ({low[1]}) | {sum(ok for _, _, ok in rows)} |")
    lines.append(f"| all | | | {len(everything)} | {geomean(everything):.2f}x | {sum(r >= 1.0 for r in everything)} | "
                 f"{min(everything):.2f}x | |" if everything else "| all | | | 0 | | | | |")
    n_summary = len(summary) + 3
    if generic_ratios:
        lines += ["", "| net | dtype | batch | geomean generic / cuinline | largest |", "|---|---|---|---|---|"]
        for (net, dtype_name, batch), rows in generic_ratios.items():
            high = max(rows)
            lines.append(f"| {net} | {dtype_name} | {batch} | {geomean([r for r, _ in rows]):.2f} | "
                         f"{high[0]:.2f} ({high[1]}) |")
        n_summary += len(generic_ratios) + 3
    print("\n".join(lines[-n_summary:]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""conv2d -> divide -> LeakyReLU: cuinline beside PyTorch, in one process, on the same buffers.

Usage: conv2d_peers.py --lib build/bench/libcuinline_bench_capi.so --out conv2d.md [--plot sweep.png]
                       [--quick] [--no-compile] [--shapes i,j,k]

Timings are CUDA-event medians after warm-up, each sample a batch of back-to-back calls on torch's
current stream (so per-call host cost counts where the GPU work is shorter than it). cuinline gets
torch's data pointers and stream through ctypes. Correctness: cuinline against F.conv2d with TF32
off (relative L2 and every element within atol = rtol = 1e-4).
"""
import argparse
import ctypes
import datetime
import math
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

SEED = (128, 8, 128, 64, 3, 1, 0)  # N, Cin, H=W, Cout, K, stride, padding
SWEEP = [
    SEED,
    (1, 3, 224, 64, 7, 2, 3),
    (32, 3, 224, 64, 7, 2, 3),
    (64, 3, 32, 16, 3, 1, 1),
    (128, 16, 32, 32, 3, 1, 1),
    (128, 3, 64, 32, 5, 1, 2),
    (16, 8, 128, 64, 5, 2, 0),
    (4, 16, 224, 32, 3, 2, 1),
    (8, 32, 112, 64, 5, 1, 2),
    (64, 32, 64, 128, 3, 1, 0),
    (32, 64, 56, 64, 3, 1, 1),
    (16, 64, 56, 128, 3, 2, 1),
    (32, 64, 56, 128, 1, 1, 0),
    (8, 64, 224, 16, 1, 2, 0),
    (2, 64, 32, 64, 7, 1, 3),
    (1, 8, 64, 16, 3, 1, 1),
    # Issue 19: non-square, dilated and strided shapes (N, Cin, H, W, Cout, KH, KW, stride h/w, pad h/w,
    # dilation h/w).
    (4, 16, 40, 40, 48, 3, 5, 1, 1, 1, 2, 1, 1),
    (8, 32, 64, 96, 64, 1, 7, 1, 1, 0, 3, 1, 1),
    (8, 32, 64, 96, 64, 7, 1, 1, 1, 3, 0, 1, 1),
    (16, 64, 56, 56, 64, 3, 3, 1, 1, 2, 2, 2, 2),
    (8, 128, 28, 28, 128, 3, 3, 1, 1, 4, 4, 4, 4),
    (32, 32, 64, 64, 64, 3, 3, 2, 1, 1, 1, 1, 1),
    (4, 8, 200, 120, 32, 5, 3, 3, 2, 2, 1, 1, 2),
    (16, 3, 96, 160, 32, 4, 4, 4, 4, 0, 0, 1, 1),
]


def load_lib(path):
    lib = ctypes.CDLL(path)
    lib.cuinline_conv2d_f32.restype = ctypes.c_int
    lib.cuinline_conv2d_f32.argtypes = [ctypes.c_void_p] * 4 + [
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_double,
        ctypes.c_double, ctypes.c_void_p]
    lib.cuinline_conv2d_compile_ms.restype = ctypes.c_double
    lib.cuinline_conv2d_compile_ms.argtypes = [
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int, ctypes.c_double,
        ctypes.c_double, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
    lib.cuinline_conv2d_tiling.restype = ctypes.c_int
    lib.cuinline_conv2d_tiling.argtypes = [
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    lib.cuinline_conv2d_last_error.restype = ctypes.c_char_p
    lib.cuinline_conv2d_set_precision.restype = ctypes.c_int
    lib.cuinline_conv2d_set_precision.argtypes = [ctypes.c_int]
    return lib


def median_ms(fn, batch, samples=15, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(batch):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / batch)
    out.sort()
    return out[len(out) // 2]


class Case:
    def __init__(self, shape, divisor=2.0, slope=0.01):
        if len(shape) == 7:  # square: N, Cin, H=W, Cout, K, stride, padding
            n, cin, hw, cout, k, st, pad = shape
            shape = (n, cin, hw, hw, cout, k, k, st, st, pad, pad, 1, 1)
        (self.n, self.cin, self.h, self.w_in, self.cout, self.kh, self.kw, self.sh, self.sw, self.ph, self.pw,
         self.dh, self.dw) = shape
        self.square = (self.h == self.w_in and self.kh == self.kw and self.sh == self.sw and self.ph == self.pw and
                       self.dh == self.dw == 1)
        self.divisor, self.slope = divisor, slope
        self.x = torch.randn(self.n, self.cin, self.h, self.w_in, device="cuda")
        bound = 1.0 / math.sqrt(self.cin * self.kh * self.kw)
        self.w = (torch.rand(self.cout, self.cin, self.kh, self.kw, device="cuda") * 2 - 1) * bound
        self.b = (torch.rand(self.cout, device="cuda") * 2 - 1) * bound
        self.oh = (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1
        self.ow = (self.w_in + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1
        self.y = torch.empty(self.n, self.cout, self.oh, self.ow, device="cuda")
        self.shape_arr = (ctypes.c_int64 * 7)(self.n, self.cin, self.h, self.w_in, self.cout, self.kh, self.kw)
        self.params_arr = (ctypes.c_int * 6)(self.sh, self.sw, self.ph, self.pw, self.dh, self.dw)
        self.flop = 2.0 * self.n * self.cout * self.oh * self.ow * self.cin * self.kh * self.kw
        self.bytes = 4.0 * (self.x.numel() + self.w.numel() + self.b.numel() + self.y.numel())

    def label(self):
        if self.square:
            return f"{self.n}x{self.cin}x{self.h}² → {self.cout}, k{self.kh} s{self.sh} p{self.ph}"
        d = f" d{self.dh}x{self.dw}" if (self.dh, self.dw) != (1, 1) else ""
        return (f"{self.n}x{self.cin}x{self.h}x{self.w_in} → {self.cout}, k{self.kh}x{self.kw} s{self.sh}x{self.sw} "
                f"p{self.ph}x{self.pw}{d}")

    def conv_only(self):
        return F.conv2d(self.x, self.w, self.b, (self.sh, self.sw), (self.ph, self.pw), (self.dh, self.dw))

    def eager(self):
        return F.leaky_relu(self.conv_only() / self.divisor, self.slope)

    def cuinline(self, lib):
        stream = torch.cuda.current_stream().cuda_stream
        rc = lib.cuinline_conv2d_f32(self.x.data_ptr(), self.w.data_ptr(), self.b.data_ptr(), self.y.data_ptr(),
                                     self.shape_arr, self.params_arr, 1, self.divisor, self.slope, stream)
        if rc != 0:
            raise RuntimeError(lib.cuinline_conv2d_last_error().decode())
        return self.y

    def batch(self):
        # enough calls per sample that a sample lasts >= ~2 ms
        est_ms = max(self.flop / 40e12, self.bytes / 3e12) * 1e3
        return int(min(200, max(3, 2.0 / max(est_ms, 1e-3))))


PRECISIONS = {"fp32": 0, "tf32": 1, "tf32x3": 2}


def set_precision(lib, name):
    if lib.cuinline_conv2d_set_precision(PRECISIONS[name]) != 0:
        raise RuntimeError("set_precision " + name)


def check(case, lib):
    case.y.fill_(float("nan"))
    got = case.cuinline(lib)
    torch.cuda.synchronize()
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    ref = case.eager()
    torch.backends.cudnn.allow_tf32 = tf32
    rel = ((got.double() - ref.double()).norm() / ref.double().norm()).item()
    ok = torch.allclose(got, ref, atol=1e-4, rtol=1e-4)
    return rel, ok


def torch_compile_ms(timeout_s):
    """torch.compile (inductor) on the seed shape, in a child process with a time limit."""
    code = (
        "import torch,torch.nn.functional as F,time\n"
        "x=torch.randn(128,8,128,128,device='cuda');w=torch.randn(64,8,3,3,device='cuda')*0.1;"
        "b=torch.randn(64,device='cuda')*0.1\n"
        "f=torch.compile(lambda x,w,b: F.leaky_relu(F.conv2d(x,w,b)/2.0,0.01))\n"
        "t=time.time();f(x,w,b);torch.cuda.synchronize();c=time.time()-t\n"
        "for _ in range(5): f(x,w,b)\n"
        "ts=[]\n"
        "for _ in range(15):\n"
        " s=torch.cuda.Event(enable_timing=True);e=torch.cuda.Event(enable_timing=True);s.record()\n"
        " for _ in range(10): f(x,w,b)\n"
        " e.record();e.synchronize();ts.append(s.elapsed_time(e)/10)\n"
        "ts.sort();print(ts[len(ts)//2],c)\n")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
        ms, compile_s = r.stdout.split()[-2:]
        return float(ms), float(compile_s)
    except Exception as e:  # noqa: BLE001 - a peer that does not run is reported, not fatal
        return None, str(e).splitlines()[0][:80] if str(e) else type(e).__name__


def regime(case, lib, sms):
    """What bounds this shape, from the tiling the library chose and the two floors."""
    t = (ctypes.c_int * 13)()
    if lib.cuinline_conv2d_tiling(case.shape_arr, case.params_arr, t) != 0:
        return "?"
    tiles_x, tiles_y, block_ch, ci_chunk, rt_max = t[9], t[10], t[11], t[5], t[7]
    cout_tiles = -(-case.cout // block_ch)
    rt = 1
    for cand in (8, 4, 2):
        if cand <= rt_max and tiles_x * -(-tiles_y // cand) * cout_tiles * case.n >= 8 * sms:
            rt = cand
            break
    blocks = tiles_x * -(-tiles_y // rt) * cout_tiles * case.n
    if t[12] == 4:  # Winograd F(2x2, 3x3): t[0] tile lanes, t[1] x t[2] warps (tiles x channels)
        tile = (f"Winograd F(2x2,3x3), {t[1]}x{t[2]} warps, {t[3] // 2} tiles x {t[4]} ch/thread, "
                f"{-(-case.cin // ci_chunk)} chunk(s)")
        if blocks < sms:
            return f"occupancy: {blocks} blocks for {sms} SMs ({tile})"
        return f"shared-memory loads of the transformed operands ({tile})"
    tile = f"block {t[0]}x{t[1]}x{t[2]}, {t[3]} px x {t[4]} ch/thread"
    if blocks < sms:
        return f"occupancy: {blocks} blocks for {sms} SMs ({tile})"
    if case.bytes / 4.0e12 > case.flop / 67e12:
        return f"bytes ({tile}, {case.cin // ci_chunk} stages)"
    stages = -(-case.cin // ci_chunk)
    if t[12] == 2:  # the next channel chunk is copied during this one's math
        return f"FMA rate, {stages} double-buffered channel chunks ({tile})"
    if t[12] == 0 and stages > 1:
        return f"FMA rate + {stages} unoverlapped channel stages ({tile})"
    return f"FMA rate, pipelined ({tile})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--shapes", help="run only these SWEEP entries (comma-separated indices)")
    ap.add_argument("--torch-compile-file", help="read the torch.compile result a --torch-compile-only run wrote")
    args = ap.parse_args()
    lib = load_lib(args.lib)
    torch.backends.cudnn.benchmark = True
    dev = torch.cuda.get_device_properties(0)
    lines = [f"GPU: {dev.name}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, PyTorch {torch.__version__}, "
             f"cuDNN {torch.backends.cudnn.version()}", ""]

    # ---- the seed shape ----
    case = Case(SEED)
    rel, ok = check(case, lib)
    tile = (ctypes.c_int * 9)()
    nvrtc = sorted({line.split()[-1] for line in open("/proc/self/maps") if "nvrtc" in line and ".so" in line})
    compile_ms = [lib.cuinline_conv2d_compile_ms(case.shape_arr, case.params_arr, 1, 1, 2.0, 0.01, b"sm_90", tile)
                  for _ in range(3)]
    rows = []
    for tf32 in (True, False):
        torch.backends.cudnn.allow_tf32 = tf32
        tag = "TF32 allowed (default)" if tf32 else "TF32 off"
        rows.append((f"PyTorch eager (cuDNN conv + 2 elementwise), {tag}", median_ms(case.eager, 10)))
        rows.append((f"cuDNN conv alone, {tag}", median_ms(case.conv_only, 10)))
    torch.backends.cudnn.allow_tf32 = False
    if args.torch_compile_file:
        tc_ms, tc_compile = read_torch_compile(args.torch_compile_file)
    elif not args.no_compile:
        tc_ms, tc_compile = torch_compile_ms(90)
    if args.torch_compile_file or not args.no_compile:
        rows.append((f"torch.compile (inductor), first call {tc_compile if tc_ms is None else f'{tc_compile:.1f} s'}",
                     tc_ms))
    ci_ms = median_ms(lambda: case.cuinline(lib), 10)
    rows.append(("**cuinline fp32 (fused, specialized)**", ci_ms))
    mode_notes = []
    for mode in ("tf32x3", "tf32"):
        set_precision(lib, mode)
        m_rel, m_ok = check(case, lib)
        m_ms = median_ms(lambda: case.cuinline(lib), 10)
        m_compile = [lib.cuinline_conv2d_compile_ms(case.shape_arr, case.params_arr, 1, 1, 2.0, 0.01, b"sm_90", None)
                     for _ in range(2)]
        label = ("3xTF32 tensor cores (fp32-accurate split)" if mode == "tf32x3" else "TF32 tensor cores")
        rows.append((f"**cuinline {mode}: {label}**", m_ms))
        mode_notes.append(f"cuinline {mode} vs F.conv2d (TF32 off): relative L2 error {m_rel:.2e}, allclose(atol=rtol=1e-4): "
                          f"{m_ok}; {case.flop / m_ms / 1e9:.1f} TFLOP/s; NVRTC compile "
                          f"{', '.join(f'{m:.0f}' for m in m_compile)} ms.")
    set_precision(lib, "fp32")
    lines += ["## Seed shape: 128×8×128×128, 64 filters 3×3, no padding, /2, LeakyReLU(0.01), float32", "",
              "| what | ms | cuinline speedup |", "|---|---|---|"]
    for name, ms in rows:
        if ms is None:
            lines.append(f"| {name} | not built / did not run | |")
        else:
            lines.append(f"| {name} | {ms:.3f} | {ms / ci_ms:.2f}× |")
    lines += ["| floor: 18.7 GFLOP at the fp32 FMA peak (67 TFLOP/s) | 0.279 | |",
              "| floor: 587 MB at 4.25 TB/s (H200 copy rate) | 0.138 | |", "",
              f"cuinline vs F.conv2d (TF32 off): relative L2 error {rel:.2e}, allclose(atol=rtol=1e-4): {ok}; "
              f"{case.flop / ci_ms / 1e9:.1f} TFLOP/s ({100 * case.flop / ci_ms / 1e9 / 67:.0f} % of the FMA peak).",
              f"NVRTC compile of this variant for sm_90 (no cache): {', '.join(f'{m:.0f}' for m in compile_ms)} ms "
              f"(three compiles in one process; tiling {list(tile)[:5]}, ci_chunk {tile[5]}, unroll {tile[6]}, "
              f"smem {tile[8]} B; NVRTC libraries in this process: {', '.join(nvrtc) or '?'}).", ""] + mode_notes + [""]
    print("\n".join(lines), flush=True)

    # ---- the sweep ----
    sweep = SWEEP[:6] if args.quick else SWEEP
    if args.shapes:
        sweep = [SWEEP[int(i)] for i in args.shapes.split(",")]
    lines += ["## Sweep (divide by 2, LeakyReLU 0.01, bias; eager = cuDNN conv + 2 elementwise ops)", "",
              "| shape N×Cin×H² → Cout, k s p | GFLOP | MB | eager TF32 off ms | eager default ms | cuinline ms | "
              "vs eager (TF32 off) | vs eager default | TFLOP/s | rel err | limited by | tf32x3 ms (rel err) | "
              "tf32x3 vs eager TF32 off | tf32 ms (rel err) | tf32 vs eager default |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    results = []
    for shape in sweep:
        c = Case(shape)
        rel, ok = check(c, lib)
        bt = c.batch()
        torch.backends.cudnn.allow_tf32 = False
        e_off = median_ms(c.eager, bt)
        torch.backends.cudnn.allow_tf32 = True
        e_def = median_ms(c.eager, bt)
        torch.backends.cudnn.allow_tf32 = False
        ms = median_ms(lambda: c.cuinline(lib), bt)
        extra = {}
        for mode in ("tf32x3", "tf32"):
            set_precision(lib, mode)
            m_rel, _ = check(c, lib)
            extra[mode] = (median_ms(lambda: c.cuinline(lib), bt), m_rel)
        set_precision(lib, "fp32")
        results.append((c.label(), e_off, e_def, ms, extra["tf32x3"][0], extra["tf32"][0]))
        row = (f"| {c.label()} | {c.flop / 1e9:.2f} | {c.bytes / 1e6:.0f} | {e_off:.3f} | {e_def:.3f} | {ms:.3f} | "
               f"{e_off / ms:.2f}× | {e_def / ms:.2f}× | {c.flop / ms / 1e9:.1f} | {rel:.1e}{'' if ok else ' FAIL'} | "
               f"{regime(c, lib, dev.multi_processor_count)} | {extra['tf32x3'][0]:.3f} ({extra['tf32x3'][1]:.0e}) | "
               f"{e_off / extra['tf32x3'][0]:.2f}× | {extra['tf32'][0]:.3f} ({extra['tf32'][1]:.0e}) | "
               f"{e_def / extra['tf32'][0]:.2f}× |")
        lines.append(row)
        print(row, flush=True)
        del c
        torch.cuda.empty_cache()
    lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")

    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(11, 5))
            xs = range(len(results))
            ax.bar([i - 0.27 for i in xs], [r[1] / r[3] for r in results], 0.27, label="fp32 FMA vs eager, TF32 off")
            ax.bar([i for i in xs], [r[1] / r[4] for r in results], 0.27, label="tf32x3 vs eager, TF32 off")
            ax.bar([i + 0.27 for i in xs], [r[2] / r[5] for r in results], 0.27, label="tf32 vs eager, TF32 default")
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_xticks(list(xs))
            ax.set_xticklabels([r[0] for r in results], rotation=60, ha="right", fontsize=7)
            ax.set_ylabel("cuinline speedup (×)")
            ax.set_title(f"fused conv2d → /2 → LeakyReLU, {dev.name}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(args.plot, dpi=110)
        except Exception as e:  # noqa: BLE001
            print("plot failed:", e)


def read_torch_compile(path, wait_s=120):
    deadline = time.time() + wait_s
    while time.time() < deadline:
        try:
            with open(path) as f:
                text = f.read().split()
            if len(text) >= 2:
                return (None if text[0] == "None" else float(text[0])), (
                    float(text[1]) if text[0] != "None" else " ".join(text[1:]))
        except (OSError, ValueError):
            pass
        time.sleep(1)
    return None, "timed out"


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--torch-compile-only":
        ms, c = torch_compile_ms(110)
        print(ms, c, flush=True)
        sys.exit(0)
    t0 = time.time()
    main()
    print(f"conv2d_peers.py: {time.time() - t0:.0f} s")

#!/usr/bin/env python3
"""Where f32 channels-last conv2d should leave the general kernel for the f32 NCHW kernels between
transposing copies (conv2d_tuning's transpose_min_macs, 2^22 multiply-adds an image): the same
calls timed with CUINLINE_CONV2D_TRANSPOSE=0 (the general kernel) and =1 (the copies), each in a
process of its own (the library reads the variable once), on shapes around the threshold and
batches of 1, 8 and 64.

Usage: conv2d_f32_nhwc_threshold.py --lib build/bench/libcuinline_bench_capi.so

Every tensor channels-last (input, weight, output), bias, epilogue /2 -> LeakyReLU(0.01), precision
fp32; CUDA events around each call on torch's current stream, the L2 flushed before each, median of
30 after warm-up.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

# Cin, H=W, Cout, K, padding: multiply-adds an image from ~0.3M to ~19M.
SHAPES = [(8, 32, 16, 3, 1), (8, 64, 16, 3, 1), (16, 32, 32, 3, 1), (16, 64, 32, 3, 1), (32, 32, 64, 3, 1),
          (3, 128, 32, 5, 2), (64, 28, 64, 3, 1)]
BATCHES = [1, 8, 64]


def measure(lib_path):
    import torch
    from conv2d_half_peers import load_lib  # (this directory; imports torch)
    lib = load_lib(lib_path)
    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    cl = torch.channels_last
    out = {}
    for cin, hw, cout, k, pad in SHAPES:
        for n in BATCHES:
            x = torch.randn(n, cin, hw, hw, device="cuda").contiguous(memory_format=cl)
            w = (torch.randn(cout, cin, k, k, device="cuda") * 0.1).contiguous(memory_format=cl)
            b = torch.randn(cout, device="cuda")
            o = hw + 2 * pad - k + 1
            y = torch.empty(n, cout, o, o, device="cuda").contiguous(memory_format=cl)
            shape = (ctypes.c_int64 * 7)(n, cin, hw, hw, cout, k, k)
            params = (ctypes.c_int * 6)(1, 1, pad, pad, 1, 1)
            kernel = ctypes.c_int(-1)

            def call(kp=None):
                rc = lib.cuinline_conv2d_any(x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), shape, params, 0,
                                             7, 1, 2.0, 0.01, torch.cuda.current_stream().cuda_stream, kp)
                if rc != 0:
                    raise RuntimeError(lib.cuinline_conv2d_last_error().decode())

            call(ctypes.byref(kernel))
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ms = []
            for _ in range(30):
                flush.zero_()
                s.record()
                call()
                e.record()
                e.synchronize()
                ms.append(s.elapsed_time(e))
            ms.sort()
            out[f"{cin},{hw},{cout},{k},{pad},{n}"] = (ms[len(ms) // 2], kernel.value)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.lib)))
        return
    runs = {}
    for setting in ("0", "1"):
        env = dict(os.environ, CUINLINE_CONV2D_TRANSPOSE=setting)
        r = subprocess.run([sys.executable, __file__, "--lib", args.lib, "--child"], env=env, capture_output=True,
                           text=True, check=False)
        if r.returncode != 0:
            sys.exit(r.stderr)
        runs[setting] = json.loads(r.stdout.strip().splitlines()[-1])
    print("| Cin x H=W -> Cout, k | MACs an image | N | general kernel ms | NCHW kernel + copies ms | "
          "copies / general |")
    print("|---|---|---|---|---|---|")
    for cin, hw, cout, k, pad in SHAPES:
        o = hw + 2 * pad - k + 1
        macs = cout * o * o * cin * k * k
        for n in BATCHES:
            key = f"{cin},{hw},{cout},{k},{pad},{n}"
            g, t = runs["0"][key][0], runs["1"][key][0]
            print(f"| {cin}x{hw}² -> {cout}, k{k} | {macs / 1e6:.1f}M | {n} | {g:.4f} | {t:.4f} | {t / g:.2f} |")


if __name__ == "__main__":
    main()

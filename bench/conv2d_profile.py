#!/usr/bin/env python3
"""Launches the seed-shape conv2d in each precision a few times (for ncu: profile one launch each).
Usage: conv2d_profile.py LIB"""
import ctypes
import sys

import torch

lib = ctypes.CDLL(sys.argv[1])
x = torch.randn(128, 8, 128, 128, device="cuda")
w = torch.randn(64, 8, 3, 3, device="cuda") * 0.1
b = torch.randn(64, device="cuda") * 0.1
y = torch.empty(128, 64, 126, 126, device="cuda")
shape = (ctypes.c_int64 * 7)(128, 8, 128, 128, 64, 3, 3)
params = (ctypes.c_int * 6)(1, 1, 0, 0, 1, 1)
for precision in (0, 1, 2):
    lib.cuinline_conv2d_set_precision(precision)
    for _ in range(3):
        rc = lib.cuinline_conv2d_f32(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()),
                                     ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(y.data_ptr()), shape, params, 1,
                                     ctypes.c_double(2.0), ctypes.c_double(0.01), None)
        assert rc == 0
torch.cuda.synchronize()

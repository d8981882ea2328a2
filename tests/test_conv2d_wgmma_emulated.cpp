// tests/test_conv2d_hmma_emulated.cpp with wgmma.mma_async emulated (its descriptors decoded and the
// swizzled tiles read as the PTX ISA defines them): the wgmma tiling's main loop as sm_90a runs it —
// the copies into the swizzled layout, the descriptors, the one wgmma group in flight and the buffer
// it reads, the accumulator layout into the epilogue — checked against the float64 reference on the
// host. The plain test runs the same tilings through their mma.sync form, and alone the tilings
// without wgmma (the same program in both binaries).
#define CUINLINE_CONV2D_WGMMA_EMULATED 1
#include "test_conv2d_hmma_emulated.cpp"

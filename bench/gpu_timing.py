"""How the Python benchmarks time a GPU call (docs/PERFORMANCE.md, "Method"): warm-up calls, then
CUDA events around each timed call with the L2 flushed before it (a 256 MiB write), the median.

The stream is held busy (a spin of HOLD_CYCLES clocks, about 0.5 ms) between the flush and the start
event, so that the host's work of the timed call (ctypes descriptors, torch.compile's guards, a Triton
launcher) is done before the GPU reaches the start event: else, where it outlasts the flush, the GPU
idles inside the timed window and the host's time is counted as the kernel's."""
import torch

HOLD_CYCLES = 1 << 20


def l2_flush_buffer():
    """256 MiB of float32: zeroing it before a timed call evicts the L2 (60 MB on an H200)."""
    return torch.empty(64 << 20, dtype=torch.float32, device="cuda")


def time_ms(fn, flush, samples=30, warmup=3):
    """The median of `samples` timed calls of fn (ms), each after flush.zero_(), after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(samples):
        flush.zero_()
        torch.cuda._sleep(HOLD_CYCLES)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    ms.sort()
    return ms[len(ms) // 2]

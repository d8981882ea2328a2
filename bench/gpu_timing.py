"""How the Python benchmarks time a GPU call (docs/PERFORMANCE.md, "Method"): warm-up calls, then
CUDA events around each timed call with the L2 flushed before it (a 256 MiB write), the median."""
import torch


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
        s.record()
        fn()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    ms.sort()
    return ms[len(ms) // 2]

"""PyTorch peers of bench/nary_bench.cpp: the same expressions in eager mode and torch.compile on
the same shapes, timed the same way (L2 flushed with a 256 MiB write before each timed call, CUDA
events, median of 30 after warm-up), beside a copy. Run in the same GPU call as the C++ bench."""
import torch
import torch.nn.functional as F
from gpu_timing import l2_flush_buffer, time_ms


def main():
    flush = l2_flush_buffer()
    m, n = 8192, 28672
    exprs = {
        "SwiGLU silu(a) * b": lambda a, b, row: F.silu(a) * b,
        "bias + GELU gelu(x + bias_row)": lambda a, b, row: F.gelu(a + row),
        "x + 0.5 * r": lambda a, b, row: a + 0.5 * b,
    }
    print("| op | dtype | copy ms | eager ms | torch.compile ms |")
    print("|---|---|---|---|---|")
    for dt in (torch.float32, torch.bfloat16):
        a = torch.randn(m, n, device="cuda", dtype=dt)
        b = torch.randn(m, n, device="cuda", dtype=dt)
        row = torch.randn(n, device="cuda", dtype=dt)
        y = torch.empty_like(a)
        copy = time_ms(lambda: y.copy_(a), flush)
        for name, fn in exprs.items():
            compiled = torch.compile(fn)
            eager = time_ms(lambda: fn(a, b, row), flush)
            comp = time_ms(lambda: compiled(a, b, row), flush)
            print(f"| {name} | {str(dt).split('.')[-1]} | {copy:.4f} | {eager:.4f} | {comp:.4f} |")
        del a, b, y
        torch.cuda.empty_cache()
    k = 8192
    x = torch.randn(k, k, device="cuda")
    row = torch.randn(k, device="cuda")
    y = torch.empty_like(x)
    f = lambda: x + row
    compiled = torch.compile(f)
    print(f"| bias row x + b | float32 | {time_ms(lambda: y.copy_(x), flush):.4f} | {time_ms(f, flush):.4f} | "
          f"{time_ms(compiled, flush):.4f} |")


if __name__ == "__main__":
    main()

"""PyTorch peers of bench/resnet_block.cpp: relu(conv2d(x, w, b, padding=1) + residual), f32, eager
(TF32 off and on) and torch.compile (TF32 off and on), the L2 flushed (256 MiB zero_) before each
timed call, CUDA events, median of 40 after warm-up. Run in the same GPU call as the C++ bench."""
import torch
import torch.nn.functional as F

from gpu_timing import l2_flush_buffer, time_ms


def block(x, w, b, r):
    return torch.relu(F.conv2d(x, w, b, padding=1) + r)


def main():
    flush = l2_flush_buffer()
    compiled = torch.compile(block)
    print("| shape | eager TF32 off | eager TF32 on | torch.compile TF32 off | torch.compile TF32 on |")
    print("|---|---|---|---|---|")
    for n, c, hw in [(32, 64, 56), (32, 128, 28), (32, 256, 14), (8, 64, 112)]:
        g = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(n, c, hw, hw, device="cuda", generator=g)
        w = torch.randn(c, c, 3, 3, device="cuda", generator=g) * 0.05
        b = torch.randn(c, device="cuda", generator=g)
        r = torch.randn(n, c, hw, hw, device="cuda", generator=g)
        row = []
        for fn in (block, compiled):
            for tf32 in (False, True):
                torch.backends.cudnn.allow_tf32 = tf32
                torch.backends.cuda.matmul.allow_tf32 = tf32
                row.append(time_ms(lambda: fn(x, w, b, r), flush, samples=40, warmup=5))
        print(f"| {n}x{c}x{hw}^2 | {row[0]:.4f} | {row[1]:.4f} | {row[2]:.4f} | {row[3]:.4f} |")


if __name__ == "__main__":
    main()

// conv2d_transpose.cuh — the copies around an f32 conv with channels-last tensors.
//
// The f32 kernels (conv2d.cuh's direct kernel, Winograd, the TF32 tensor cores) read and write NCHW.
// An f32 call with a channels-last input, weight, residual or output (PyTorch's
// memory_format=torch.channels_last) runs them on NCHW copies in stream-ordered scratch memory
// (conv2d_launch.cpp): the channels-last input, weight and residual are transposed into NCHW first,
// the conv writes an NCHW result, and that is transposed into the caller's channels-last output.
// One transpose is a batch of row-major matrices [rows][cols] -> [cols][rows]:
//   input / residual  [N][H*W][C]        -> [N][C][H*W]
//   weight            [Cout][KH*KW][Cin] -> [Cout][Cin][KH*KW]
//   output            [N][Cout][OH*OW]   -> [N][OH*OW][Cout]
//
// Shape-generic: the extents are kernel arguments, so one module (conv2d_transpose.cpp's
// make_transpose_request: this header, one kernel) and one cache entry an arch serve every such
// variant. The values are moved as 32-bit words, bit for bit (NaN payloads, -0.0 and subnormals
// unchanged).
//
// A block moves a tile of 2^lt elements (the host's choice, 2^10-2^12): tr rows x tc columns, tc = 32
// where the matrix has at least 32 columns, else the power of two at or above its column count (8
// channels: 8 columns), so a matrix with few columns still reads whole runs: thread t loads elements
// t, t + 256, ... of the tile in row-major order (consecutive threads, consecutive addresses of the
// source) and stores elements t, t + 256, ... of the transposed tile (consecutive addresses of the
// destination). The tile sits in shared memory with rows padded to tc + 1 words (tc even: a column
// read by consecutive rows is conflict-free; tc = 1 needs no padding). tc and tr are powers of two:
// a thread's row and column are shifts and masks.
//
// No standard or toolkit headers.

#ifndef CUINLINE_CONV2D_TRANSPOSE_CUH
#define CUINLINE_CONV2D_TRANSPOSE_CUH

namespace cuinline_conv2d_transpose_detail {
constexpr int kThreads = 256;
constexpr int kMaxLogTile = 12;
// Shared memory of the largest tile with the widest padding: 2^12 elements plus one word a row, most
// at tc = 2 (2048 rows of 3 words).
constexpr int kSmemWords = (1 << kMaxLogTile) * 3 / 2;
}  // namespace cuinline_conv2d_transpose_detail

/// Batch blockIdx.y of [rows][cols] 32-bit words at src -> [cols][rows] at dst (batch stride rows x
/// cols in both). Tile blockIdx.x: tile row blockIdx.x / col_tiles, tile column blockIdx.x %
/// col_tiles; the tile is 2^(lt - lc) rows x 2^lc columns (lc <= 5, 10 <= lt <= 12).
/// Block: 256 threads; no dynamic shared memory.
__global__ void __launch_bounds__(cuinline_conv2d_transpose_detail::kThreads)
    cuinline_conv2d_transpose(const unsigned* __restrict__ src, unsigned* __restrict__ dst, long long rows,
                              long long cols, unsigned col_tiles, int lc, int lt) {
  namespace d = cuinline_conv2d_transpose_detail;
  __shared__ unsigned s[d::kSmemWords];
  const int tc = 1 << lc;
  const int lr = lt - lc;  // log2 tr
  const int tr = 1 << lr;
  const int pitch = lc == 0 ? 1 : tc + 1;
  const int tile = 1 << lt;
  const unsigned rt = blockIdx.x / col_tiles;
  const long long r0 = static_cast<long long>(rt) * tr;
  const long long c0 = static_cast<long long>(blockIdx.x - rt * col_tiles) * tc;
  const long long plane = rows * cols;
  src += blockIdx.y * plane;
  dst += blockIdx.y * plane;
#pragma unroll 4
  for (int e = static_cast<int>(threadIdx.x); e < tile; e += d::kThreads) {
    const int i = e >> lc, j = e & (tc - 1);
    const long long r = r0 + i, c = c0 + j;
    if (r < rows && c < cols) s[i * pitch + j] = src[r * cols + c];
  }
  __syncthreads();
#pragma unroll 4
  for (int e = static_cast<int>(threadIdx.x); e < tile; e += d::kThreads) {
    const int j = e >> lr, i = e & (tr - 1);
    const long long r = r0 + i, c = c0 + j;
    if (r < rows && c < cols) dst[c * rows + r] = s[i * pitch + j];
  }
}

#endif  // CUINLINE_CONV2D_TRANSPOSE_CUH

// conv2d_hmma/plan.cuh — the tiling, shared-memory layout and launch figures of conv2d_hmma.cuh:
// plan_figures(PlanShape), a constexpr function of the shape struct's values, and Plan<S>, its
// figures for a shape struct S (the members listed at the top of conv2d_hmma.cuh) with the checks
// and the two device helpers. One definition for both sides: the library's host code includes this
// file (src/ops/conv2d/conv2d_hmma.cpp) and plans a variant's shared memory, buffers, grid and
// stores with plan_figures, which is what the kernel's Plan<S> compiles. Plain C++ besides the two
// device helpers, which are host functions where the file is compiled as host C++ (no __CUDACC__);
// CUINLINE_CONV2D_HMMA_WGMMA (0 where undefined) picks the wgmma tiling's block count.

#ifdef __CUDACC__
#define CUINLINE_CONV2D_HMMA_PLAN_FN static __device__ __forceinline__
#define CUINLINE_CONV2D_HMMA_PLAN_CONSTEXPR __host__ __device__ constexpr
#else
#define CUINLINE_CONV2D_HMMA_PLAN_FN static inline
#define CUINLINE_CONV2D_HMMA_PLAN_CONSTEXPR constexpr
#endif

#ifndef CUINLINE_CONV2D_HMMA_PLAN_CUH
#define CUINLINE_CONV2D_HMMA_PLAN_CUH

namespace cuinline_conv2d_hmma_detail {

// The values of a shape struct S's members that a plan depends on (conv2d_hmma.cuh lists them;
// flags 0 or 1; elem: bytes of a storage element, 2 for f16 / bf16, 4 for float).
struct PlanShape {
  int elem;
  int cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  int in_nhwc, w_nhwc, out_nhwc, in_aligned, out_aligned;
  int warps_m, warps_n, mt, nt, ci_pad, bk, async_depth;
  int wgmma, halo, window, window_tiles, pointwise, tma;
  int residual;
};

// A plan's figures; Plan<S> has each as the member k<Name> (kThreads, kSmemBytes, ...), where the
// comments of plan_figures say what they are.
struct PlanFigures {
  int warps, threads, bm, bn, bk, elem;
  long long pixels;
  bool halo;
  int segs, co_blocks;
  long long tiles_x;
  int tiles_y;
  int taps, taps_per_step, ci_steps, steps;
  bool pointwise;
  int pitch;
  bool wgmma;
  int row_bytes, swz_mask, tile_pitch, k_slices;
  bool a_trans;
  int a_pitch_t, a_elems;
  bool window;
  int stage_elems, chunk_elems;
  bool async;
  int step_words;
  bool all_at_once;
  int reg_stages, async_stages, stages, chunks;
  int win_tile_cols, win_tile_rows, win_rows, win_cols, win_pixels, win_group, win_bytes, win_bufs;
  bool window_tiles;
  int win_out_offset;
  int halo_rows, halo_cols;
  bool in_nchw_copy;
  int left, stage_cols, halo_lead, halo_pitch, halo_b, halo_a, halo_zero, halo_stage, halo_out;
  int main_bytes, c_pitch, cm, cc;
  bool half_epi;
  int h_pitch, out_bytes, out_end;
  bool tma, tma_im2col;
  int box_cols, box_rows, bar_offset, smem_bytes;
  long long run;
  int vec_max, out_vec;
  bool res_prefetch;
  int res_offset;
};

// Outputs a store: the largest of 8 (16-bit outputs rounded in registers, half_epi), 4, 2 that
// divides the output's contiguous run, where the output and residual pointers are aligned to it;
// else 1 (see kOutVec below).
CUINLINE_CONV2D_HMMA_PLAN_CONSTEXPR int plan_out_vec(long long run, bool half_epi, bool aligned) {
  return !aligned                     ? 1
         : run % (half_epi ? 8 : 4) == 0 ? (half_epi ? 8 : 4)
         : run % 4 == 0                  ? 4
         : run % 2 == 0                  ? 2
                                         : 1;
}

CUINLINE_CONV2D_HMMA_PLAN_CONSTEXPR PlanFigures plan_figures(const PlanShape& s) {
  PlanFigures f{};
  f.warps = s.warps_m * s.warps_n;
  f.threads = 32 * f.warps;
  f.bm = 16 * s.mt * s.warps_m;
  f.bn = 8 * s.nt * s.warps_n;
  f.bk = s.bk;
  // Bytes of a storage element: 2 (f16, bf16), or 4 (float: TF32 operands, the wgmma cp.async form
  // only; see conv2d_hmma.cuh).
  f.elem = s.elem;
  f.pixels = (long long)s.oh * s.ow;
  // The halo tiling (kHalo; see conv2d_hmma.cuh): a block is kBM consecutive columns of one
  // output row, kSegs blocks a row.
  f.halo = s.halo != 0;
  f.segs = (s.ow + f.bm - 1) / f.bm;
  // (The halo form's tiles run along y: block x computes tiles row_tiles x .. of them in turn.)
  // (The pointwise form's blocks run channel blocks fastest: block x is pixel tile x / kCoBlocks,
  // channel block x % kCoBlocks, so the blocks that read one A tile run together and all but the
  // first find it in L2.)
  f.co_blocks = (s.cout + f.bn - 1) / f.bn;
  f.tiles_x = f.halo ? 1 : (f.pixels + f.bm - 1) / f.bm * (s.pointwise != 0 ? f.co_blocks : 1);
  f.tiles_y = f.halo ? s.oh * f.segs : 1;
  // (Batch tiles, kBatchTiles: the cp.async wgmma tiling of small planes; the block's kBM pixels are
  // consecutive pixels of the batch's N x kOH x kOW (image-major), not of one image's plane, so a
  // block's weight tile serves several images (a 7 x 7 plane filled 49 of 256 rows a tile, and every
  // image re-read the whole weight). Grid: ceil(N kPixels / kBM) blocks along x, one along z; the
  // launch passes N in row_tiles. kTilesX stays the per-image count.)
  f.taps = s.kh * s.kw;
  f.taps_per_step = s.elem == 2 && s.ci_pad == 8 ? 2 : 1;
  f.ci_steps = f.taps_per_step == 2 ? 1 : s.ci_pad / s.bk;
  f.steps = f.taps_per_step == 2 ? (f.taps + 1) / 2 : f.taps * f.ci_steps;
  // The pointwise form (kPointwise; see conv2d_hmma.cuh): a 1 x 1 filter, stride 1, no padding,
  // an NCHW input of whole 16-byte runs of pixels (kPixels % kChunkElems == 0) and a weight of whole
  // 16-byte runs of channels, both 16-byte aligned: A is copied by cp.async as the input lays it out
  // ([k][pixel], kATrans), B as the weight does ([channel][k]); the mma.sync tilings (16-bit: the
  // ldmatrix.trans path; float: m16n8k8 with each operand rounded to TF32 as it is read from shared
  // memory).
  f.pointwise = s.pointwise != 0;
  // Shared tiles, in 16-bit elements: a row of kBK k values padded by 16 bytes, so the 8 rows an
  // ldmatrix phase reads fall in distinct bank quads (float: the m16n8k8 B fragment's words, k t of
  // channel g, on distinct banks: the pitch is 4, 12 or 20 words mod 32).
  f.pitch = s.bk * s.elem / 2 + 8;
  // The wgmma tiling: tiles [rows][kBK] without padding, swizzled (see conv2d_hmma.cuh).
  f.wgmma = s.wgmma != 0;
  f.row_bytes = s.bk * s.elem;         // a row of a swizzled tile
  f.swz_mask = f.row_bytes / 16 - 1;  // 1, 3, 7: the 32-, 64-, 128-byte swizzle
  // (Shared offsets are counted in 16-bit units whatever the storage: a swizzled row is kRowBytes / 2.)
  f.tile_pitch = f.wgmma ? f.row_bytes / 2 : f.pitch;
  // A wgmma k slice is 32 bytes: k16 of 16-bit operands, k8 of TF32 ones.
  f.k_slices = f.row_bytes / 32;
  // An NCHW input stages A transposed, [kBK][kBM + 8] (pixels contiguous, as in global memory: a
  // warp's 32-bit stores of two neighbouring pixels hit 32 banks), read by ldmatrix.trans; a
  // channels-last input as [kBM][kPitch] (channels contiguous).
  // (float: [kBK][kBM + 8] words, pitch 8 or 24 mod 32: the A fragment's words, k t of pixel g, on
  // distinct banks.)
  f.a_trans = !s.in_nhwc;
  f.a_pitch_t = (f.bm + 8) * s.elem / 2;
  f.a_elems = f.a_trans ? s.bk * f.a_pitch_t : f.bm * f.tile_pitch;
  // The window form (kWindow, below) stages only B a step.
  f.window = s.window != 0;
  f.stage_elems = (f.window ? 0 : f.a_elems) + f.bn * f.tile_pitch;
  // Channels-last input and weight with whole 16-byte runs of channels (kCin % 8 == 0): the tiles
  // are copied by cp.async, 16 bytes (8 channels) a copy, kStages deep, where both pointers are
  // 16-byte aligned (kInAligned); else, and for every other layout, the register gather over two of
  // the buffers.
  f.chunk_elems = 16 / s.elem;  // elements of one 16-byte copy
  f.async = (s.in_nhwc && s.w_nhwc && s.cin % f.chunk_elems == 0 && s.in_aligned) || f.pointwise;
  // Short reductions (kSteps <= 5; the seed's 3x3 over 8 channels is 5 steps): every step's tile is
  // requested at once, one memory latency a block instead of one a step. The register gather then
  // holds all the steps' words (kAllAtOnce, where that is at most 64 words a thread) and stages them
  // in kSteps buffers; cp.async rings over kSteps buffers (at least 3).
  f.step_words = (f.bm * s.bk / 2 + f.bn * s.bk / 2) / f.threads;
  f.all_at_once = f.steps <= 5 && f.steps * f.step_words <= 64;
  f.reg_stages = f.all_at_once ? f.steps : 2;
  // async_depth > 0: that many cp.async buffers instead (a tuning choice of the host's plan).
  // Longer reductions: two buffers (H200, f16: UNet-like 0.151 -> 0.148 ms channels-last, ResNet-like
  // 0.043 -> 0.040 against three, four or five; .cg copies were slower everywhere).
  f.async_stages = s.async_depth > 0         ? s.async_depth
                   : f.steps > 3 && f.steps <= 5 ? f.steps
                   : f.steps > 5                 ? 2
                                                 : 3;
  f.stages = s.wgmma                                    ? s.async_depth
             : f.pointwise                              ? f.async_stages
             : f.async && f.async_stages > f.reg_stages ? f.async_stages
                                                        : f.reg_stages;
  f.chunks = f.row_bytes / 16;  // 16-byte copies a tile row and k step
  // The window form of the wgmma tiling (kWindow: the cp.async form with more than 8 input channels,
  // column stride 1, output rows of a multiple of 64 columns that a block tile's kBM pixels cover
  // whole or in equal parts): the block's tile is kWinTileRows output rows x kWinTileCols columns,
  // and the input those read — the window, kWinRows x kWinCols pixels — is copied once a k chunk
  // of kBK channels instead of once a filter tap: [8-channel group][pixel] 16 bytes each, a group
  // kWinGroup bytes (16 past a multiple of 128: a warp's copies of 4 pixels x 8 groups fall on
  // distinct bank quads). The k steps run chunk-major (chunk, then tap); tap (kh, kw)'s A tile of
  // m64 tile i is the window from pixel (row kh kDH, column kw kDW) of the tile's row on — 64
  // consecutive pixels — read in place through a plain K-major descriptor, its second 8 channels
  // one group (kWinGroup bytes) on. Two window buffers: chunk c + 1's is copied during chunk c.
  f.win_tile_cols = f.bm < s.ow ? f.bm : s.ow;
  f.win_tile_rows = f.bm / f.win_tile_cols;
  f.win_rows = (f.win_tile_rows - 1) * s.sh + (s.kh - 1) * s.dh + 1;
  f.win_cols = f.win_tile_cols + (s.kw - 1) * s.dw;
  f.win_pixels = f.win_rows * f.win_cols;
  f.win_group = (f.win_pixels * 16 + 127) / 128 * 128 + 16;
  f.win_bytes = f.chunks * f.win_group;
  f.win_bufs = f.ci_steps > 1 ? 2 : 1;
  // kWindowTiles: a block computes tiles in turn, and the 16-bit output tile has a place of its own
  // from the second window buffer on (neither the next tile's first B buffers nor its first window,
  // which are copied while this tile's outputs are stored; its second window is copied at its step
  // 1, after every thread's stores).
  f.window_tiles = f.window && s.window_tiles != 0;
  f.win_out_offset = f.window_tiles ? f.stages * f.stage_elems * 2 + f.win_bytes : 0;
  // The halo tiling's shared memory: every step's B tile ([kBN][16], the 32-byte swizzle; 256-byte
  // aligned), then the input window [kHaloRows][kHaloCols] of 16-byte pixels (8 channels, zeros past
  // kCin and outside the image), then (an odd tap count) 1 KiB of zeros that the last step's second
  // tap reads.
  f.halo_rows = (s.kh - 1) * s.dh + 1;
  f.halo_cols = f.bm + (s.kw - 1) * s.dw;
  // An NCHW input of whole 16-byte runs (kW % 8 == 0, aligned): copied by cp.async as it is laid out,
  // [kHaloRows][8 channels][kStageCols] from the 8-aligned column below the window's first (kLeft
  // columns before it), then transposed into the window by ldmatrix.trans + stmatrix (sm_90; other
  // archs gather). The window's rows then have 8 columns of slack each side (kHaloLead), which the
  // aligned 8-column groups may write.
  f.in_nchw_copy = f.halo && !s.in_nhwc && s.w % 8 == 0 && s.in_aligned;
  f.left = (8 - s.pw % 8) % 8;
  f.stage_cols = (f.left + f.halo_cols + 7) / 8 * 8;
  f.halo_lead = f.in_nchw_copy ? 8 : 0;
  f.halo_pitch = f.halo_cols + 2 * f.halo_lead;
  f.halo_b = f.steps * f.bn * 32;
  f.halo_a = f.halo_rows * f.halo_pitch * 16;
  f.halo_zero = f.taps % 2 ? 1024 : 0;
  f.halo_stage = f.in_nchw_copy ? f.halo_rows * 8 * f.stage_cols * 2 : 0;
  // The 16-bit output tile (kHalfEpi's, below) has its own place after B: the next tile's window is
  // copied while this one's is stored.
  f.halo_out = (s.out_nhwc ? f.bm : f.bn) * ((s.out_nhwc ? f.bn : f.bm) + 8) * 2;
  f.main_bytes = f.halo     ? f.halo_b + f.halo_out + f.halo_a + f.halo_zero + f.halo_stage
                 : f.window ? f.stages * f.stage_elems * 2 + f.win_bufs * f.win_bytes
                            : f.stages * f.stage_elems * 2;
  // The epilogue tile (fp32): [kBN][kBM + 4] for an NCHW output, [kBM][kBN + 8] for channels-last.
  // The pitches make the accumulator writes conflict-free (NCHW: a warp's 32 scalar writes, channels
  // 2t (+1) x pixels g, land on banks 8t + g; channels-last: a half-warp's float2 writes, pixels g x
  // channel pairs t, on 8g + 2t, 8g + 2t + 1) and keep every row 16-byte aligned for the float4 reads.
  f.c_pitch = s.out_nhwc ? f.bn + 8 : f.bm + 4;
  f.cm = s.out_nhwc ? f.c_pitch : 1;  // stride of a pixel in the tile
  f.cc = s.out_nhwc ? 1 : f.c_pitch;  // stride of a channel
  // The f16 / bf16 wgmma tiling rounds in registers and stages the output tile in the storage type
  // (kHalfEpi; see the epilogue): [kBM][kBN + 8] for a channels-last output, [kBN][kBM + 8] for NCHW
  // (rows 16-byte aligned, the register writes conflict-free). A residual is first copied into the
  // same tile (16-byte loads) and read from it in the accumulators' layout.
  f.half_epi = f.wgmma && s.elem == 2;
  f.h_pitch = s.out_nhwc ? f.bn + 8 : f.bm + 8;
  f.out_bytes = f.half_epi ? (s.out_nhwc ? f.bm : f.bn) * f.h_pitch * 2 : (s.out_nhwc ? f.bm : f.bn) * f.c_pitch * 4;
  // (wgmma: + 1024 to align the stages to the 128-byte swizzle's 1024-byte period.)
  f.out_end = f.win_out_offset + f.out_bytes;
  // The TMA form (kTma; conv2d_hmma/mainloop_tma.cuh): the cp.async wgmma tiling's buffers filled by
  // the tensor memory accelerator, then full and empty mbarriers for each buffer (8 bytes each) after
  // the buffers and the epilogue's tile. tma 1: a tile's kBM pixels are one box of the input of
  // kBoxRows output rows x kBoxCols columns (stride 1); tma 2 (kTmaIm2col): one im2col copy of kBM
  // consecutive pixels, any plane and stride.
  f.tma = s.tma != 0;
  f.tma_im2col = s.tma == 2;
  f.box_cols = f.bm < s.ow ? f.bm : s.ow;
  f.box_rows = f.bm / f.box_cols;
  f.bar_offset = ((f.main_bytes > f.out_end ? f.main_bytes : f.out_end) + 7) / 8 * 8;
  f.smem_bytes = (f.tma ? f.bar_offset + 16 * f.stages : f.main_bytes > f.out_end ? f.main_bytes : f.out_end) +
                 (f.wgmma ? 1024 : 0);
  // Outputs a store: the largest of 8, 4, 2 that divides the contiguous run of the output (so that a
  // vector never straddles two runs and stays aligned) where the output and residual pointers are
  // aligned to it (kOutAligned), else 1. At most 4: a quarter-warp's float4 reads of the tile then
  // cover 128 contiguous bytes (8 floats a thread would be two reads 32 bytes apart, a 2-way bank
  // conflict each). kHalfEpi: up to 8 outputs (16 bytes) a store, a quarter-warp's reads 128
  // contiguous bytes of 16-bit values.
  f.run = s.out_nhwc ? s.cout : f.halo ? s.ow : f.pixels;
  f.vec_max = f.half_epi ? 8 : 4;
  f.out_vec = plan_out_vec(f.run, f.half_epi, s.out_aligned != 0);
  // The residual's tile copied while the main loop runs (kResPrefetch; conv2d_hmma/epilogue.cuh's
  // prefetch_residual): the cp.async wgmma tiling's plain kernel, where its k steps leave buffers
  // unused (kSteps < kStages: a short reduction, a 1 x 1 over 64-128 channels) and the tile fits
  // there, after the buffers the steps use and the output tile, without growing the block's shared
  // memory. The tile is [kBM][kBN] channels-last or [kBN][kBM] NCHW, rows unpadded and their 16-byte
  // chunks swizzled by row (chunk c of row r at c ^ (r % 8): the 8 rows an ldmatrix reads fall on
  // distinct bank quads), so rows of at least 64 values; 16-byte copies (kOutVec 8). Else the
  // residual is copied into the output tile after the main loop.
  const int res_fast = s.out_nhwc ? f.bn : f.bm;
  const int used = (f.steps < f.stages ? f.steps : f.stages) * f.stage_elems * 2;
  f.res_offset = ((used > f.out_bytes ? used : f.out_bytes) + 127) / 128 * 128;
  f.res_prefetch = s.residual != 0 && f.half_epi && f.async && !f.window && !f.halo && !f.tma &&
                   !f.pointwise && f.steps < f.stages && f.out_vec == 8 && res_fast >= 64 &&
                   f.res_offset + f.bm * f.bn * 2 <= f.main_bytes;
  return f;
}

// The PlanShape of a shape struct S.
template <class S>
CUINLINE_CONV2D_HMMA_PLAN_CONSTEXPR PlanShape plan_shape() {
  return PlanShape{(int)sizeof(typename S::storage),
                   S::kCin, S::kH, S::kW, S::kCout, S::kKH, S::kKW, S::kSH, S::kSW, S::kPH, S::kPW, S::kDH, S::kDW,
                   S::kOH, S::kOW,
                   S::kInNhwc, S::kWNhwc, S::kOutNhwc, S::kInAligned, S::kOutAligned,
                   S::kWarpsM, S::kWarpsN, S::kMT, S::kNT, S::kCiPad, S::kBK, S::kAsyncDepth,
                   S::kWgmma, S::kHalo, S::kWindow, S::kWindowTiles, S::kPointwise, S::kTma, S::kHasResidual};
}

// The figures of a shape struct S, evaluated once an instantiation. (A namespace-scope variable
// template: NVRTC emits a class's static constexpr members as device globals, and calling
// plan_figures for each member instead cost the front end ~9 M instructions a variant.)
template <class S>
constexpr PlanFigures kPlanFigures = plan_figures(plan_shape<S>());

template <class S>
struct Plan {
  static constexpr int kWarps = kPlanFigures<S>.warps;
  static constexpr int kThreads = kPlanFigures<S>.threads;
  static constexpr int kBM = kPlanFigures<S>.bm;
  static constexpr int kBN = kPlanFigures<S>.bn;
  static constexpr int kBK = kPlanFigures<S>.bk;
  static constexpr int kElem = kPlanFigures<S>.elem;
  static constexpr long long kPixels = kPlanFigures<S>.pixels;
  static constexpr bool kHalo = kPlanFigures<S>.halo;
  static constexpr int kSegs = kPlanFigures<S>.segs;
  static constexpr int kCoBlocks = kPlanFigures<S>.co_blocks;
  static constexpr int kTilesX = (int)kPlanFigures<S>.tiles_x;
  static constexpr int kTilesY = kPlanFigures<S>.tiles_y;
  static constexpr bool kBatchTiles = S::kBatchTiles != 0;
  static constexpr int kTaps = kPlanFigures<S>.taps;
  static constexpr int kTapsPerStep = kPlanFigures<S>.taps_per_step;
  static constexpr int kCiSteps = kPlanFigures<S>.ci_steps;
  static constexpr int kSteps = kPlanFigures<S>.steps;
  static constexpr bool kPointwise = kPlanFigures<S>.pointwise;
  static constexpr int kPitch = kPlanFigures<S>.pitch;
  static constexpr bool kWgmma = kPlanFigures<S>.wgmma;
  static constexpr int kRowBytes = kPlanFigures<S>.row_bytes;
  static constexpr int kSwzMask = kPlanFigures<S>.swz_mask;
  static constexpr int kTilePitch = kPlanFigures<S>.tile_pitch;
  static constexpr int kKSlices = kPlanFigures<S>.k_slices;
  static constexpr bool kATrans = kPlanFigures<S>.a_trans;
  static constexpr int kAPitchT = kPlanFigures<S>.a_pitch_t;
  static constexpr int kAElems = kPlanFigures<S>.a_elems;
  static constexpr bool kWindow = kPlanFigures<S>.window;
  static constexpr int kStageElems = kPlanFigures<S>.stage_elems;
  static constexpr int kChunkElems = kPlanFigures<S>.chunk_elems;
  static constexpr bool kAsync = kPlanFigures<S>.async;
  static constexpr int kStepWords = kPlanFigures<S>.step_words;
  static constexpr bool kAllAtOnce = kPlanFigures<S>.all_at_once;
  static constexpr int kRegStages = kPlanFigures<S>.reg_stages;
  static constexpr int kAsyncStages = kPlanFigures<S>.async_stages;
  static constexpr int kStages = kPlanFigures<S>.stages;
  static constexpr int kChunks = kPlanFigures<S>.chunks;
  static constexpr int kWinTileCols = kPlanFigures<S>.win_tile_cols;
  static constexpr int kWinTileRows = kPlanFigures<S>.win_tile_rows;
  static constexpr int kWinRows = kPlanFigures<S>.win_rows;
  static constexpr int kWinCols = kPlanFigures<S>.win_cols;
  static constexpr int kWinPixels = kPlanFigures<S>.win_pixels;
  static constexpr int kWinGroup = kPlanFigures<S>.win_group;
  static constexpr int kWinBytes = kPlanFigures<S>.win_bytes;
  static constexpr int kWinBufs = kPlanFigures<S>.win_bufs;
  static constexpr bool kWindowTiles = kPlanFigures<S>.window_tiles;
  static constexpr int kWinOutOffset = kPlanFigures<S>.win_out_offset;
  static constexpr int kHaloRows = kPlanFigures<S>.halo_rows;
  static constexpr int kHaloCols = kPlanFigures<S>.halo_cols;
  static constexpr bool kInNchwCopy = kPlanFigures<S>.in_nchw_copy;
  static constexpr int kLeft = kPlanFigures<S>.left;
  static constexpr int kStageCols = kPlanFigures<S>.stage_cols;
  static constexpr int kHaloLead = kPlanFigures<S>.halo_lead;
  static constexpr int kHaloPitch = kPlanFigures<S>.halo_pitch;
  static constexpr int kHaloB = kPlanFigures<S>.halo_b;
  static constexpr int kHaloA = kPlanFigures<S>.halo_a;
  static constexpr int kHaloZero = kPlanFigures<S>.halo_zero;
  static constexpr int kHaloStage = kPlanFigures<S>.halo_stage;
  static constexpr int kHaloOut = kPlanFigures<S>.halo_out;
  static constexpr int kMainBytes = kPlanFigures<S>.main_bytes;
  static constexpr int kCPitch = kPlanFigures<S>.c_pitch;
  static constexpr int kCM = kPlanFigures<S>.cm;
  static constexpr int kCC = kPlanFigures<S>.cc;
  static constexpr bool kHalfEpi = kPlanFigures<S>.half_epi;
  static constexpr int kHPitch = kPlanFigures<S>.h_pitch;
  static constexpr int kOutBytes = kPlanFigures<S>.out_bytes;
  static constexpr int kOutEnd = kPlanFigures<S>.out_end;
  static constexpr bool kTma = kPlanFigures<S>.tma;
  static constexpr bool kTmaIm2col = kPlanFigures<S>.tma_im2col;
  // The TMA form's blocks a multiprocessor (the plain kernel's __launch_bounds__; the split
  // kernel's is 1): one warpgroup of consumers and the producer's 256 threads, two (at most 128
  // registers: an m64 tile's 64 accumulators need no more); two warpgroups, one (setmaxnreg moves
  // the producer's registers to the consumers).
  static constexpr int kTmaMinBlocks = S::kWarpsM == 4 ? 2 : 1;
  static constexpr int kBoxCols = kPlanFigures<S>.box_cols;
  static constexpr int kBoxRows = kPlanFigures<S>.box_rows;
  static constexpr int kBarOffset = kPlanFigures<S>.bar_offset;
  static constexpr int kSmemBytes = kPlanFigures<S>.smem_bytes;
  // Element strides (channel, row, column, image) of the input and output; of the weight (output
  // channel, input channel, filter row, filter column).
  static constexpr long long kInC = S::kInNhwc ? 1 : (long long)S::kH * S::kW;
  static constexpr long long kInY = S::kInNhwc ? (long long)S::kW * S::kCin : S::kW;
  static constexpr long long kInX = S::kInNhwc ? S::kCin : 1;
  static constexpr long long kInN = (long long)S::kCin * S::kH * S::kW;
  static constexpr long long kOutC = S::kOutNhwc ? 1 : kPixels;
  static constexpr long long kOutP = S::kOutNhwc ? S::kCout : 1;  // a pixel of the flattened plane
  static constexpr long long kOutN = (long long)S::kCout * kPixels;
  static constexpr long long kWO = (long long)S::kCin * kTaps;
  static constexpr long long kWI = S::kWNhwc ? 1 : kTaps;
  static constexpr long long kWY = S::kWNhwc ? (long long)S::kKW * S::kCin : S::kKW;
  static constexpr long long kWX = S::kWNhwc ? S::kCin : 1;
  // Gather of the A tile, a 32-bit shared store of two 16-bit values at a time: channels-last, two
  // consecutive k of one pixel, kAThreadsK threads along the k pairs (the contiguous axis) x
  // kAThreadsM along the pixels; NCHW (kATrans), one k of two neighbouring pixels, kAThreadsM =
  // kBM / 2 threads along the pixel pairs (the contiguous axis) x kAThreadsK along k.
  static constexpr int kPairs = S::kBK / 2;
  static constexpr int kAThreadsM = kATrans ? kBM / 2 : (kThreads / kPairs < kBM ? kThreads / kPairs : kBM);
  static constexpr int kAThreadsK = kThreads / kAThreadsM;
  static constexpr int kARows = kATrans ? 1 : kBM / kAThreadsM;  // pixels (pixel pairs) a thread
  static constexpr int kAPairs = kATrans ? S::kBK / kAThreadsK : kPairs / kAThreadsK;  // words of one
  static constexpr int kAPixels = kATrans ? 2 : kARows;  // window origins a thread keeps
  // The B tile: lanes along the pairs (a channels-last weight's contiguous axis), then channels.
  static constexpr int kBThreadsK = kThreads < kPairs ? kThreads : kPairs;
  static constexpr int kBThreadsN = kThreads / kBThreadsK;
  static constexpr int kBRows = kBN / kBThreadsN;
  static constexpr int kBPairs = kPairs / kBThreadsK;
  static constexpr long long kRun = kPlanFigures<S>.run;
  static constexpr int kVecMax = kPlanFigures<S>.vec_max;
  static constexpr int kOutVec = kPlanFigures<S>.out_vec;
  static constexpr bool kResPrefetch = kPlanFigures<S>.res_prefetch;
  static constexpr int kResOffset = kPlanFigures<S>.res_offset;

  static_assert(S::kNT % 2 == 0, "B fragments are loaded two n tiles at a time");
  static_assert(kElem == 4 || (S::kCiPad == 8 ? S::kCin <= 8 && S::kBK == 16
                                              : S::kCiPad % 16 == 0 && S::kCiPad >= S::kCin && S::kCiPad - S::kCin < 16),
                "kCiPad: 8 (two taps a step) or Cin rounded up to 16");
  static_assert(kElem == 4 || ((S::kBK == 16 || S::kBK == 32 || S::kBK == 64) && (S::kCiPad == 8 || S::kCiPad % S::kBK == 0)),
                "kBK");
  // Float storage (TF32): Cin rounded up to 8 (one k8 slice), a k step of 8, 16 or 32 channels (the
  // 32-, 64- or 128-byte swizzle), the cp.async wgmma tiling without its halo and window forms.
  static_assert(kElem == 2 || (S::kCiPad % 8 == 0 && S::kCiPad >= S::kCin && S::kCiPad - S::kCin < 8 &&
                               (S::kBK == 8 || S::kBK == 16 || S::kBK == 32) && S::kCiPad % S::kBK == 0),
                "float storage: kCiPad is Cin rounded up to 8, kBK 8, 16 or 32 dividing it");
  static_assert(kThreads <= 1024, "block too large");
  // (The register gather's split; the cp.async main loop does not use it.)
  static_assert(kAsync || kHalo || (kAThreadsM * kAThreadsK == kThreads && kARows * kAThreadsM * (kATrans ? 2 : 1) == kBM &&
                           kAPairs * kAThreadsK * (kATrans ? 1 : 2) == S::kBK),
                "the A gather must cover the tile evenly");
  static_assert(kAsync || kHalo || (kBThreadsN * kBThreadsK == kThreads && kBN % kBThreadsN == 0 && kPairs % kBThreadsK == 0),
                "the B gather must cover the tile evenly");
  static_assert((kBM * kBN) % (8 * kThreads) == 0, "the epilogue covers the tile in whole iterations");
  static_assert(!kWgmma || ((kAsync || kHalo) && (S::kWarpsM == 4 || S::kWarpsM == 8) && S::kWarpsN == 1 &&
                            kBM % 64 == 0 && (kBN == 16 || kBN == 32 || kBN == 64 || kBN == 128) &&
                            (kHalo || kStages >= 3)),
                "the wgmma tiling: the cp.async form, one or two warpgroups, m64 tiles, n 16 to 128, 3 buffers");
  static_assert(kElem == 2 || (kWgmma && kAsync && !kHalo && !kWindow) || kPointwise,
                "float storage: the cp.async wgmma tiling (a staged, channels-last copy) or the pointwise form");
  static_assert(!kPointwise || (!S::kInNhwc && S::kKH == 1 && S::kKW == 1 && S::kSH == 1 && S::kSW == 1 &&
                                S::kPH == 0 && S::kPW == 0 && S::kInAligned && kPixels % kChunkElems == 0 &&
                                S::kCin % kChunkElems == 0 && !kWgmma && !kHalo && !kWindow &&
                                (kElem == 4 || S::kCiPad >= 16) &&
                                (S::kBK * kBM * kElem / 16) % kThreads == 0),
                "the pointwise form: 1 x 1, stride 1, no padding, an aligned NCHW input of whole 16-byte runs, "
                "a k step of whole 16-byte chunks a thread");
  static_assert(!kBatchTiles || (kWgmma && kAsync && !kHalo && !kWindow && !kPointwise),
                "batch tiles: the cp.async wgmma tiling's own form");
  static_assert(!kHalo || (kWgmma && S::kCiPad == 8 && S::kSW == 1 && S::kWarpsM == 4 && !S::kHasResidual),
                "the halo tiling: the wgmma tiling's one warpgroup, up to 8 channels, column stride 1, no residual");
  static_assert(!kWindow || (kWgmma && kAsync && !kHalo && kTapsPerStep == 1 && S::kSW == 1 && S::kOW % 64 == 0 &&
                             (kBM % S::kOW == 0 || S::kOW % kBM == 0) && kStages >= 3 && kTaps >= kStages - 1),
                "the window form: the cp.async wgmma tiling, column stride 1, whole 64-column parts of output "
                "rows a tile, the next chunk's window copied within a chunk's taps");
  static_assert(!kWindowTiles || (kHalfEpi && kWinBufs == 2 && !kBatchTiles && !kPointwise),
                "window tiles: the 16-bit output tile in the second window buffer's place");
  static_assert(
      !kTma ||
          (kWgmma && kAsync && kHalfEpi && !kHalo && !kWindow && !kBatchTiles && !kPointwise &&
           S::kBK == 64 && S::kCiPad == S::kCin && kBM <= 256 &&
           (kTmaIm2col ? S::kSH <= 8 && S::kSW <= 8
                       : S::kSH == 1 && S::kSW == 1 && kBoxCols * kBoxRows == kBM &&
                             (kBM % S::kOW == 0 || S::kOW % kBM == 0) && kBoxCols <= 256 && kBoxRows <= 256)),
      "the TMA form: the f16 / bf16 cp.async wgmma tiling, k steps of 64 channels (no padding); a box a "
      "tile: stride 1, a tile of whole output rows or of one row's part, boxes of at most 256 a side; "
      "im2col: strides of at most 8");
  // The first row of a warp's A tile i: with wgmma's accumulator layout 64 (kMT wg + i) + 16 (w % 4)
  // (warpgroup wg = w / 4 computes m64 tiles kMT wg .. kMT wg + kMT - 1), else w's kMT consecutive
  // tiles.
  CUINLINE_CONV2D_HMMA_PLAN_FN int a_row0(int wm, int i) {
    return kWgmma ? 64 * (S::kMT * (wm / 4) + i) + 16 * (wm % 4) : (wm * S::kMT + i) * 16;
  }
  // __launch_bounds__'s blocks a multiprocessor: the host's, except that the wgmma tiling's mma.sync
  // form (archs without wgmma) holds more registers than the host budgets for wgmma (the seed spilled
  // 4 bytes at 96 registers on sm_80): at most 4 blocks (128 registers) there.
#if CUINLINE_CONV2D_HMMA_WGMMA
  static constexpr int kMinBlocks = S::kMinBlocks;
#else
  static constexpr int kMinBlocks = kWgmma && S::kMinBlocks > 4 ? 4 : S::kMinBlocks;
#endif
  // The swizzled chunk of chunk c in row r.
  CUINLINE_CONV2D_HMMA_PLAN_FN int swz(int r, int c) { return c ^ ((r * kRowBytes >> 7) & kSwzMask); }
};

}  // namespace cuinline_conv2d_hmma_detail

#endif  // CUINLINE_CONV2D_HMMA_PLAN_CUH

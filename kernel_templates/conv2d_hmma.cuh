// conv2d_hmma.cuh — conv2d in f16 or bf16 (and f32 in precision tf32) on tensor cores, with the
// contract of conv2d_generic.cuh: any valid shape with groups = 1, input / weight / output each NCHW
// or channels-last, bias, residual, an fp32 epilogue E, one rounding to nearest even at the store.
// Every shape and layout is a compile-time constant; the design and the measurements behind it are
// in docs/conv2d.md ("f16 / bf16 on tensor cores").
//
// GEMM view: M = output pixels of one image (the flattened OH x OW plane; of the whole batch with
// kBatchTiles), N = output channels, K = (filter tap, input channel), channel innermost. Input
// channels are padded with zeros to kCiPad, so a k step of kBK channels lies in one tap and a pixel
// is bounds-checked once a step; up to 8 channels (kCiPad = 8) a k step of 16 is two taps. Products
// of two f16 / bf16 values are exact in fp32, so results differ from the general kernel's only in
// summation order.
//
// Why several main loops: the operands must reach the tensor cores as 16-byte runs of channels.
//   register gather: any layout, 16-bit loads into registers, then shared memory (mma.sync);
//   cp.async: channels-last input and weight, 16-byte aligned (kInAligned), copied straight to
//     shared memory; on sm_90a (kWgmma) wgmma reads them through matrix descriptors from wgmma's
//     swizzled K-major layout, so no warp re-reads fragments with ldmatrix (what limited mma.sync);
//     elsewhere the same tiling runs ldmatrix + mma.sync, so the launch does not depend on the arch;
//   kHalo (up to 8 channels) and kWindow (more): the input a tile reads is staged once and each
//     tap's A tile is read from it in place, instead of copying every pixel once a tap;
//   kPointwise (1 x 1, NCHW): A copied as the input lays it out, nothing staged;
//   float storage (TF32): the cp.async wgmma tiling with 4-byte elements, on a staged copy the
//     staging kernel rounded to TF32.
// Only the loop a variant needs is compiled: the host plans it and renders the flags.
// Epilogue: the accumulators go through shared memory in the output's contiguous order so that
// stores are coalesced vectors (kOutVec, kOutAligned); on the f16 / bf16 wgmma tiling the bias, the
// residual, E and the rounding happen in registers and the tile is 16-bit (half the shared bytes).
//
// Required members of S (all `static constexpr int` unless said):
//   typedef storage (ew_half, ew_bf16, or float: TF32, the cp.async wgmma tiling only);
//   kCin, kH, kW, kCout, kKH, kKW, kSH, kSW, kPH, kPW, kDH, kDW, kOH, kOW, kHasBias, kHasResidual,
//   kInNhwc, kWNhwc, kOutNhwc (0 or 1), kWarpsM, kWarpsN, kMT, kNT (even), kCiPad (8 for kCin <= 8,
//   else kCin rounded up to 16), kBK, kMinBlocks, kInAligned (input and weight pointers 16-byte
//   aligned, 0 or 1), kOutAligned (the output pointer aligned to 2 * the vector kOutVec would be
//   with it, 0 or 1), kAsyncDepth (cp.async buffers; 0: the default), kCopyL2 (1: cp.async.cg,
//   cached in L2 only; 0: .ca), kWgmma (0 or 1: the wgmma tiling above; needs the cp.async form,
//   4 x 1 or 8 x 1 warps, kBM a multiple of 64, kBN of 16, 32, 64 or 128, at least 3 buffers);
//   optional: kHalo, kWindow (the wgmma tiling's forms, below), kPointwise (0 or 1: the pointwise
//   form above; kAsyncDepth buffers). The kernel trusts the two alignment flags.
// No standard or toolkit headers (ew_common.cuh has the half types and their conversions).

#ifndef CUINLINE_CONV2D_HMMA_CUH
#define CUINLINE_CONV2D_HMMA_CUH

// tests/test_conv2d_hmma_emulated.cpp compiles this file on the host with
// CUINLINE_CONV2D_HMMA_EMULATED defined: it supplies the half types, the mma, ldmatrix and the
// shared memory (a warp's lanes as threads), and checks the kernel's indexing against a reference.
#ifndef CUINLINE_CONV2D_HMMA_EMULATED
#include "ew_common.cuh"
#endif

// The wgmma main loop is compiled for sm_90a (and by the emulated test, which supplies wgmma).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(CUINLINE_CONV2D_WGMMA_EMULATED)
#define CUINLINE_CONV2D_HMMA_WGMMA 1
#else
#define CUINLINE_CONV2D_HMMA_WGMMA 0
#endif

namespace cuinline_conv2d_hmma_detail {

// S::kHalo where S has it, else 0 (shapes written before the halo tiling need not name it).
template <class S, class = void>
struct HaloOf {
  static constexpr int value = 0;
};
template <class S>
struct HaloOf<S, decltype(void(S::kHalo))> {
  static constexpr int value = S::kHalo;
};

// S::kWindow where S has it, else 0.
template <class S, class = void>
struct WindowOf {
  static constexpr int value = 0;
};
template <class S>
struct WindowOf<S, decltype(void(S::kWindow))> {
  static constexpr int value = S::kWindow;
};

// S::kPointwise where S has it, else 0.
template <class S, class = void>
struct PointwiseOf {
  static constexpr int value = 0;
};
template <class S>
struct PointwiseOf<S, decltype(void(S::kPointwise))> {
  static constexpr int value = S::kPointwise;
};

// S::kBatchTiles where S has it, else 0.
template <class S, class = void>
struct BatchTilesOf {
  static constexpr int value = 0;
};
template <class S>
struct BatchTilesOf<S, decltype(void(S::kBatchTiles))> {
  static constexpr int value = S::kBatchTiles;
};

// S::kHaloWeightBatch where S has it, else 1 (the halo form's weight gather in batches; 0 under
// CUINLINE_CONV2D_HALO_WBATCH=0).
template <class S, class = void>
struct HaloWeightBatchOf {
  static constexpr int value = 1;
};
template <class S>
struct HaloWeightBatchOf<S, decltype(void(S::kHaloWeightBatch))> {
  static constexpr int value = S::kHaloWeightBatch;
};

// S::kWindowTiles where S has it, else 0: the window form's blocks compute several tiles in turn
// (window_tiles), the next tile's first copies issued while this one's outputs are stored.
template <class S, class = void>
struct WindowTilesOf {
  static constexpr int value = 0;
};
template <class S>
struct WindowTilesOf<S, decltype(void(S::kWindowTiles))> {
  static constexpr int value = S::kWindowTiles;
};

// S::kStoreBatch where S has it, else 1 for the halo form's NCHW output and 0 elsewhere
// (store_tile_half's loads and stores in batches; the host writes CUINLINE_CONV2D_STORE_BATCH's 0 or
// 1 where it is set). H100, f16, ms unbatched / batched: seed NCHW (the halo form)
// 0.1596 / 0.1569; channels-last 0.1115 / 0.1252; ResNet-like NCHW 0.0477 / 0.0518, UNet-like NHWC
// 0.0889 / 0.1010.
template <class S, class = void>
struct StoreBatchOf {
  static constexpr int value = HaloOf<S>::value != 0 && !S::kOutNhwc ? 1 : 0;
};
template <class S>
struct StoreBatchOf<S, decltype(void(S::kStoreBatch))> {
  static constexpr int value = S::kStoreBatch;
};

template <class S>
struct Plan {
  static constexpr int kWarps = S::kWarpsM * S::kWarpsN;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBM = 16 * S::kMT * S::kWarpsM;
  static constexpr int kBN = 8 * S::kNT * S::kWarpsN;
  static constexpr int kBK = S::kBK;
  // Bytes of a storage element: 2 (f16, bf16), or 4 (float: TF32 operands, the wgmma cp.async form
  // only; see the top of the file).
  static constexpr int kElem = (int)sizeof(typename S::storage);
  static constexpr long long kPixels = (long long)S::kOH * S::kOW;
  // The halo tiling (kHalo; see the top of the file): a block is kBM consecutive columns of one
  // output row, kSegs blocks a row.
  static constexpr bool kHalo = HaloOf<S>::value != 0;
  static constexpr int kSegs = (S::kOW + kBM - 1) / kBM;
  // (The halo form's tiles run along y: block x computes tiles row_tiles x .. of them in turn.)
  // (The pointwise form's blocks run channel blocks fastest: block x is pixel tile x / kCoBlocks,
  // channel block x % kCoBlocks, so the blocks that read one A tile run together and all but the
  // first find it in L2.)
  static constexpr int kCoBlocks = (S::kCout + kBN - 1) / kBN;
  static constexpr int kTilesX =
      kHalo ? 1 : (int)((kPixels + kBM - 1) / kBM) * (PointwiseOf<S>::value != 0 ? kCoBlocks : 1);
  static constexpr int kTilesY = kHalo ? S::kOH * kSegs : 1;
  // Batch tiles (kBatchTiles; the cp.async wgmma tiling of small planes): the block's kBM pixels are
  // consecutive pixels of the batch's N x kOH x kOW (image-major), not of one image's plane, so a
  // block's weight tile serves several images (a 7 x 7 plane filled 49 of 256 rows a tile, and every
  // image re-read the whole weight). Grid: ceil(N kPixels / kBM) blocks along x, one along z; the
  // launch passes N in row_tiles.
  static constexpr bool kBatchTiles = BatchTilesOf<S>::value != 0;
  static constexpr int kTaps = S::kKH * S::kKW;
  static constexpr int kTapsPerStep = kElem == 2 && S::kCiPad == 8 ? 2 : 1;
  static constexpr int kCiSteps = kTapsPerStep == 2 ? 1 : S::kCiPad / S::kBK;
  static constexpr int kSteps = kTapsPerStep == 2 ? (kTaps + 1) / 2 : kTaps * kCiSteps;
  // The pointwise form (kPointwise; see the top of the file): a 1 x 1 filter, stride 1, no padding,
  // an NCHW input of whole 16-byte runs of pixels (kPixels % kChunkElems == 0) and a weight of whole
  // 16-byte runs of channels, both 16-byte aligned: A is copied by cp.async as the input lays it out
  // ([k][pixel], kATrans), B as the weight does ([channel][k]); the mma.sync tilings (16-bit: the
  // ldmatrix.trans path; float: m16n8k8 with each operand rounded to TF32 as it is read from shared
  // memory).
  static constexpr bool kPointwise = PointwiseOf<S>::value != 0;
  // Shared tiles, in 16-bit elements: a row of kBK k values padded by 16 bytes, so the 8 rows an
  // ldmatrix phase reads fall in distinct bank quads (float: the m16n8k8 B fragment's words, k t of
  // channel g, on distinct banks: the pitch is 4, 12 or 20 words mod 32).
  static constexpr int kPitch = S::kBK * kElem / 2 + 8;
  // The wgmma tiling: tiles [rows][kBK] without padding, swizzled (see the top of the file).
  static constexpr bool kWgmma = S::kWgmma != 0;
  static constexpr int kRowBytes = S::kBK * kElem;     // a row of a swizzled tile
  static constexpr int kSwzMask = kRowBytes / 16 - 1;  // 1, 3, 7: the 32-, 64-, 128-byte swizzle
  // (Shared offsets are counted in 16-bit units whatever the storage: a swizzled row is kRowBytes / 2.)
  static constexpr int kTilePitch = kWgmma ? kRowBytes / 2 : kPitch;
  // A wgmma k slice is 32 bytes: k16 of 16-bit operands, k8 of TF32 ones.
  static constexpr int kKSlices = kRowBytes / 32;
  // An NCHW input stages A transposed, [kBK][kBM + 8] (pixels contiguous, as in global memory: a
  // warp's 32-bit stores of two neighbouring pixels hit 32 banks), read by ldmatrix.trans; a
  // channels-last input as [kBM][kPitch] (channels contiguous).
  // (float: [kBK][kBM + 8] words, pitch 8 or 24 mod 32: the A fragment's words, k t of pixel g, on
  // distinct banks.)
  static constexpr bool kATrans = !S::kInNhwc;
  static constexpr int kAPitchT = (kBM + 8) * kElem / 2;
  static constexpr int kAElems = kATrans ? S::kBK * kAPitchT : kBM * kTilePitch;
  // The window form (kWindow, below) stages only B a step.
  static constexpr bool kWindow = WindowOf<S>::value != 0;
  static constexpr int kStageElems = (kWindow ? 0 : kAElems) + kBN * kTilePitch;
  // Channels-last input and weight with whole 16-byte runs of channels (kCin % 8 == 0): the tiles
  // are copied by cp.async, 16 bytes (8 channels) a copy, kStages deep, where both pointers are
  // 16-byte aligned (kInAligned); else, and for every other layout, the register gather over two of
  // the buffers.
  static constexpr int kChunkElems = 16 / kElem;  // elements of one 16-byte copy
  static constexpr bool kAsync =
      (S::kInNhwc && S::kWNhwc && S::kCin % kChunkElems == 0 && S::kInAligned) || kPointwise;
  // Short reductions (kSteps <= 5; the seed's 3x3 over 8 channels is 5 steps): every step's tile is
  // requested at once, one memory latency a block instead of one a step. The register gather then
  // holds all the steps' words (kAllAtOnce, where that is at most 64 words a thread) and stages them
  // in kSteps buffers; cp.async rings over kSteps buffers (at least 3).
  static constexpr int kStepWords = (kBM * S::kBK / 2 + kBN * S::kBK / 2) / kThreads;
  static constexpr bool kAllAtOnce = kSteps <= 5 && kSteps * kStepWords <= 64;
  static constexpr int kRegStages = kAllAtOnce ? kSteps : 2;
  // S::kAsyncDepth > 0: that many cp.async buffers instead (a tuning choice of the host's plan).
  // Longer reductions: two buffers (H200, f16: UNet-like 0.151 -> 0.148 ms channels-last, ResNet-like
  // 0.043 -> 0.040 against three, four or five; .cg copies were slower everywhere).
  static constexpr int kAsyncStages = S::kAsyncDepth > 0             ? S::kAsyncDepth
                                      : kSteps > 3 && kSteps <= 5 ? kSteps
                                      : kSteps > 5                ? 2
                                                                  : 3;
  static constexpr int kStages = S::kWgmma ? S::kAsyncDepth
                                 : kPointwise ? kAsyncStages
                                 : kAsync && kAsyncStages > kRegStages ? kAsyncStages
                                                                       : kRegStages;
  static constexpr int kChunks = kRowBytes / 16;  // 16-byte copies a tile row and k step
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
  static constexpr int kWinTileCols = kBM < S::kOW ? kBM : S::kOW;
  static constexpr int kWinTileRows = kBM / kWinTileCols;
  static constexpr int kWinRows = (kWinTileRows - 1) * S::kSH + (S::kKH - 1) * S::kDH + 1;
  static constexpr int kWinCols = kWinTileCols + (S::kKW - 1) * S::kDW;
  static constexpr int kWinPixels = kWinRows * kWinCols;
  static constexpr int kWinGroup = (kWinPixels * 16 + 127) / 128 * 128 + 16;
  static constexpr int kWinBytes = kChunks * kWinGroup;
  static constexpr int kWinBufs = kCiSteps > 1 ? 2 : 1;
  // kWindowTiles: a block computes tiles in turn, and the 16-bit output tile has a place of its own
  // from the second window buffer on (neither the next tile's first B buffers nor its first window,
  // which are copied while this tile's outputs are stored; its second window is copied at its step
  // 1, after every thread's stores).
  static constexpr bool kWindowTiles = kWindow && WindowTilesOf<S>::value != 0;
  static constexpr int kWinOutOffset = kWindowTiles ? kStages * kStageElems * 2 + kWinBytes : 0;
  // The halo tiling's shared memory: every step's B tile ([kBN][16], the 32-byte swizzle; 256-byte
  // aligned), then the input window [kHaloRows][kHaloCols] of 16-byte pixels (8 channels, zeros past
  // kCin and outside the image), then (an odd tap count) 1 KiB of zeros that the last step's second
  // tap reads.
  static constexpr int kHaloRows = (S::kKH - 1) * S::kDH + 1;
  static constexpr int kHaloCols = kBM + (S::kKW - 1) * S::kDW;
  // An NCHW input of whole 16-byte runs (kW % 8 == 0, aligned): copied by cp.async as it is laid out,
  // [kHaloRows][8 channels][kStageCols] from the 8-aligned column below the window's first (kLeft
  // columns before it), then transposed into the window by ldmatrix.trans + stmatrix (sm_90; other
  // archs gather). The window's rows then have 8 columns of slack each side (kHaloLead), which the
  // aligned 8-column groups may write.
  static constexpr bool kInNchwCopy = kHalo && !S::kInNhwc && S::kW % 8 == 0 && S::kInAligned;
  static constexpr int kLeft = (8 - S::kPW % 8) % 8;
  static constexpr int kStageCols = (kLeft + kHaloCols + 7) / 8 * 8;
  static constexpr int kHaloLead = kInNchwCopy ? 8 : 0;
  static constexpr int kHaloPitch = kHaloCols + 2 * kHaloLead;
  static constexpr int kHaloB = kSteps * kBN * 32;
  static constexpr int kHaloA = kHaloRows * kHaloPitch * 16;
  static constexpr int kHaloZero = kTaps % 2 ? 1024 : 0;
  static constexpr int kHaloStage = kInNchwCopy ? kHaloRows * 8 * kStageCols * 2 : 0;
  // The 16-bit output tile (kHalfEpi's, below) has its own place after B: the next tile's window is
  // copied while this one's is stored.
  static constexpr int kHaloOut = (S::kOutNhwc ? kBM : kBN) * ((S::kOutNhwc ? kBN : kBM) + 8) * 2;
  static constexpr int kMainBytes = kHalo     ? kHaloB + kHaloOut + kHaloA + kHaloZero + kHaloStage
                                   : kWindow ? kStages * kStageElems * 2 + kWinBufs * kWinBytes
                                             : kStages * kStageElems * 2;
  // The epilogue tile (fp32): [kBN][kBM + 4] for an NCHW output, [kBM][kBN + 8] for channels-last.
  // The pitches make the accumulator writes conflict-free (NCHW: a warp's 32 scalar writes, channels
  // 2t (+1) x pixels g, land on banks 8t + g; channels-last: a half-warp's float2 writes, pixels g x
  // channel pairs t, on 8g + 2t, 8g + 2t + 1) and keep every row 16-byte aligned for the float4 reads.
  static constexpr int kCPitch = S::kOutNhwc ? kBN + 8 : kBM + 4;
  static constexpr int kCM = S::kOutNhwc ? kCPitch : 1;  // stride of a pixel in the tile
  static constexpr int kCC = S::kOutNhwc ? 1 : kCPitch;  // stride of a channel
  // The f16 / bf16 wgmma tiling rounds in registers and stages the output tile in the storage type
  // (kHalfEpi; see the epilogue): [kBM][kBN + 8] for a channels-last output, [kBN][kBM + 8] for NCHW
  // (rows 16-byte aligned, the register writes conflict-free). A residual is first copied into the
  // same tile (16-byte loads) and read from it in the accumulators' layout.
  static constexpr bool kHalfEpi = kWgmma && kElem == 2;
  static constexpr int kHPitch = S::kOutNhwc ? kBN + 8 : kBM + 8;
  static constexpr int kOutBytes =
      kHalfEpi ? (S::kOutNhwc ? kBM : kBN) * kHPitch * 2 : (S::kOutNhwc ? kBM : kBN) * kCPitch * 4;
  // (wgmma: + 1024 to align the stages to the 128-byte swizzle's 1024-byte period.)
  static constexpr int kOutEnd = kWinOutOffset + kOutBytes;
  static constexpr int kSmemBytes = (kMainBytes > kOutEnd ? kMainBytes : kOutEnd) + (kWgmma ? 1024 : 0);
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
  // Outputs a store: the largest of 8, 4, 2 that divides the contiguous run of the output (so that a
  // vector never straddles two runs and stays aligned) where the output and residual pointers are
  // aligned to it (kOutAligned), else 1. At most 4: a quarter-warp's float4 reads of the tile then
  // cover 128 contiguous bytes (8 floats a thread would be two reads 32 bytes apart, a 2-way bank
  // conflict each).
  static constexpr long long kRun = S::kOutNhwc ? S::kCout : kHalo ? S::kOW : kPixels;
  // kHalfEpi: up to 8 outputs (16 bytes) a store, a quarter-warp's reads 128 contiguous bytes of
  // 16-bit values.
  static constexpr int kVecMax = kHalfEpi ? 8 : 4;
  static constexpr int kOutVec = !S::kOutAligned     ? 1
                                 : kRun % kVecMax == 0 ? kVecMax
                                 : kRun % 4 == 0       ? 4
                                 : kRun % 2 == 0       ? 2
                                                       : 1;

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
  // The first row of a warp's A tile i: with wgmma's accumulator layout 64 (kMT wg + i) + 16 (w % 4)
  // (warpgroup wg = w / 4 computes m64 tiles kMT wg .. kMT wg + kMT - 1), else w's kMT consecutive
  // tiles.
  static __device__ __forceinline__ int a_row0(int wm, int i) {
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
  static __device__ __forceinline__ int swz(int r, int c) { return c ^ ((r * kRowBytes >> 7) & kSwzMask); }
};

#ifndef CUINLINE_CONV2D_HMMA_EMULATED
// The mma of a storage type: d += a * b on one m16n8k16 tile (A row-major 16x16, B column-major
// 16x8, fp32 accumulators).
template <class T>
struct Mma;
template <>
struct Mma<ew_half> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<ew_bf16> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// TF32 m16n8k8 (float storage on archs without wgmma): A row-major 16x8 (a0 row g, k t; a1 row g +
// 8; a2, a3 k t + 4), B column-major 8x8 (b0 k t, column g; b1 k t + 4), fp32 accumulators; g = lane
// / 4, t = lane % 4.
struct MmaTf32 {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
// A 32-bit word of shared memory at shared address addr.
__device__ __forceinline__ unsigned lds32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Four 8x8 matrices of 16-bit elements: lanes 8j .. 8j + 7 give the row addresses of matrix j; a
// lane receives row lane / 4, columns 2 (lane % 4) and 2 (lane % 4) + 1 of each.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, transposed: a lane receives rows 2 (lane % 4) and 2 (lane % 4) + 1, column lane / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// 16 bytes global -> shared, asynchronously; zeros where !valid (src must still be a valid address).
// kL2Only: cached in L2 only (.cg), else in L1 too (.ca: neighbouring taps re-read the same input).
template <int kL2Only>
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  if (kL2Only) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
  }
}
__device__ __forceinline__ void copy_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most kPending of this thread's newest copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

#if CUINLINE_CONV2D_HMMA_WGMMA
// wgmma (sm_90a). D (m64 x kN, fp32) += A (m64 x k16, shared, descriptor a) * B (k16 x kN, shared,
// descriptor b), both K-major; a thread's d[j][q] is row 16 (warp % 4) + lane / 4 + 8 (q / 2),
// column 8 j + 2 (lane % 4) + q % 2 (the layout of mma.sync's m16n8 tiles, one a column block).
template <class T, int kN>
struct Wgmma;
template <>
struct Wgmma<ew_half, 16> {
  static __device__ __forceinline__ void run(float (&d)[2][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_half, 32> {
  static __device__ __forceinline__ void run(float (&d)[4][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]),
          "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_half, 64> {
  static __device__ __forceinline__ void run(float (&d)[8][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]),
          "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]),
          "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
          "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]),
          "+f"(d[7][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_half, 128> {
  static __device__ __forceinline__ void run(float (&d)[16][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]),
          "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]),
          "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
          "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]),
          "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]),
          "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]),
          "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]),
          "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),
          "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]),
          "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_bf16, 16> {
  static __device__ __forceinline__ void run(float (&d)[2][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_bf16, 32> {
  static __device__ __forceinline__ void run(float (&d)[4][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]),
          "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_bf16, 64> {
  static __device__ __forceinline__ void run(float (&d)[8][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]),
          "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]),
          "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
          "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]),
          "+f"(d[7][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<ew_bf16, 128> {
  static __device__ __forceinline__ void run(float (&d)[16][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0][0]),
          "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]),
          "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]),
          "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),
          "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]),
          "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]),
          "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]),
          "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]),
          "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),
          "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]),
          "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

// TF32 (float storage): m64nNk8, both operands K-major (tf32 has no transposed form); the tensor
// cores read the top 19 bits of each 32-bit value (the staging copy rounded them to nearest).
template <>
struct Wgmma<float, 16> {
  static __device__ __forceinline__ void run(float (&d)[2][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, %8, %9, p, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
          "+f"(d[1][2]), "+f"(d[1][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<float, 32> {
  static __device__ __forceinline__ void run(float (&d)[4][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, %16, %17, p, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
          "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<float, 64> {
  static __device__ __forceinline__ void run(float (&d)[8][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
          "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
          "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
          "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<float, 128> {
  static __device__ __forceinline__ void run(float (&d)[16][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
          "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
          "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
          "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
          "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
          "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),
          "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
          "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "l"(a), "l"(b), "r"(1));
  }
};

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// cp.async writes shared memory through the generic proxy, wgmma reads it through the async proxy:
// each thread fences its landed copies before the barrier that publishes them.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accesses of an accumulator across a wgmma wait or fence.
__device__ __forceinline__ void fence_operand(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}
// stmatrix (sm_90): four 8x8 16-bit matrices from the accumulator fragment layout (a lane's word j
// is row lane / 4, columns 2 (lane % 4), + 1 of matrix j) to the rows whose addresses lanes 8j ..
// 8j + 7 give; .trans stores each matrix transposed (fragment column c to the row of lane 8j + c).
__device__ __forceinline__ void stmatrix_x4(unsigned addr, const unsigned (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, const unsigned (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
#endif  // CUINLINE_CONV2D_HMMA_WGMMA
#endif  // CUINLINE_CONV2D_HMMA_EMULATED

#if CUINLINE_CONV2D_HMMA_WGMMA
// Every accumulator of a thread past the last wgmma wait (the compiler keeps their reads after it).
template <class S>
__device__ __forceinline__ void fence_accumulators(float (&acc)[S::kMT][S::kNT][4]) {
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][j][q]);
    }
  }
}
// A matrix descriptor of a K-major tile in the swizzled layout with rows of kRowBytes (32, 64, 128),
// starting at shared address addr: start address, leading byte offset 16 (unused by the swizzled
// K-major layouts), stride byte offset 8 rows (the next 8-row core-matrix group), swizzle mode
// (1: 128-byte, 2: 64-byte, 3: 32-byte).
template <int kRowBytes>
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr) {
  constexpr unsigned long long kMode = kRowBytes == 128 ? 1 : kRowBytes == 64 ? 2 : 3;
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<unsigned long long>(8 * kRowBytes >> 4) << 32) | (kMode << 62);
}
// A descriptor of a K-major tile without swizzle (the halo tiling's A): 8 x 16-byte core matrices,
// row r of a core matrix 16 r bytes from its start, the next 8 rows 128 bytes on (stride byte
// offset), the k 8..15 core matrix `lbo` bytes from the k 0..7 one (leading byte offset, < 256 KiB).
__device__ __forceinline__ unsigned long long wgmma_desc_plain(unsigned addr, unsigned lbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16) | (static_cast<unsigned long long>(128 >> 4) << 32);
}
#endif

// A thread's accumulators, zeroed.
template <class S>
__device__ __forceinline__ void zero_accumulators(float (&acc)[S::kMT][S::kNT][4]) {
#pragma unroll
  for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    }
  }
}

// The raw 16 bits of an element (0 where !ok: zero padding). kPredicated (device): one predicated
// load instead of `ok ? __ldg(p) : 0`, a branch around each load until ptxas converts it. Used by the
// gather of a short reduction (kAllAtOnce: up to 64 words a thread requested at once, the seed's 120
// loads) given at least 168 registers a thread, where it takes ~25 % off NVRTC's time (optimizer and
// ptxas); elsewhere the branch form (predicated there, ptxas keeps more loads in flight and spilled
// tilings of 128 registers). p is not read where !ok either way.
#ifndef CUINLINE_CONV2D_HMMA_EMULATED
template <bool kPredicated = false, class T>
__device__ __forceinline__ unsigned load_bits(const T* p, bool ok) {
  if constexpr (kPredicated) {
    unsigned short v;
    asm("{\n  .reg .pred p;\n  setp.ne.b32 p, %2, 0;\n  mov.b16 %0, 0;\n  @p ld.global.nc.u16 %0, [%1];\n}\n"
        : "=h"(v)
        : "l"(p), "r"(ok ? 1 : 0));
    return v;
  } else {
    return ok ? static_cast<unsigned>(__ldg(reinterpret_cast<const unsigned short*>(p))) : 0u;
  }
}
#else
template <bool kPredicated = false, class T>
unsigned load_bits(const T* p, bool ok) {
  return ok ? static_cast<unsigned>(__ldg(reinterpret_cast<const unsigned short*>(p))) : 0u;
}
#endif
template <class T>
__device__ __forceinline__ float to_float(unsigned bits) {
  T h;
  h.bits = static_cast<unsigned short>(bits);
  return ew_traits<T>::to_op(h);
}
template <class T>
__device__ __forceinline__ unsigned from_float(float x) {
  return ew_traits<T>::from_op(x).bits;
}

// One thread's share of a k step, gathered into registers: A pairs (pixel r, pair j) and B pairs
// (channel r, pair j), each two consecutive k packed low-first (the order ldmatrix expects).
template <class S>
struct Fetch {
  unsigned a[Plan<S>::kARows][Plan<S>::kAPairs];
  unsigned b[Plan<S>::kBRows][Plan<S>::kBPairs];
};

// The pixel state of a thread's A rows, fixed for the block: the first input row and column its
// filter window reads (iy0 >= kH marks a pixel past the plane: every tap then reads nothing).
template <class S>
struct Pixels {
  int iy0[Plan<S>::kAPixels];
  int ix0[Plan<S>::kAPixels];
};

// The filter tap and input channel of column k (0 <= k < kBK) of k step `step`; tap_ok: the tap
// exists (two taps a step: the last step of an odd tap count has only one), ci_ok: a real channel.
template <class S>
__device__ __forceinline__ void tap_channel(int step, int k, int& kh, int& kw, bool& tap_ok, int& ci,
                                            bool& ci_ok) {
  using P = Plan<S>;
  int tap;
  if (P::kTapsPerStep == 2) {
    tap = 2 * step + k / 8;
    ci = k % 8;
  } else {
    tap = step / P::kCiSteps;
    ci = (step - tap * P::kCiSteps) * S::kBK + k;
  }
  kh = tap / S::kKW;
  kw = tap - kh * S::kKW;
  tap_ok = P::kTapsPerStep == 1 || P::kTaps % 2 == 0 || tap < P::kTaps;
  ci_ok = (P::kTapsPerStep == 1 && S::kCin % S::kBK == 0) || ci < S::kCin;
}

// One thread's share of k step `step`, into registers (zeros for padding channels, taps past the
// last, taps outside the image, pixels past the plane and channels past Cout). Offsets within an
// image or a weight row are 32-bit (an image has fewer than 2^31 elements, a weight row fewer than
// 2^22) and unsigned: where a load is off its offset may wrap, and nothing is read there.
template <class S>
__device__ __forceinline__ void fetch(Fetch<S>& f, const Pixels<S>& px,
                                      const typename S::storage* __restrict__ in_n,
                                      const typename S::storage* __restrict__ weight, int co0, int step,
                                      int am0, int ak0, int bn0, int bk0) {
  using P = Plan<S>;
  using T = typename S::storage;
  constexpr bool kPred = P::kAllAtOnce && P::kThreads * S::kMinBlocks <= 384;  // (see load_bits)
  (void)am0;
  if constexpr (P::kATrans) {
    // Column k of pixels 2 am0 and 2 am0 + 1 (low, high half).
#pragma unroll
    for (int j = 0; j < P::kAPairs; ++j) {
      int kh, kw, ci;
      bool tap_ok, ci_ok;
      tap_channel<S>(step, ak0 + j * P::kAThreadsK, kh, kw, tap_ok, ci, ci_ok);
      unsigned word = 0;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int iy = px.iy0[e] + kh * S::kDH;
        const int ix = px.ix0[e] + kw * S::kDW;
        const bool ok = tap_ok && ci_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const unsigned at = static_cast<unsigned>(iy) * static_cast<unsigned>(P::kInY) +
                            static_cast<unsigned>(ix) * static_cast<unsigned>(P::kInX) +
                            static_cast<unsigned>(ci) * static_cast<unsigned>(P::kInC);
        word |= load_bits<kPred>(in_n + at, ok) << (16 * e);
      }
      f.a[0][j] = word;
    }
  } else {
    // Columns k, k + 1 of pixel am0 + r * kAThreadsM (one tap: kCiPad is even).
#pragma unroll
    for (int r = 0; r < P::kARows; ++r) {
#pragma unroll
      for (int j = 0; j < P::kAPairs; ++j) {
        int kh, kw, ci;
        bool tap_ok, ci_ok;
        tap_channel<S>(step, 2 * (ak0 + j * P::kAThreadsK), kh, kw, tap_ok, ci, ci_ok);
        const int iy = px.iy0[r] + kh * S::kDH;
        const int ix = px.ix0[r] + kw * S::kDW;
        const bool inside = tap_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const unsigned at = static_cast<unsigned>(iy) * static_cast<unsigned>(P::kInY) +
                            static_cast<unsigned>(ix) * static_cast<unsigned>(P::kInX) +
                            static_cast<unsigned>(ci) * static_cast<unsigned>(P::kInC);
        const bool ci1_ok = (P::kTapsPerStep == 1 && S::kCin % S::kBK == 0) || ci + 1 < S::kCin;
        f.a[r][j] = load_bits<kPred>(in_n + at, inside && ci_ok) |
                    load_bits<kPred>(in_n + (at + static_cast<unsigned>(P::kInC)), inside && ci1_ok) << 16;
      }
    }
  }
  // B: columns k, k + 1 of channel co0 + bn0 + r * kBThreadsN.
#pragma unroll
  for (int r = 0; r < P::kBRows; ++r) {
    const int co = co0 + bn0 + r * P::kBThreadsN;
    const bool co_ok = S::kCout % P::kBN == 0 || co < S::kCout;
    // A weight of fewer than 2^31 elements: one 32-bit offset (no 64-bit row pointers to keep).
    constexpr bool kWSmall = S::kCout * P::kWO < (1ll << 31);
    const T* w_co = kWSmall ? weight : weight + (co_ok ? co : 0) * P::kWO;
    const unsigned w_row = kWSmall ? static_cast<unsigned>(co) * static_cast<unsigned>(P::kWO) : 0u;
#pragma unroll
    for (int j = 0; j < P::kBPairs; ++j) {
      int kh, kw, ci;
      bool tap_ok, ci_ok;
      tap_channel<S>(step, 2 * (bk0 + j * P::kBThreadsK), kh, kw, tap_ok, ci, ci_ok);
      const bool ok = co_ok && tap_ok;
      const unsigned at = w_row + static_cast<unsigned>(kh) * static_cast<unsigned>(P::kWY) +
                          static_cast<unsigned>(kw) * static_cast<unsigned>(P::kWX) +
                          static_cast<unsigned>(ci) * static_cast<unsigned>(P::kWI);
      const bool ci1_ok = (P::kTapsPerStep == 1 && S::kCin % S::kBK == 0) || ci + 1 < S::kCin;
      f.b[r][j] = load_bits<kPred>(w_co + at, ok && ci_ok) |
                  load_bits<kPred>(w_co + (at + static_cast<unsigned>(P::kWI)), ok && ci1_ok) << 16;
    }
  }
}

template <class S>
__device__ __forceinline__ void store_stage(const Fetch<S>& f, unsigned short* s_a, int am0, int ak0, int bn0,
                                            int bk0) {
  using P = Plan<S>;
  unsigned short* s_b = s_a + P::kAElems;
#pragma unroll
  for (int r = 0; r < P::kARows; ++r) {
#pragma unroll
    for (int j = 0; j < P::kAPairs; ++j) {
      if (P::kATrans) {  // [k][pixel]: pixels 2 am0, 2 am0 + 1 of column k
        const int k = ak0 + j * P::kAThreadsK;
        *reinterpret_cast<unsigned*>(s_a + k * P::kAPitchT + 2 * am0) = f.a[r][j];
      } else {  // [pixel][k]: columns k, k + 1 of the pixel
        const int m = am0 + r * P::kAThreadsM;
        const int k = 2 * (ak0 + j * P::kAThreadsK);
        *reinterpret_cast<unsigned*>(s_a + m * P::kPitch + k) = f.a[r][j];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < P::kBRows; ++r) {
#pragma unroll
    for (int j = 0; j < P::kBPairs; ++j) {
      const int n = bn0 + r * P::kBThreadsN;
      const int k = 2 * (bk0 + j * P::kBThreadsK);
      *reinterpret_cast<unsigned*>(s_b + n * P::kPitch + k) = f.b[r][j];
    }
  }
}

// acc += the staged step. a_row / b_row: this lane's ldmatrix row addresses (bytes, shared space) of
// its warp's first A and B tiles at k = 0.
template <class S>
__device__ __forceinline__ void accumulate(float (&acc)[S::kMT][S::kNT][4], unsigned a_row, unsigned b_row) {
  using P = Plan<S>;
#pragma unroll
  for (int ks = 0; ks < S::kBK / 16; ++ks) {
    unsigned a[S::kMT][4];
    unsigned b[S::kNT / 2][4];
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      if (P::kATrans) {
        ldmatrix_x4_trans(a[i], a_row + (ks * 16 * P::kAPitchT + i * 16) * 2);
      } else {
        ldmatrix_x4(a[i], a_row + (i * 16 * P::kPitch + ks * 16) * 2);
      }
    }
#pragma unroll
    for (int jj = 0; jj < S::kNT / 2; ++jj) ldmatrix_x4(b[jj], b_row + (jj * 16 * P::kPitch + ks * 16) * 2);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) {
        Mma<typename S::storage>::run(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
      }
    }
  }
}

// acc += the staged step in the wgmma tiling's swizzled tiles (stage: their shared address), by
// ldmatrix and mma.sync: the wgmma tiling compiled for an arch without wgmma. Warp wm computes rows
// 64 i + 16 wm (Plan::a_row0) x all kBN channels.
// One k step of mma.sync from shared tiles (the wgmma tilings' form for other archs): lane's A row
// address of warp tile i and k16 slice ks from a_row(i, ks) (ldmatrix.x4: rows lane % 16, channels
// 8 (lane / 16) on), B from the swizzled [kBN][kBK] tile at b_stage.
template <class S, class ARow>
__device__ __forceinline__ void accumulate_rows(float (&acc)[S::kMT][S::kNT][4], const ARow& a_row, unsigned b_stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wn = (threadIdx.x / 32) / S::kWarpsM;
#pragma unroll
  for (int ks = 0; ks < S::kBK / 16; ++ks) {
    unsigned a[S::kMT][4];
    unsigned b[S::kNT / 2][4];
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) ldmatrix_x4(a[i], a_row(i, ks));
#pragma unroll
    for (int jj = 0; jj < S::kNT / 2; ++jj) {
      const int n = wn * S::kNT * 8 + jj * 16 + lane % 8 + lane / 16 * 8;
      ldmatrix_x4(b[jj], b_stage + n * P::kRowBytes + P::swz(n, 2 * ks + (lane / 8) % 2) * 16);
    }
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) {
        Mma<typename S::storage>::run(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
      }
    }
  }
}
// The cp.async form's: A from the swizzled [kBM][kBK] tile at the start of the stage.
template <class S>
__device__ __forceinline__ void accumulate_swizzled(float (&acc)[S::kMT][S::kNT][4], unsigned stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  accumulate_rows<S>(
      acc,
      [&](int i, int ks) {
        const int r = P::a_row0(wm, i) + lane % 16;
        return stage + r * P::kRowBytes + P::swz(r, 2 * ks + lane / 16) * 16;
      },
      stage + P::kAElems * 2);
}

// The float (TF32) form of accumulate_swizzled, for archs without wgmma: mma.sync m16n8k8 with its
// fragments read as 32-bit words from the swizzled tiles (element k of row r at byte r kRowBytes +
// swz(r, k / 4) 16 + (k % 4) 4). Warp wm computes rows 64 i + 16 wm (Plan::a_row0) x all kBN
// channels, the wgmma accumulator layout.
template <class S>
__device__ __forceinline__ void accumulate_swizzled_tf32(float (&acc)[S::kMT][S::kNT][4], unsigned stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  const int g = lane / 4, t = lane % 4;
  const unsigned b_stage = stage + P::kAElems * 2;
  auto at = [&](unsigned tile, int r, int k) {
    return tile + r * P::kRowBytes + P::swz(r, k / 4) * 16 + (k % 4) * 4;
  };
#pragma unroll
  for (int ks = 0; ks < S::kBK / 8; ++ks) {
    const int k0 = 8 * ks + t;
    unsigned a[S::kMT][4];
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      const int r = P::a_row0(wm, i) + g;
      a[i][0] = lds32(at(stage, r, k0));
      a[i][1] = lds32(at(stage, r + 8, k0));
      a[i][2] = lds32(at(stage, r, k0 + 4));
      a[i][3] = lds32(at(stage, r + 8, k0 + 4));
    }
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
      const int n = j * 8 + g;
      const unsigned b0 = lds32(at(b_stage, n, k0));
      const unsigned b1 = lds32(at(b_stage, n, k0 + 4));
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) MmaTf32::run(acc[i][j], a[i], b0, b1);
    }
  }
}

// x rounded to TF32 (cvt.rna: to nearest, ties away from zero; the 32-bit pattern with the low 13
// mantissa bits zero), as the staging copy (conv2d_stage.cuh) and cuBLAS / cuDNN round TF32 operands.
__device__ __forceinline__ unsigned tf32_bits(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#elif defined(__CUDA_ARCH__)
  return __float_as_uint(x);  // (no TF32 before sm_80: the module compiles there, is never launched)
#else
  // The host emulation (tests/test_conv2d_hmma_emulated.cpp): half a TF32 ulp added to the magnitude,
  // then truncated; Inf stays, NaN becomes the canonical NaN.
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) != 0u ? 0x7fffffffu : u;
  return (u + 0x1000u) & 0xffffe000u;
#endif
}
__device__ __forceinline__ float float_of_bits(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// The pointwise form's float main loop step: acc += the staged step at shared address `stage` (A
// [kBK][kAPitchT / 2] words, pixels contiguous; B [kBN][kPitch / 2] words, k contiguous) by mma.sync
// m16n8k8, each fp32 word rounded to TF32 as it is read. Warp (wm, wn) computes pixels (wm kMT + i)
// 16 .. of tile i x channels wn kNT 8 + 8 j ..; per k8 slice the B fragments of the warp's n tiles
// are read once, the A fragments one m tile at a time.
template <class S>
__device__ __forceinline__ void accumulate_pointwise_tf32(float (&acc)[S::kMT][S::kNT][4], unsigned stage) {
  using P = Plan<S>;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  const int wn = (threadIdx.x / 32) / S::kWarpsM;
  const int g = lane / 4, t = lane % 4;
  constexpr int kAWords = P::kAPitchT / 2;  // a k row of A
  constexpr int kBWords = P::kPitch / 2;    // a channel row of B
  const unsigned a_base = stage + (t * kAWords + wm * S::kMT * 16 + g) * 4;
  const unsigned b_base = stage + P::kAElems * 2 + ((wn * S::kNT * 8 + g) * kBWords + t) * 4;
#pragma unroll
  for (int ks = 0; ks < S::kBK / 8; ++ks) {
    unsigned b[S::kNT][2];
#pragma unroll
    for (int j = 0; j < S::kNT; ++j) {
      const unsigned at = b_base + (j * 8 * kBWords + ks * 8) * 4;
      b[j][0] = tf32_bits(float_of_bits(lds32(at)));
      b[j][1] = tf32_bits(float_of_bits(lds32(at + 16)));
    }
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      // a0 (pixel g, k t), a1 (pixel g + 8), a2 (k t + 4), a3 (both)
      const unsigned at = a_base + (ks * 8 * kAWords + i * 16) * 4;
      const unsigned a[4] = {tf32_bits(float_of_bits(lds32(at))), tf32_bits(float_of_bits(lds32(at + 32))),
                             tf32_bits(float_of_bits(lds32(at + 4 * kAWords * 4))),
                             tf32_bits(float_of_bits(lds32(at + 4 * kAWords * 4 + 32)))};
#pragma unroll
      for (int j = 0; j < S::kNT; ++j) MmaTf32::run(acc[i][j], a, b[j][0], b[j][1]);
    }
  }
}

#if CUINLINE_CONV2D_HMMA_WGMMA
// One k step of wgmma (sm_90a) for this thread's warpgroup: B from the swizzled [kBN][kBK] tile at
// b_stage, A of m64 tile i and k16 slice ks through descriptor a_desc(i, ks). (The caller fences
// before and commits after.)
template <class S, class ADesc>
__device__ __forceinline__ void wgmma_step(float (&acc)[S::kMT][S::kNT][4], const ADesc& a_desc, unsigned b_stage) {
  using P = Plan<S>;
#pragma unroll
  for (int ks = 0; ks < P::kKSlices; ++ks) {
    const unsigned long long b = wgmma_desc<P::kRowBytes>(b_stage + ks * 32);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) Wgmma<typename S::storage, P::kBN>::run(acc[i], a_desc(i, ks), b);
  }
}
#endif

// The end of a cp.async main loop: every wgmma group done and its accumulators fenced, then (past
// the empty copy groups left) a barrier: every warp's reads of the buffers are done before the
// epilogue reuses them.
template <class S>
__device__ __forceinline__ void finish_mainloop(float (&acc)[S::kMT][S::kNT][4]) {
#if CUINLINE_CONV2D_HMMA_WGMMA
  if constexpr (Plan<S>::kWgmma) {
    wgmma_wait<0>();
    fence_accumulators<S>(acc);
  }
#endif
  (void)acc;
  copy_wait<0>();
  __syncthreads();
}

// The B tile of one k step (weight rows co0 .. co0 + kBN - 1, channels ci .. ci + 7 of filter tap
// `tap`: this thread's 16-byte chunk `chunk` of rows row0, row0 + kThreads / kChunks, ...) by
// cp.async into s_b: padded rows, or the wgmma tiling's swizzled ones; zeros where !ci_ok or past
// kCout. (mainloop_async keeps its own copy of this loop, and of wgmma_step's and finish_mainloop's:
// written through these helpers its PTX changed and the UNet-like layer without the window form ran
// 2-3 % slower, 0.0895 -> 0.0912 ms channels-last; H200.)
template <class S>
__device__ __forceinline__ void copy_b_tile(unsigned short* s_b, const typename S::storage* __restrict__ weight,
                                            int co0, int tap, int ci, bool ci_ok, int chunk, int row0) {
  using P = Plan<S>;
  constexpr int kRowStep = P::kThreads / P::kChunks;
  constexpr int kBRowsAsync = (P::kBN + kRowStep - 1) / kRowStep;
#pragma unroll
  for (int r = 0; r < kBRowsAsync; ++r) {
    const int n = row0 + r * kRowStep;
    if (P::kBN % kRowStep == 0 || n < P::kBN) {
      const int co = co0 + n;
      const bool ok = ci_ok && (S::kCout % P::kBN == 0 || co < S::kCout);
      const typename S::storage* src = weight + (ok ? co * P::kWO + (long long)tap * S::kCin + ci : 0);
      copy16_async<S::kCopyL2>(s_b + n * P::kTilePitch + (P::kWgmma ? P::swz(n, chunk) : chunk) * 8, src, ok);
    }
  }
}

// The first input row and column of pixel p's filter window (iy0 = kH past the plane: every tap
// then reads outside the image).
template <class S>
__device__ __forceinline__ void window_origin(int p, int& iy0, int& ix0) {
  const int oy = p / S::kOW;
  const int ox = p - oy * S::kOW;
  iy0 = p < Plan<S>::kPixels ? oy * S::kSH - S::kPH : S::kH;
  ix0 = ox * S::kSW - S::kPW;
}
// The same for pixel pg of the batch's images x kPixels (batch tiles), and the offset of its image
// in the input (past the last image: iy0 = kH, nothing read).
template <class S>
__device__ __forceinline__ void batch_origin(int pg, int images, int& iy0, int& ix0, long long& image) {
  using P = Plan<S>;
  const int n = pg / (int)P::kPixels;
  window_origin<S>(pg - n * (int)P::kPixels, iy0, ix0);
  if (n >= images) iy0 = S::kH;
  image = (long long)n * P::kInN;
}
// Element offset of output (or residual) pixel p, channel co, from the first image's origin (batch
// tiles: p counts the batch's pixels; channels-last, that is one plane of N x kPixels).
template <class S>
__device__ __forceinline__ long long out_offset(int p, int co) {
  using P = Plan<S>;
  if constexpr (P::kBatchTiles && !S::kOutNhwc) {
    const int n = p / (int)P::kPixels;
    return n * P::kOutN + (p - n * (int)P::kPixels) * P::kOutP + co * P::kOutC;
  } else {
    return p * P::kOutP + co * P::kOutC;
  }
}

// The main loop through registers (every layout): step k + 1's loads are in flight during step k's
// mma, then stored to the other of two buffers; one barrier a step.
template <class S>
__device__ __forceinline__ void mainloop_registers(float (&acc)[S::kMT][S::kNT][4], unsigned short* s_stage,
                                                   unsigned a_row, unsigned b_row,
                                                   const typename S::storage* __restrict__ in_n,
                                                   const typename S::storage* __restrict__ weight, int p0,
                                                   int co0) {
  using P = Plan<S>;
  const int tid = threadIdx.x;
  // This thread's gather coordinates: A pixel am0 (+ r * kAThreadsM), pair ak0 (+ j * kAThreadsK),
  // or with kATrans pixels 2 am0, 2 am0 + 1, column ak0 (+ j * kAThreadsK); B channel bn0 (+ r *
  // kBThreadsN), pair bk0 (+ j * kBThreadsK).
  const int am0 = P::kATrans ? tid % P::kAThreadsM : tid / P::kAThreadsK;
  const int ak0 = P::kATrans ? tid / P::kAThreadsM : tid % P::kAThreadsK;
  const int bk0 = tid % P::kBThreadsK;
  const int bn0 = tid / P::kBThreadsK;
  Pixels<S> px;
#pragma unroll
  for (int r = 0; r < P::kAPixels; ++r) {
    window_origin<S>(p0 + (P::kATrans ? 2 * am0 + r : am0 + r * P::kAThreadsM), px.iy0[r], px.ix0[r]);
  }
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  if constexpr (P::kAllAtOnce) {
    // Every step's loads in flight together, staged in buffers 0 .. kSteps - 1.
    Fetch<S> fs[P::kSteps];
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step) fetch<S>(fs[step], px, in_n, weight, co0, step, am0, ak0, bn0, bk0);
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step)
      store_stage<S>(fs[step], s_stage + step * P::kStageElems, am0, ak0, bn0, bk0);
    __syncthreads();
#pragma unroll 1
    for (int step = 0; step < P::kSteps; ++step)
      accumulate<S>(acc, a_row + step * kStageBytes, b_row + step * kStageBytes);
    __syncthreads();  // every warp's reads of the stages are done before the epilogue reuses them
    return;
  }
  Fetch<S> f;
  fetch<S>(f, px, in_n, weight, co0, 0, am0, ak0, bn0, bk0);
  store_stage<S>(f, s_stage, am0, ak0, bn0, bk0);
  __syncthreads();
#pragma unroll 1
  for (int step = 0; step < P::kSteps; ++step) {
    const int buf = step & 1;
    // Step + 1's buffer was last read in step - 1, before the barrier that ended it.
    if (step + 1 < P::kSteps) fetch<S>(f, px, in_n, weight, co0, step + 1, am0, ak0, bn0, bk0);
    accumulate<S>(acc, a_row + buf * kStageBytes, b_row + buf * kStageBytes);
    if (step + 1 < P::kSteps) store_stage<S>(f, s_stage + (buf ^ 1) * P::kStageElems, am0, ak0, bn0, bk0);
    __syncthreads();
  }
}

// The main loop through cp.async (P::kAsync: 16-byte aligned pointers): kStages buffers in a ring,
// step k + kStages - 1's copies issued while step k computes. Thread `tid` copies chunk tid %
// kChunks of A rows tid / kChunks + r * (kThreads / kChunks) and the same of the B rows. Chunks of
// channels >= kCin (kCin % 8 == 0: a chunk is all real or all padding) and of taps outside the image
// are zero-filled.
template <class S>
__device__ __forceinline__ void mainloop_async(float (&acc)[S::kMT][S::kNT][4], unsigned short* s_stage,
                                               unsigned a_row, unsigned b_row,
                                               const typename S::storage* __restrict__ in_n,
                                               const typename S::storage* __restrict__ weight, int p0,
                                               int co0, int images = 1) {
  using P = Plan<S>;
  constexpr int kRowStep = P::kThreads / P::kChunks;  // rows a pass of the block covers
  constexpr int kARowsAsync = P::kBM / kRowStep;
  constexpr int kBRowsAsync = (P::kBN + kRowStep - 1) / kRowStep;
  static_assert(P::kThreads % P::kChunks == 0 && (P::kPointwise || P::kBM % kRowStep == 0), "whole A rows a pass");
  const int tid = threadIdx.x;
  const int chunk = tid % P::kChunks;
  const int row0 = tid / P::kChunks;
  int iy0[kARowsAsync], ix0[kARowsAsync];
  long long image[P::kBatchTiles ? kARowsAsync : 1] = {};  // (batch tiles: each row's image)
  if constexpr (P::kBatchTiles) {
#pragma unroll
    for (int r = 0; r < kARowsAsync; ++r) batch_origin<S>(p0 + row0 + r * kRowStep, images, iy0[r], ix0[r], image[r]);
  } else if constexpr (!P::kPointwise) {
#pragma unroll
    for (int r = 0; r < kARowsAsync; ++r) window_origin<S>(p0 + row0 + r * kRowStep, iy0[r], ix0[r]);
  }
  (void)images;
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  // The pointwise form's A tile: kBK rows (input channels) of kBM pixels, kPwChunks 16-byte copies a
  // row, thread tid taking copies tid, tid + kThreads, ... of the tile (consecutive threads along a
  // row: a warp's copies are 512 contiguous bytes of one or two channels). A chunk lies wholly in or
  // past the plane (kPixels % kChunkElems == 0); channels past kCin are zeros.
  constexpr int kPwChunks = P::kBM * P::kElem / 16;
  constexpr int kPwCopies = P::kPointwise ? S::kBK * kPwChunks / P::kThreads : 0;

  auto issue = [&](int step, int buf) {
    // Two taps a step (kCin == 8): chunk c is tap 2 step + c (zeros past the last tap).
    const int tap = P::kTapsPerStep == 2 ? 2 * step + chunk : step / P::kCiSteps;
    const int ci = P::kTapsPerStep == 2 ? 0 : (step - tap * P::kCiSteps) * S::kBK + chunk * P::kChunkElems;
    const int kh = tap / S::kKW;
    const int kw = tap - kh * S::kKW;
    const bool ci_ok =
        P::kTapsPerStep == 2 ? P::kTaps % 2 == 0 || tap < P::kTaps : S::kCin % S::kBK == 0 || ci < S::kCin;
    unsigned short* s_a = s_stage + buf * P::kStageElems;
    unsigned short* s_b = s_a + P::kAElems;
    // Chunk `chunk` of tile row `row`: padded rows, or the wgmma tiling's swizzled ones.
    auto at = [&](int row) { return row * P::kTilePitch + (P::kWgmma ? P::swz(row, chunk) : chunk) * 8; };
    if constexpr (P::kPointwise) {
#pragma unroll
      for (int r = 0; r < kPwCopies; ++r) {
        const int q = tid + r * P::kThreads;
        const int k = q / kPwChunks;
        const int c = q - k * kPwChunks;
        const int ca = step * S::kBK + k;  // (one tap: the step's channels)
        const int p = p0 + c * P::kChunkElems;
        const bool ok = (S::kCin % S::kBK == 0 || ca < S::kCin) && (P::kPixels % P::kBM == 0 || p < P::kPixels);
        const typename S::storage* src = in_n + (ok ? (long long)ca * P::kPixels + p : 0);
        copy16_async<S::kCopyL2>(s_a + k * P::kAPitchT + c * 8, src, ok);
      }
    } else {
#pragma unroll
      for (int r = 0; r < kARowsAsync; ++r) {
        const int iy = iy0[r] + kh * S::kDH;
        const int ix = ix0[r] + kw * S::kDW;
        const bool ok = ci_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const long long at_image = P::kBatchTiles ? image[P::kBatchTiles ? r : 0] : 0;
        const typename S::storage* src = in_n + (ok ? at_image + (iy * S::kW + ix) * (long long)S::kCin + ci : 0);
        copy16_async<S::kCopyL2>(s_a + at(row0 + r * kRowStep), src, ok);
      }
    }
#pragma unroll
    for (int r = 0; r < kBRowsAsync; ++r) {
      const int n = row0 + r * kRowStep;
      if (P::kBN % kRowStep == 0 || n < P::kBN) {
        const int co = co0 + n;
        const bool ok = ci_ok && (S::kCout % P::kBN == 0 || co < S::kCout);
        const typename S::storage* src = weight + (ok ? co * P::kWO + (long long)tap * S::kCin + ci : 0);
        copy16_async<S::kCopyL2>(s_b + at(n), src, ok);
      }
    }
  };
  if constexpr (P::kWgmma) {
    // kStages - 2 steps' copies ahead, and one wgmma group in flight: step k's copies go into the
    // buffer of step k - 2, whose wgmma every thread has waited for (wgmma_wait<1> at the end of
    // step k - 1) before the barrier of step k.
    constexpr int kAhead = P::kStages - 2;
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < P::kSteps) issue(s, s);
      copy_commit();
    }
    const unsigned base = smem_address(s_stage);
    const int warpgroup = (int)(threadIdx.x / 128);  // (kWarpsN = 1)
    (void)warpgroup;
#pragma unroll 1
    for (int step = 0; step < P::kSteps; ++step) {
      copy_wait<kAhead - 1>();  // this thread's copies of this step have landed
#if CUINLINE_CONV2D_HMMA_WGMMA
      fence_async_shared();     // ... and are visible to the tensor cores' reads
#endif
      __syncthreads();
      const int next = step + kAhead;
      if (next < P::kSteps) issue(next, next % P::kStages);
      copy_commit();
      const unsigned stage = base + (step % P::kStages) * kStageBytes;
#if CUINLINE_CONV2D_HMMA_WGMMA
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < P::kKSlices; ++ks) {
        const unsigned long long b = wgmma_desc<P::kRowBytes>(stage + P::kAElems * 2 + ks * 32);
#pragma unroll
        for (int i = 0; i < S::kMT; ++i) {
          const unsigned a_tile = stage + (S::kMT * warpgroup + i) * 64 * P::kRowBytes;
          const unsigned long long a = wgmma_desc<P::kRowBytes>(a_tile + ks * 32);
          Wgmma<typename S::storage, P::kBN>::run(acc[i], a, b);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();
#else
      if constexpr (P::kElem == 4) {
        accumulate_swizzled_tf32<S>(acc, stage);
      } else {
        accumulate_swizzled<S>(acc, stage);
      }
#endif
    }
#if CUINLINE_CONV2D_HMMA_WGMMA
    wgmma_wait<0>();
    fence_accumulators<S>(acc);
#endif
    copy_wait<0>();   // (only empty groups are left)
    __syncthreads();  // every warp's reads of the stages are done before the epilogue reuses them
    (void)a_row, (void)b_row;
  } else {
    // (Not instantiated for the wgmma tiling: less for NVRTC, and no unreachable code.)
#pragma unroll
    for (int s = 0; s < P::kAsyncStages - 1; ++s) {
      if (s < P::kSteps) issue(s, s);
      copy_commit();
    }
#pragma unroll 1
    for (int step = 0; step < P::kSteps; ++step) {
      // One group committed a step: all but the newest kStages - 2 done means this step's landed.
      copy_wait<P::kAsyncStages - 2>();
      __syncthreads();
      // Into the buffer step - 1 read (every warp is past it now).
      const int next = step + P::kAsyncStages - 1;
      if (next < P::kSteps) issue(next, next % P::kAsyncStages);
      copy_commit();
      const int buf = step % P::kAsyncStages;
      if constexpr (P::kElem == 4) {
        accumulate_pointwise_tf32<S>(acc, smem_address(s_stage) + buf * kStageBytes);
      } else {
        accumulate<S>(acc, a_row + buf * kStageBytes, b_row + buf * kStageBytes);
      }
    }
    copy_wait<0>();   // (only empty groups are left)
    __syncthreads();  // every warp's reads of the stages are done before the epilogue reuses them
  }
}

// The window form's main loop (P::kWindow; see Plan): the window of k chunk 0 and the first steps'
// B tiles, then a step a k step (chunk-major: tap t of chunk c is step c kTaps + t) as in
// mainloop_async — kStages B buffers, kStages - 2 steps' copies ahead, one wgmma group in flight —
// with chunk c + 1's window copied from the second step of chunk c on, into the buffer chunk c - 1
// read: every thread waited for that chunk's last wgmma group (wgmma_wait<1> at the end of the first
// step) before the barrier of the second. It has landed by step (c + 1) kTaps (kTaps >= kStages -
// 1). A copy of 16 bytes is 8 channels of one pixel (a thread's group, tid % kChunks, is the same in
// every copy); pixels outside the image and channels past kCin are zeros. kPart: kWindowWhole (the
// copies before step 0, then the steps), kWindowFirstCopies (only those copies: window_tiles issues
// them while the previous tile's outputs are stored) or kWindowSteps (only the steps).
enum WindowPart { kWindowWhole, kWindowFirstCopies, kWindowSteps };
template <class S, WindowPart kPart = kWindowWhole>
__device__ __forceinline__ void mainloop_window(float (&acc)[S::kMT][S::kNT][4], unsigned short* s_stage,
                                                const typename S::storage* __restrict__ in_n,
                                                const typename S::storage* __restrict__ weight, int p0, int co0) {
  using P = Plan<S>;
  constexpr int kRowStep = P::kThreads / P::kChunks;
  constexpr unsigned kStageBytes = P::kStageElems * 2;
  constexpr int kAhead = P::kStages - 2;
  static_assert(P::kThreads % P::kChunks == 0, "a thread's 8-channel group is the same in every copy");
  const int tid = threadIdx.x;
  const int chunk = tid % P::kChunks;
  const int row0 = tid / P::kChunks;
  unsigned char* s_win = reinterpret_cast<unsigned char*>(s_stage) + P::kStages * kStageBytes;
  // The window's pixel (0, 0): input row oy0 kSH - kPH, column ox0 - kPW.
  const int oy0 = p0 / S::kOW;
  const int iy_base = oy0 * S::kSH - S::kPH;
  const int ix_base = p0 - oy0 * S::kOW - S::kPW;

  auto issue_b = [&](int step, int buf) {
    const int c = step / P::kTaps;
    const int tap = step - c * P::kTaps;
    const int ci = c * S::kBK + chunk * 8;
    const bool ci_ok = S::kCin % S::kBK == 0 || ci < S::kCin;
    copy_b_tile<S>(s_stage + buf * P::kStageElems, weight, co0, tap, ci, ci_ok, chunk, row0);
  };
  // A thread's copies of a window: pixels row0, row0 + kRowStep, ... (kWinCopies at most). Chunk c
  // + 1's are issued in kWinParts equal parts at taps 1 .. kWinParts of chunk c, each in that step's
  // copy group (lands kAhead steps on, by step (c + 1) kTaps at the latest), so that no step waits
  // for a whole window (4 x 130 pixels x 128 bytes for the UNet-like layer, from DRAM). UNet-like
  // layer, ms channels-last / NCHW: f16 0.0887 / 0.1169 -> 0.0865 / 0.1156, bf16 0.0883 / 0.1171 ->
  // 0.0853 / 0.1136 (H100). Chunk 0's window comes whole before step 0.
  constexpr int kWinCopies = (P::kWinPixels + kRowStep - 1) / kRowStep;
  constexpr int kWinParts = P::kTaps - kAhead < kWinCopies ? P::kTaps - kAhead : kWinCopies;
  static_assert(kWinParts >= 1, "the next chunk's window is copied within a chunk");
  auto issue_window = [&](int c, int buf, int part, int parts) {
    unsigned char* w = s_win + buf * P::kWinBytes + chunk * P::kWinGroup;
    const int ci = c * S::kBK + chunk * 8;
    const bool ci_ok = S::kCin % S::kBK == 0 || ci < S::kCin;
    const int pix_end = row0 + (part + 1) * kWinCopies / parts * kRowStep;
#pragma unroll 1
    for (int pix = row0 + part * kWinCopies / parts * kRowStep; pix < pix_end && pix < P::kWinPixels;
         pix += kRowStep) {
      const int r = pix / P::kWinCols;
      const int iy = iy_base + r;
      const int ix = ix_base + (pix - r * P::kWinCols);
      const bool ok = ci_ok && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
      copy16_async<S::kCopyL2>(w + pix * 16, in_n + (ok ? ((long long)iy * S::kW + ix) * S::kCin + ci : 0), ok);
    }
  };
  // Pixel offset in the window of output pixel m of the tile (its row's first column) at tap t.
  auto win_pixel = [](int m, int tap) {
    const int mr = m / P::kWinTileCols;
    const int kh = tap / S::kKW;
    return (mr * S::kSH + kh * S::kDH) * P::kWinCols + (m - mr * P::kWinTileCols) + (tap - kh * S::kKW) * S::kDW;
  };

  if constexpr (kPart != kWindowSteps) {
    issue_window(0, 0, 0, 1);
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < P::kSteps) issue_b(s, s);
      copy_commit();
    }
  }
  if constexpr (kPart == kWindowFirstCopies) return;
  const unsigned base = smem_address(s_stage);
  const unsigned win_base = smem_address(s_win);
#pragma unroll 1
  for (int step = 0; step < P::kSteps; ++step) {
    copy_wait<kAhead - 1>();  // this thread's copies of this step (and of the chunk's window) landed
#if CUINLINE_CONV2D_HMMA_WGMMA
    fence_async_shared();
#endif
    __syncthreads();
    const int c = step / P::kTaps;
    const int tap = step - c * P::kTaps;
    const int next = step + kAhead;
    if (next < P::kSteps) issue_b(next, next % P::kStages);
    if (P::kCiSteps > 1 && tap >= 1 && tap <= kWinParts && c + 1 < P::kCiSteps)
      issue_window(c + 1, (c + 1) % P::kWinBufs, tap - 1, kWinParts);
    copy_commit();
    const unsigned stage = base + (step % P::kStages) * kStageBytes;
    const unsigned win = win_base + (c % P::kWinBufs) * P::kWinBytes;
#if CUINLINE_CONV2D_HMMA_WGMMA
    const int warpgroup = (int)(threadIdx.x / 128);  // (kWarpsN = 1)
    wgmma_fence();
    wgmma_step<S>(
        acc,
        [&](int i, int ks) {
          const unsigned a0 = win + 2 * ks * P::kWinGroup + win_pixel(64 * (S::kMT * warpgroup + i), tap) * 16;
          return wgmma_desc_plain(a0, P::kWinGroup);
        },
        stage);
    wgmma_commit();
    wgmma_wait<1>();
#else
    // mma.sync (other archs): A rows lane % 16 of the 16 pixels of warp tile i from the window (8
    // channels of group 2 ks + lane / 16).
    const int lane = threadIdx.x % 32;
    const int wm = threadIdx.x / 32;
    accumulate_rows<S>(
        acc,
        [&](int i, int ks) {
          return win + (2 * ks + lane / 16) * P::kWinGroup + win_pixel(P::a_row0(wm, i) + lane % 16, tap) * 16;
        },
        stage);
#endif
  }
  finish_mainloop<S>(acc);
}

// The halo tiling's main loop (P::kHalo: up to 8 input channels, column stride 1, one warpgroup):
// the block's kBM output columns ox0.. of output row oy need input rows oy * kSH - kPH + r (r <
// kHaloRows) and columns ox0 - kPW + x (x < kHaloCols), each pixel's 8 channels 16 bytes: that
// window is staged once (cp.async from a channels-last input of 8 channels on aligned pointers, else
// gathered 16-bit loads: NCHW, or fewer channels), and so is every step's B tile; then the whole
// reduction runs at once. The A tile of tap t (kh, kw) is the window from pixel kh kDH kHaloCols + kw
// kDW on — consecutive output columns are consecutive 16-byte pixels — so wgmma reads it through a
// plain K-major descriptor (8-row groups 128 bytes apart) whose second k half, tap t + 1, is
// `off(t + 1) - off(t)` pixels further (the leading byte offset), or the 1 KiB of zeros past the
// last tap. The input is read once a block instead of once a tap (the seed: 3 rows x 130 pixels
// against 10 taps x 128), and an NCHW input needs no staging copy.
template <class S>
__device__ __forceinline__ int halo_offset(int tap) {  // pixels into the window of tap's A tile
  return tap / S::kKW * S::kDH * Plan<S>::kHaloPitch + tap % S::kKW * S::kDW;
}
// 8 channels (zeros past kCin and where !ok) from src (channel 0's element) with channel stride
// kStride, as 4 words (channel 2k in word k's low half).
template <class S, long long kStride>
__device__ __forceinline__ void gather8_words(const typename S::storage* src, bool ok, unsigned (&w)[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned lo = 2 * k < S::kCin ? load_bits(src + (ok ? 2 * k * kStride : 0), ok) : 0u;
    const unsigned hi = 2 * k + 1 < S::kCin ? load_bits(src + (ok ? (2 * k + 1) * kStride : 0), ok) : 0u;
    w[k] = lo | hi << 16;
  }
}
// The same, as 16 bytes into shared memory.
template <class S, long long kStride>
__device__ __forceinline__ void gather8(unsigned short* dst, const typename S::storage* src, bool ok) {
  unsigned w[4];
  gather8_words<S, kStride>(src, ok, w);
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}
// The halo form's shared memory and steps. A block computes tiles first .. last - 1 in turn (the
// launch's row_tiles a block): every step's weights (and the zeros) are staged once; each tile's
// window is copied while the previous tile's outputs are stored.
template <class S>
struct Halo {
  using P = Plan<S>;
  using T = typename S::storage;
  unsigned short* s_b;     // B: step s, row n (channel co0 + n), chunk c (tap 2s + c), swizzled
  unsigned short* s_h;     // the 16-bit output tile
  unsigned short* s_a;     // the window (row 0, with its slack)
  unsigned short* s_zero;  // 1 KiB of zeros (an odd tap count)
  unsigned short* s_nchw;  // an NCHW input's copied runs (kInNchwCopy)
  static constexpr bool kInCopy = S::kInNhwc && S::kCin == 8 && S::kInAligned;
  static constexpr bool kWCopy = S::kWNhwc && S::kCin == 8 && S::kInAligned;
#if CUINLINE_CONV2D_HMMA_WGMMA
  static constexpr bool kTranspose = P::kInNchwCopy;
#else
  static constexpr bool kTranspose = false;
#endif

  __device__ __forceinline__ explicit Halo(unsigned char* smem)
      : s_b(reinterpret_cast<unsigned short*>(smem)),
        s_h(reinterpret_cast<unsigned short*>(smem + P::kHaloB)),
        s_a(reinterpret_cast<unsigned short*>(smem + P::kHaloB + P::kHaloOut)),
        s_zero(reinterpret_cast<unsigned short*>(smem + P::kHaloB + P::kHaloOut + P::kHaloA)),
        s_nchw(reinterpret_cast<unsigned short*>(smem + P::kHaloB + P::kHaloOut + P::kHaloA + P::kHaloZero)) {}

  // Every step's B tile and the zeros (copies uncommitted).
  __device__ __forceinline__ void load_weights(const T* __restrict__ weight, int co0) const {
    const int tid = threadIdx.x;
    if constexpr (!kWCopy && HaloWeightBatchOf<S>::value != 0) {
      // The gather in batches of kBatch chunks a thread, every load of a batch issued before the
      // first store: the block's first tile waits for about one load latency a batch instead of
      // one a chunk (the seed's 5 chunks a thread of 8 16-bit loads; as one chunk at a time the
      // block's start was ~15 % of the NCHW seed's stall samples on an H100).
      constexpr int kTotal = P::kSteps * P::kBN * 2;
      constexpr int kIters = (kTotal + P::kThreads - 1) / P::kThreads;
      constexpr int kBatch = kIters < 5 ? kIters : 5;
#pragma unroll 1
      for (int it0 = 0; it0 < kIters; it0 += kBatch) {
        unsigned w[kBatch][4];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int i = tid + (it0 + b) * P::kThreads;
          const int step = i / (P::kBN * 2);
          const int n = (i / 2) % P::kBN;
          const int tap = 2 * step + i % 2;
          const int co = co0 + n;
          const bool ok = i < kTotal && (P::kTaps % 2 == 0 || tap < P::kTaps) &&
                          (S::kCout % P::kBN == 0 || co < S::kCout);
          const int kh = tap / S::kKW, kw = tap % S::kKW;
          gather8_words<S, P::kWI>(weight + (ok ? co * P::kWO + kh * P::kWY + kw * P::kWX : 0), ok, w[b]);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int i = tid + (it0 + b) * P::kThreads;
          if (i < kTotal) {
            const int n = (i / 2) % P::kBN;
            *reinterpret_cast<uint4*>(s_b + i / (P::kBN * 2) * P::kBN * 16 + n * 16 + P::swz(n, i % 2) * 8) =
                make_uint4(w[b][0], w[b][1], w[b][2], w[b][3]);
          }
        }
      }
    } else {
#pragma unroll 1
    for (int i = tid; i < P::kSteps * P::kBN * 2; i += P::kThreads) {
      const int step = i / (P::kBN * 2);
      const int n = (i / 2) % P::kBN;
      const int c = i % 2;
      const int tap = 2 * step + c;
      const int co = co0 + n;
      const bool ok = (P::kTaps % 2 == 0 || tap < P::kTaps) && (S::kCout % P::kBN == 0 || co < S::kCout);
      unsigned short* dst = s_b + step * P::kBN * 16 + n * 16 + P::swz(n, c) * 8;
      if constexpr (kWCopy) {
        copy16_async<0>(dst, weight + (ok ? co * P::kWO + tap * 8 : 0), ok);
      } else {
        const int kh = tap / S::kKW, kw = tap % S::kKW;
        gather8<S, P::kWI>(dst, weight + (ok ? co * P::kWO + kh * P::kWY + kw * P::kWX : 0), ok);
      }
    }
    }
    if constexpr (P::kHaloZero > 0) {
#pragma unroll 1
      for (int i = tid; i < P::kHaloZero / 16; i += P::kThreads) {
        *reinterpret_cast<uint4*>(s_zero + i * 8) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
  }

  // Tile `tile`'s window (copies uncommitted; an NCHW input's runs, transposed by ready()).
  __device__ __forceinline__ void load_window(const T* __restrict__ in_n, int tile) const {
    const int tid = threadIdx.x;
    const int oy = tile / P::kSegs;
    const int ox0 = (tile - oy * P::kSegs) * P::kBM;
    if constexpr (kTranspose) {
      // Rows of 8-column runs of each channel from column xa0, a multiple of 8: a run is all in the
      // image or all outside.
      constexpr int kGroups = P::kStageCols / 8;
      const int xa0 = ox0 - S::kPW - P::kLeft;
#pragma unroll 1
      for (int i = tid; i < P::kHaloRows * 8 * kGroups; i += P::kThreads) {
        const int row = i / (8 * kGroups);  // (row, channel, group)
        const int c = (i / kGroups) % 8;
        const int iy = oy * S::kSH - S::kPH + row;
        const int ix = xa0 + 8 * (i % kGroups);
        const bool ok = c < S::kCin && iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        copy16_async<0>(s_nchw + i * 8, in_n + (ok ? c * P::kInC + iy * P::kInY + ix : 0), ok);
      }
    } else {
#pragma unroll 1
      for (int i = tid; i < P::kHaloRows * P::kHaloCols; i += P::kThreads) {
        const int row = i / P::kHaloCols, x = i % P::kHaloCols;
        const int iy = oy * S::kSH - S::kPH + row;
        const int ix = ox0 - S::kPW + x;
        const bool ok = iy >= 0 && iy < S::kH && ix >= 0 && ix < S::kW;
        const long long at = ok ? iy * P::kInY + ix * P::kInX : 0;
        unsigned short* dst = s_a + (row * P::kHaloPitch + P::kHaloLead + x) * 8;
        if constexpr (kInCopy) {
          copy16_async<0>(dst, in_n + at, ok);
        } else {
          gather8<S, P::kInC>(dst, in_n + at, ok);
        }
      }
    }
  }

  // The committed copies landed (and an NCHW window transposed), visible to every warp and to the
  // tensor cores.
  __device__ __forceinline__ void ready() const {
    copy_wait<0>();
#if CUINLINE_CONV2D_HMMA_WGMMA
    if constexpr (kTranspose) {
      // 8 x 8 matrices (8 channels x 8 columns of a row): ldmatrix.trans gives lane l column l / 4's
      // channels 2 (l % 4), + 1, which stmatrix stores as row l / 4 (a 16-byte pixel) of the window.
      // A warp moves 4 matrices an instruction (the last repeated past the end: identical stores).
      constexpr int kGroups = P::kStageCols / 8;
      constexpr int kMatrices = P::kHaloRows * kGroups;
      __syncthreads();
      const int tid = threadIdx.x;
      const int lane = tid % 32;
#pragma unroll 1
      for (int q0 = tid / 32 * 4; q0 < kMatrices; q0 += P::kThreads / 8) {
        const int q = q0 + lane / 8 < kMatrices ? q0 + lane / 8 : kMatrices - 1;
        const int row = q / kGroups, g = q % kGroups;
        unsigned r[4];
        ldmatrix_x4_trans(r, smem_address(s_nchw + ((row * 8 + lane % 8) * P::kStageCols + 8 * g)));
        const int col = P::kHaloLead + 8 * g - P::kLeft + lane % 8;  // (in the slack where < kHaloLead)
        stmatrix_x4(smem_address(s_a + (row * P::kHaloPitch + col) * 8), r);
      }
    }
    fence_async_shared();  // the copies and the stores, visible to the tensor cores' reads
#endif
    __syncthreads();
  }

  // acc += the tile's whole reduction (acc: this thread's accumulators, the wgmma layout). Ends with
  // this thread's reads of shared memory done.
  __device__ __forceinline__ void compute(float (&acc)[S::kMT][S::kNT][4]) const {
    const unsigned b_base = smem_address(s_b);
    const unsigned a_base = smem_address(s_a) + P::kHaloLead * 16;
    const unsigned zero = smem_address(s_zero);
#if CUINLINE_CONV2D_HMMA_WGMMA
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step) {
      const unsigned long long b = wgmma_desc<32>(b_base + step * P::kBN * 32);
      const int t0 = 2 * step, t1 = 2 * step + 1;
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
        const unsigned a0 = a_base + (64 * i + halo_offset<S>(t0)) * 16;
        const unsigned lbo = t1 < P::kTaps ? (halo_offset<S>(t1) - halo_offset<S>(t0)) * 16 : zero - a0;
        Wgmma<T, P::kBN>::run(acc[i], wgmma_desc_plain(a0, lbo), b);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators<S>(acc);
#else
    // mma.sync (other archs): warp w's rows 64 i + 16 w (the wgmma accumulator layout); ldmatrix rows
    // of tap t0 (lanes 0-15) and t1 (lanes 16-31, or the zeros).
    const int lane = threadIdx.x % 32;
    const int wm = threadIdx.x / 32;
#pragma unroll
    for (int step = 0; step < P::kSteps; ++step) {
      const int t0 = 2 * step, t1 = 2 * step + 1;
      const unsigned b_step = b_base + step * P::kBN * 32;
      unsigned a[S::kMT][4];
      unsigned b[S::kNT / 2][4];
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
        const int r = P::a_row0(wm, i) + lane % 16;
        const unsigned row = lane < 16      ? a_base + (r + halo_offset<S>(t0)) * 16
                             : t1 < P::kTaps ? a_base + (r + halo_offset<S>(t1)) * 16
                                             : zero + (lane % 8) * 16;
        ldmatrix_x4(a[i], row);
      }
#pragma unroll
      for (int jj = 0; jj < S::kNT / 2; ++jj) {
        const int n = jj * 16 + lane % 8 + lane / 16 * 8;
        ldmatrix_x4(b[jj], b_step + n * 32 + P::swz(n, (lane / 8) % 2) * 16);
      }
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
        for (int j = 0; j < S::kNT; ++j) {
          Mma<T>::run(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
        }
      }
    }
#endif
  }
};

// kVec 16-bit values (packed low-first into 32-bit words) stored as one access.
template <class T, int kVec>
__device__ __forceinline__ void store_bits(T* dst, const unsigned (&h)[kVec]) {
  if constexpr (kVec == 1) {
    *reinterpret_cast<unsigned short*>(dst) = static_cast<unsigned short>(h[0]);
  } else if constexpr (kVec == 2) {
    *reinterpret_cast<unsigned*>(dst) = h[0] | h[1] << 16;
  } else if constexpr (kVec == 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
  } else {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
  }
}

// kVec 16-bit values (aligned to kVec) as one load, unpacked low-first.
template <class T, int kVec>
__device__ __forceinline__ void load_vec(const T* src, unsigned (&h)[kVec]) {
  if constexpr (kVec == 1) {
    h[0] = load_bits(src, true);
  } else if constexpr (kVec == 2) {
    const unsigned w = __ldg(reinterpret_cast<const unsigned*>(src));
    h[0] = w & 0xffffu, h[1] = w >> 16;
  } else {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(src));
    h[0] = w.x & 0xffffu, h[1] = w.x >> 16, h[2] = w.y & 0xffffu, h[3] = w.y >> 16;
  }
}

// kVec consecutive floats of the epilogue tile (16-byte aligned for 4, 8-byte for 2) as one read.
template <int kVec>
__device__ __forceinline__ void read_tile(const float* p, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else if constexpr (kVec == 2) {
    const float2 q = *reinterpret_cast<const float2*>(p);
    v[0] = q.x, v[1] = q.y;
  } else {
    v[0] = p[0];
  }
}

// One element of a storage-type vector (bias) as fp32.
template <class T>
__device__ __forceinline__ float value_at(const T* p) {
  if constexpr (sizeof(T) == 4) {
    return __ldg(reinterpret_cast<const float*>(p));
  } else {
    return to_float<T>(load_bits(p, true));
  }
}
// kVec consecutive elements (aligned to kVec) as one load, in fp32.
template <class T, int kVec>
__device__ __forceinline__ void load_values(const T* src, float (&x)[kVec]) {
  if constexpr (sizeof(T) == 4) {
    const float* f = reinterpret_cast<const float*>(src);
    if constexpr (kVec == 4) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(f));
      x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
    } else if constexpr (kVec == 2) {
      const float2 q = __ldg(reinterpret_cast<const float2*>(f));
      x[0] = q.x, x[1] = q.y;
    } else {
      x[0] = __ldg(f);
    }
  } else {
    unsigned h[kVec];
    load_vec<T, kVec>(src, h);
#pragma unroll
    for (int e = 0; e < kVec; ++e) x[e] = to_float<T>(h[e]);
  }
}
// kVec fp32 values rounded once to the storage type and stored as one access (aligned to kVec).
template <class T, int kVec>
__device__ __forceinline__ void store_values(T* dst, const float (&x)[kVec]) {
  if constexpr (sizeof(T) == 4) {
    float* f = reinterpret_cast<float*>(dst);
    if constexpr (kVec == 4) {
      *reinterpret_cast<float4*>(f) = make_float4(x[0], x[1], x[2], x[3]);
    } else if constexpr (kVec == 2) {
      *reinterpret_cast<float2*>(f) = make_float2(x[0], x[1]);
    } else {
      f[0] = x[0];
    }
  } else {
    unsigned h[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) h[e] = from_float<T>(x[e]);
    store_bits<T, kVec>(dst, h);
  }
}

// The epilogue's stores from the fp32 tile s_c (the block's pixels from p0, channels from co0):
// kVec consecutive outputs along the output's contiguous axis a thread and iteration. A thread's
// position along that axis is the same every iteration; the other axis steps by kSlowStep.
template <class S, class E, int kVec>
__device__ __forceinline__ void store_tile(const float* s_c, const typename S::storage* __restrict__ bias,
                                           typename S::storage* __restrict__ out_n,
                                           const typename S::storage* __restrict__ res_n, int p0, int co0,
                                           long long p_end, const E& ep) {
  using P = Plan<S>;
  using T = typename S::storage;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;  // pixels (NCHW) or channels (NHWC) of the tile
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / kVec;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0, "whole rows of vectors an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * kVec;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
  // Channels-last: a thread's channels are the same every iteration, so is their bias (loaded once).
  float bias_fast[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) bias_fast[e] = 0.0f;
  if (S::kOutNhwc && S::kHasBias && (S::kCout % P::kBN == 0 || co0 + fast < S::kCout)) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) bias_fast[e] = value_at(bias + co0 + fast + e);
  }
#pragma unroll 4
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;  // first pixel of the vector
    const int c = S::kOutNhwc ? fast : slow;  // first channel
    const int p = p0 + m;
    const int co = co0 + c;
    // The whole vector lies in the plane / the channels when its first element does (kVec divides
    // the run and the tile's origin).
    if (p < p_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      const long long at = out_offset<S>(p, co);
      float v[kVec];
      read_tile<kVec>(s_c + m * P::kCM + c * P::kCC, v);  // along the tile's contiguous axis
      const float b = !S::kOutNhwc && S::kHasBias ? value_at(bias + co) : 0.0f;
      float r[kVec];
      if (S::kHasResidual) load_values<T, kVec>(res_n + at, r);
      float y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        // conv + bias, rounded, then + residual, rounded (PyTorch's two adds), then the epilogue: all
        // fp32; one rounding to the storage type.
        float x = v[e];
        if (S::kHasBias) x += S::kOutNhwc ? bias_fast[e] : b;
        if (S::kHasResidual) x += r[e];
        y[e] = ep(x, S::kOutNhwc ? co + e : co);
      }
      store_values<T, kVec>(out_n + at, y);
    }
  }
}

// The type of kVec 16-bit values (one load or store).
template <int kVec>
struct StoreVec {
  using type = unsigned short;
};
template <>
struct StoreVec<2> {
  using type = unsigned;
};
template <>
struct StoreVec<4> {
  using type = uint2;
};
template <>
struct StoreVec<8> {
  using type = uint4;
};

// kHalfEpi's stores from the tile of 16-bit outputs s_h (already biased, E'd and rounded in
// registers): kVec consecutive outputs along the output's contiguous axis as one load from shared
// memory and one store (16 bytes for 8). Tile pixel m < m_end is pixel p0 + m of the plane.
template <class S, int kVec>
__device__ __forceinline__ void store_tile_half(const unsigned short* s_h, typename S::storage* __restrict__ out_n,
                                                int p0, int m_end, int co0) {
  using P = Plan<S>;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / kVec;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0, "whole rows of vectors an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * kVec;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
  if constexpr (StoreBatchOf<S>::value != 0) {
    // In batches of kB vectors: every shared load of a batch, then its stores (one load and its
    // store at a time, the stores waited on each load: the compiler does not move a shared load
    // above a global store through these pointers; ~8 % of the f16 NCHW seed's stall samples).
    using V = typename StoreVec<kVec>::type;
    constexpr int kIters = kSlow / kSlowStep;
    constexpr int kB = kIters < 8 ? kIters : 8;
#pragma unroll 1
    for (int it0 = 0; it0 < kIters; it0 += kB) {
      V v[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int slow = slow0 + (it0 + b) * kSlowStep;
        const int m = S::kOutNhwc ? slow : fast;
        const int c = S::kOutNhwc ? fast : slow;
        if (it0 + b < kIters) v[b] = *reinterpret_cast<const V*>(s_h + (S::kOutNhwc ? m * P::kHPitch + c : c * P::kHPitch + m));
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int slow = slow0 + (it0 + b) * kSlowStep;
        const int m = S::kOutNhwc ? slow : fast;
        const int c = S::kOutNhwc ? fast : slow;
        const int co = co0 + c;
        if (it0 + b < kIters && m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
          *reinterpret_cast<V*>(out_n + out_offset<S>(p0 + m, co)) = v[b];
        }
      }
    }
  } else {
#pragma unroll 4
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;
    const int c = S::kOutNhwc ? fast : slow;
    const int p = p0 + m;
    const int co = co0 + c;
    if (m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      const unsigned short* src = s_h + (S::kOutNhwc ? m * P::kHPitch + c : c * P::kHPitch + m);
      typename S::storage* dst = out_n + out_offset<S>(p, co);
      if constexpr (kVec == 8) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else if constexpr (kVec == 4) {
        *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
      } else if constexpr (kVec == 2) {
        *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src);
      } else {
        *reinterpret_cast<unsigned short*>(dst) = *src;
      }
    }
  }
  }
}

// kHalfEpi with a residual: the residual's tile into s_h, where write_half_tile reads it, kVec
// consecutive values along the output's contiguous axis a load (store_tile_half's order and
// bounds; the places past the plane or the channels are left as they are: their outputs are never
// stored).
template <class S, int kVec>
__device__ __forceinline__ void load_tile_half(unsigned short* s_h, const typename S::storage* __restrict__ res_n,
                                               int p0, int m_end, int co0) {
  using P = Plan<S>;
  constexpr int kFast = S::kOutNhwc ? P::kBN : P::kBM;
  constexpr int kSlow = S::kOutNhwc ? P::kBM : P::kBN;
  constexpr int kFastVecs = kFast / kVec;
  constexpr int kSlowStep = P::kThreads / kFastVecs;
  static_assert(P::kThreads % kFastVecs == 0 && kSlow % kSlowStep == 0, "whole rows of vectors an iteration");
  const int fast = (int)(threadIdx.x % kFastVecs) * kVec;
  const int slow0 = (int)(threadIdx.x / kFastVecs);
#pragma unroll 4
  for (int slow = slow0; slow < kSlow; slow += kSlowStep) {
    const int m = S::kOutNhwc ? slow : fast;
    const int c = S::kOutNhwc ? fast : slow;
    const int co = co0 + c;
    if (m < m_end && (S::kCout % P::kBN == 0 || co < S::kCout)) {
      unsigned short* dst = s_h + (S::kOutNhwc ? m * P::kHPitch + c : c * P::kHPitch + m);
      const typename S::storage* src = res_n + out_offset<S>(p0 + m, co);
      if constexpr (kVec == 8) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else if constexpr (kVec == 4) {
        *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
      } else if constexpr (kVec == 2) {
        *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src);
      } else {
        *dst = *reinterpret_cast<const unsigned short*>(src);
      }
    }
  }
}

// kHalfEpi's tile: acc + bias, E and the one rounding in registers, into the 16-bit tile s_h
// ([kBM][kHPitch] channels-last, [kBN][kHPitch] NCHW). kResidual: s_h holds the residual's tile
// (load_tile_half, then a barrier), added after the bias as store_tile adds it; each value is read
// by the lane that then writes its output in the same place. (The caller's barrier then orders the
// tile's reads.)
template <class S, class E, bool kResidual = false>
__device__ __forceinline__ void write_half_tile(const float (&acc)[S::kMT][S::kNT][4], unsigned short* s_h,
                                                const typename S::storage* __restrict__ bias, int co0,
                                                const E& ep) {
  using P = Plan<S>;
  using T = typename S::storage;
  const int lane = threadIdx.x % 32;
  const int wm = (threadIdx.x / 32) % S::kWarpsM;
  const int wn = (threadIdx.x / 32) / S::kWarpsM;
  // E'd, rounded value of accumulator q of tile (i, j), channel c + q % 2 (bias b[q % 2]; residual
  // bits res, where kResidual).
  auto out = [&](int i, int j, int q, const float (&b)[2], unsigned short res) {
    float x = acc[i][j][q];
    if (S::kHasBias) x += b[q % 2];
    if (kResidual) x += to_float<T>(res);
    return from_float<T>(ep(x, co0 + wn * S::kNT * 8 + j * 8 + 2 * (lane % 4) + q % 2));
  };
  // Bias of channels c, c + 1 (0 past kCout).
  auto bias_pair = [&](int c, float (&b)[2]) {
    b[0] = b[1] = 0.0f;
    if (S::kHasBias) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (S::kCout % P::kBN == 0 || co0 + c + e < S::kCout) {
          b[e] = to_float<T>(load_bits(bias + co0 + c + e, true));
        }
      }
    }
  };
  const int t = lane % 4;
#if CUINLINE_CONV2D_HMMA_WGMMA
  // sm_90: one stmatrix a pair of n tiles and m16 rows: matrices (j, rows g), (j, rows g + 8), (j +
  // 1, g), (j + 1, g + 8); .trans for NCHW, whose tile rows are channels. A quarter of the shared
  // stores of 32-bit writes, and for NCHW an eighth of the 16-bit ones (NCHW rows: lane 8k + x
  // addresses channel (j + k / 2) 8 + x, pixels from row0 + 8 (k % 2); channels-last rows: pixel
  // row0 + 8 (k % 2) + x, channels from (j + k / 2) 8; every row 16-byte aligned and the 8 rows of a
  // matrix on distinct bank quads: the pitch is 4 words mod 32).
  const int mat = lane / 8;
  const int mrow = lane % 8;
#pragma unroll
  for (int j = 0; j < S::kNT; j += 2) {
    const int c = wn * S::kNT * 8 + j * 8 + 2 * t;
    float b0[2], b1[2];
    bias_pair(c, b0);
    bias_pair(c + 8, b1);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
      const int m = P::a_row0(wm, i) + 8 * (mat % 2);
      const int cm = wn * S::kNT * 8 + (j + mat / 2) * 8;
      const unsigned at = S::kOutNhwc ? smem_address(s_h + (m + mrow) * P::kHPitch + cm)
                                      : smem_address(s_h + (cm + mrow) * P::kHPitch + m);
      // The residual in the layout stmatrix writes: ldmatrix from the same rows.
      unsigned res[4] = {0, 0, 0, 0};
      if constexpr (kResidual) {
        if (S::kOutNhwc) {
          ldmatrix_x4(res, at);
        } else {
          ldmatrix_x4_trans(res, at);
        }
      }
      unsigned r[4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        r[h] = out(i, j, 2 * h, b0, res[h] & 0xffffu) | out(i, j, 2 * h + 1, b0, res[h] >> 16) << 16;
        r[2 + h] = out(i, j + 1, 2 * h, b1, res[2 + h] & 0xffffu) | out(i, j + 1, 2 * h + 1, b1, res[2 + h] >> 16)
                                                                           << 16;
      }
      if (S::kOutNhwc) {
        stmatrix_x4(at, r);
      } else {
        stmatrix_x4_trans(at, r);
      }
    }
  }
#else
  // Writes: channels-last, a channel pair as one 32-bit word (a warp's 8 rows x 4 pairs on 32
  // banks: the pitch is 4 words mod 32); NCHW, two 16-bit writes (rows g, channels 2t + e: 16
  // banks, two lanes a word).
  const int g = lane / 4;
#pragma unroll
  for (int j = 0; j < S::kNT; ++j) {
    const int c = wn * S::kNT * 8 + j * 8 + 2 * t;
    float b[2];
    bias_pair(c, b);
#pragma unroll
    for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = P::a_row0(wm, i) + g + 8 * h;
        unsigned short res0 = 0, res1 = 0;
        if constexpr (kResidual) {
          res0 = S::kOutNhwc ? s_h[m * P::kHPitch + c] : s_h[c * P::kHPitch + m];
          res1 = S::kOutNhwc ? s_h[m * P::kHPitch + c + 1] : s_h[(c + 1) * P::kHPitch + m];
        }
        const unsigned r0 = out(i, j, 2 * h, b, res0), r1 = out(i, j, 2 * h + 1, b, res1);
        if (S::kOutNhwc) {
          *reinterpret_cast<unsigned*>(s_h + m * P::kHPitch + c) = r0 | r1 << 16;
        } else {
          s_h[c * P::kHPitch + m] = static_cast<unsigned short>(r0);
          s_h[(c + 1) * P::kHPitch + m] = static_cast<unsigned short>(r1);
        }
      }
    }
  }
#endif
}

}  // namespace cuinline_conv2d_hmma_detail

/// input, weight, output and residual in the layouts of S; bias [kCout] (ignored unless kHasBias);
/// residual of the output's shape and layout (ignored unless kHasResidual); every tensor of the
/// storage type. Grid: (kTilesX, ceil(kCout / kBN), N); block: kThreads; dynamic shared memory:
/// kSmemBytes. row_tiles is unused (the launch passes the same arguments to every conv2d kernel).
namespace cuinline_conv2d_hmma_detail {

// One block's tile of kBM pixels of the flattened plane x kBN channels (every form but the halo's).
template <class S, class E>
__device__ __forceinline__ void block_tile(unsigned char* smem, const typename S::storage* __restrict__ input,
                                           const typename S::storage* __restrict__ weight,
                                           const typename S::storage* __restrict__ bias,
                                           typename S::storage* __restrict__ output,
                                           const typename S::storage* __restrict__ residual, int images,
                                           const E& ep) {
  using P = Plan<S>;
  using T = typename S::storage;
  unsigned short* s_stage = reinterpret_cast<unsigned short*>(smem);

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int wm = warp % S::kWarpsM;
  const int wn = warp / S::kWarpsM;
  const int p0 = (int)(P::kPointwise ? blockIdx.x / P::kCoBlocks : blockIdx.x) * P::kBM;
  const int co0 = (int)(P::kPointwise ? blockIdx.x % P::kCoBlocks : blockIdx.y) * P::kBN;
  const long long n = P::kBatchTiles ? 0 : blockIdx.z;  // (batch tiles: p0 counts the batch's pixels)
  const T* in_n = input + n * P::kInN;
  const long long p_end = P::kBatchTiles ? (long long)images * P::kPixels : P::kPixels;

  // ldmatrix row addresses: A tile i rows (lane % 16), k half lane / 16; B tiles 2jj, 2jj + 1 rows
  // lane % 8 (+ 8 for lanes 16-31), k half (lane / 8) % 2.
  const unsigned base = smem_address(s_stage);
  // kATrans: matrix lane / 8 of an A tile is k rows (lane / 16) * 8 .. + 7, pixels ((lane / 8) % 2) * 8
  // .. + 7 (a0: pixels 0-7 x k 0-7, a1: pixels 8-15, a2: k 8-15, a3: both), read transposed.
  const unsigned a_row =
      P::kATrans
          ? base + ((lane / 16 * 8 + lane % 8) * P::kAPitchT + wm * S::kMT * 16 + (lane / 8) % 2 * 8) * 2
          : base + ((wm * S::kMT * 16 + lane % 16) * P::kPitch + lane / 16 * 8) * 2;
  const unsigned b_row =
      base + (P::kAElems + (wn * S::kNT * 8 + lane % 8 + lane / 16 * 8) * P::kPitch + (lane / 8) % 2 * 8) * 2;

  float acc[S::kMT][S::kNT][4];
  zero_accumulators<S>(acc);
  // One main loop: cp.async where the layouts allow it and the host found both pointers 16-byte
  // aligned (S::kInAligned), else the register gather.
  if constexpr (P::kWindow) {
    mainloop_window<S>(acc, s_stage, in_n, weight, p0, co0);
    (void)a_row, (void)b_row;
  } else if constexpr (P::kAsync) {
    mainloop_async<S>(acc, s_stage, a_row, b_row, in_n, weight, p0, co0, images);
  } else {
    mainloop_registers<S>(acc, s_stage, a_row, b_row, in_n, weight, p0, co0);
  }

  T* out_n = output + n * P::kOutN;
  // Epilogue: accumulator q of tile (i, j) is pixel g + 8 (q / 2), channel 2t + q % 2. (The last
  // barrier of the main loop ended every read of the stage buffers.)
  if constexpr (P::kHalfEpi) {
    // The f16 / bf16 wgmma tiling: acc + bias (+ the residual), E and the one rounding in registers
    // (the order and arithmetic of store_tile), the 16-bit results into a tile of the storage type — half
    // the shared-memory bytes of the fp32 tile, which made the seed L1-bound (ncu, H200: L1 84 %,
    // DRAM 34 %) — then kOutVec outputs a load and store.
    unsigned short* s_h = reinterpret_cast<unsigned short*>(smem);
    if constexpr (S::kHasResidual) {
      load_tile_half<S, P::kOutVec>(s_h, residual + n * P::kOutN, p0, (int)(p_end - p0), co0);
      __syncthreads();
    }
    write_half_tile<S, E, S::kHasResidual>(acc, s_h, bias, co0, ep);
    __syncthreads();
    store_tile_half<S, P::kOutVec>(s_h, out_n, p0, (int)(p_end - p0), co0);
  } else {
    // (Not instantiated for kHalfEpi.)
    float* s_c = reinterpret_cast<float*>(smem);
    {
      const int g = lane / 4;
      const int t = lane % 4;
#pragma unroll
      for (int i = 0; i < S::kMT; ++i) {
#pragma unroll
        for (int j = 0; j < S::kNT; ++j) {
          if (S::kOutNhwc) {  // channels 2t, 2t + 1 are neighbours: one float2 a pixel row
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int m = P::a_row0(wm, i) + g + 8 * h;
              const int c = wn * S::kNT * 8 + j * 8 + 2 * t;
              *reinterpret_cast<float2*>(s_c + m * P::kCM + c) =
                  make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const int m = P::a_row0(wm, i) + g + 8 * (q / 2);
              const int c = wn * S::kNT * 8 + j * 8 + 2 * t + q % 2;
              s_c[m * P::kCM + c * P::kCC] = acc[i][j][q];
            }
          }
        }
      }
    }
    __syncthreads();
    const T* res_n = S::kHasResidual ? residual + n * P::kOutN : residual;
    // kOutVec outputs a store (1 where the host found the output not aligned to the vector; every
    // vector's offset is a multiple of kOutVec).
    store_tile<S, E, P::kOutVec>(s_c, bias, out_n, res_n, p0, co0, p_end, ep);
  }
}

// The window form with kWindowTiles: a block computes tiles L, L + G, L + 2G, ... (up to row_tiles)
// of the batch's N x kTilesX pixel tiles (image-major) of its kBN output channels (blockIdx.y), L
// its linear index along x and z and G = gridDim.x x gridDim.z the blocks (gridDim.x = ceil(kTilesX
// / row_tiles), gridDim.z = N). The next tile's window of chunk 0 and first B tiles are copied
// while this tile's outputs are rounded and stored (its output tile in a place of its own), so that
// a tile's first step does not wait for its window from DRAM.
template <class S, class E>
__device__ __forceinline__ void window_tiles(unsigned char* smem, const typename S::storage* __restrict__ input,
                                             const typename S::storage* __restrict__ weight,
                                             const typename S::storage* __restrict__ bias,
                                             typename S::storage* __restrict__ output, int row_tiles, const E& ep) {
  using P = Plan<S>;
  unsigned short* s_stage = reinterpret_cast<unsigned short*>(smem);
  unsigned short* s_h = reinterpret_cast<unsigned short*>(smem + P::kWinOutOffset);
  const int co0 = (int)blockIdx.y * P::kBN;
  const long long stride = (long long)gridDim.x * gridDim.z;
  const long long first = blockIdx.x + (long long)gridDim.x * blockIdx.z;
  const long long total = (long long)P::kTilesX * gridDim.z;
  const long long end = first + row_tiles * stride < total ? first + row_tiles * stride : total;
  float acc[S::kMT][S::kNT][4];
  if (first < end) {
    mainloop_window<S, kWindowFirstCopies>(acc, s_stage, input + first / P::kTilesX * P::kInN, weight,
                                           (int)(first % P::kTilesX) * P::kBM, co0);
  }
#pragma unroll 1
  for (long long t = first; t < end; t += stride) {
    const int p0 = (int)(t % P::kTilesX) * P::kBM;
    zero_accumulators<S>(acc);
    // (Its last barrier: every warp's reads of the buffers are done.)
    mainloop_window<S, kWindowSteps>(acc, s_stage, input + t / P::kTilesX * P::kInN, weight, p0, co0);
    const long long next = t + stride;
    if (next < end) {
      mainloop_window<S, kWindowFirstCopies>(acc, s_stage, input + next / P::kTilesX * P::kInN, weight,
                                             (int)(next % P::kTilesX) * P::kBM, co0);
    }
    write_half_tile<S, E>(acc, s_h, bias, co0, ep);
    __syncthreads();
    store_tile_half<S, P::kOutVec>(s_h, output + t / P::kTilesX * P::kOutN, p0, (int)(P::kPixels - p0), co0);
  }
}

// The halo form: a block computes tiles L, L + G, L + 2G, ... (up to row_tiles) of the batch's
// N x kTilesY tiles (image-major), L its linear index along x and z and G = gridDim.x x gridDim.z
// the blocks (gridDim.x = ceil(kTilesY / row_tiles), gridDim.z = N): the blocks resident at a time
// hold consecutive tiles of a few images, the order of the flattened tiling. (Consecutive tiles a
// block: seed NCHW 0.191 ms; tiles x, x + gridDim.x, ... of image z: 0.163 — output rows scattered
// over ~40 images at a time; H200.) Every step's weights are staged once, each tile's window copied
// while the previous tile's outputs are stored.
template <class S, class E>
__device__ __forceinline__ void halo_tiles(unsigned char* smem, const typename S::storage* __restrict__ input,
                                           const typename S::storage* __restrict__ weight,
                                           const typename S::storage* __restrict__ bias,
                                           typename S::storage* __restrict__ output, int co0, int row_tiles,
                                           const E& ep) {
  using P = Plan<S>;
  const Halo<S> h(smem);
  const long long stride = (long long)gridDim.x * gridDim.z;
  const long long first = blockIdx.x + (long long)gridDim.x * blockIdx.z;
  const long long total = (long long)P::kTilesY * gridDim.z;
  const long long end = first + row_tiles * stride < total ? first + row_tiles * stride : total;
  h.load_weights(weight, co0);
  if (first < end) h.load_window(input + first / P::kTilesY * P::kInN, (int)(first % P::kTilesY));
  copy_commit();
#pragma unroll 1
  for (long long t = first; t < end; t += stride) {
    h.ready();  // (its barrier also ends the previous tile's reads of the output tile)
    float acc[S::kMT][S::kNT][4];
    zero_accumulators<S>(acc);
    h.compute(acc);
    __syncthreads();  // every warp's reads of the window are done
    const long long next = t + stride;
    if (next < end) h.load_window(input + next / P::kTilesY * P::kInN, (int)(next % P::kTilesY));
    copy_commit();
    write_half_tile<S, E>(acc, h.s_h, bias, co0, ep);
    __syncthreads();
    const int tile = (int)(t % P::kTilesY);
    const int oy = tile / P::kSegs;
    const int ox0 = (tile - oy * P::kSegs) * P::kBM;
    store_tile_half<S, P::kOutVec>(h.s_h, output + t / P::kTilesY * P::kOutN, oy * S::kOW + ox0, S::kOW - ox0,
                                   co0);
  }
}

}  // namespace cuinline_conv2d_hmma_detail

template <class S, class E>
__global__ void __launch_bounds__(cuinline_conv2d_hmma_detail::Plan<S>::kThreads,
                                  cuinline_conv2d_hmma_detail::Plan<S>::kMinBlocks)
    cuinline_conv2d_hmma(const typename S::storage* __restrict__ input,
                         const typename S::storage* __restrict__ weight,
                         const typename S::storage* __restrict__ bias,
                         typename S::storage* __restrict__ output, int row_tiles,
                         const typename S::storage* __restrict__ residual,
                         const cuinline_conv2d_chan chan) {
  using P = cuinline_conv2d_hmma_detail::Plan<S>;
  const E ep{chan};
  namespace d = cuinline_conv2d_hmma_detail;
#ifdef CUINLINE_CONV2D_HMMA_EMULATED
  unsigned char* smem = cuinline_emulated_smem();
#else
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The wgmma tiling's stages start at a multiple of 1024 bytes (the swizzle's period).
  unsigned char* smem = smem_raw + (P::kWgmma ? (1024u - (d::smem_address(smem_raw) & 1023u)) & 1023u : 0u);
#endif
  if constexpr (P::kHalo) {
    d::halo_tiles<S, E>(smem, input, weight, bias, output, blockIdx.y * P::kBN, row_tiles, ep);
  } else if constexpr (P::kWindowTiles) {
    d::window_tiles<S, E>(smem, input, weight, bias, output, row_tiles, ep);
  } else {
    // (row_tiles: the images, for batch tiles; else unused)
    d::block_tile<S, E>(smem, input, weight, bias, output, residual, row_tiles, ep);
  }
}


#endif  // CUINLINE_CONV2D_HMMA_CUH

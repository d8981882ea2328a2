// conv2d_hmma/plan.cuh — Plan<S>: the tiling, shared-memory layout and launch figures of
// conv2d_hmma.cuh for a shape struct S (the members listed at the top of conv2d_hmma.cuh). Plain C++
// besides two device helpers, which are host functions where the file is compiled as host C++ (no
// __CUDACC__); CUINLINE_CONV2D_HMMA_WGMMA (0 where undefined) picks the wgmma tiling's block count.

#ifdef __CUDACC__
#define CUINLINE_CONV2D_HMMA_PLAN_FN static __device__ __forceinline__
#else
#define CUINLINE_CONV2D_HMMA_PLAN_FN static inline
#endif

#ifndef CUINLINE_CONV2D_HMMA_PLAN_CUH
#define CUINLINE_CONV2D_HMMA_PLAN_CUH

namespace cuinline_conv2d_hmma_detail {

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
  static constexpr bool kHalo = S::kHalo != 0;
  static constexpr int kSegs = (S::kOW + kBM - 1) / kBM;
  // (The halo form's tiles run along y: block x computes tiles row_tiles x .. of them in turn.)
  // (The pointwise form's blocks run channel blocks fastest: block x is pixel tile x / kCoBlocks,
  // channel block x % kCoBlocks, so the blocks that read one A tile run together and all but the
  // first find it in L2.)
  static constexpr int kCoBlocks = (S::kCout + kBN - 1) / kBN;
  static constexpr int kTilesX =
      kHalo ? 1 : (int)((kPixels + kBM - 1) / kBM) * (S::kPointwise != 0 ? kCoBlocks : 1);
  static constexpr int kTilesY = kHalo ? S::kOH * kSegs : 1;
  // Batch tiles (kBatchTiles; the cp.async wgmma tiling of small planes): the block's kBM pixels are
  // consecutive pixels of the batch's N x kOH x kOW (image-major), not of one image's plane, so a
  // block's weight tile serves several images (a 7 x 7 plane filled 49 of 256 rows a tile, and every
  // image re-read the whole weight). Grid: ceil(N kPixels / kBM) blocks along x, one along z; the
  // launch passes N in row_tiles.
  static constexpr bool kBatchTiles = S::kBatchTiles != 0;
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
  static constexpr bool kPointwise = S::kPointwise != 0;
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
  static constexpr bool kWindow = S::kWindow != 0;
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
  static constexpr bool kWindowTiles = kWindow && S::kWindowTiles != 0;
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

#pragma once
// The sm_80 instructions the host-emulated tensor-core kernels use, emulated from the PTX ISA on a
// block whose threads are lanes (fibers, emulated_lanes.hpp): the block's shared memory and
// barrier, ldmatrix.x4 (.trans), mma.sync m16n8k16 (f16, bf16) and m16n8k8 (TF32), ld.shared, and
// cp.async with its commit groups and waits. A test sets g_block (and, per block, g_copies) before
// it runs a block's lanes, and reaches these from the kernel's namespace with a using-directive
// (the kernels call them unqualified or through namespace cuinline_arch).
//
// The includer defines first: threadIdx (the running lane's index: lane i of a block is its thread
// i), uint4, ew_half, ew_bf16 and ew_traits<T>::to_op for both, and
// in_a_tensor(const void*, std::size_t) (whether a global read falls inside a tensor of the call).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "emulated_lanes.hpp"

namespace cuinline_emulated_sm80 {

// One block's shared state: its shared memory, the block barrier, a barrier a warp and the words a
// warp's lanes exchange in a warp-wide instruction. The exchanges use two sets of words in turn (a
// lane's turn flips at each of its warp-wide instructions), so one barrier an instruction is enough:
// a lane writes the next instruction's words into the other set, and cannot reach a third
// instruction before every lane of its warp has arrived at the second, i.e. has read the first's.
struct Block {
  std::vector<unsigned char> smem;
  std::unique_ptr<cuinline::test::lanes::LaneBarrier> block;
  std::vector<std::unique_ptr<cuinline::test::lanes::LaneBarrier>> warp;
  unsigned words[2][32][32][6];
  unsigned char turn[1024] = {};
};
inline Block* g_block = nullptr;

// The running lane's words for its next warp-wide instruction: its warp's set of this turn.
inline unsigned (&exchange_words(Block& b, int warp))[32][6] {
  unsigned char& turn = b.turn[threadIdx.x];
  unsigned(&words)[32][6] = b.words[turn][warp];
  turn ^= 1;
  return words;
}

// Whether the `bytes` at shared byte `at` are inside the block's shared memory (a failure otherwise).
inline bool in_smem(unsigned at, unsigned bytes) {
  if (at + bytes <= g_block->smem.size()) return true;
  ADD_FAILURE() << "shared bytes " << at << " + " << bytes << " past the block's " << g_block->smem.size();
  return false;
}
// The T at shared byte `at` (inside the shared memory: in_smem), assembled from its bytes (a plain
// load for the sanitizers to check, where a small memcpy costs a call).
template <class T>
inline T load_smem(unsigned at) {
  static_assert(sizeof(T) <= 8);
  const unsigned char* p = g_block->smem.data() + at;
  unsigned long long v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<unsigned long long>(p[i]) << (8 * i);
  T t;
  std::memcpy(&t, &v, sizeof(T));
  return t;
}

}  // namespace cuinline_emulated_sm80

inline void __syncthreads() {
  cuinline_emulated_sm80::g_block->block->arrive_and_wait();
}
inline unsigned char* cuinline_emulated_smem() {
  return cuinline_emulated_sm80::g_block->smem.data();
}

namespace cuinline_emulated_sm80 {

inline unsigned smem_address(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - g_block->smem.data());
}
// Lanes 8j .. 8j + 7 give the row addresses of matrix j; a lane receives row lane / 4, 32-bit word
// lane % 4 of each matrix.
inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Block& b = *g_block;
  if (addr % 16 != 0) ADD_FAILURE() << "ldmatrix row addresses are 16-byte aligned: " << addr;
  unsigned(&words)[32][6] = exchange_words(b, warp);
  words[lane][0] = addr;
  b.warp[warp]->arrive_and_wait();
  for (int j = 0; j < 4; ++j) {
    const unsigned row = words[8 * j + lane / 4][0];
    r[j] = in_smem(row, 16) ? load_smem<unsigned>(row + (lane % 4) * 4) : 0u;
  }
}
// Transposed: a lane receives rows 2 (lane % 4) and 2 (lane % 4) + 1 of column lane / 4 (low, high).
inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Block& b = *g_block;
  if (addr % 16 != 0) ADD_FAILURE() << "ldmatrix row addresses are 16-byte aligned: " << addr;
  unsigned(&words)[32][6] = exchange_words(b, warp);
  words[lane][0] = addr;
  b.warp[warp]->arrive_and_wait();
  for (int j = 0; j < 4; ++j) {
    unsigned short h[2];
    for (int e = 0; e < 2; ++e) {
      const unsigned row = words[8 * j + 2 * (lane % 4) + e][0];
      h[e] = in_smem(row, 16) ? load_smem<unsigned short>(row + (lane / 4) * 2) : 0;
    }
    r[j] = h[0] | static_cast<unsigned>(h[1]) << 16;
  }
}
// m16n8k16, A row-major: a0 (row g, k 2t, 2t + 1), a1 (g + 8, same k), a2 (g, k + 8), a3 (g + 8,
// k + 8); B column-major: b0 (k 2t, 2t + 1, column g), b1 (k + 8); C/D: c0, c1 (row g, columns 2t,
// 2t + 1), c2, c3 (row g + 8); lane = 4g + t, the lower k in the lower 16 bits.
// Every f16 value as the kernels' conversion gives it, looked up (the conversion is arithmetic on
// the host: most of an emulated mma's time).
inline const std::vector<float>& half_values() {
  static const std::vector<float> values = [] {
    std::vector<float> v(65536);
    for (unsigned i = 0; i < 65536; ++i) v[i] = ew_traits<ew_half>::to_op(ew_half{static_cast<unsigned short>(i)});
    return v;
  }();
  return values;
}
// The value of 16-bit operand `bits` of type T (ew_half or ew_bf16).
template <class T>
inline double operand_value(unsigned short bits) {
  if constexpr (std::is_same_v<T, ew_half>) {
    return half_values()[bits];
  } else {
    return ew_traits<T>::to_op(T{bits});
  }
}

template <class T>
struct Mma {
  static double element(unsigned word, int k) {
    return operand_value<T>(static_cast<unsigned short>(word >> (16 * (k % 2))));
  }
  static void run(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    Block& b = *g_block;
    unsigned(&words)[32][6] = exchange_words(b, warp);
    for (int q = 0; q < 4; ++q) words[lane][q] = a[q];
    words[lane][4] = b0;
    words[lane][5] = b1;
    b.warp[warp]->arrive_and_wait();
    const int g = lane / 4, t = lane % 4;
    // This lane's two rows of A (g, g + 8) and two columns of B (2t, 2t + 1), each read once.
    double av[2][16], bv[2][16];
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 16; ++k) {
        av[h][k] = element(words[g * 4 + (k % 8) / 2][h + (k >= 8 ? 2 : 0)], k);
        bv[h][k] = element(words[(2 * t + h) * 4 + (k % 8) / 2][k >= 8 ? 5 : 4], k);
      }
    }
    for (int q = 0; q < 4; ++q) {
      double sum = d[q];
      for (int k = 0; k < 16; ++k) sum += av[q / 2][k] * bv[q % 2][k];
      d[q] = static_cast<float>(sum);
    }
  }
};

// m16n8k8 TF32 (float storage): A row-major a0 (row g, k t), a1 (g + 8, t), a2 (g, t + 4), a3 (g +
// 8, t + 4); B column-major b0 (k t, column g), b1 (k t + 4); C/D as m16n8k16's. The operands are
// 32-bit floats (the kernel's are already TF32 values: they are used as they are here).
struct MmaTf32 {
  static float value(unsigned word) {
    float f;
    std::memcpy(&f, &word, 4);
    return f;
  }
  static void run(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    Block& b = *g_block;
    unsigned(&words)[32][6] = exchange_words(b, warp);
    for (int q = 0; q < 4; ++q) words[lane][q] = a[q];
    words[lane][4] = b0;
    words[lane][5] = b1;
    b.warp[warp]->arrive_and_wait();
    const int g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; ++q) {
      const int row = g + 8 * (q / 2), col = 2 * t + q % 2;
      double sum = d[q];
      for (int k = 0; k < 8; ++k) {
        const unsigned aw = words[(row % 8) * 4 + k % 4][(row >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0)];
        const unsigned bw = words[col * 4 + k % 4][k >= 4 ? 5 : 4];
        sum += static_cast<double>(value(aw)) * value(bw);
      }
      d[q] = static_cast<float>(sum);
    }
  }
};
inline unsigned lds32(unsigned addr) {
  if (addr % 4 != 0) ADD_FAILURE() << "a 4-byte shared load must be aligned: " << addr;
  return in_smem(addr, 4) ? load_smem<unsigned>(addr) : 0u;
}

// cp.async: a thread's copies are queued and committed in groups; g_copies_at_issue performs them
// at once (the earliest a copy may land: catches a buffer overwritten while it is read), else at
// the wait that must see them (the latest: catches a read before its wait).
struct Copy {
  void* dst;
  const void* src;
  bool valid;
  int bytes = 16;
};
// A thread's copies: not yet committed, and its committed groups (by thread, set up for each block).
struct ThreadCopies {
  std::vector<Copy> uncommitted;
  std::vector<std::vector<Copy>> groups;
};
inline std::vector<ThreadCopies> g_copies;
inline ThreadCopies& my_copies() {
  return g_copies[cuinline::test::lanes::lane_index()];
}
inline bool g_copies_at_issue = false;
inline void perform(const Copy& c) {
  if (c.valid) {
    std::memcpy(c.dst, c.src, c.bytes);
  } else {
    std::memset(c.dst, 0, c.bytes);
  }
}
template <int kL2Only>
inline void copy16_async(void* dst, const void* src, bool valid) {
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(dst) % 16, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(src) % 16, 0u);
  if (valid) EXPECT_TRUE(in_a_tensor(src, 16)) << "a copy from outside every tensor";
  if (g_copies_at_issue) {
    perform({dst, src, valid});
  } else {
    my_copies().uncommitted.push_back({dst, src, valid});
  }
}
template <int kBytes>
inline void copy_async(void* dst, const void* src) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(dst) % kBytes, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(src) % kBytes, 0u);
  EXPECT_TRUE(in_a_tensor(src, kBytes)) << "a copy from outside every tensor";
  if (!in_smem(smem_address(dst), kBytes)) return;
  if (g_copies_at_issue) {
    perform({dst, src, true, kBytes});
  } else {
    my_copies().uncommitted.push_back({dst, src, true, kBytes});
  }
}
inline void copy_commit() {
  ThreadCopies& mine = my_copies();
  mine.groups.push_back(std::move(mine.uncommitted));
  mine.uncommitted.clear();
}
template <int kPending>
inline void copy_wait() {
  std::vector<std::vector<Copy>>& groups = my_copies().groups;
  while (groups.size() > static_cast<std::size_t>(kPending)) {
    for (const Copy& c : groups.front()) perform(c);
    groups.erase(groups.begin());
  }
}

}  // namespace cuinline_emulated_sm80

#pragma once
// The bf16 table form of the elementwise kernels (kernel_templates/ew_table.cuh): which chains have
// it, which calls take it, and its grid. One rule for the specialized kernel (its module holds the
// table kernel beside the plain one) and the generic kernel.
#include <cstdint>
#include <cuinline/ops.hpp>

#include "ops/elementwise/variant.hpp"

namespace cuinline::ops::detail {

/// Elements from which a call takes the table form: each block builds its table before it looks
/// anything up, about as much work as 8 elements a thread. H200, bf16: at 2^24 elements the table
/// form ran gelu and add(in1)|gelu 0.94-0.99x the plain kernel, at 8192 x 28672 1.16-1.22x.
inline constexpr std::int64_t kTableMinElements = std::int64_t{1} << 25;

/// The table kernels' launch (ew_table.cuh: EWT_BLOCK, EWT_BLOCKS_PER_SM; the generic table kernel
/// in src/ops/elementwise/ew_generic.cu has the same): 1024-thread blocks, two resident a
/// multiprocessor, one 16-byte vector a thread at a time.
inline constexpr std::uint32_t kTableBlock = 1024;
inline constexpr std::uint32_t kTableBlocksPerSm = 2;

/// The index in op.steps of the first step the table computes, or -1 where (op, key) has no table
/// form. It has one where: bf16, a chain, one output, 16-byte vectors, 32-bit indices, the
/// contiguous path; the chain ends with a run of steps without tensor operands that holds an
/// activation whose plain kernel is compute-bound (gelu, mish, softplus, elu, selu, celu,
/// logsigmoid, log), or two or more transcendental ones (sigmoid, tanh, silu, gelu_tanh, exp,
/// softsign, tanhshrink besides those); and no activation or math step comes before that run.
int table_run_start(const Op& op, const NaryKey& key) noexcept;

/// The same index in lowered steps (cuinline::detail::lower_chain: div_leaky_relu is two), as the
/// generic kernel's program counts them; -1 likewise.
int table_run_start_lowered(const Op& op, const NaryKey& key) noexcept;

/// Whether a call of `numel` elements on (op, key) takes the specialized kernel's table form.
bool table_applies(const Op& op, const NaryKey& key, std::int64_t numel) noexcept;

/// Whether a planned call (key.table: plan_nary's table_applies) takes the generic kernel's table
/// form: one input only. Over two (add(in1)|gelu with a row, mul(in1)|silu with a column) a generic
/// table kernel, which interprets the tensor steps before the run at 54-73 registers a thread (four
/// 256-thread blocks a multiprocessor), ran 0.91-0.95x the generic kernel without it (H200,
/// [8192, 28672]); one kernel for one and two inputs at 32 registers ran add(in1)|gelu 1.06x but
/// gelu 0.82x the one-input kernel.
bool generic_table_applies(const NaryKey& key) noexcept;

/// A table kernel's blocks on `device`: as many as are resident at once (two a multiprocessor, one
/// where it holds fewer than 2048 threads), no more than the vectors need. The device's figures are
/// queried once.
std::uint32_t table_grid(std::int64_t numel, std::int64_t head, int device);

}  // namespace cuinline::ops::detail

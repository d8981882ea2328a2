#pragma once
// A conv2d call's tensors checked and planned into the variant its kernels are compiled for
// (conv2d_variant_for): shapes, strides, dtypes, alignment, overlaps and the epilogue's channel
// operands, refused with an InvalidArgument that names what was wrong before anything launches; and
// the tensors the kernels read or write through a compact copy (their strides, or a residual in the
// other layout than the output's). The launch sequence (conv2d_launch.cpp) runs what it plans.
#include <cuinline/conv2d.hpp>
#include <vector>

namespace cuinline::ops::conv2d_impl {

// F.conv2d's unbatched form: an input [Cin, H, W] gives an output [Cout, OH, OW] — one image. Such a
// call is the batched call on views with a leading batch axis of 1 (`unbatched` true); any other mix
// of 3-D and 4-D tensors is named. (A null view — no residual — stays null.)
struct Batched {
  TensorView input, output, residual;
  bool unbatched = false;
};
Batched batched(const TensorView& input, const TensorView& output, const TensorView& residual);

// The call's tensors that the kernels read or write through a compact copy in one stream-ordered
// workspace (kernel_layout): strides the kernels do not take, or a residual in the other layout than
// the output's.
struct Conv2dCopies {
  bool input = false, weight = false, bias = false, output = false, residual = false;
  unsigned operands = 0;  ///< bit k: channel operand k
  bool any() const noexcept { return input || weight || bias || output || residual || operands != 0; }
};

/// The variant of a batched call (4-D input and output) on these tensors, `copies` set to the tensors
/// it reads or writes through a compact copy. Throws InvalidArgument for bad input.
Conv2dVariant plan_call(const TensorView& input, const TensorView& weight, const TensorView& bias,
                        const TensorView& output, const Conv2dParams& params, const Op& epilogue,
                        Conv2dPrecision precision, const TensorView& residual,
                        const std::vector<TensorView>& channel_operands, Conv2dCopies& copies);

// The compact view a copy of `t` is in (its data set at launch): `layout`'s strides for a 4-D
// tensor, row-major for any other (a per-channel vector).
TensorView compact_view(const TensorView& t, Conv2dLayout layout);

}  // namespace cuinline::ops::conv2d_impl

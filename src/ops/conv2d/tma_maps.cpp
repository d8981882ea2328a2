// The TMA form's tensor maps as figures (no driver): what conv2d_launch.cpp encodes for a launch, and
// the driver's documented limits on them, so that a host test can check every planned launch.
#include <algorithm>
#include <cstdint>
#include <string>

#include "ops/conv2d/conv2d_internal.hpp"

namespace cuinline::ops::conv2d_impl {

Conv2dVariant launched_variant(const Conv2dTiling& t, const Conv2dVariant& v) {
  return t.staged() ? hmma_staged_variant(v) : v;
}

TmaMapShapes tma_map_shapes(const HmmaTiling& t, const Conv2dVariant& v, std::int64_t n) {
  TmaMapShapes s;
  const auto c = static_cast<std::uint64_t>(v.in_channels);
  const auto box_cols = static_cast<std::uint32_t>(std::min<std::int64_t>(t.tile_cols, v.out_width()));
  const auto bk = static_cast<std::uint32_t>(t.ci_chunk);
  s.im2col = t.tma_im2col;
  s.in_dims[0] = c;
  s.in_dims[1] = static_cast<std::uint64_t>(v.width);
  s.in_dims[2] = static_cast<std::uint64_t>(v.height);
  s.in_dims[3] = static_cast<std::uint64_t>(n);
  s.in_strides[0] = c * 2;
  s.in_strides[1] = s.in_strides[0] * s.in_dims[1];
  s.in_strides[2] = s.in_strides[1] * s.in_dims[2];
  if (s.im2col) {
    const Conv2dParams& p = v.params;
    s.lower[0] = -p.pad_w, s.lower[1] = -p.pad_h;
    s.upper[0] = p.pad_w - (v.kernel_w - 1) * p.dilation_w;
    s.upper[1] = p.pad_h - (v.kernel_h - 1) * p.dilation_h;
    s.channels_per_pixel = bk;
    s.pixels_per_column = static_cast<std::uint32_t>(t.tile_cols);
    s.element_strides[1] = static_cast<std::uint32_t>(p.stride_w);
    s.element_strides[2] = static_cast<std::uint32_t>(p.stride_h);
  } else {
    s.in_box[0] = bk;
    s.in_box[1] = box_cols;
    s.in_box[2] = box_cols == 0 ? 0 : static_cast<std::uint32_t>(t.tile_cols) / box_cols;
    s.in_box[3] = 1;
  }
  s.w_dims[0] = c * static_cast<std::uint64_t>(v.kernel_h) * static_cast<std::uint64_t>(v.kernel_w);
  s.w_dims[1] = static_cast<std::uint64_t>(v.out_channels);
  s.w_strides[0] = s.w_dims[0] * 2;
  s.w_box[0] = bk;
  s.w_box[1] = static_cast<std::uint32_t>(t.block_channels());
  return s;
}

std::string tma_map_problem(const TmaMapShapes& s) {
  constexpr std::uint64_t kElement = 2, kSwizzleBytes = 128;
  const auto dims = [](const char* map, const std::uint64_t* d, int rank) -> std::string {
    for (int i = 0; i < rank; ++i) {
      if (d[i] == 0 || d[i] > (std::uint64_t{1} << 32)) {
        return std::string(map) + " dimension " + std::to_string(i) + " is " + std::to_string(d[i]) +
               " (1 to 2^32)";
      }
    }
    return "";
  };
  const auto strides = [](const char* map, const std::uint64_t* st, int count,
                          std::uint64_t inner) -> std::string {
    for (int i = 0; i < count; ++i) {
      if (st[i] % 16 != 0 || st[i] >= (std::uint64_t{1} << 40) || (i == 0 && st[i] < inner)) {
        return std::string(map) + " stride " + std::to_string(i) + " is " + std::to_string(st[i]) +
               " bytes (a multiple of 16 under 2^40, at least the row's bytes)";
      }
    }
    return "";
  };
  const auto box = [](const char* map, const std::uint32_t* b, int rank) -> std::string {
    for (int i = 0; i < rank; ++i) {
      if (b[i] == 0 || b[i] > 256) {
        return std::string(map) + " box dimension " + std::to_string(i) + " is " + std::to_string(b[i]) +
               " (1 to 256)";
      }
    }
    if ((b[0] * kElement) % 16 != 0 || b[0] * kElement > kSwizzleBytes) {
      return std::string(map) + " box row of " + std::to_string(b[0] * kElement) +
             " bytes (a multiple of 16, at most the 128-byte swizzle)";
    }
    return "";
  };
  std::string why = dims("the input map's", s.in_dims, 4);
  if (why.empty()) why = strides("the input map's", s.in_strides, 3, s.in_dims[0] * kElement);
  if (why.empty() && !s.im2col) why = box("the input map's", s.in_box, 4);
  if (why.empty() && s.im2col) {
    for (int i = 0; i < 2 && why.empty(); ++i) {
      if (s.lower[i] < -128 || s.lower[i] > 127 || s.upper[i] < -128 || s.upper[i] > 127) {
        why = "the im2col map's corners " + std::to_string(s.lower[i]) + " / " + std::to_string(s.upper[i]) +
              " (within [-128, 127])";
      }
    }
    for (int i = 0; i < 4 && why.empty(); ++i) {
      if (s.element_strides[i] == 0 || s.element_strides[i] > 8) {
        why = "the im2col map's element stride " + std::to_string(s.element_strides[i]) + " (1 to 8)";
      }
    }
    if (why.empty() &&
        (s.channels_per_pixel == 0 || s.channels_per_pixel > 256 ||
         (s.channels_per_pixel * kElement) % 16 != 0 || s.channels_per_pixel * kElement > kSwizzleBytes)) {
      why = "the im2col map's " + std::to_string(s.channels_per_pixel) +
            " channels a pixel (1 to 256, a multiple of 16 bytes, at most the 128-byte swizzle)";
    }
    if (why.empty() && (s.pixels_per_column == 0 || s.pixels_per_column > 1024)) {
      why = "the im2col map's " + std::to_string(s.pixels_per_column) + " pixels a column (1 to 1024)";
    }
  }
  if (why.empty()) why = dims("the weight map's", s.w_dims, 2);
  if (why.empty()) why = strides("the weight map's", s.w_strides, 1, s.w_dims[0] * kElement);
  if (why.empty()) why = box("the weight map's", s.w_box, 2);
  return why;
}

}  // namespace cuinline::ops::conv2d_impl

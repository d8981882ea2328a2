// Real layers past the limits conv2d once had (filters <= 31, stride and dilation <= 16, padding
// <= 64, channels <= 4096), each sized so that a float64 CPU reference of one call stays under
// ~5e7 multiply-adds: the host test plans and compiles them, the gpu test runs them against it.
#pragma once

#include <cuinline/conv2d.hpp>
#include <vector>

namespace cuinline::test {

struct PastLimitsShape {
  const char* what;
  int n, cin, h, w, cout, kh, kw;
  ops::Conv2dParams p;
};

inline std::vector<PastLimitsShape> past_limits_shapes() {
  auto params = [](int sh, int sw, int ph, int pw, int dh, int dw, int groups) {
    ops::Conv2dParams p;
    p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh, p.dilation_w = dw;
    p.groups = groups;
    return p;
  };
  return {
      {"ViT-B/32 patch embedding (32 x 32, stride 32)", 2, 3, 224, 224, 96, 32, 32, params(32, 32, 0, 0, 1, 1, 1)},
      {"patch embedding, image not a multiple of the patch", 1, 3, 100, 70, 40, 32, 32, params(32, 32, 0, 0, 1, 1, 1)},
      {"DeepLab ASPP, dilation and padding 24", 1, 64, 33, 33, 32, 3, 3, params(1, 1, 24, 24, 24, 24, 1)},
      {"ASPP, dilation and padding 36", 1, 16, 65, 65, 16, 3, 3, params(1, 1, 36, 36, 36, 36, 1)},
      {"dilation 17 x 3, padding 17 x 2", 2, 8, 40, 36, 24, 3, 3, params(1, 1, 17, 2, 17, 3, 1)},
      {"FCN's first conv, padding 100", 1, 3, 40, 40, 16, 3, 3, params(1, 1, 100, 100, 1, 1, 1)},
      {"padding 70 x 3", 1, 8, 20, 30, 8, 5, 3, params(2, 1, 70, 3, 1, 1, 1)},
      {"stride 40 x 17", 2, 16, 200, 200, 32, 3, 3, params(40, 17, 1, 1, 1, 1, 1)},
      {"41 x 5 filter", 1, 8, 32, 32, 16, 41, 5, params(1, 1, 20, 2, 1, 1, 1)},
      {"51 x 51 depthwise (SLaK)", 1, 16, 32, 32, 16, 51, 51, params(1, 1, 25, 25, 1, 1, 16)},
      {"4100 input channels, 1 x 1", 2, 4100, 4, 4, 8, 1, 1, params(1, 1, 0, 0, 1, 1, 1)},
      {"4200 output channels, 3 x 3", 1, 16, 3, 3, 4200, 3, 3, params(1, 1, 1, 1, 1, 1, 1)},
      {"1-D audio filter of 80 taps, stride 4", 1, 1, 1, 20000, 16, 1, 80, params(1, 4, 0, 40, 1, 1, 1)},
  };
}

}  // namespace cuinline::test

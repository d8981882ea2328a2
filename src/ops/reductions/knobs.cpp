// The CUINLINE_ROWS_* knobs (knobs.hpp).
#include "ops/reductions/knobs.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/log.hpp"
#include "ops/reductions/plan.hpp"

namespace cuinline::ops::detail {

static_assert(kWarpLongestRow == std::int64_t{32} * kWarpMaxPerThread,
              "the warp form holds rows of at most 32 lanes of kWarpMaxPerThread");

RowKnobs read_row_knobs(const char* (*lookup)(const char* name)) {
  RowKnobs k;
  const auto refuse = [&](const char* name, const char* value, const char* accepted) {
    k.refused.push_back(std::string(name) + "=" + value + " is not " + accepted + ": ignored");
  };
  const auto set = [&](const char* name) -> const char* {
    const char* value = lookup(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  if (const char* v = set("CUINLINE_ROWS_CLUSTER")) {
    if (std::strcmp(v, "0") == 0) {
      k.cluster = ClusterKnob::off;
    } else if (std::strcmp(v, "all") == 0) {
      k.cluster = ClusterKnob::all;
    } else if (std::strcmp(v, "1") != 0) {
      refuse("CUINLINE_ROWS_CLUSTER", v, "0, 1 or all");
    }
  }
  if (const char* v = set("CUINLINE_ROWS_WORKSPACE")) {
    if (std::strcmp(v, "0") == 0) {
      k.workspace = false;
    } else if (std::strcmp(v, "1") != 0) {
      refuse("CUINLINE_ROWS_WORKSPACE", v, "0 or 1");
    }
  }
  const auto power_of_two_to_8 = [&](const char* name, int& field) {
    const char* v = set(name);
    if (v == nullptr) return;
    for (const char* accepted : {"1", "2", "4", "8"}) {
      if (std::strcmp(v, accepted) == 0) {
        field = std::atoi(accepted);
        return;
      }
    }
    refuse(name, v, "1, 2, 4 or 8");
  };
  power_of_two_to_8("CUINLINE_ROWS_WARP_VECTORS", k.warp_vectors);
  power_of_two_to_8("CUINLINE_ROWS_WARP_ROWS", k.warp_rows);
  if (const char* v = set("CUINLINE_ROWS_WARP_MAX")) {
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(v, &end, 10);
    if (errno != 0 || *end != '\0' || value < 1 || value > kWarpLongestRow) {
      refuse("CUINLINE_ROWS_WARP_MAX", v, ("a row length of 1-" + std::to_string(kWarpLongestRow)).c_str());
    } else {
      k.warp_max = static_cast<std::int64_t>(value);
    }
  }
  return k;
}

const RowKnobs& row_knobs() {
  static const RowKnobs k = [] {
    RowKnobs read = read_row_knobs([](const char* name) -> const char* { return std::getenv(name); });
    for (const std::string& message : read.refused) logger()->warn("{}", message);
    return read;
  }();
  return k;
}

}  // namespace cuinline::ops::detail

#pragma once
// Option canonicalization shared by compile() and make_cache_key(): the key hashes the canonical
// options without building them, so the same walk feeds both.

#include <string>
#include <string_view>
#include <vector>

namespace cuinline::detail {

/// Receives canonical options one at a time; the option's text is prefix + value.
class OptionSink {
 public:
  virtual void option(std::string_view prefix, std::string_view value) = 0;

 protected:
  ~OptionSink() = default;
};

/// Walks `options` in order and hands each canonical option to `sink`. Throws InvalidArgument like
/// canonical_options().
void for_each_canonical_option(const std::vector<std::string>& options, OptionSink& sink);

/// The part of default_options() that goes into the cache key (everything but the toolkit include
/// path, which differs between machines that must share keys).
const std::vector<std::string>& keyed_default_options();

/// True for an option that selects the language standard (the default -std is then left out).
bool is_std_option(std::string_view canonical);

}  // namespace cuinline::detail

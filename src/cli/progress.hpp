#pragma once
// Progress of `cuinline warm`: a one-line bar on a terminal (done/total and the variant being
// compiled), one line per variant otherwise. Thread-safe: the workers report into it.

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cuinline::cli {

enum class Outcome { compiled, cached, failed };

class Progress {
 public:
  Progress(std::size_t total, bool bar);

  void started(std::size_t index, const std::string& label);
  /// `error` is printed (to stderr) when the outcome is failed.
  void finished(std::size_t index, const std::string& label, Outcome outcome, double seconds,
                const std::string& error);

  struct Totals {
    std::size_t compiled = 0;
    std::size_t cached = 0;
    std::size_t failed = 0;
  };
  /// Clears the bar and returns the counts.
  Totals done();
  std::vector<std::string> failed_labels() const;

 private:
  void draw_bar_locked(bool force);
  void clear_bar_locked();

  std::size_t total_;
  bool bar_;
  mutable std::mutex mutex_;
  Totals totals_;
  std::map<std::size_t, std::string> running_;  // index → label, for "the current variant"
  std::vector<std::string> failed_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool bar_drawn_ = false;
};

}  // namespace cuinline::cli

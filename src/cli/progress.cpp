#include "cli/progress.hpp"

#include <cstdio>

#include "cli/util.hpp"

namespace cuinline::cli {

Progress::Progress(std::size_t total, bool bar) : total_(total), bar_(bar) {}

void Progress::started(std::size_t index, const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_[index] = label;
  if (bar_) draw_bar_locked(false);
}

void Progress::finished(std::size_t index, const std::string& label, Outcome outcome, double seconds,
                        const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_.erase(index);
  switch (outcome) {
    case Outcome::compiled:
      ++totals_.compiled;
      break;
    case Outcome::cached:
      ++totals_.cached;
      break;
    case Outcome::failed:
      ++totals_.failed;
      failed_.push_back(label);
      break;
  }
  std::size_t done = totals_.compiled + totals_.cached + totals_.failed;
  if (bar_) {
    if (outcome == Outcome::failed) {
      clear_bar_locked();
      std::fprintf(stderr, "FAILED %s:\n%s\n", label.c_str(), error.c_str());
      std::fflush(stderr);
    }
    draw_bar_locked(outcome == Outcome::failed || done == total_);
    return;
  }
  static const char* const names[] = {"compiled", "cached", "FAILED"};
  int width = static_cast<int>(std::to_string(total_).size());
  std::printf("[%*zu/%zu] %-8s %s (%s)\n", width, done, total_, names[static_cast<int>(outcome)],
              label.c_str(), format_seconds(seconds).c_str());
  std::fflush(stdout);
  if (outcome == Outcome::failed) {
    std::fprintf(stderr, "FAILED %s:\n%s\n", label.c_str(), error.c_str());
    std::fflush(stderr);
  }
}

void Progress::draw_bar_locked(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && bar_drawn_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_draw_ = now;
  std::size_t done = totals_.compiled + totals_.cached + totals_.failed;
  constexpr int kBarWidth = 24;
  int filled = total_ == 0 ? kBarWidth : static_cast<int>(done * kBarWidth / total_);
  std::string line = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                     std::string(static_cast<std::size_t>(kBarWidth - filled), '.') + "] " +
                     std::to_string(done) + "/" + std::to_string(total_);
  if (totals_.failed > 0) line += " (" + std::to_string(totals_.failed) + " failed)";
  if (!running_.empty()) line += "  " + running_.rbegin()->second;
  auto columns = static_cast<std::size_t>(terminal_columns());
  if (line.size() >= columns) line.resize(columns > 1 ? columns - 1 : 0);
  std::printf("\r\x1b[K%s", line.c_str());
  std::fflush(stdout);
  bar_drawn_ = true;
}

void Progress::clear_bar_locked() {
  if (!bar_drawn_) return;
  std::printf("\r\x1b[K");
  std::fflush(stdout);
  bar_drawn_ = false;
}

Progress::Totals Progress::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bar_) clear_bar_locked();
  return totals_;
}

std::vector<std::string> Progress::failed_labels() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

}  // namespace cuinline::cli

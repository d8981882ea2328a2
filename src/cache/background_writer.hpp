#pragma once
// One background thread that runs jobs in order: KernelCache copies remote hits into the disk tier
// with it, so a remote hit is served without waiting for the disk write (its fsync alone is about
// as long as the whole remote hit). Started on first use; the destructor runs what is queued and
// joins. After a fork() the child has no thread: jobs then run on the caller's thread.

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace cuinline::detail {

class BackgroundWriter {
 public:
  /// More jobs than this waiting: the next one runs on the caller's thread (back-pressure).
  static constexpr std::size_t kMaxQueued = 256;

  BackgroundWriter() = default;
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  void submit(std::function<void()> job);
  /// Returns when every job submitted before the call has run.
  void drain();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  pid_t owner_ = 0;  // the process that started thread_
  std::thread thread_;
};

}  // namespace cuinline::detail

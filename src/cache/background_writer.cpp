#include "cache/background_writer.hpp"

#include <unistd.h>

#include <exception>

#include "common/log.hpp"

namespace cuinline::detail {

BackgroundWriter::~BackgroundWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    if (owner_ == ::getpid()) {
      thread_.join();
    } else {
      thread_.detach();  // a forked child: the thread object is a copy of the parent's, no thread
    }
  }
}

void BackgroundWriter::submit(std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool forked = thread_.joinable() && owner_ != ::getpid();
  if (stop_ || forked || queue_.size() >= kMaxQueued) {
    lock.unlock();
    job();
    return;
  }
  if (!thread_.joinable()) {
    owner_ = ::getpid();
    thread_ = std::thread([this] { loop(); });
  }
  queue_.push_back(std::move(job));
  lock.unlock();
  wake_.notify_one();
}

void BackgroundWriter::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (thread_.joinable() && owner_ != ::getpid()) return;
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void BackgroundWriter::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      logger()->warn("background cache write failed: {}", e.what());
    }
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace cuinline::detail

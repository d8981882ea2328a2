// ReplyScanner (redis_client.hpp): one RESP2 reply followed through its bytes as they arrive, so that
// its headers are checked against the bounds before hiredis buffers anything.

#include <algorithm>
#include <cstdio>

#include "cache/redis_client.hpp"

namespace cuinline::detail {

void ReplyScanner::reset() {
  state_ = State::type;
  items_ = bytes_ = 0;
  open_.clear();
  complete_ = false;
  error_.clear();
}

bool ReplyScanner::fail(std::string message) {
  error_ = std::move(message);
  return false;
}

void ReplyScanner::item_done() {
  state_ = State::type;
  while (!open_.empty()) {
    if (--open_.back() > 0) return;
    open_.pop_back();
  }
  complete_ = true;
}

bool ReplyScanner::end_of_line() {
  if (type_ == '$' || type_ == '*' || type_ == ':') {
    if (digits_ == 0 || (negative_ && type_ != ':' && number_ != 1)) {
      return fail("protocol error: a bad '" + std::string(1, type_) + "' header");
    }
  }
  if (type_ == '$' && !negative_) {
    bulk_left_ = number_ + 2;
    state_ = State::bulk;
    return true;
  }
  if (type_ == '*' && !negative_ && number_ > 0) {
    if (open_.size() >= kMaxDepth) return fail("protocol error: arrays nested deeper than 7");
    open_.push_back(number_);
    state_ = State::type;
    return true;
  }
  item_done();
  return true;
}

long long ReplyScanner::scan(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size() && !complete_) {
    const char c = bytes[i];
    switch (state_) {
      case State::type:
        if (c != '+' && c != '-' && c != ':' && c != '$' && c != '*') {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
          fail(std::string("protocol error: a reply starting with byte ") + hex);
          return -1;
        }
        if (++items_ > kMaxItems) {
          fail("reply of more than " + std::to_string(kMaxItems) + " items: dropping the connection");
          return -1;
        }
        type_ = c;
        negative_ = false;
        digits_ = 0;
        number_ = 0;
        line_bytes_ = 0;
        state_ = State::line;
        ++i;
        break;
      case State::line:
        ++i;
        if (c == '\r') {
          state_ = State::line_end;
          break;
        }
        ++line_bytes_;
        if (type_ == '+' || type_ == '-') break;  // bounded by the reply's byte count
        if (line_bytes_ > 24) {
          fail("protocol error: a header line too long");
          return -1;
        }
        if (c == '-' && line_bytes_ == 1) {
          negative_ = true;
        } else if (c >= '0' && c <= '9') {
          ++digits_;
          number_ = number_ * 10 + static_cast<std::uint64_t>(c - '0');
          // Checked digit by digit: a header announcing too much is refused before its end arrives.
          if (!negative_ && type_ == '$' && number_ > max_bytes_) {
            fail("a bulk reply announcing more than " + std::to_string(max_bytes_) +
                 " bytes: dropping the connection");
            return -1;
          }
          if (!negative_ && type_ == '*' && number_ > kMaxItems) {
            fail("an array reply announcing more than " + std::to_string(kMaxItems) +
                 " items: dropping the connection");
            return -1;
          }
        } else {
          fail("protocol error: a bad '" + std::string(1, type_) + "' header");
          return -1;
        }
        break;
      case State::line_end:
        ++i;
        if (c != '\n') {
          fail("protocol error: '\\r' without '\\n'");
          return -1;
        }
        if (!end_of_line()) return -1;
        break;
      case State::bulk: {
        const std::uint64_t take = std::min<std::uint64_t>(bulk_left_, bytes.size() - i);
        i += take;
        bulk_left_ -= take;
        if (bulk_left_ == 0) item_done();
        break;
      }
    }
  }
  bytes_ += i;
  if (bytes_ > max_bytes_) {
    fail("a reply larger than " + std::to_string(max_bytes_) + " bytes: dropping the connection");
    return -1;
  }
  return static_cast<long long>(i);
}

}  // namespace cuinline::detail

// Routes cuinline's log into the application's own (the sink of include/cuinline/log.hpp) and
// prints the version: a program built against the installed package with spdlog's headers hidden.
#include <cstdio>
#include <cuinline/cuinline.h>
#include <cuinline/cuinline.hpp>
#include <string>
#include <string_view>
#include <vector>

int main() {
  std::vector<std::string> lines;
  cuinline::set_log_sink([&](cuinline::LogLevel level, std::string_view message) {
    lines.push_back(std::string(cuinline::to_string(level)) + ": " + std::string(message));
  });
  cuinline::set_log_level(cuinline::LogLevel::warn);
  cuinline::set_log_sink(nullptr);
  std::printf("cuinline %s, log level %s\n", cuinline_version(), cuinline::to_string(cuinline::log_level()));
  return 0;
}

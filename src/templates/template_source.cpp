#include "templates/template_source.hpp"

#include <cstdlib>
#include <cstring>
#include <cuinline/error.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "templates/embedded.hpp"

namespace cuinline::detail {

std::string template_text(std::string_view name) {
  if (const char* dir = std::getenv("CUINLINE_TEMPLATE_DIR"); dir != nullptr && *dir != '\0') {
    const std::filesystem::path path = std::filesystem::path(dir) / std::string(name);
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      std::ifstream file(path, std::ios::binary);
      std::ostringstream text;
      text << file.rdbuf();
      if (!file) {
        throw InvalidArgument("reading kernel template '" + path.string() +
                              "' (CUINLINE_TEMPLATE_DIR): " + std::strerror(errno));
      }
      return text.str();
    }
  }
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr && name == kEmbeddedTemplates[i].name) {
      return kEmbeddedTemplates[i].content;
    }
  }
  throw InvalidArgument("no kernel template named '" + std::string(name) + "'");
}

std::vector<std::string> embedded_template_names() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < kEmbeddedTemplateCount; ++i) {
    if (kEmbeddedTemplates[i].name != nullptr) names.emplace_back(kEmbeddedTemplates[i].name);
  }
  return names;
}

}  // namespace cuinline::detail

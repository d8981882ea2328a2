#pragma once
// The kernel_templates/*.cuh files, embedded at build time by cmake/embed_templates.cmake.
#include <cstddef>

namespace cuinline::detail {

struct EmbeddedTemplate {
  const char* name;     // file name, e.g. "elementwise.cuh"
  const char* content;  // the file's text
};

extern const EmbeddedTemplate kEmbeddedTemplates[];
extern const std::size_t kEmbeddedTemplateCount;

}  // namespace cuinline::detail

#pragma once
// The kernel_templates/*.cuh files, embedded at build time by cmake/embed_templates.cmake.
#include <cstddef>

namespace cuinline::detail {

struct EmbeddedTemplate {
  const char* name;     // path under kernel_templates, e.g. "elementwise.cuh", "arch/mma_sm80.cuh"
  const char* content;  // the file's text
};

extern const EmbeddedTemplate kEmbeddedTemplates[];
extern const std::size_t kEmbeddedTemplateCount;

}  // namespace cuinline::detail

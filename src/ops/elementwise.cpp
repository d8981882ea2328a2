// The elementwise op descriptions: Step / Op / Variant, parsing, enumeration for `cuinline warm`,
// and the CompileRequest of a variant. Launching is in elementwise_launch.cpp.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>

#include "templates/render.hpp"
#include "templates/template_source.hpp"

namespace cuinline::ops {

namespace {

bool same_bits(double a, double b) noexcept {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The shortest decimal that reads back as the same double.
std::string shortest(double v) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (same_bits(std::strtod(buf, nullptr), v)) break;
  }
  return buf;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

double parse_number(std::string_view text, std::string_view context) {
  const std::string s(trim(text));
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    throw InvalidArgument("parsing op '" + std::string(context) + "': '" + s + "' is not a number");
  }
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

Step parse_step(std::string_view text, std::string_view whole) {
  text = trim(text);
  std::string_view name = text;
  std::vector<double> args;
  if (const auto open = text.find('('); open != std::string_view::npos) {
    if (text.back() != ')') throw InvalidArgument("parsing op '" + std::string(whole) + "': missing ')'");
    name = trim(text.substr(0, open));
    const std::string_view inner = trim(text.substr(open + 1, text.size() - open - 2));
    if (!inner.empty()) {
      for (std::string_view a : split(inner, ',')) args.push_back(parse_number(a, whole));
    }
  }
  struct Known {
    const char* name;
    StepKind kind;
    std::size_t arity;
  };
  static const Known kKnown[] = {
      {"add", StepKind::add, 1},     {"sub", StepKind::sub, 1},
      {"mul", StepKind::mul, 1},     {"div", StepKind::div, 1},
      {"relu", StepKind::relu, 0},   {"leaky_relu", StepKind::leaky_relu, 1},
      {"clamp", StepKind::clamp, 2}, {"div_leaky_relu", StepKind::div_leaky_relu, 2},
  };
  for (const Known& k : kKnown) {
    if (name != k.name) continue;
    if (args.size() != k.arity) {
      throw InvalidArgument("parsing op '" + std::string(whole) + "': " + k.name + " takes " +
                            std::to_string(k.arity) + " argument(s), got " + std::to_string(args.size()));
    }
    Step step{k.kind, 0, 0};
    if (k.arity > 0) step.a = args[0];
    if (k.arity > 1) step.b = args[1];
    return step;
  }
  throw InvalidArgument("parsing op '" + std::string(whole) + "': unknown step '" + std::string(name) +
                        "' (add, sub, mul, div, relu, leaky_relu, clamp, div_leaky_relu, expr(...))");
}

}  // namespace

const char* to_string(StepKind kind) noexcept {
  switch (kind) {
    case StepKind::add:
      return "add";
    case StepKind::sub:
      return "sub";
    case StepKind::mul:
      return "mul";
    case StepKind::div:
      return "div";
    case StepKind::relu:
      return "relu";
    case StepKind::leaky_relu:
      return "leaky_relu";
    case StepKind::clamp:
      return "clamp";
    case StepKind::div_leaky_relu:
      return "div_leaky_relu";
  }
  return "unknown";
}

bool operator==(const Step& x, const Step& y) noexcept {
  return x.kind == y.kind && same_bits(x.a, y.a) && same_bits(x.b, y.b);
}

bool operator==(const NamedConstant& p, const NamedConstant& q) noexcept {
  return p.name == q.name && same_bits(p.value, q.value);
}

bool operator==(const Op& p, const Op& q) noexcept {
  return p.steps == q.steps && p.expression == q.expression && p.constants == q.constants;
}

std::string Op::describe() const {
  if (!expression.empty()) {
    std::string s = "expr(" + expression;
    for (std::size_t i = 0; i < constants.size(); ++i) {
      s += (i == 0 ? "; " : ", ") + constants[i].name + "=" + shortest(constants[i].value);
    }
    return s + ")";
  }
  std::string s;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (i > 0) s += '|';
    const Step& st = steps[i];
    s += to_string(st.kind);
    switch (st.kind) {
      case StepKind::relu:
        break;
      case StepKind::clamp:
      case StepKind::div_leaky_relu:
        s += "(" + shortest(st.a) + "," + shortest(st.b) + ")";
        break;
      default:
        s += "(" + shortest(st.a) + ")";
        break;
    }
  }
  return s;
}

void Op::validate() const {
  if (steps.empty() && expression.empty())
    throw InvalidArgument("elementwise op: no steps and no expression");
  if (!steps.empty() && !expression.empty()) {
    throw InvalidArgument("elementwise op: both steps and an expression given; use one");
  }
  for (const Step& st : steps) {
    if (static_cast<unsigned>(st.kind) > static_cast<unsigned>(StepKind::div_leaky_relu)) {
      throw InvalidArgument("elementwise op: unknown step kind " + std::to_string(static_cast<int>(st.kind)));
    }
  }
  if (!steps.empty() && !constants.empty()) {
    throw InvalidArgument("elementwise op: named constants are only for expressions");
  }
  if (expression.find_first_of(";{}#") != std::string::npos) {
    throw InvalidArgument("elementwise expression '" + expression +
                          "': must be one C++ expression (no ; { } #)");
  }
  for (std::size_t i = 0; i < constants.size(); ++i) {
    const std::string& n = constants[i].name;
    if (!is_identifier(n) || n == "x" || n == "x_storage" || n == "T" || n.rfind("ew_", 0) == 0 ||
        n.rfind("cuinline", 0) == 0) {
      throw InvalidArgument("elementwise expression: bad constant name '" + n +
                            "' (an identifier other than x and T, not starting with ew_ or cuinline)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (constants[j].name == n)
        throw InvalidArgument("elementwise expression: constant '" + n + "' given twice");
    }
  }
}

Op parse_op(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty()) throw InvalidArgument("parsing op: empty text");
  if (t.rfind("expr(", 0) == 0) {
    if (t.back() != ')') throw InvalidArgument("parsing op '" + std::string(t) + "': missing ')'");
    std::string_view inner = t.substr(5, t.size() - 6);
    Op op;
    const auto semi = inner.rfind(';');
    op.expression = std::string(trim(inner.substr(0, semi)));
    if (semi != std::string_view::npos) {
      for (std::string_view part : split(inner.substr(semi + 1), ',')) {
        part = trim(part);
        if (part.empty()) continue;
        const auto eq = part.find('=');
        if (eq == std::string_view::npos) {
          throw InvalidArgument("parsing op '" + std::string(t) + "': constant '" + std::string(part) +
                                "' is not name=value");
        }
        op.constants.push_back({std::string(trim(part.substr(0, eq))), parse_number(part.substr(eq + 1), t)});
      }
    }
    if (op.expression.empty()) throw InvalidArgument("parsing op '" + std::string(t) + "': empty expression");
    op.validate();
    return op;
  }
  Op op;
  for (std::string_view part : split(t, '|')) op.steps.push_back(parse_step(part, t));
  op.validate();
  return op;
}

std::vector<int> vector_widths(DType dtype) {
  const std::size_t size = dtype_size(dtype);
  if (size == 0) throw InvalidArgument("unsupported dtype " + std::to_string(static_cast<int>(dtype)));
  std::vector<int> widths;
  for (int w = 1; w <= 8 && w * size <= 16; w *= 2) widths.push_back(w);
  return widths;
}

std::string Variant::name() const {
  std::string s = op.describe() + "<" + to_string(dtype);
  if (layout == Layout::strided) return s + ",strided>";
  return s + ",v" + std::to_string(vector_width) + (index == IndexWidth::i64 ? ",i64>" : ",i32>");
}

void Variant::validate() const {
  op.validate();
  const std::vector<int> widths = vector_widths(dtype);
  if (layout == Layout::strided) {
    if (vector_width != 1 || index != IndexWidth::i64) {
      throw InvalidArgument("elementwise variant " + name() +
                            ": strided variants have vector width 1, index i64");
    }
    return;
  }
  bool ok = false;
  for (int w : widths) ok = ok || w == vector_width;
  if (!ok) {
    throw InvalidArgument("elementwise variant: vector width " + std::to_string(vector_width) +
                          " is not valid for " + to_string(dtype) + " (at most 16 bytes, a power of two)");
  }
}

bool operator==(const Variant& p, const Variant& q) noexcept {
  return p.dtype == q.dtype && p.vector_width == q.vector_width && p.index == q.index &&
         p.layout == q.layout && p.op == q.op;
}

std::string kernel_name(const Variant& variant) {
  const std::string s = detail::storage_type(variant.dtype);
  if (variant.layout == Layout::strided) return "ew_strided<cuinline_ew_op, " + s + ">";
  return "ew_contiguous<cuinline_ew_op, " + s + ", " + std::to_string(variant.vector_width) + ", " +
         (variant.index == IndexWidth::i64 ? "long long" : "unsigned int") + ">";
}

CompileRequest make_request(const Variant& variant) {
  variant.validate();
  CompileRequest request;
  request.name = "elementwise.cu";
  // The source holds the constants only as rendered (opmath literals), so two variants whose
  // constants convert to the same opmath value are one program and one cache entry.
  request.source = "// cuinline elementwise kernel\n#include \"elementwise.cuh\"\n\n" +
                   detail::render_op_functor(variant.op, variant.dtype, "cuinline_ew_op");
  for (const char* header : {"ew_common.cuh", "ew_ops.cuh", "elementwise.cuh"}) {
    request.headers.push_back({header, detail::template_text(header)});
  }
  // No contraction: a chain rounds after every step, like a sequence of PyTorch ops. -minimal: the
  // templates use no CUDA runtime types or device-side runtime calls; NVRTC then skips declaring
  // them (front end 19 -> 10 ms for a small kernel on the build machine; identical cubins).
  request.options = {"--fmad=false", "-minimal"};
  request.name_expressions = {kernel_name(variant)};
  return request;
}

std::vector<Variant> enumerate_variants(const Op& op, DType dtype, VariantSet which) {
  op.validate();
  std::vector<Variant> variants;
  for (IndexWidth index : {IndexWidth::i32, IndexWidth::i64}) {
    if ((index == IndexWidth::i32 && !which.index32) || (index == IndexWidth::i64 && !which.index64))
      continue;
    for (int w : vector_widths(dtype)) variants.push_back(Variant{op, dtype, w, index, Layout::contiguous});
  }
  if (which.strided) variants.push_back(Variant{op, dtype, 1, IndexWidth::i64, Layout::strided});
  return variants;
}

}  // namespace cuinline::ops

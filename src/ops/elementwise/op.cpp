// The elementwise ops' descriptions: Step / Op, their text form (parse_op, describe) and checks.
// Variants are in variant.cpp, planning in plan.cpp, launching in launch.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuinline/error.hpp>
#include <cuinline/ops.hpp>


namespace cuinline::ops {

namespace {

bool same_bits(double a, double b) noexcept {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The shortest decimal that reads back as the same double.
std::string shortest(double v) {
  char buf[40];
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15) {  // 10, not 1e+01
    std::snprintf(buf, sizeof buf, "%.0f", v);
    if (same_bits(std::strtod(buf, nullptr), v)) return buf;  // (not -0.0: "-0" reads back as -0.0 too)
  }
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

// "in0".."in9" → the digit (validate() then checks the range); anything else → -1.
int input_operand(std::string_view text) {
  text = trim(text);
  if (text.size() == 3 && text.substr(0, 2) == "in" && text[2] >= '0' && text[2] <= '9') return text[2] - '0';
  return -1;
}

Step parse_step(std::string_view text, std::string_view whole) {
  text = trim(text);
  std::string_view name = text;
  std::vector<double> args;
  if (const auto open = text.find('('); open != std::string_view::npos) {
    if (text.back() != ')') throw InvalidArgument("parsing op '" + std::string(whole) + "': missing ')'");
    name = trim(text.substr(0, open));
    const std::string_view inner = trim(text.substr(open + 1, text.size() - open - 2));
    // A select: "where(in1, in2)" or "where(in1, 0.5)".
    if (name == "where") {
      const std::vector<std::string_view> parts = split(inner, ',');
      if (parts.size() != 2) {
        throw InvalidArgument("parsing op '" + std::string(whole) + "': where takes 2 arguments (a condition input and "
                              "an input or a scalar, e.g. where(in1, in2) or where(in1, 0)), got " +
                              std::to_string(inner.empty() ? 0 : parts.size()));
      }
      const int cond = input_operand(parts[0]);
      if (cond < 0) {
        throw InvalidArgument("parsing op '" + std::string(whole) + "': where's condition '" +
                              std::string(trim(parts[0])) + "' is not an input in1..in7");
      }
      const int other = input_operand(parts[1]);
      if (other >= 0) return Step::where_input(cond, other);
      return Step::where_scalar(cond, parse_number(parts[1], whole));
    }
    // A tensor operand: "add(in2)".
    if (inner.size() == 3 && inner.substr(0, 2) == "in" && inner[2] >= '1' && inner[2] <= '7') {
      const int k = inner[2] - '0';
      if (name == "add") return Step::add_input(k);
      if (name == "sub") return Step::sub_input(k);
      if (name == "mul") return Step::mul_input(k);
      if (name == "div") return Step::div_input(k);
      throw InvalidArgument("parsing op '" + std::string(whole) + "': " + std::string(name) +
                            " takes no tensor operand (add, sub, mul, div do)");
    }
    if (!inner.empty()) {
      for (std::string_view a : split(inner, ',')) args.push_back(parse_number(a, whole));
    }
  }
  if (name == "where") {
    throw InvalidArgument("parsing op '" + std::string(whole) + "': where takes 2 arguments (e.g. where(in1, in2))");
  }
  // Steps by name: the arguments a step takes (min..max), the defaults of the optional ones (as
  // PyTorch's functional defaults), and aliases (hardtanh and relu6 are clamp, as in ATen).
  struct Known {
    const char* name;
    StepKind kind;
    std::size_t min_args, max_args;
    double default_a, default_b;
    const char* bounds = nullptr;  // a pair taken together (0 or 2 arguments), e.g. "min_val, max_val"
  };
  static const Known kKnown[] = {
      {"add", StepKind::add, 1, 1, 0, 0},
      {"sub", StepKind::sub, 1, 1, 0, 0},
      {"mul", StepKind::mul, 1, 1, 0, 0},
      {"div", StepKind::div, 1, 1, 0, 0},
      {"relu", StepKind::relu, 0, 0, 0, 0},
      {"leaky_relu", StepKind::leaky_relu, 0, 1, 0.01, 0},  // F.leaky_relu's negative_slope = 0.01
      {"clamp", StepKind::clamp, 2, 2, 0, 0},
      {"hardtanh", StepKind::clamp, 0, 2, -1, 1, "min_val, max_val"},
      {"relu6", StepKind::clamp, 0, 0, 0, 6},
      {"div_leaky_relu", StepKind::div_leaky_relu, 2, 2, 0, 0},
      {"sigmoid", StepKind::sigmoid, 0, 0, 0, 0},
      {"tanh", StepKind::tanh, 0, 0, 0, 0},
      {"silu", StepKind::silu, 0, 0, 0, 0},
      {"swish", StepKind::silu, 0, 0, 0, 0},
      {"gelu", StepKind::gelu, 0, 0, 0, 0},
      {"gelu_tanh", StepKind::gelu_tanh, 0, 0, 0, 0},
      {"mish", StepKind::mish, 0, 0, 0, 0},
      {"softplus", StepKind::softplus, 0, 2, 1, 20},
      {"elu", StepKind::elu, 0, 1, 1, 0},
      {"selu", StepKind::selu, 0, 0, 0, 0},
      {"celu", StepKind::celu, 0, 1, 1, 0},
      {"hardswish", StepKind::hardswish, 0, 0, 0, 0},
      {"hardsigmoid", StepKind::hardsigmoid, 0, 0, 0, 0},
      {"exp", StepKind::exp, 0, 0, 0, 0},
      {"log", StepKind::log, 0, 0, 0, 0},
      {"sqrt", StepKind::sqrt, 0, 0, 0, 0},
      {"abs", StepKind::abs, 0, 0, 0, 0},
      {"neg", StepKind::neg, 0, 0, 0, 0},
      {"softsign", StepKind::softsign, 0, 0, 0, 0},
      {"tanhshrink", StepKind::tanhshrink, 0, 0, 0, 0},
      {"logsigmoid", StepKind::logsigmoid, 0, 0, 0, 0},
      {"hardshrink", StepKind::hardshrink, 0, 1, 0.5, 0},  // F.hardshrink's lambd = 0.5
      {"softshrink", StepKind::softshrink, 0, 1, 0.5, 0},
      {"threshold", StepKind::threshold, 2, 2, 0, 0},      // F.threshold has no defaults
      {"rrelu", StepKind::leaky_relu, 0, 2, 1.0 / 8, 1.0 / 3, "lower, upper"},  // evaluation mode: see below
  };
  for (const Known& k : kKnown) {
    if (name != k.name) continue;
    if (args.size() < k.min_args || args.size() > k.max_args) {
      const std::string takes = k.min_args == k.max_args
                                    ? std::to_string(k.min_args)
                                    : std::to_string(k.min_args) + " to " + std::to_string(k.max_args);
      throw InvalidArgument("parsing op '" + std::string(whole) + "': " + k.name + " takes " + takes +
                            " argument(s), got " + std::to_string(args.size()));
    }
    if (k.bounds != nullptr && args.size() == 1) {  // hardtanh(1), rrelu(0.1): which bound?
      throw InvalidArgument("parsing op '" + std::string(whole) + "': " + k.name + " takes 0 or 2 arguments (" +
                            k.bounds + "), got 1");
    }
    Step step{k.kind, k.default_a, k.default_b};
    if (args.size() > 0) step.a = args[0];
    if (args.size() > 1) step.b = args[1];
    if (std::string_view(k.name) == "rrelu") {
      // F.rrelu(training=False): at::leaky_relu(x, (lower + upper) / 2), in double; ATen checks the
      // bounds' order first.
      if (!(step.a <= step.b)) {
        throw InvalidArgument("parsing op '" + std::string(whole) + "': rrelu's lower bound " + shortest(step.a) +
                              " is above its upper bound " + shortest(step.b) + " (PyTorch refuses it too)");
      }
      return Step::rrelu(step.a, step.b);
    }
    return step;
  }
  throw InvalidArgument("parsing op '" + std::string(whole) + "': unknown step '" + std::string(name) +
                        "' (add, sub, mul, div, relu, leaky_relu, clamp, div_leaky_relu, where, sigmoid, tanh, "
                        "silu, gelu, gelu_tanh, mish, softplus, elu, selu, celu, hardswish, hardsigmoid, "
                        "hardtanh, relu6, exp, log, sqrt, abs, neg, softsign, tanhshrink, logsigmoid, hardshrink, "
                        "softshrink, threshold, rrelu, expr(...))");
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
    case StepKind::add_tensor:
      return "add";
    case StepKind::sub_tensor:
      return "sub";
    case StepKind::mul_tensor:
      return "mul";
    case StepKind::div_tensor:
      return "div";
    case StepKind::where_tensor:
    case StepKind::where_scalar:
      return "where";
    case StepKind::sigmoid:
      return "sigmoid";
    case StepKind::tanh:
      return "tanh";
    case StepKind::silu:
      return "silu";
    case StepKind::gelu:
      return "gelu";
    case StepKind::gelu_tanh:
      return "gelu_tanh";
    case StepKind::mish:
      return "mish";
    case StepKind::softplus:
      return "softplus";
    case StepKind::elu:
      return "elu";
    case StepKind::selu:
      return "selu";
    case StepKind::celu:
      return "celu";
    case StepKind::hardswish:
      return "hardswish";
    case StepKind::hardsigmoid:
      return "hardsigmoid";
    case StepKind::exp:
      return "exp";
    case StepKind::log:
      return "log";
    case StepKind::sqrt:
      return "sqrt";
    case StepKind::abs:
      return "abs";
    case StepKind::neg:
      return "neg";
    case StepKind::softsign:
      return "softsign";
    case StepKind::tanhshrink:
      return "tanhshrink";
    case StepKind::logsigmoid:
      return "logsigmoid";
    case StepKind::hardshrink:
      return "hardshrink";
    case StepKind::softshrink:
      return "softshrink";
    case StepKind::threshold:
      return "threshold";
  }
  return "unknown";
}

bool is_function_step(StepKind kind) noexcept {
  return static_cast<unsigned>(kind) >= static_cast<unsigned>(StepKind::sigmoid) &&
         static_cast<unsigned>(kind) <= static_cast<unsigned>(StepKind::threshold);
}

bool operator==(const Step& x, const Step& y) noexcept {
  return x.kind == y.kind && same_bits(x.a, y.a) && same_bits(x.b, y.b) && x.operand == y.operand &&
         x.cond == y.cond;
}

bool operator==(const NamedConstant& p, const NamedConstant& q) noexcept {
  return p.name == q.name && same_bits(p.value, q.value);
}

bool operator==(const Op& p, const Op& q) noexcept {
  return p.steps == q.steps && p.expression == q.expression && p.constants == q.constants &&
         p.input_names == q.input_names && p.more_outputs == q.more_outputs;
}

int Op::min_inputs() const noexcept {
  if (!expression.empty()) return input_names.empty() ? 1 : static_cast<int>(input_names.size());
  int n = 1;
  for (const Step& s : steps) n = std::max({n, s.operand + 1, s.cond + 1});
  return n;
}

std::string Op::describe() const {
  if (!expression.empty()) {
    std::string s = "expr(";
    if (!input_names.empty()) {
      s += "[";
      for (std::size_t i = 0; i < input_names.size(); ++i) s += (i ? "," : "") + input_names[i];
      s += "] ";
    }
    s += expression;
    for (const std::string& o : more_outputs) s += " | " + o;
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
    if (is_function_step(st.kind)) {
      // Arguments are printed only where they differ from the defaults, so "softplus" reads back
      // as the same step and prints as it was written.
      if (st.kind == StepKind::softplus && !(same_bits(st.a, 1) && same_bits(st.b, 20))) {
        s += "(" + shortest(st.a) + "," + shortest(st.b) + ")";
      } else if ((st.kind == StepKind::elu || st.kind == StepKind::celu) && !same_bits(st.a, 1)) {
        s += "(" + shortest(st.a) + ")";
      } else if ((st.kind == StepKind::hardshrink || st.kind == StepKind::softshrink) && !same_bits(st.a, 0.5)) {
        s += "(" + shortest(st.a) + ")";
      } else if (st.kind == StepKind::threshold) {
        s += "(" + shortest(st.a) + "," + shortest(st.b) + ")";
      }
      continue;
    }
    switch (st.kind) {
      case StepKind::relu:
        break;
      case StepKind::add_tensor:
      case StepKind::sub_tensor:
      case StepKind::mul_tensor:
      case StepKind::div_tensor:
        s += "(in" + std::to_string(st.operand) + ")";
        break;
      case StepKind::where_tensor:
        s += "(in" + std::to_string(st.cond) + ",in" + std::to_string(st.operand) + ")";
        break;
      case StepKind::where_scalar:
        s += "(in" + std::to_string(st.cond) + "," + shortest(st.a) + ")";
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
    if (static_cast<unsigned>(st.kind) > static_cast<unsigned>(StepKind::threshold)) {
      throw InvalidArgument("elementwise op: unknown step kind " + std::to_string(static_cast<int>(st.kind)));
    }
    if (st.kind == StepKind::celu && st.a == 0) {
      throw InvalidArgument("elementwise op: celu's alpha is 0 (it divides by alpha; PyTorch refuses it too)");
    }
    if (st.kind == StepKind::softshrink && !(st.a >= 0)) {
      throw InvalidArgument("elementwise op: softshrink's lambd is " + shortest(st.a) +
                            "; it must be at least 0 (PyTorch refuses it too)");
    }
    const bool where = st.kind == StepKind::where_tensor || st.kind == StepKind::where_scalar;
    const bool tensor_step = (st.kind >= StepKind::add_tensor && st.kind <= StepKind::div_tensor) ||
                             st.kind == StepKind::where_tensor;
    auto check_input = [&](int k, const char* role) {
      if (k < 1 || k >= kMaxInputs) {
        throw InvalidArgument("elementwise op: step " + std::string(to_string(st.kind)) + " names input " +
                              std::to_string(k) + " as its " + role + "; a tensor operand is input 1.." +
                              std::to_string(kMaxInputs - 1) + " (input 0 is the chain's start)");
      }
    };
    if (where) check_input(st.cond, "condition");
    if (tensor_step) check_input(st.operand, where ? "other value" : "operand");
    if (!tensor_step && st.operand != 0) {
      throw InvalidArgument("elementwise op: step " + std::string(to_string(st.kind)) + " takes no tensor operand");
    }
    if (!where && st.cond != 0) {
      throw InvalidArgument("elementwise op: step " + std::string(to_string(st.kind)) + " takes no condition");
    }
  }
  if (!steps.empty() && (!input_names.empty() || !more_outputs.empty())) {
    throw InvalidArgument("elementwise op: input names and more outputs are only for expressions");
  }
  if (more_outputs.size() + 1 > static_cast<std::size_t>(kMaxOutputs)) {
    throw InvalidArgument("elementwise expression: " + std::to_string(more_outputs.size() + 1) + " outputs, at most " +
                          std::to_string(kMaxOutputs));
  }
  if (input_names.size() > static_cast<std::size_t>(kMaxInputs)) {
    throw InvalidArgument("elementwise expression: " + std::to_string(input_names.size()) + " inputs, at most " +
                          std::to_string(kMaxInputs));
  }
  for (const std::string& o : more_outputs) {
    if (o.empty() || o.find_first_of(";{}#") != std::string::npos) {
      throw InvalidArgument("elementwise expression output '" + o + "': must be one C++ expression (no ; { } #)");
    }
  }
  auto reserved = [](const std::string& n) {
    return n == "x_storage" || n == "T" || n == "xs" || n == "ys" || n.rfind("ew_", 0) == 0 ||
           n.rfind("cuinline", 0) == 0 || (n.size() == 2 && n[0] == 'y' && n[1] >= '0' && n[1] <= '9');
  };
  for (std::size_t i = 0; i < input_names.size(); ++i) {
    const std::string& n = input_names[i];
    if (!is_identifier(n) || reserved(n)) {
      throw InvalidArgument("elementwise expression: bad input name '" + n +
                            "' (an identifier other than T, xs, ys, y0..y9, not starting with ew_ or cuinline)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (input_names[j] == n) throw InvalidArgument("elementwise expression: input '" + n + "' named twice");
    }
    for (const auto& c : constants) {
      if (c.name == n) throw InvalidArgument("elementwise expression: '" + n + "' is both an input and a constant");
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
    if (!is_identifier(n) || n == "x" || n == "x_storage" || n == "T" || n == "xs" || n == "ys" ||
        n.rfind("ew_", 0) == 0 || n.rfind("cuinline", 0) == 0 ||
        (n.size() == 2 && n[0] == 'y' && n[1] >= '0' && n[1] <= '9')) {
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
    std::string_view inner = trim(t.substr(5, t.size() - 6));
    Op op;
    // "[a, b] a * b | y0 > 0 ? y0 : 0; s=1": input names, outputs split at single '|'.
    if (!inner.empty() && inner.front() == '[') {
      const auto close = inner.find(']');
      if (close == std::string_view::npos) throw InvalidArgument("parsing op '" + std::string(t) + "': missing ']'");
      for (std::string_view name : split(inner.substr(1, close - 1), ',')) op.input_names.emplace_back(trim(name));
      inner = inner.substr(close + 1);
    }
    const auto semi = inner.rfind(';');
    const std::string_view body = inner.substr(0, semi);
    std::vector<std::string> outputs;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= body.size(); ++i) {
      const bool single_bar = i < body.size() && body[i] == '|' && (i == 0 || body[i - 1] != '|') &&
                              (i + 1 == body.size() || body[i + 1] != '|');
      if (i == body.size() || single_bar) {
        outputs.emplace_back(trim(body.substr(start, i - start)));
        start = i + 1;
      }
    }
    op.expression = outputs[0];
    op.more_outputs.assign(outputs.begin() + 1, outputs.end());
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

}  // namespace cuinline::ops

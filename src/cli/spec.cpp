#include "cli/spec.hpp"

#include <algorithm>
#include <cstring>
#include <cuinline/error.hpp>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "cli/json_field.hpp"

namespace cuinline::cli {
namespace {

// Each value once, in list order: a repeated value would only name the same variants again.
template <typename T>
void push_once(std::vector<T>& list, const T& value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"f32", "f16", "bf16", "f64"};
  return names;
}

// "dtype": "f32" or ["f32", "f16"]; the long spellings (float32, half, ...) are accepted too.
std::vector<DType> parse_dtypes(const JsonField& field) {
  std::vector<DType> out;
  for (const auto& item : field.one_or_many()) {
    std::optional<DType> dtype;
    if (item.value().is_string()) dtype = parse_dtype(item.value().get_ref<const std::string&>());
    if (!dtype) item.as_choice(dtype_names());  // throws with the list of choices
    push_once(out, *dtype);
  }
  return out;
}

// "precision": "tf32" or ["fp32", "tf32x3"]; the names are the library's (ops::to_string).
std::vector<ops::Conv2dPrecision> parse_precisions(const JsonField& field) {
  using ops::Conv2dPrecision;
  static const std::vector<std::string> names = {ops::to_string(Conv2dPrecision::fp32),
                                                 ops::to_string(Conv2dPrecision::tf32),
                                                 ops::to_string(Conv2dPrecision::tf32x3)};
  std::vector<Conv2dPrecision> out;
  for (const auto& item : field.one_or_many()) {
    // as_choice throws "expected one of fp32,tf32,tf32x3, got ..." for anything else.
    push_once(out, ops::parse_conv2d_precision(item.as_choice(names)));
  }
  return out;
}

// "layout": "nchw" or ["nchw", "nhwc"] (conv2d: the input's and the output's; "weight_layout" the
// weight's).
std::vector<ops::Conv2dLayout> parse_layouts(const JsonField& field) {
  using ops::Conv2dLayout;
  static const std::vector<std::string> names = {ops::to_string(Conv2dLayout::nchw),
                                                 ops::to_string(Conv2dLayout::nhwc)};
  std::vector<Conv2dLayout> out;
  for (const auto& item : field.one_or_many()) push_once(out, ops::parse_conv2d_layout(item.as_choice(names)));
  return out;
}

// Numbers each once, compared by their bits (0.0 and -0.0 are different constants).
std::vector<double> parse_numbers(const JsonField& field, double min, double max) {
  std::vector<double> out;
  std::unordered_set<std::uint64_t> seen;
  for (const auto& item : field.one_or_many()) {
    const double value = item.as_number(min, max);
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    if (seen.insert(bits).second) out.push_back(value);
  }
  return out;
}

// Ops, each once (operator==; describe() only buckets them).
struct OpSet {
  std::vector<ops::Op>* out;
  std::unordered_map<std::string, std::vector<std::size_t>> by_text;
  void add(ops::Op op) {
    auto& bucket = by_text[op.describe()];
    for (std::size_t i : bucket) {
      if ((*out)[i] == op) return;
    }
    bucket.push_back(out->size());
    out->push_back(std::move(op));
  }
};

// A string that reaches NVRTC as a line of its own (a name expression is compiled as
// "#pragma nv_mangled_name <expr>"): a line break in it would start a directive of the spec's
// choosing, such as an #include of any file.
std::string as_single_line(const JsonField& item) {
  std::string text = item.as_nonempty_string();
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) item.fail("must not contain control characters (a line break, a tab, ...)");
  }
  return text;
}

std::vector<std::string> parse_strings(const JsonField& field) {
  std::vector<std::string> out;
  for (const auto& item : field.one_or_many()) out.push_back(as_single_line(item));
  return out;
}

ops::Op parse_op_text(const JsonField& field) {
  const std::string text = field.as_nonempty_string();  // its own message already names the field
  ops::Op op;
  try {
    op = ops::parse_op(text);
    op.validate();
  } catch (const InvalidArgument& e) {
    field.fail(e.what());
  }
  return op;
}

// "op": "relu" | "leaky_relu(0.01)" | "div(2)|leaky_relu(0.01)" | "expr(...)" | a list of those.
// The bare names leaky_relu and div_leaky_relu take their constants from "slope" / "divisor",
// each a number or a list (every combination is warmed; they are combined when the variants are
// built, not here).
void parse_ops(const JsonField& entry, OpEntry& op) {
  auto slope_field = entry.find("slope");
  auto divisor_field = entry.find("divisor");
  op.slopes = slope_field ? parse_numbers(*slope_field, -1e30, 1e30) : std::vector<double>{0.01};
  // A divisor of 0 is allowed, as in the library and PyTorch (x / 0 gives ±inf, 0 / 0 NaN).
  if (divisor_field) op.divisors = parse_numbers(*divisor_field, -1e30, 1e30);
  OpSet fixed{&op.ops, {}};
  for (const auto& item : entry.at("op").one_or_many()) {
    std::string text = item.as_nonempty_string();
    if (text == "leaky_relu") {
      op.leaky_relu = true;
    } else if (text == "div_leaky_relu") {
      if (!divisor_field) entry.at("divisor");  // "missing required field"
      op.div_leaky_relu = true;
    } else {
      fixed.add(parse_op_text(item));
    }
  }
  if (slope_field && !op.leaky_relu && !op.div_leaky_relu) {
    slope_field->fail("a slope needs op \"leaky_relu\" or \"div_leaky_relu\" (without arguments)");
  }
  if (divisor_field && !op.div_leaky_relu) {
    divisor_field->fail("a divisor needs op \"div_leaky_relu\" (without arguments)");
  }
}

// "vector_width": 4 or [1, 2, 4]; each must be a width of every listed dtype (16 bytes at most).
std::vector<int> parse_vector_widths(const JsonField& field, const std::vector<DType>& dtypes) {
  std::vector<int> out;
  for (const auto& item : field.one_or_many()) {
    auto width = static_cast<int>(item.as_int(1, 16));
    for (DType dtype : dtypes) {
      auto allowed = ops::vector_widths(dtype);
      if (std::find(allowed.begin(), allowed.end(), width) == allowed.end()) {
        std::string list;
        for (int w : allowed) list += (list.empty() ? "" : ",") + std::to_string(w);
        item.fail("expected one of " + list + " for " + to_string(dtype) + ", got number " +
                  std::to_string(width));
      }
    }
    push_once(out, width);
  }
  return out;
}

OpEntry parse_op(const JsonField& entry) {
  entry.expect_object(
      {"kind", "op", "slope", "divisor", "dtype", "vector_width", "index", "shape", "strided", "inputs"});
  OpEntry op;
  parse_ops(entry, op);
  op.dtypes = parse_dtypes(entry.at("dtype"));
  if (auto f = entry.find("vector_width")) op.vector_widths = parse_vector_widths(*f, op.dtypes);
  auto index = entry.find("index");
  auto shape = entry.find("shape");
  if (index && shape) shape->fail("give either \"index\" or \"shape\", not both");
  if (index) {
    op.index32 = false;
    for (const auto& item : index->one_or_many()) {
      (item.as_choice({"i32", "i64"}) == "i32" ? op.index32 : op.index64) = true;
    }
  }
  if (shape) {
    // The index width the run-time choice takes for a tensor of this shape.
    std::int64_t numel = 1;
    for (const auto& dim : shape->elements(1, TensorView::kMaxDims)) {
      std::int64_t extent = dim.as_int(1, INT64_MAX);
      if (numel > INT64_MAX / extent) shape->fail("more than 2^63 elements");
      numel *= extent;
    }
    op.index32 = numel <= INT32_MAX;
    op.index64 = !op.index32;
  }
  if (auto f = entry.find("strided")) op.strided = f->as_bool();
  if (auto inputs = entry.find("inputs")) {
    for (const char* alone : {"vector_width", "index", "shape"}) {
      if (auto other = entry.find(alone)) other->fail("not with \"inputs\" (the shapes pick the variant)");
    }
    for (const auto& tensor : inputs->elements(1, ops::kMaxInputs)) {
      std::vector<std::int64_t> dims;
      std::int64_t numel = 1;
      for (const auto& dim : tensor.elements(0, TensorView::kMaxDims)) {
        const std::int64_t extent = dim.as_int(1, INT64_MAX);
        if (numel > INT64_MAX / extent) tensor.fail("more than 2^63 elements");
        numel *= extent;
        dims.push_back(extent);
      }
      op.input_shapes.push_back(std::move(dims));
    }
  }
  return op;
}

// A pair of per-dimension values written as one number (both) or [h, w].
std::pair<int, int> parse_hw(const JsonField& field, std::int64_t min, std::int64_t max) {
  if (field.value().is_array()) {
    auto items = field.elements(2, 2);
    return {static_cast<int>(items[0].as_int(min, max)), static_cast<int>(items[1].as_int(min, max))};
  }
  int v = static_cast<int>(field.as_int(min, max));
  return {v, v};
}

Conv2dEntry parse_conv2d(const JsonField& entry) {
  entry.expect_object({"kind", "dtype", "input", "filters", "stride", "padding", "dilation", "groups", "bias",
                       "epilogue", "precision", "layout", "weight_layout"});
  // dtype: of every tensor (f32, f16, bf16, f64; one or a list). layout: of the input and the output
  // ("nchw", "nhwc"; one or a list); weight_layout: the weight's (default: each "layout" in turn,
  // as model.to(memory_format=torch.channels_last) makes the weights channels-last too).
  Conv2dEntry conv;
  std::vector<DType>& dtypes = conv.dtypes;
  dtypes = {DType::f32};
  if (auto f = entry.find("dtype")) {
    dtypes.clear();
    for (const auto& item : f->one_or_many()) {
      const std::string name = item.as_choice({"f32", "f16", "bf16", "f64"});
      push_once(dtypes, *parse_dtype(name));
    }
  }
  conv.layouts = {ops::Conv2dLayout::nchw};
  if (auto f = entry.find("layout")) conv.layouts = parse_layouts(*f);
  // empty: the weight's layout is the input's
  if (auto f = entry.find("weight_layout")) conv.weight_layouts = parse_layouts(*f);
  // input: [N, C, H, W] (N is a run-time value, not part of the kernel) or [C, H, W].
  auto input = entry.at("input").elements(3, 4);
  std::size_t first = input.size() == 4 ? 1 : 0;
  if (first == 1) input[0].as_int(1, INT32_MAX);
  int c = static_cast<int>(input[first].as_int(1, ops::kMaxConv2dChannels));
  int h = static_cast<int>(input[first + 1].as_int(1, ops::kMaxConv2dExtent));
  int w = static_cast<int>(input[first + 2].as_int(1, ops::kMaxConv2dExtent));
  // groups (F.conv2d's): divides the input and output channels.
  int groups = 1;
  if (auto f = entry.find("groups")) {
    groups = static_cast<int>(f->as_int(1, ops::kMaxConv2dChannels));
    if (c % groups != 0) f->fail("must divide the input's " + std::to_string(c) + " channels, got " + std::to_string(groups));
  }
  // filters: [Cout, KH, KW] or the weight's shape [Cout, Cin / groups, KH, KW].
  auto filters = entry.at("filters").elements(3, 4);
  int k = static_cast<int>(filters[0].as_int(1, ops::kMaxConv2dChannels));
  if (filters.size() == 4 && filters[1].as_int(1, ops::kMaxConv2dChannels) != c / groups) {
    filters[1].fail("expected the input's channel count " + std::to_string(c) +
                    (groups != 1 ? " / groups " + std::to_string(groups) + " = " + std::to_string(c / groups)
                                 : std::string()) +
                    ", got " + JsonField::describe(filters[1].value()));
  }
  int kh = static_cast<int>(filters[filters.size() - 2].as_int(1, ops::kMaxConv2dExtent));
  int kw = static_cast<int>(filters[filters.size() - 1].as_int(1, ops::kMaxConv2dExtent));
  ops::Conv2dParams params;
  params.groups = groups;
  if (auto f = entry.find("stride")) std::tie(params.stride_h, params.stride_w) = parse_hw(*f, 1, ops::kMaxConv2dExtent);
  if (auto f = entry.find("padding")) std::tie(params.pad_h, params.pad_w) = parse_hw(*f, 0, ops::kMaxConv2dExtent);
  if (auto f = entry.find("dilation")) std::tie(params.dilation_h, params.dilation_w) = parse_hw(*f, 1, ops::kMaxConv2dExtent);
  conv.biases = {false};
  if (auto f = entry.find("bias")) {
    conv.biases.clear();
    for (const auto& item : f->one_or_many()) push_once(conv.biases, item.as_bool());
  }
  // epilogue: an op string ("div(2)|leaky_relu(0.01)", "relu", ...) or a list; none: the bare conv.
  if (auto f = entry.find("epilogue")) {
    OpSet epilogues{&conv.epilogues, {}};
    for (const auto& item : f->one_or_many()) epilogues.add(parse_op_text(item));
  } else {
    conv.epilogues = {ops::Op::chain({})};
  }
  conv.precisions = {ops::Conv2dPrecision::fp32};
  if (auto f = entry.find("precision")) conv.precisions = parse_precisions(*f);
  conv.channels = c;
  conv.height = h;
  conv.width = w;
  conv.filters = k;
  conv.kernel_h = kh;
  conv.kernel_w = kw;
  conv.params = params;
  // The combinations are built and validated one at a time (Conv2dEntry::variant), after the spec's
  // size was checked against the bound.
  return conv;
}

ReductionEntry parse_reductions(const JsonField& entry) {
  entry.expect_object({"kind", "op", "dtype", "row_length", "vector_width", "prologue", "epilogue"});
  ReductionEntry rd;
  using ops::RowOp;
  static const RowOp all[] = {RowOp::softmax, RowOp::log_softmax, RowOp::rms_norm, RowOp::add_rms_norm,
                              RowOp::layer_norm};
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (RowOp op : all) out.push_back(ops::to_string(op));
    return out;
  }();
  for (const auto& item : entry.at("op").one_or_many()) {
    const std::string name = item.as_choice(names);
    push_once(rd.ops, all[std::find(names.begin(), names.end(), name) - names.begin()]);
  }
  rd.dtypes = parse_dtypes(entry.at("dtype"));
  // The row length (the last dimension); the row count is a run-time value. Up to 2^40 elements.
  for (const auto& item : entry.at("row_length").one_or_many()) {
    push_once(rd.row_lengths, item.as_int(1, std::int64_t{1} << 40));
  }
  if (auto f = entry.find("vector_width")) rd.vector_widths = parse_vector_widths(*f, rd.dtypes);
  // The chains, checked as the ops check them (a chain, a prologue without tensor operands).
  for (const char* which : {"prologue", "epilogue"}) {
    const auto f = entry.find(which);
    if (!f) continue;
    ops::Op& chain = *which == 'p' ? rd.prologue : rd.epilogue;
    chain = parse_op_text(*f);
    for (RowOp op : rd.ops) {
      ops::RowVariant v;
      v.op = op;
      v.prologue = rd.prologue;
      v.epilogue = rd.epilogue;
      v.epilogue_inputs = rd.epilogue.steps.empty() ? 0 : rd.epilogue.min_inputs() - 1;
      try {
        v.validate();
      } catch (const InvalidArgument& e) {
        f->fail(e.what());
      }
    }
  }
  return rd;
}

CudaFileEntry parse_cuda(const JsonField& entry) {
  entry.expect_object(
      {"kind", "file", "name", "name_expressions", "functions", "options", "defines", "headers"});
  CudaFileEntry cuda;
  cuda.file = entry.at("file").as_nonempty_string();
  cuda.name = "inline";
  if (auto f = entry.find("name")) cuda.name = as_single_line(*f);
  if (auto f = entry.find("name_expressions")) cuda.name_expressions = parse_strings(*f);
  if (auto f = entry.find("functions")) cuda.functions = parse_strings(*f);
  if (auto f = entry.find("options")) cuda.options = parse_strings(*f);
  if (auto f = entry.find("headers")) cuda.headers = parse_strings(*f);
  if (auto f = entry.find("defines")) {
    if (!f->value().is_object()) f->fail("expected an object, got " + JsonField::describe(f->value()));
    for (const auto& item : f->value().items()) {
      JsonField value(item.value(), f->path() + "." + item.key());
      const std::string& name = item.key();
      bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
      for (char c : name) {
        ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
      }
      if (!ok) value.fail("not a valid macro name");
      if (item.value().is_string()) {
        cuda.defines[name] = item.value().get<std::string>();
        if (cuda.defines[name].find('\0') != std::string::npos) value.fail("must not contain NUL characters");
      } else if (item.value().is_number_integer() || item.value().is_number_unsigned() ||
                 item.value().is_number_float() || item.value().is_boolean()) {
        cuda.defines[name] =
            item.value().is_boolean() ? (item.value().get<bool>() ? "1" : "0") : item.value().dump();
      } else {
        value.fail("expected a string, number or boolean, got " + JsonField::describe(item.value()));
      }
    }
  }
  if (cuda.name_expressions.empty() && cuda.functions.empty()) {
    entry.at("name_expressions");  // neither is present: name the missing field
  }
  return cuda;
}

}  // namespace

Spec parse_spec(std::string_view json_text) {
  nlohmann::json doc = parse_json_text(json_text);
  JsonField root(doc, "(root)");
  root.expect_object({"version", "description", "entries"});
  if (auto f = root.find("version")) {
    if (f->as_int(0, INT32_MAX) != 1) f->fail("unsupported spec version (this cuinline reads version 1)");
  }
  if (auto f = root.find("description")) f->as_string();

  Spec spec;
  for (const auto& entry : root.at("entries").elements()) {
    if (!entry.value().is_object())
      entry.fail("expected an object, got " + JsonField::describe(entry.value()));
    SpecEntry out;
    out.path = entry.path();
    std::string kind = entry.at("kind").as_choice({"op", "conv2d", "reductions", "cuda"});
    if (kind == "op") {
      out.kind = EntryKind::op;
      out.op = parse_op(entry);
    } else if (kind == "conv2d") {
      out.kind = EntryKind::conv2d;
      out.conv2d = parse_conv2d(entry);
    } else if (kind == "reductions") {
      out.kind = EntryKind::reductions;
      out.reductions = parse_reductions(entry);
    } else {
      out.kind = EntryKind::cuda;
      out.cuda = parse_cuda(entry);
    }
    spec.entries.push_back(std::move(out));
  }
  return spec;
}

}  // namespace cuinline::cli

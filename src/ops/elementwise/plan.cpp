// The elementwise planner: ops::apply's checks, broadcasting and plan (each input's pattern,
// merged dimensions, vector width, scalar head, grid; all host arithmetic, no allocation). The
// one-input ops plan through it too (whole_inputs_only).
#include "ops/elementwise/plan.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <limits>
#include <string>
#include <tuple>

#include "driver/tensor_access.hpp"
#include "ops/elementwise/table.hpp"

namespace cuinline::ops::detail {
namespace {
std::string shape_text(const TensorView& t) {
  return t.describe();
}

[[noreturn]] void bad(const Op& op, const std::string& what) {
  throw InvalidArgument("elementwise " + op.describe() + ": " + what);
}

// Byte range [lo, hi) of a view with elements.
void byte_range(const TensorView& v, std::uintptr_t& lo, std::uintptr_t& hi) {
  std::uintptr_t first = 0, last = 0;
  cuinline::detail::byte_span(v, first, last);
  lo = first;
  hi = last + 1;
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d] || (a.shape[d] > 1 && a.strides[d] != b.strides[d])) return false;
  }
  return true;
}

// Input `in`'s strides over the output's dimensions (0 where broadcast); throws when it does not
// broadcast to `out_shape`.
void broadcast_strides(const Op& op, const TensorView& in, int k, const TensorView& out, std::int64_t* strides) {
  const int off = out.ndim - in.ndim;
  if (off < 0) {
    bad(op, "input " + std::to_string(k) + " " + shape_text(in) + " has more dimensions than the broadcast shape " +
                shape_text(out));
  }
  for (int d = 0; d < out.ndim; ++d) {
    if (d < off) {
      strides[d] = 0;
      continue;
    }
    const std::int64_t e = in.shape[d - off];
    if (e == out.shape[d]) {
      strides[d] = out.shape[d] == 1 ? 0 : in.strides[d - off];
    } else if (e == 1) {
      strides[d] = 0;
    } else {
      bad(op, "input " + std::to_string(k) + " " + shape_text(in) + " does not broadcast to " + shape_text(out));
    }
  }
}

}  // namespace

NaryPlan plan_nary(const Op& op, TensorList inputs, TensorList outputs, bool whole_inputs_only) {
  op.validate();
  const int ni = static_cast<int>(inputs.size()), no = static_cast<int>(outputs.size());
  if (ni < 1 || ni > kMaxInputs) bad(op, std::to_string(ni) + " inputs given; 1 to " + std::to_string(kMaxInputs) + " are supported");
  if (no < 1 || no > kMaxOutputs) bad(op, std::to_string(no) + " outputs given; 1 to " + std::to_string(kMaxOutputs) + " are supported");
  if (op.min_inputs() > ni) {
    bad(op, "it uses " + std::to_string(op.min_inputs()) + " inputs, " + std::to_string(ni) + " given");
  }
  if (!op.expression.empty() && !op.input_names.empty() && static_cast<int>(op.input_names.size()) != ni) {
    bad(op, "it names " + std::to_string(op.input_names.size()) + " inputs, " + std::to_string(ni) + " given");
  }
  if (!op.expression.empty() && op.input_names.empty() && ni > 1) {
    for (const NamedConstant& c : op.constants) {
      if (c.name.size() == 1 && c.name[0] >= 'a' && c.name[0] < 'a' + ni) {
        bad(op, "constant '" + c.name + "' has the name of an unnamed input (inputs are a, b, ... here)");
      }
    }
  }
  if (op.outputs() != no) bad(op, "it has " + std::to_string(op.outputs()) + " output(s), " + std::to_string(no) + " given");
  NaryPlan p;
  const DType dt = outputs[0].dtype;
  const std::size_t es = dtype_size(dt);
  if (es == 0) bad(op, "unsupported dtype");
  for (const TensorView& t : inputs) {
    if (t.dtype != dt) {
      bad(op, std::string("mixed dtypes (") + to_string(t.dtype) + " and " + to_string(dt) +
                  ") are not supported; convert first (PyTorch would promote to the wider type)");
    }
    if (t.ndim < 0 || t.ndim > TensorView::kMaxDims) bad(op, "bad number of dimensions");
  }
  // The broadcast shape (PyTorch's rule), which every output must have.
  TensorView shape;
  for (const TensorView& t : inputs) shape.ndim = std::max(shape.ndim, t.ndim);
  for (int d = 0; d < shape.ndim; ++d) shape.shape[d] = 1;
  for (int k = 0; k < ni; ++k) {
    const TensorView& t = inputs[k];
    const int off = shape.ndim - t.ndim;
    for (int d = 0; d < t.ndim; ++d) {
      std::int64_t& e = shape.shape[d + off];
      if (t.shape[d] < 0) bad(op, "negative dimension in " + shape_text(t));
      if (t.shape[d] == e || t.shape[d] == 1) continue;
      if (e == 1) {
        e = t.shape[d];
        continue;
      }
      bad(op, "input shapes do not broadcast: " + shape_text(inputs[0]) + " and " + shape_text(t) + " (input " +
                  std::to_string(k) + ")");
    }
  }
  shape.dtype = dt;
  for (int k = 0; k < no; ++k) {
    const TensorView& o = outputs[k];
    if (o.dtype != dt) bad(op, std::string("output ") + std::to_string(k) + " is " + to_string(o.dtype) + ", the inputs " + to_string(dt));
    bool same = o.ndim == shape.ndim;
    for (int d = 0; same && d < o.ndim; ++d) same = o.shape[d] == shape.shape[d];
    if (!same) bad(op, "output " + std::to_string(k) + " " + shape_text(o) + " does not have the broadcast shape " + shape_text(shape));
    for (int d = 0; d < o.ndim; ++d) {
      if (o.shape[d] > 1 && o.strides[d] == 0) bad(op, "output " + std::to_string(k) + " " + shape_text(o) + " has several elements at one address (stride 0)");
    }
  }
  std::int64_t n = 1;
  for (int d = 0; d < shape.ndim; ++d) {
    if (shape.shape[d] != 0 && n > std::numeric_limits<std::int64_t>::max() / shape.shape[d]) bad(op, "too many elements");
    n *= shape.shape[d];
  }
  p.numel = n;
  p.key.dtype = dt;
  p.key.inputs = static_cast<std::uint8_t>(ni);
  p.key.outputs = static_cast<std::uint8_t>(no);
  if (n == 0) return p;
  for (int k = 0; k < ni; ++k) {
    if (inputs[k].data == nullptr) bad(op, "input " + std::to_string(k) + " is a null pointer with elements");
    if (reinterpret_cast<std::uintptr_t>(inputs[k].data) % es != 0) bad(op, "input " + std::to_string(k) + " is not aligned to its element size");
    p.args.in[k] = inputs[k].data;
  }
  for (int k = 0; k < no; ++k) {
    if (outputs[k].data == nullptr) bad(op, "output " + std::to_string(k) + " is a null pointer with elements");
    if (reinterpret_cast<std::uintptr_t>(outputs[k].data) % es != 0) bad(op, "output " + std::to_string(k) + " is not aligned to its element size");
    p.args.out[k] = outputs[k].data;
  }
  // Aliasing: an output may be exactly one of the inputs; nothing else may overlap it.
  for (int k = 0; k < no; ++k) {
    std::uintptr_t olo, ohi;
    byte_range(outputs[k], olo, ohi);
    for (int j = 0; j < ni; ++j) {
      if (same_view(outputs[k], inputs[j])) continue;
      std::uintptr_t ilo, ihi;
      byte_range(inputs[j], ilo, ihi);
      if (ilo < ohi && olo < ihi) bad(op, "output " + std::to_string(k) + " overlaps input " + std::to_string(j) + " without being the same view");
    }
    for (int j = 0; j < k; ++j) {
      std::uintptr_t lo, hi;
      byte_range(outputs[j], lo, hi);
      if (lo < ohi && olo < hi) bad(op, "outputs " + std::to_string(j) + " and " + std::to_string(k) + " overlap");
    }
  }
  // Strides of every operand over the broadcast shape.
  std::int64_t in_strides[kMaxInputs][TensorView::kMaxDims] = {};
  for (int k = 0; k < ni; ++k) broadcast_strides(op, inputs[k], k, shape, in_strides[k]);

  // The fast path: contiguous outputs, each input the whole tensor, a scalar, a row or a column.
  bool fast = true;
  for (int k = 0; k < no && fast; ++k) fast = outputs[k].is_contiguous();
  std::int64_t contiguous[TensorView::kMaxDims] = {};  // the output's (contiguous) strides
  {
    std::int64_t s = 1;
    for (int d = shape.ndim - 1; d >= 0; --d) {
      contiguous[d] = s;
      s *= shape.shape[d];
    }
  }
  for (int k = 0; k < ni && fast; ++k) {
    const std::int64_t* st = in_strides[k];
    // Split the dimensions (size > 1) into those the input follows contiguously and those it
    // repeats along (stride 0).
    bool all_follow = true, none_follow = true;
    for (int d = 0; d < shape.ndim; ++d) {
      if (shape.shape[d] == 1) continue;
      const bool follows = st[d] == contiguous[d] && st[d] != 0;
      all_follow = all_follow && follows;
      none_follow = none_follow && st[d] == 0;
    }
    // The whole tensor first: a one-element input of a one-element call is read whole (the
    // one-input ops' variants know no other pattern).
    if (all_follow) {
      p.key.patterns[k] = kFull;
      continue;
    }
    if (whole_inputs_only) {
      fast = false;  // a broadcast input of a one-input op: the strided path, as ever
      break;
    }
    if (none_follow) {
      p.key.patterns[k] = kScalar;
      continue;
    }
    // Inner strides relative to the trailing block: a row follows the output's strides over the
    // trailing dims (and 0 before), a column follows them divided by the trailing block (and 0 after).
    int first = -1, last = -1;  // dims (size > 1) the input follows
    for (int d = 0; d < shape.ndim; ++d) {
      if (shape.shape[d] == 1 || st[d] == 0) continue;
      if (first < 0) first = d;
      last = d;
    }
    bool gap = false;  // a repeated dim between two followed ones
    for (int d = first; d <= last; ++d) gap = gap || (shape.shape[d] > 1 && st[d] == 0);
    if (gap) {
      fast = false;
      break;
    }
    std::int64_t below = 1;  // elements of the dims after `last`
    for (int d = last + 1; d < shape.ndim; ++d) below *= shape.shape[d];
    bool dense = true;  // the followed dims are contiguous in the input: strides contiguous[d] / below
    for (int d = first; d <= last; ++d) dense = dense && (shape.shape[d] == 1 || st[d] * below == contiguous[d]);
    if (!dense) {
      fast = false;
      break;
    }
    std::int64_t span = 1;
    for (int d = first; d <= last; ++d) span *= shape.shape[d];
    if (below == 1) {
      p.key.patterns[k] = kRow;  // repeated along leading dims: element i % span
      p.args.period[k] = span;
    } else if (first == 0 || [&] {
                 for (int d = 0; d < first; ++d) if (shape.shape[d] > 1) return false;
                 return true;
               }()) {
      p.key.patterns[k] = kCol;  // repeated along trailing dims: element i / below
      p.args.period[k] = below;
    } else {
      fast = false;  // repeated both before and after: the strided path
    }
  }
  if (fast) {
    // Widest vector (<= 16 bytes) such that, after the same `head` (< W) scalar elements, every
    // whole-tensor operand (outputs and FULL inputs) is aligned to it: they must share their
    // misalignment modulo the vector (in place, or all offset alike). Rows and columns keep head 0
    // (a row is aligned itself, every period a multiple of W); scalars need nothing.
    bool broadcast = false;
    for (int k = 0; k < ni; ++k) broadcast = broadcast || p.key.patterns[k] == kRow || p.key.patterns[k] == kCol;
    int w = static_cast<int>(16 / es);
    std::int64_t head = 0;
    for (; w > 1; w /= 2) {
      const std::uintptr_t vb = es * static_cast<std::uintptr_t>(w);
      const std::uintptr_t r = reinterpret_cast<std::uintptr_t>(outputs[0].data) % vb;
      bool ok = !(broadcast && r != 0);
      for (int k = 1; k < no && ok; ++k) ok = reinterpret_cast<std::uintptr_t>(outputs[k].data) % vb == r;
      for (int k = 0; k < ni && ok; ++k) {
        const std::uint8_t pat = p.key.patterns[k];
        const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(inputs[k].data) % vb;
        if (pat == kFull) ok = a == r;
        if (pat == kRow) ok = a == 0;
        if (ok && (pat == kRow || pat == kCol)) ok = p.args.period[k] % w == 0;
      }
      head = static_cast<std::int64_t>(((vb - r) % vb) / es);
      if (ok && n >= head + w) break;
    }
    if (w == 1) head = 0;
    p.key.vector_width = static_cast<std::uint8_t>(w);
    p.key.index64 = n > std::numeric_limits<std::int32_t>::max();
    p.head = head;
    if (!p.key.index64) {  // a row's or a column's period as a multiply and a shift (the kernel's only way)
      for (int k = 0; k < ni; ++k) {
        if (p.key.patterns[k] == kRow || p.key.patterns[k] == kCol) {
          std::tie(p.args.div_mul[k], p.args.div_shift[k]) = fast_divisor(p.args.period[k]);
          // A row or a column follows a dimension of 2 or more, and a 32-bit launch has under 2^31
          // elements: its period always has a divisor.
          if (p.args.div_mul[k] == 0) {
            bad(op,
                "internal: no multiply-shift divisor for a period of " + std::to_string(p.args.period[k]));
          }
        }
      }
    }
    // An expression over one whole tensor and broadcast operands (bias + GELU): each thread has only
    // 16 bytes in flight and more arithmetic than a chain between them. Two vectors a thread (with
    // 64 registers) reached 99.1 % of a copy's bandwidth on an H200 where one reached 96.2 %
    // (f32 gelu(x + bias_row), [8192, 28672]); with two or more whole inputs
    // the ops already ran at the copy's bandwidth. 4- and 8-byte dtypes only: bf16 bias + GELU is
    // bound by its arithmetic (8 erff a thread), not by the bytes in flight.
    int whole = 0;
    for (int k = 0; k < ni; ++k) whole += p.key.patterns[k] == kFull ? 1 : 0;
    p.key.wide = !op.expression.empty() && whole == 1 && ni > 1 && es >= 4;
    const std::int64_t vectors = (n - head) / w;
    const std::int64_t per_block =
        std::int64_t{kBlock} * unroll_for(es * static_cast<std::size_t>(w)) * (p.key.wide ? 2 : 1);
    const std::int64_t blocks = std::max<std::int64_t>(1, (vectors + per_block - 1) / per_block);
    if (blocks > std::numeric_limits<std::int32_t>::max()) bad(op, "tensor too large for one launch");
    p.grid = static_cast<std::uint32_t>(blocks);
    // A large bf16 call of a chain that ends in a costly run looks the run up (table.hpp).
    p.key.table = table_applies(op, p.key, n);
    return p;
  }
  p.key.strided = true;
  p.key.vector_width = 1;
  p.key.index64 = true;
  p.key.patterns = {};
  // Merge dimensions: drop size-1 ones, join neighbours that every operand walks contiguously (a
  // broadcast one, stride 0, in both): fewer divisions per element, as TensorIterator's coalescing.
  NaryStrided& s = p.strided;
  for (int d = 0; d < shape.ndim; ++d) {
    if (shape.shape[d] == 1) continue;
    const std::int64_t e = shape.shape[d];
    if (s.ndim > 0) {
      const int j = s.ndim - 1;
      bool joins = true;
      for (int k = 0; k < ni && joins; ++k) joins = s.in_strides[k][j] == in_strides[k][d] * e;
      for (int k = 0; k < no && joins; ++k) joins = s.out_strides[k][j] == outputs[k].strides[d] * e;
      if (joins) {
        s.shape[j] *= e;
        for (int k = 0; k < ni; ++k) s.in_strides[k][j] = in_strides[k][d];
        for (int k = 0; k < no; ++k) s.out_strides[k][j] = outputs[k].strides[d];
        continue;
      }
    }
    s.shape[s.ndim] = e;
    for (int k = 0; k < ni; ++k) s.in_strides[k][s.ndim] = in_strides[k][d];
    for (int k = 0; k < no; ++k) s.out_strides[k][s.ndim] = outputs[k].strides[d];
    ++s.ndim;
  }
  if (s.ndim == 0) {
    s.ndim = 1;
    s.shape[0] = 1;
  }
  p.grid = static_cast<std::uint32_t>(std::min<std::int64_t>((n + kBlock - 1) / kBlock, std::int64_t{1} << 20));
  return p;
}

// Every identifier of an expression that is not a call must be an input, a constant, an earlier
// output (y0 ...) or a type keyword: an unknown name is an InvalidArgument before anything is
// compiled, not an NVRTC error.
void check_expression_names(const Op& op, int inputs) {
  if (op.expression.empty()) return;
  std::vector<std::string> known;
  for (int i = 0; i < inputs; ++i) {
    known.push_back(op.input_names.empty() ? (inputs == 1 ? std::string("x") : std::string(1, static_cast<char>('a' + i)))
                                           : op.input_names[static_cast<std::size_t>(i)]);
  }
  for (const NamedConstant& c : op.constants) known.push_back(c.name);
  static const char* const kKeywords[] = {"float", "double", "int", "unsigned", "long", "short", "signed",
                                          "bool", "char", "true", "false", "static_cast", "sizeof"};
  for (int k = 0; k < op.outputs(); ++k) {
    const std::string& e = k == 0 ? op.expression : op.more_outputs[static_cast<std::size_t>(k - 1)];
    if (k > 0) known.push_back("y" + std::to_string(k - 1));
    for (std::size_t i = 0; i < e.size();) {
      const unsigned char c = static_cast<unsigned char>(e[i]);
      if (std::isdigit(c) || (c == '.' && i + 1 < e.size() && std::isdigit(static_cast<unsigned char>(e[i + 1])))) {
        while (i < e.size() && (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '.' ||
                                ((e[i] == '+' || e[i] == '-') && (e[i - 1] == 'e' || e[i - 1] == 'E' || e[i - 1] == 'p' || e[i - 1] == 'P'))))
          ++i;  // a number, with its exponent and suffix
        continue;
      }
      if (!std::isalpha(c) && c != '_') {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '_')) ++j;
      const std::string name = e.substr(i, j - i);
      std::size_t after = j;
      while (after < e.size() && e[after] == ' ') ++after;
      const bool call = after < e.size() && e[after] == '(';
      bool ok = call || std::find(known.begin(), known.end(), name) != known.end();
      for (const char* kw : kKeywords) ok = ok || name == kw;
      if (!ok) {
        std::string names;
        for (std::size_t q = 0; q < known.size(); ++q) names += (q ? ", " : "") + known[q];
        bad(op, "the expression names '" + name + "', which is not one of its inputs, constants or earlier outputs (" +
                    names + ")");
      }
      i = j;
    }
  }
}

std::pair<std::uint32_t, std::uint32_t> fast_divisor(std::int64_t d) {
  if (d < 2 || d >= (std::int64_t{1} << 31)) return {0, 0};
  std::uint32_t log2 = 0;  // ceil(log2(d))
  while ((std::int64_t{1} << log2) < d) ++log2;
  const std::uint32_t p = 31 + log2;
  const std::uint64_t multiplier =
      ((std::uint64_t{1} << p) + static_cast<std::uint64_t>(d) - 1) / static_cast<std::uint64_t>(d);
  return {static_cast<std::uint32_t>(multiplier), p - 32};
}

int multiprocessors(int device) {
  static std::atomic<int> counts[64] = {};
  if (device < 0 || device >= 64) return device_info(device).multiprocessors;
  int c = counts[device].load(std::memory_order_relaxed);
  if (c == 0) {
    c = device_info(device).multiprocessors;
    counts[device].store(c, std::memory_order_relaxed);
  }
  return c;
}

}  // namespace cuinline::ops::detail

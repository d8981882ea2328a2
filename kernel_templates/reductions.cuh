// reductions.cuh — row reductions over the last dimension: softmax, log_softmax, rms_norm,
// add_rms_norm (vLLM's fused_add_rms_norm) and layer_norm, in five forms (docs/reductions.md):
//
//   rd_regs<op, S, V, E, T> with T <= 32 (the warp form): T lanes of a warp per row (T = 1, 2, 4,
//       8, 16 or 32), 128 / T rows per block of 128 threads, the row in registers (E elements a
//       lane: rows up to T * E; E == V when T < 32);
//   rd_regs<op, S, V, E, T> with T >= 128: one block of T threads per row, the row in registers
//       (rows up to T * E);
//   rd_split_stats<op, S, V, E, T> then rd_split_write<op, S, V, E, T>: long rows split into
//       chunks of T * E elements, a block a chunk; the first kernel writes each chunk's statistics
//       to a workspace (softmax: max and sum; rms: sum of squares; layer_norm: sum and squared
//       deviations from the chunk's mean), the second merges a row's and writes the chunk;
//   rd_cluster<op, S, V, E, T, G, C> (sm_90 and later): the split form's chunks, G a block, a row's
//       C blocks one thread block cluster; the chunks' statistics merged through distributed shared
//       memory in the split form's order, each chunk written from registers (one read);
//   rd_long<op, S, V, T>: one block per row of any length, looping over the row (where no
//       workspace can be had): an online softmax (running max and sum) then one write pass; sums
//       of squares then a write pass (rms); mean, then variance, then the write pass (layer_norm).
//
// Each takes three more template arguments, defaulted to "no chain": P, a prologue functor
// S -> S applied to every element of x as it is loaded (before add_rms_norm's add), Q, an
// epilogue functor (ew_nary's: xs[0] the output rounded to S, xs[1..K] the K extra tensors'
// elements at the same place; ys[0] what is stored), and K, the number of those tensors (the
// argument then carries them after rd_args: rd_args_e<K>). Both are elementwise chains rendered
// by the elementwise family (ew_ops.cuh), so each of their steps rounds to S as that family's do.
//
// S is the storage type (float, double, ew_half, ew_bf16), V the elements of one access (16 bytes
// when every row is aligned to it, else the widest that is). Accumulation is in ew_traits<S>::op:
// float for f16 / bf16 / f32, double for f64. The formulas are PyTorch's: softmax
// exp(x - max) / sum (f32's chunked rows: rd_chunk_scale), log_softmax (x - max) - log(sum), rms x *
// rsqrt(mean(x^2) + eps) * w, layer_norm (x - mean) * rsqrt(var + eps) * w + b with the biased variance.
#ifndef CUINLINE_REDUCTIONS_CUH
#define CUINLINE_REDUCTIONS_CUH

#include "ew_common.cuh"

enum { RD_SOFTMAX = 0, RD_LOG_SOFTMAX = 1, RD_RMS_NORM = 2, RD_ADD_RMS_NORM = 3, RD_LAYER_NORM = 4 };
// The warp form's block (src/ops/reductions/plan.hpp's kWarpBlock): 128 / T rows of T lanes.
enum { RD_WARP_BLOCK = 128 };

// The launch arguments (one struct, as src/ops/reductions/plan.hpp lays it out): x is read, y
// written (may be x), w / b are the weight and bias (null: absent), r the residual of
// add_rms_norm (read, then x + r written back). Strides are between rows, in elements.
struct rd_args {
  const void* x;
  void* y;
  const void* w;
  const void* b;
  void* r;
  long long rows, n, sx, sy, sr;
  double eps;
  void* ws;         // the split form's workspace: two accumulation-type values a chunk
  long long chunk;  // the split form's chunk (T * E elements)
};

// A kernel with K > 0 epilogue tensors takes rd_args followed by K of these (each tensor and its row
// stride, in elements); one without takes rd_args alone, the argument it always took.
struct rd_extra {
  const void* p;
  long long s;
};
template <int K>
struct rd_args_e : rd_args {
  rd_extra e[K];
};
template <int K>
struct rd_args_of {
  typedef rd_args_e<K> type;
};
template <>
struct rd_args_of<0> {
  typedef rd_args type;
};
__device__ __forceinline__ const rd_extra* rd_extras(const rd_args&) { return 0; }
template <int K>
__device__ __forceinline__ const rd_extra* rd_extras(const rd_args_e<K>& a) { return a.e; }
// The split form's write kernel: the epilogue's tensors moved to its chunk.
template <class S>
__device__ __forceinline__ void rd_shift_extras(rd_args&, long long) {}
template <class S, int K>
__device__ __forceinline__ void rd_shift_extras(rd_args_e<K>& a, long long base) {
#pragma unroll
  for (int k = 0; k < K; ++k) a.e[k].p = static_cast<const S*>(a.e[k].p) + base;
}
// The arguments of a chunk from column `base` (the split and cluster forms): the weight, the bias
// and the epilogue's tensors moved to it.
template <class S, class Args>
__device__ __forceinline__ Args rd_at_chunk(const Args& a, long long base) {
  Args shifted = a;
  if (a.w != 0) shifted.w = static_cast<const S*>(a.w) + base;
  if (a.b != 0) shifted.b = static_cast<const S*>(a.b) + base;
  rd_shift_extras<S>(shifted, base);
  return shifted;
}

// No prologue: x as loaded. No epilogue: the output as computed.
struct rd_no_prologue {
  template <class S>
  __device__ __forceinline__ S operator()(S x) const { return x; }
};
struct rd_no_epilogue {
  template <class S, int N>
  __device__ __forceinline__ void operator()(const S (&xs)[N], S (&ys)[1]) const { ys[0] = xs[0]; }
};

// e^v in opmath, for an output of storage type S. A 16-bit output (f16, bf16) takes __expf, the
// hardware's 2^x of v * log2(e): a relative error of at most a few 1e-6 (the product's rounding when
// |v| nears 88) under the output's own rounding of 2^-9 (bf16) or 2^-12 (f16), in fewer instructions
// than expf. An exp an element is what bounds softmax on 16-bit rows (more bandwidth on H200 bf16
// rows: 13 % on rows of 128, 18 % on 1024, 31 % on the split form's 4 million; docs/reductions.md).
// float and double outputs take the accurate expf / exp, as PyTorch's kernels do.
template <class S>
__device__ __forceinline__ float rd_exp(float v) {
  return sizeof(S) == 2 ? __expf(v) : expf(v);
}
template <class S>
__device__ __forceinline__ double rd_exp(double v) {
  return exp(v);
}
// e^v (v <= 0) as a term of a chunk's sum of exp(x - max), whose max term is 1: for a 16-bit output
// rd_exp's 2^(v log2 e) with results under 2^-126 flushed to 0 (ex2.approx.ftz: three instructions
// an element fewer than the subnormal range's scaling). Such a term is below half an ulp of every
// partial sum it can reach before the 1 does, so the chunk's sum has rd_exp's bits.
template <class S>
__device__ __forceinline__ float rd_exp_term(float v) {
  if (sizeof(S) != 2) return rd_exp<S>(v);
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v * 1.44269502162933349609375f));
  return r;
#else  // a host emulation's: its __expf, flushed the same way
  const float r = __expf(v);
  return r < 1.17549435e-38f ? 0.0f : r;
#endif
}
template <class S>
__device__ __forceinline__ double rd_exp_term(double v) {
  return rd_exp<S>(v);
}
// e[j] = rd_exp(x[j] - s0) for a vector of V. For a 16-bit output, where no product (x - s0) log2 e
// is under -126 (every result normal) the hardware's ex2 takes it with subnormal results flushed,
// which then changes nothing: one instruction an element, against rd_exp's three more for the
// subnormal range's scaling; other vectors (a row's -inf, its far tail) take rd_exp.
template <class S, int V>
__device__ __forceinline__ void rd_exp_vector(const float* x, float s0, float* e) {
#ifdef __CUDA_ARCH__
  if (sizeof(S) == 2) {
    float t[V];
#pragma unroll
    for (int j = 0; j < V; ++j) t[j] = (x[j] - s0) * 1.44269502162933349609375f;
    float lo = t[0];
#pragma unroll
    for (int j = 1; j < V; ++j) lo = fminf(lo, t[j]);
    if (lo >= -126.0f) {
#pragma unroll
      for (int j = 0; j < V; ++j) asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e[j]) : "f"(t[j]));
      return;
    }
  }
#endif
#pragma unroll
  for (int j = 0; j < V; ++j) e[j] = rd_exp<S>(x[j] - s0);
}
template <class S, int V>
__device__ __forceinline__ void rd_exp_vector(const double* x, double s0, double* e) {
#pragma unroll
  for (int j = 0; j < V; ++j) e[j] = rd_exp<S>(x[j] - s0);
}
// The chunk forms' softmax on f32 rows (rd_split_write, rd_cluster, and the generic kernel's chunks,
// whose bits these are): an element's output is its exp(x - cm) over its chunk's max cm, as the
// chunk's statistics took it (rd_exp_term), times rd_chunk_scale(cm, m, s) = exp(cm - m) / s over
// the row's max m and sum s, in double and rounded once. One exp an element where exp(x - m) / s
// took an exp and a division an element besides the statistics' exp: the cluster form keeps each
// exp from its statistics (rd_chunk_stats), the split form takes it again from the same operands.
// Its error is the exp's, the scale's half ulp and the product's half ulp. A chunk whose max is
// -inf (no element above -inf) writes exp(x - m) / s.
template <class S>
struct rd_chunk_exp {
  enum { value = 0 };
};
template <>
struct rd_chunk_exp<float> {
  enum { value = 1 };
};
__device__ __forceinline__ float rd_chunk_scale(float cm, float m, float s) {
  return static_cast<float>(exp(static_cast<double>(cm) - static_cast<double>(m)) / static_cast<double>(s));
}
__device__ __forceinline__ double rd_chunk_scale(double cm, double m, double s) {
  return exp(cm - m) / s;
}
// x / d for an output of storage type S: a 16-bit output multiplies by the reciprocal (1.5 ulp of
// fp32 at most, under its rounding; one division a row instead of one an element).
// rd_div in two halves, for a divisor taken once a row: rd_divisor(d) (the reciprocal for a 16-bit
// output, else d itself), then rd_div_by for each element. The same bits as rd_div.
template <class S, class A>
__device__ __forceinline__ A rd_divisor(A d) {
  return sizeof(S) == 2 ? A(1) / d : d;
}
template <class S, class A>
__device__ __forceinline__ A rd_div_by(A x, A divisor) {
  return sizeof(S) == 2 ? x * divisor : x / divisor;
}
template <class S, class A>
__device__ __forceinline__ A rd_div(A x, A d) {
  return rd_div_by<S>(x, rd_divisor<S>(d));
}
__device__ __forceinline__ float rd_log(float v) { return logf(v); }
__device__ __forceinline__ double rd_log(double v) { return log(v); }
__device__ __forceinline__ float rd_rsqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double rd_rsqrt(double v) { return rsqrt(v); }
__device__ __forceinline__ float rd_neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double rd_neg_inf(double) { return __longlong_as_double(0xfff0000000000000ll); }
// rms_norm's 1 / sqrt(mean(x^2) + eps) from the row's sum of squares ss: 0 where ss is infinite,
// so that a row holding ±inf normalizes to ±0 at its finite elements and NaN at its infinite ones
// (x * 0), as the definition and PyTorch's composite and vectorized kernels give.
template <class A>
__device__ __forceinline__ A rd_rms_rstd(A ss, long long n, double eps) {
  return rd_rsqrt(ss / static_cast<A>(n) + static_cast<A>(eps));
}
__device__ __forceinline__ float rd_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double rd_mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float rd_add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double rd_add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float rd_fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double rd_fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
// layer_norm's output from d = x - mean and rstd, with its roundings spelled out (so that the
// specialized kernels, compiled with contraction on, and the generic ones round alike), PyTorch's:
// t = d * rstd rounded, then t * w + b in one fused multiply-add (t * w, t + b where one is absent).
template <class A>
__device__ __forceinline__ A rd_layer_out(A d, A rstd, bool has_w, A w, bool has_b, A b) {
  const A t = rd_mul_rn(d, rstd);
  if (has_w) return has_b ? rd_fma_rn(t, w, b) : rd_mul_rn(t, w);
  return has_b ? rd_add_rn(t, b) : t;
}
// layer_norm's statistics by the corrected two-pass (Chan, Golub and LeVeque): from the summed mean
// m of n elements (inv = 1 / n), the sum c of their deviations x - m and the sum q of the
// deviations' squares, the mean m + c / n (the summed mean's rounding taken back: exact on a
// constant row, as PyTorch's Welford mean is, so such a row normalizes to exactly 0) and the squared
// deviations from it, q - c * c / n (not below 0; NaN stays NaN).
template <class A>
__device__ __forceinline__ void rd_corrected(A m, A c, A q, A inv, A& mean, A& m2) {
  const A cn = rd_mul_rn(c, inv);
  mean = rd_add_rn(m, cn);
  const A r = rd_fma_rn(-c, cn, q);
  m2 = r < A(0) ? A(0) : r;
}
// Where a thread's deviations' sum c comes from: 16-bit rows take it from the thread's own sum of
// its `held` elements, part - held * m in one FMA, with no addition an element (their float sum is
// exact wherever the values span few binades: a constant row's is, and so its c and mean); wider
// rows add the deviations up as they take their squares.
template <class S>
struct rd_thread_dev {
  enum { value = sizeof(S) == 2 };
};
__device__ __forceinline__ float rd_shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double rd_shfl_xor(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

struct rd_add {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
// NaN is never kept as the maximum: a NaN element makes the sum NaN, hence every output.
struct rd_max {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const { return b > a ? b : a; }
};

// The reduction of v over the T threads of a row; every thread gets the result. T <= 32: an aligned
// group of T lanes of a warp (xor offsets T / 2 .. 1 stay inside it), but the shuffles name the
// whole warp, so every lane of the warp must call it, whatever its group's row. T >= 128: the block;
// `sh` holds one value per warp, the second barrier lets the caller reuse it at once, and every
// thread of the block must call it (no early exit before it in the block forms). rd_reduce_n takes
// T at run time (the generic kernels, reductions_generic.cuh); rd_reduce<T> is it with T a constant.
// The block's barrier (rd_reduce_n's); the cluster form's groups of T threads each meet at a named
// barrier of their own (rd_group_bar, id 1 + the group), so a group's reduction is a block's.
struct rd_block_bar {
  __device__ __forceinline__ void operator()() const { __syncthreads(); }
};
#ifndef CUINLINE_RD_CLUSTER_HOOKS
__device__ __forceinline__ void rd_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
#endif
struct rd_group_bar {
  int id, count;
  __device__ __forceinline__ void operator()() const { rd_bar_sync(id, count); }
};
// rd_reduce_n for thread t of T, its barrier `bar` (the block's, or a group's).
template <class A, class F, class B>
__device__ __forceinline__ A rd_reduce_at(A v, F f, A identity, A* sh, int T, int t, B bar) {
#pragma unroll
  for (int o = (T < 32 ? T : 32) / 2; o > 0; o >>= 1) v = f(v, rd_shfl_xor(v, o));
  if (T <= 32) return v;
  const int lane = t & 31, warp = t >> 5;
  if (lane == 0) sh[warp] = v;
  bar();
  v = lane < T / 32 ? sh[lane] : identity;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, rd_shfl_xor(v, o));
  bar();
  return v;
}
template <class A, class F>
__device__ __forceinline__ A rd_reduce_n(A v, F f, A identity, A* sh, int T) {
  return rd_reduce_at(v, f, identity, sh, T, static_cast<int>(threadIdx.x), rd_block_bar());
}
template <int T, class A, class F>
__device__ __forceinline__ A rd_reduce(A v, F f, A identity, A* sh) {
  return rd_reduce_n(v, f, identity, sh, T);
}
// Two sums reduced at once (layer_norm's deviations and their squares): sh and sh2 32 values each.
template <class A, class B>
__device__ __forceinline__ void rd_sum2_at(A& u, A& w, A* sh, A* sh2, int T, int t, B bar) {
#pragma unroll
  for (int o = (T < 32 ? T : 32) / 2; o > 0; o >>= 1) {
    u += rd_shfl_xor(u, o);
    w += rd_shfl_xor(w, o);
  }
  if (T <= 32) return;
  const int lane = t & 31, warp = t >> 5;
  if (lane == 0) {
    sh[warp] = u;
    sh2[warp] = w;
  }
  bar();
  u = lane < T / 32 ? sh[lane] : A(0);
  w = lane < T / 32 ? sh2[lane] : A(0);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    u += rd_shfl_xor(u, o);
    w += rd_shfl_xor(w, o);
  }
  bar();
}
template <class A>
__device__ __forceinline__ void rd_sum2_n(A& u, A& w, A* sh, A* sh2, int T) {
  rd_sum2_at(u, w, sh, sh2, T, static_cast<int>(threadIdx.x), rd_block_bar());
}

// Online softmax state (running max m, sum s of exp(x - m)). A factor exp(mi - m) is exactly 1
// when mi == m: so a row's -inf elements count 1 each while the max is -inf and vanish (factor 0)
// once a finite element raises it, and a row all -inf ends with max -inf, hence NaN outputs (x -
// max = NaN), as PyTorch's two passes give; +inf in a row makes the sum NaN (exp(inf - inf)).
template <class S, class A>
__device__ __forceinline__ A rd_rescale(A mi, A m) {
  return mi == m ? A(1) : rd_exp<S>(mi - m);
}
// A new max's rescale of the sum is one FMA, spelled out: left to contraction, the looped form
// (NVRTC) and the generic kernel's whole rows (nvcc) rounded it differently in f64.
template <class S, class A>
__device__ __forceinline__ void rd_online_add(A& m, A& s, A v) {
  if (v > m) {
    s = rd_fma_rn(s, rd_exp<S>(m - v), rd_exp<S>(v - v));
    m = v;
  } else {
    s += (v == m && v == rd_neg_inf(v)) ? A(1) : rd_exp<S>(v - m);
  }
}
// The merge's sum of two products rounds as one FMA, spelled out: contracted by the compiler, which
// product the FMA took would depend on the code around the merge, and the kernels that merge (the
// split form's write kernel, the looped form, the generic kernels) would round it differently.
__device__ __forceinline__ float rd_fma_of_products(float a, float b, float c, float d) {
  return __fmaf_rn(a, b, __fmul_rn(c, d));
}
__device__ __forceinline__ double rd_fma_of_products(double a, double b, double c, double d) {
  return __fma_rn(a, b, __dmul_rn(c, d));
}
template <class S, class A>
__device__ __forceinline__ void rd_online_merge(A& m, A& s, A m2, A s2) {
  const A mm = m2 > m ? m2 : m;
  s = rd_fma_of_products(s, rd_rescale<S>(m, mm), s2, rd_rescale<S>(m2, mm));
  m = mm;
}
// As rd_reduce_at / rd_reduce_n / rd_reduce, for the online softmax's (max, sum) pairs.
template <class S, class A, class B>
__device__ __forceinline__ void rd_online_reduce_at(A& m, A& s, A* shm, A* shs, int T, int t, B bar) {
#pragma unroll
  for (int o = (T < 32 ? T : 32) / 2; o > 0; o >>= 1)
    rd_online_merge<S>(m, s, rd_shfl_xor(m, o), rd_shfl_xor(s, o));
  if (T <= 32) return;
  const int lane = t & 31, warp = t >> 5;
  if (lane == 0) {
    shm[warp] = m;
    shs[warp] = s;
  }
  bar();
  m = lane < T / 32 ? shm[lane] : rd_neg_inf(m);
  s = lane < T / 32 ? shs[lane] : A(0);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) rd_online_merge<S>(m, s, rd_shfl_xor(m, o), rd_shfl_xor(s, o));
  bar();
}
template <class S, class A>
__device__ __forceinline__ void rd_online_reduce_n(A& m, A& s, A* shm, A* shs, int T) {
  rd_online_reduce_at<S>(m, s, shm, shs, T, static_cast<int>(threadIdx.x), rd_block_bar());
}
template <class S, int T, class A>
__device__ __forceinline__ void rd_online_reduce(A& m, A& s, A* shm, A* shs) {
  rd_online_reduce_n<S>(m, s, shm, shs, T);
}

// V elements as one access of sizeof(S) * V bytes (the planner chose V so that it is aligned).
template <class S, int V>
union rd_pack {
  typename ew_raw<sizeof(S) * V>::type raw;
  S v[V];
};
// The weight and bias (read by every row: kept in L1) and other read-only data: the non-coherent
// path.
template <class S, int V, class A>
__device__ __forceinline__ void rd_load(const S* p, A* out) {
  rd_pack<S, V> u;
  u.raw = __ldg(reinterpret_cast<const typename ew_raw<sizeof(S) * V>::type*>(p));
#pragma unroll
  for (int j = 0; j < V; ++j) out[j] = ew_traits<S>::to_op(u.v[j]);
}
// The residual is written by the kernel and read again (rd_long): plain loads only.
template <class S, int V, class A>
__device__ __forceinline__ void rd_load_plain(const S* p, A* out) {
  rd_pack<S, V> u;
  u.raw = *reinterpret_cast<const typename ew_raw<sizeof(S) * V>::type*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) out[j] = ew_traits<S>::to_op(u.v[j]);
}
template <class S, int V, class A>
__device__ __forceinline__ void rd_store(S* p, const A* in) {
  rd_pack<S, V> u;
#pragma unroll
  for (int j = 0; j < V; ++j) u.v[j] = ew_traits<S>::from_op(in[j]);
  *reinterpret_cast<typename ew_raw<sizeof(S) * V>::type*>(p) = u.raw;
}
// x's elements through the prologue P (on the storage values, as the elementwise op before the
// reduction would have written them), kNc: through the non-coherent path (__ldg). The forms that
// hold the row in registers (rd_regs) use plain loads: they moved 5-42 % more bytes a second than
// through __ldg on bf16 rows of 512-32768, 1 % more on f32 ones (H200, L2 flushed; softmax bf16
// x 8192 3570 against 2973 GB/s, layer_norm 2547 against 1795). The split and looped forms keep
// __ldg (not measured with plain loads; the looped form's f64 chains spill with them). x may be y
// (in place): every element is read by the thread that writes it, before it writes it.
template <class S, int V, class P, bool kNc, class A>
__device__ __forceinline__ void rd_load_x(const S* p, A* out) {
  typedef typename ew_raw<sizeof(S) * V>::type R;
  rd_pack<S, V> u;
  u.raw = kNc ? __ldg(reinterpret_cast<const R*>(p)) : *reinterpret_cast<const R*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) out[j] = ew_traits<S>::to_op(P()(u.v[j]));
}
// The output's V elements at column i of row `row` through the epilogue Q with its K extra
// tensors (rd_extras(a); the split form passes them shifted to its chunk), stored at p.
template <class S, int V, class Q, int K, class A, class Args>
__device__ __forceinline__ void rd_store_out(const Args& a, long long row, long long i, S* p, const A* in) {
  rd_pack<S, V> e[K > 0 ? K : 1];
  const rd_extra* ex = rd_extras(a);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    e[k].raw = __ldg(reinterpret_cast<const typename ew_raw<sizeof(S) * V>::type*>(
        static_cast<const S*>(ex[k].p) + row * ex[k].s + i));
  }
  rd_pack<S, V> u;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    S xs[K + 1];
    xs[0] = ew_traits<S>::from_op(in[j]);
#pragma unroll
    for (int k = 0; k < K; ++k) xs[k + 1] = e[k].v[j];
    S ys[1];
    Q()(xs, ys);
    u.v[j] = ys[0];
  }
  *reinterpret_cast<typename ew_raw<sizeof(S) * V>::type*>(p) = u.raw;
}

// add_rms_norm's first step on V elements at offset i of the row: z = x + r rounded to S (as
// PyTorch's x + residual), written back into the residual; v = z.
template <class S, int V, class A>
__device__ __forceinline__ void rd_add_residual(S* r, A* v) {
  A rv[V];
  rd_load_plain<S, V>(r, rv);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const S z = ew_traits<S>::from_op(v[j] + rv[j]);
    v[j] = ew_traits<S>::to_op(z);
  }
  rd_store<S, V>(r, v);
}

// The output of V elements at offset i from their values v and the row's statistics: for softmax
// (a, b) = (max, sum), log_softmax (max, log(sum)), rms (-, rsqrt), layer_norm (mean, rsqrt).
template <int kOp, class S, int V, class Q, int K, class A, class Args>
__device__ __forceinline__ void rd_finish(const Args& a, long long row, long long i, A* v, A s0, A s1, S* y) {
  // The weight and bias as loaded (storage values), widened where used: 16-bit ones in half the
  // registers (layer_norm's block form on bf16 rows of 8192 held 55 registers with both widened).
  typedef typename ew_raw<sizeof(S) * V>::type R;
  rd_pack<S, V> w, b;
  if ((kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM || kOp == RD_LAYER_NORM) && a.w != 0) {
    w.raw = __ldg(reinterpret_cast<const R*>(static_cast<const S*>(a.w) + i));
  }
  if (kOp == RD_LAYER_NORM && a.b != 0) b.raw = __ldg(reinterpret_cast<const R*>(static_cast<const S*>(a.b) + i));
  A e[V];
  if (kOp == RD_SOFTMAX) rd_exp_vector<S, V>(v, s0, e);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    A o;
    if (kOp == RD_SOFTMAX) o = rd_div_by<S>(e[j], s1);
    if (kOp == RD_LOG_SOFTMAX) o = (v[j] - s0) - s1;
    if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
      o = v[j] * s1;
      if (a.w != 0) o = o * ew_traits<S>::to_op(w.v[j]);
    }
    if (kOp == RD_LAYER_NORM) {
      o = rd_layer_out(v[j] - s0, s1, a.w != 0, a.w != 0 ? ew_traits<S>::to_op(w.v[j]) : A(1), a.b != 0,
                       a.b != 0 ? ew_traits<S>::to_op(b.v[j]) : A(0));
    }
    v[j] = o;
  }
  rd_store_out<S, V, Q, K>(a, row, i, y + i, v);
}

// A thread's E elements of the row in rd_regs (kStore): opmath values (A v[E], RD_OPMATH); packed
// (RD_PACKED), the loaded 16-byte packs of 16-bit storage values (E / V of them: half the
// registers), widened where read; or parked (RD_PARKED), half of the opmath values in dynamic shared
// memory. Packed where a 1024-thread block holds 32 elements a thread of an unchained f16 / bf16
// softmax, log_softmax, rms_norm or add_rms_norm (rows of 16385-32768): 32 registers a thread, so
// two blocks share an SM (rd_regs_min_blocks). Every value such a row keeps is a storage value (x,
// or add_rms_norm's x + r rounded), which the packs hold exactly; softmax's exp(x - max), kept as an
// opmath value for the output, is computed again there from the same operands (the same bits).
// layer_norm is not packed: its write pass holds the weight's and the bias's packs too, and at 32
// registers it spilled 56 (f16) to 300 (bf16) bytes and ran 5 % slower.
enum { RD_OPMATH = 0, RD_PACKED = 1, RD_PARKED = 2, RD_PACKED_EACH = 3 };
// "Unchained" below: no epilogue, and no prologue or a light one, of scalar add, sub and mul steps
// (div by a scalar is a product): a float operation and a rounding each, or one 16-bit instruction
// where the constant is a storage value (ew_ops.cuh's ew_*_exact). The program of such a variant
// specializes rd_light for its rd_prologue (src/ops/reductions/variant.cpp's light(): f16 and bf16
// rows but add_rms_norm's and f16 rms_norm's, which ptxas spilled). A light prologue keeps no
// register past its load, so the variant takes the unchained layouts and bounds (the packs,
// rd_regs_min_blocks, the chunks' packs); its values are the prologue's storage values, which the
// packs hold exactly.
template <class P>
struct rd_light {
  enum { value = 0 };
};
template <>
struct rd_light<rd_no_prologue> {
  enum { value = 1 };
};
template <class P, class Q, int K>
struct rd_unchained {
  enum { value = 0 };
};
template <class P>
struct rd_unchained<P, rd_no_epilogue, 0> {
  enum { value = rd_light<P>::value };
};
template <int kOp, class S, int E, int T, class P, class Q, int K>
struct rd_packs {
  enum {
    value = sizeof(S) == 2 && E == 32 && T == 1024 && kOp != RD_LAYER_NORM && rd_unchained<P, Q, K>::value ? 1 : 0
  };
};
// Element j of a pack, widened: f16 by its conversion (ptxas reads either half of the 32-bit
// register); bf16 from the 32-bit word that holds it (the high half masked, the low one shifted), so
// no 16-bit value is extracted into a register of its own.
template <int V>
__device__ __forceinline__ float rd_widen(const rd_pack<ew_half, V>& u, int j) {
  return ew_traits<ew_half>::to_op(u.v[j]);
}
template <int V>
__device__ __forceinline__ float rd_widen(const rd_pack<ew_bf16, V>& u, int j) {
  const unsigned w = reinterpret_cast<const unsigned*>(&u.raw)[j / 2];
  return __uint_as_float((j & 1) ? (w & 0xffff0000u) : (w << 16));
}
// As rd_widen, widened again at each read (RD_PACKED_EACH): a bf16 element's mask or shift is an
// instruction the compiler may otherwise keep the result of for every pass that reads it (the
// cluster form's bf16 layer_norm, three passes over 64 elements a thread: 120 registers a thread,
// 73 this way; ptxas, sm_90). The same bits. (f16's conversion reads either half of a word in
// place: it is not kept so.)
template <int V>
__device__ __forceinline__ float rd_widen_each(const rd_pack<ew_half, V>& u, int j) {
  return rd_widen(u, j);
}
template <int V>
__device__ __forceinline__ float rd_widen_each(const rd_pack<ew_bf16, V>& u, int j) {
#ifdef __CUDA_ARCH__
  const unsigned w = reinterpret_cast<const unsigned*>(&u.raw)[j / 2];
  unsigned r;
  if (j & 1) {
    asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(r) : "r"(w));
  } else {
    asm volatile("shl.b32 %0, %1, 16;" : "=r"(r) : "r"(w));
  }
  return __uint_as_float(r);
#else
  return rd_widen(u, j);
#endif
}
// The max of m and a pack of 16-bit values (V even, sm_80 and later): the pack's words taken pairwise
// by max.{f16x2,bf16x2} (one instruction for two elements, no widening), then the result's two
// halves by rd_max. The same value as rd_max over the elements in order: a max of exact values, a
// NaN never taken (the packed max returns the other operand; the running max starts at -inf); only
// between -0 and +0 may it keep the other zero, which no output reads: x - max and exp(x - max) are
// the same for either, and log_softmax's (x - max) - log(sum) at x = ±0 has a sum of at least 2
// where both zeros are the row's max.
// The max of m and vector it of a row, element by element (rd_max, in order).
template <int V, class Row, class A>
__device__ __forceinline__ A rd_max_each(const Row& v, int it, A m) {
#pragma unroll
  for (int j = 0; j < V; ++j) m = rd_max()(m, v(it, j));
  return m;
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <class S>
__device__ __forceinline__ unsigned rd_max2(unsigned a, unsigned b);
template <>
__device__ __forceinline__ unsigned rd_max2<ew_bf16>(unsigned a, unsigned b) {
  unsigned r;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <>
__device__ __forceinline__ unsigned rd_max2<ew_half>(unsigned a, unsigned b) {
  unsigned r;
  asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <class S, int V>
__device__ __forceinline__ float rd_max_packed(const rd_pack<S, V>& u, float m) {
  const unsigned* w = reinterpret_cast<const unsigned*>(&u.raw);
  unsigned p = w[0];
#pragma unroll
  for (int k = 1; k < V / 2; ++k) p = rd_max2<S>(p, w[k]);
  rd_pack<S, 2> two;
  two.raw = p;
  m = rd_max()(m, ew_traits<S>::to_op(two.v[0]));
  return rd_max()(m, ew_traits<S>::to_op(two.v[1]));
}
#endif
template <class S, int V, int E, int kStore, int T>
struct rd_row {
  typedef typename ew_traits<S>::op A;
  A v[E];
  __device__ __forceinline__ A operator()(int it, int j) const { return v[it * V + j]; }
  __device__ __forceinline__ A vmax(int it, A m) const { return rd_max_each<V>(*this, it, m); }
  __device__ __forceinline__ A* at(int it) { return v + it * V; }
  __device__ __forceinline__ void keep(int it, int j, A value) { v[it * V + j] = value; }
  template <class P, int kOp, bool kNc = false>
  __device__ __forceinline__ void load(int it, const S* x, S* r) {
    rd_load_x<S, V, P, kNc>(x, v + it * V);
    if (kOp == RD_ADD_RMS_NORM) rd_add_residual<S, V>(r, v + it * V);
  }
  __device__ __forceinline__ void zero(int it) {
#pragma unroll
    for (int j = 0; j < V; ++j) v[it * V + j] = A(0);
  }
};
template <class S, int V, int E, int T>
struct rd_row<S, V, E, RD_PACKED, T> {
  typedef typename ew_traits<S>::op A;
  typedef typename ew_raw<sizeof(S) * V>::type R;
  rd_pack<S, V> u[E / V];
  A w[V];  // one pack widened, for the write pass
  __device__ __forceinline__ A operator()(int it, int j) const { return rd_widen(u[it], j); }
  // The max of m and vector it: on sm_80 and later max.{f16x2,bf16x2} over the pack's words, then
  // its two halves (rd_max_packed).
  __device__ __forceinline__ A vmax(int it, A m) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (V % 2 == 0) return rd_max_packed<S, V>(u[it], m);
#endif
    return rd_max_each<V>(*this, it, m);
  }
  __device__ __forceinline__ A* at(int it) {
#pragma unroll
    for (int j = 0; j < V; ++j) w[j] = rd_widen(u[it], j);
    return w;
  }
  __device__ __forceinline__ void keep(int, int, A) {}
  // x through the prologue P as storage values (what rd_load_x widens), kNc: through __ldg.
  template <class P, int kOp, bool kNc = false>
  __device__ __forceinline__ void load(int it, const S* x, S* r) {
    u[it].raw = kNc ? __ldg(reinterpret_cast<const R*>(x)) : *reinterpret_cast<const R*>(x);
#pragma unroll
    for (int j = 0; j < V; ++j) u[it].v[j] = P()(u[it].v[j]);
    if (kOp == RD_ADD_RMS_NORM) {  // z = x + r rounded to S, written back to the residual and kept
      rd_pack<S, V> rv;
      rv.raw = *reinterpret_cast<const R*>(r);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        u[it].v[j] = ew_traits<S>::from_op(ew_traits<S>::to_op(u[it].v[j]) + ew_traits<S>::to_op(rv.v[j]));
      }
      *reinterpret_cast<R*>(r) = u[it].raw;
    }
  }
  __device__ __forceinline__ void zero(int it) { u[it].raw = R(); }
};
template <class S, int V, int E, int T>
struct rd_row<S, V, E, RD_PACKED_EACH, T> : rd_row<S, V, E, RD_PACKED, T> {
  typedef typename ew_traits<S>::op A;
  __device__ __forceinline__ A operator()(int it, int j) const { return rd_widen_each(this->u[it], j); }
  __device__ __forceinline__ A* at(int it) {
#pragma unroll
    for (int j = 0; j < V; ++j) this->w[j] = rd_widen_each(this->u[it], j);
    return this->w;
  }
};

// Parked (f32): where a 1024-thread block holds 32 elements a thread of an unchained softmax,
// log_softmax or rms_norm (rows of 16385-32768), the thread's last 16 stay in dynamic shared memory
// (64 KiB a block: rd_parked_bytes, which the host's plan gives as the launch's shared bytes), so
// the rest fit 32 registers and two blocks share an SM. Vector k of thread t is at (k * T + t) * V:
// 16-byte accesses without bank conflicts. The same values, so the same bits. H200, 32 Mi elements:
// softmax x 32768 0.0968 -> 0.0817 ms (70 -> 83 % of a copy), log_softmax 0.0951 -> 0.0784, rms_norm
// 0.0796 -> 0.0754-0.0765; add_rms_norm parked ran 16 % slower and layer_norm level, so they hold theirs.
// Parking takes 64 KiB of shared memory a block and pays where two blocks share a multiprocessor:
// the targets with 164-228 KiB a multiprocessor (sm_80, sm_87, sm_90, sm_100-sm_110); elsewhere
// (sm_75: 64 KiB a block in all; sm_86, sm_89, sm_120: 100 KiB a multiprocessor) the row keeps its
// registers. src/ops/reductions/plan.cpp's row_shared_bytes gives the launch's bytes by the same
// list (ReductionsEmulated.ThousandThreadBlocksFollowTheGenericKernel compares the two).
template <int kArch>
struct rd_arch_parks {
  enum { value = kArch == 80 || kArch == 87 || (kArch >= 90 && kArch < 120) ? 1 : 0 };
};
#ifdef __CUDA_ARCH__
#define RD_TARGET_ARCH (__CUDA_ARCH__ / 10)
#else
#define RD_TARGET_ARCH 90  // the host: the emulated kernels' tests, nvcc's host pass
#endif
template <int kOp, class S, int E, int T, class P, class Q, int K>
struct rd_parks {
  enum {
    value = rd_arch_parks<RD_TARGET_ARCH>::value && sizeof(S) == 4 && E == 32 && T == 1024 &&
                    (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX || kOp == RD_RMS_NORM) && rd_unchained<P, Q, K>::value
                ? 1
                : 0
  };
};
// The dynamic shared memory of a parked block, in bytes (0: none).
template <int kOp, class S, int E, int T, class P, class Q, int K>
struct rd_parked_bytes {
  enum { value = rd_parks<kOp, S, E, T, P, Q, K>::value ? T * (E / 2) * static_cast<int>(sizeof(S)) : 0 };
};
#ifndef CUINLINE_RD_DYNAMIC_SMEM
__device__ __forceinline__ float* rd_dynamic_smem() {
  extern __shared__ __align__(16) float rd_smem[];
  return rd_smem;
}
#endif
template <class S, int V, int E, int T>
struct rd_row<S, V, E, RD_PARKED, T> {
  typedef typename ew_traits<S>::op A;
  typedef typename ew_raw<sizeof(A) * V>::type RA;
  union Vec {
    RA raw;
    A a[V];
  };
  enum { kHeld = E / V / 2 };  // vectors in registers; the rest parked
  A v[kHeld * V];
  A w[V];  // a parked vector, for the write pass
  A* park;
  __device__ __forceinline__ rd_row() : park(reinterpret_cast<A*>(rd_dynamic_smem()) + threadIdx.x * V) {}
  __device__ __forceinline__ A* slot(int it) const { return park + (it - kHeld) * T * V; }
  __device__ __forceinline__ A operator()(int it, int j) const { return it < kHeld ? v[it * V + j] : slot(it)[j]; }
  __device__ __forceinline__ A vmax(int it, A m) const { return rd_max_each<V>(*this, it, m); }
  __device__ __forceinline__ A* at(int it) {
    if (it < kHeld) return v + it * V;
    Vec u;
    u.raw = *reinterpret_cast<const RA*>(slot(it));
#pragma unroll
    for (int j = 0; j < V; ++j) w[j] = u.a[j];
    return w;
  }
  __device__ __forceinline__ void keep(int it, int j, A value) {
    if (it < kHeld) {
      v[it * V + j] = value;
    } else {
      slot(it)[j] = value;
    }
  }
  template <class P, int kOp>
  __device__ __forceinline__ void load(int it, const S* x, S* r) {
    A* d = it < kHeld ? v + it * V : w;
    rd_load_x<S, V, P, false>(x, d);
    if (kOp == RD_ADD_RMS_NORM) rd_add_residual<S, V>(r, d);
    if (it >= kHeld) {
      Vec u;
#pragma unroll
      for (int j = 0; j < V; ++j) u.a[j] = w[j];
      *reinterpret_cast<RA*>(slot(it)) = u.raw;
    }
  }
  __device__ __forceinline__ void zero(int it) {
#pragma unroll
    for (int j = 0; j < V; ++j) keep(it, j, A(0));
  }
};

// The blocks of 1024 threads an SM that rd_regs asks ptxas for: two (at most 32 registers a thread)
// where a thread holds 16 elements (f32, f16, bf16 rows of 8193-16384) and the variant has no chains, so that one row's
// reductions overlap another's loads and stores; else no bound. Measured on an H200 (rows of 16384, 32 Mi
// elements, L2 flushed): f32 softmax 0.0853 -> 0.0732 ms (52 -> 32 registers), bf16 layer_norm 0.0602
// -> 0.0442 (44 -> 32, 16 bytes spilled); f32 layer_norm (38 -> 32, 28 bytes spilled), rms_norm
// and add_rms_norm unchanged; the same bits. Fewer threads a block keep their bound: at 512 and
// below the same rule ran f32 layer_norm and add_rms_norm 3-7 % slower. (f64's 8 elements and the
// chained variants: not measured, so not bounded.) 0 leaves the bound out (no .minnctapersm), as
// before: a stated 1 changes ptxas's allocation of other kernels.
template <int kOp, class S, int T, int E, class P, class Q, int K>
struct rd_regs_min_blocks {
  enum {
    value =
        T == 1024 && rd_unchained<P, Q, K>::value &&
                (E == 16 || rd_packs<kOp, S, E, T, P, Q, K>::value || rd_parks<kOp, S, E, T, P, Q, K>::value)
            ? 2
            : 0
  };
};

// One row of rd_regs (below), its E elements a thread in v: the statistics, then the outputs; a
// group whose row is past the last (live false) takes part in the shuffles and stores nothing.
template <int kOp, class S, int V, int E, int T, class Q, int K, int kStore, class Args, class A>
__device__ __forceinline__ void rd_regs_row(const Args& a, rd_row<S, V, E, kStore, T>& v, long long row,
                                            bool live, S* y, int t, int n, A* sh, A* sh2) {
  enum { kIters = E / V, kPacked = kStore == RD_PACKED };
  A s0 = A(0), s1 = A(0);
  if (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX) {
    A m = rd_neg_inf(A(0));
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if ((it * T + t) * V < n) m = v.vmax(it, m);
    }
    m = rd_reduce<T>(m, rd_max(), rd_neg_inf(A(0)), sh);
    A s = A(0);
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if ((it * T + t) * V < n) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A e = rd_exp<S>(v(it, j) - m);
          if (kOp == RD_SOFTMAX) v.keep(it, j, e);  // kept for the output: one exp an element
          s += e;
        }
      }
    }
    s = rd_reduce<T>(s, rd_add(), A(0), sh);
    s0 = m;
    s1 = kOp == RD_SOFTMAX ? rd_divisor<S>(s) : rd_log(s);
  } else if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
    A ss = A(0);
#pragma unroll
    for (int e = 0; e < E; ++e) ss += v(e / V, e % V) * v(e / V, e % V);  // the padding is 0
    ss = rd_reduce<T>(ss, rd_add(), A(0), sh);
    s1 = rd_rms_rstd(ss, n, a.eps);
  } else {
    const A inv = A(1) / static_cast<A>(n);
    A sum = A(0);
#pragma unroll
    for (int e = 0; e < E; ++e) sum += v(e / V, e % V);
    const A part = sum;
    const A mean = rd_mul_rn(rd_reduce<T>(sum, rd_add(), A(0), sh), inv);
    A dev = A(0), sq = A(0);
    int held = 0;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if ((it * T + t) * V < n) {
        held += V;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A d = v(it, j) - mean;
          if (!rd_thread_dev<S>::value) dev += d;
          sq += d * d;
        }
      }
    }
    if (rd_thread_dev<S>::value) dev = rd_fma_rn(-static_cast<A>(held), mean, part);
    rd_sum2_at(dev, sq, sh, sh2, T, t, rd_block_bar());
    A m2;
    rd_corrected(mean, dev, sq, inv, s0, m2);
    s1 = rd_rsqrt(rd_mul_rn(m2, inv) + static_cast<A>(a.eps));
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = (it * T + t) * V;
    if (!live || i >= n) continue;
    A* o = v.at(it);
    if (kOp == RD_SOFTMAX) {  // o holds exp(x - max) (packed: x, and the exp is taken again)
      if (kPacked) rd_exp_vector<S, V>(o, s0, o);  // in place: each o[j] is read before it is written
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = rd_div_by<S>(o[j], s1);
      rd_store_out<S, V, Q, K>(a, row, i, y + i, o);
    } else {
      rd_finish<kOp, S, V, Q, K>(a, row, i, o, s0, s1, y);
    }
  }
}

// The row in registers: E elements a thread, in E / V accesses of V; element (it * T + t) * V + j.
// T <= 32 (the warp form): lane threadIdx.x % T of group g = threadIdx.x / T takes rows
// (blockIdx.x * R + r) * (128 / T) + g, r = 0 .. R - 1 (R rows a group: every row's loads issued
// before the first row's reductions; each row's arithmetic is the same as with R = 1, so are its bits).
template <int kOp, class S, int V, int E, int T, class P = rd_no_prologue, class Q = rd_no_epilogue,
          int K = 0, int R = 1>
__global__ void __launch_bounds__(T <= 32 ? RD_WARP_BLOCK : T,
                                  (rd_regs_min_blocks<kOp, S, T, E, P, Q, K>::value))
    rd_regs(typename rd_args_of<K>::type a) {
  typedef typename ew_traits<S>::op A;
  enum { kIters = E / V, kRowsPerBlock = T <= 32 ? RD_WARP_BLOCK / T : 1 };
  __shared__ A sh[32], sh2[32];
  const int t = T <= 32 ? (threadIdx.x & (T - 1)) : threadIdx.x;
  const long long first =
      T <= 32 ? static_cast<long long>(blockIdx.x) * R * kRowsPerBlock + threadIdx.x / T : blockIdx.x;
  if (T == 32 && first >= a.rows) return;  // a whole warp: the warp form has no block barrier
  enum {
    kPacked = rd_packs<kOp, S, E, T, P, Q, K>::value,
    kStore = kPacked                                  ? RD_PACKED
             : rd_parks<kOp, S, E, T, P, Q, K>::value ? RD_PARKED
                                                      : RD_OPMATH
  };
  // A group of fewer lanes past the last row shares its warp with groups that shuffle over the whole
  // warp's mask, so it stays to the end: on the last row's pointers, loading nothing (it would race
  // with add_rms_norm's write-back of that row's residual) and storing nothing. (Constant for T >= 32
  // with one row a group; a whole warp of several stops at its first row past the last.)
  if (R == 1) {
    const bool live = T >= 32 || first < a.rows;
    const long long row = live ? first : a.rows - 1;
    const int n = static_cast<int>(a.n);
    const S* x = static_cast<const S*>(a.x) + row * a.sx;
    S* y = static_cast<S*>(a.y) + row * a.sy;
    rd_row<S, V, E, kStore, T> v;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int i = (it * T + t) * V;
      if (live && i < n) {  // n is a multiple of V when V > 1
        v.template load<P, kOp>(it, x + i,
                                kOp == RD_ADD_RMS_NORM ? static_cast<S*>(a.r) + row * a.sr + i : 0);
      } else {
        v.zero(it);
      }
    }
    rd_regs_row<kOp, S, V, E, T, Q, K>(a, v, row, live, y, t, n, sh, sh2);
    return;
  }
  const int n = static_cast<int>(a.n);
  rd_row<S, V, E, kStore, T> rv[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const long long mine = first + static_cast<long long>(r) * kRowsPerBlock;
    const bool live = mine < a.rows;
    const long long row = live ? mine : a.rows - 1;
    const S* x = static_cast<const S*>(a.x) + row * a.sx;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int i = (it * T + t) * V;
      if (live && i < n) {
        rv[r].template load<P, kOp>(it, x + i,
                                    kOp == RD_ADD_RMS_NORM ? static_cast<S*>(a.r) + row * a.sr + i : 0);
      } else {
        rv[r].zero(it);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const long long mine = first + static_cast<long long>(r) * kRowsPerBlock;
    const bool live = mine < a.rows;
    if (T == 32 && !live) break;  // (the rows after it are past the last too)
    const long long row = live ? mine : a.rows - 1;
    rd_regs_row<kOp, S, V, E, T, Q, K>(a, rv[r], row, live, static_cast<S*>(a.y) + row * a.sy, t, n, sh, sh2);
  }
}

// A chunk of the split and cluster forms: its count (<= T * E) elements of row `row` from column
// `base` in v (zero past count; x through the prologue, add_rms_norm's x + r written back to the
// residual), kNc: x through the non-coherent path. A chunk's values are held as the storage type's
// packs where it is 16 bits wide and unchained (rd_chunk_store: 64 elements a thread in 32
// registers, widened where read), else as opmath values: the same values either way. (Packed, a
// prologue's call of a division spilled 4 bytes: f16 layer_norm "div(2)", ptxas sm_90.)
template <int kOp, class S, class P, class Q, int K>
struct rd_chunk_store {
  enum {
    value = sizeof(S) == 2 && rd_unchained<P, Q, K>::value ? (kOp == RD_LAYER_NORM ? RD_PACKED_EACH : RD_PACKED)
                                                           : RD_OPMATH
  };
};
template <int kOp, class S, int V, int E, int T, class P, bool kNc, class Row>
__device__ __forceinline__ void rd_chunk_load(const rd_args& a, long long row, long long base, int count,
                                              int t, Row& v) {
  enum { kIters = E / V };
  const S* x = static_cast<const S*>(a.x) + row * a.sx + base;
  S* r = kOp == RD_ADD_RMS_NORM ? static_cast<S*>(a.r) + row * a.sr + base : 0;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = (it * T + t) * V;
    if (i < count) {  // count is a multiple of V when V > 1
      v.template load<P, kOp, kNc>(it, x + i, kOp == RD_ADD_RMS_NORM ? r + i : 0);
    } else {
      v.zero(it);
    }
  }
}

// A chunk's statistics over the T threads t that hold it (barrier `bar`; sh and sh2 32 values
// each): softmax's (max, sum of exp(x - max)) — with a -inf max the -inf elements count 1 each, as
// in the online softmax —, the sum of squares (st1 unset), or layer_norm's (mean, squared
// deviations from it), both by the corrected two-pass (rd_corrected). Every thread gets them.
template <int kOp, class S, int V, int E, int T, class A, class Row, class B>
__device__ __forceinline__ void rd_chunk_stats(Row& v, int count, int t, A* sh, A* sh2, B bar, A& st0,
                                               A& st1) {
  enum { kIters = E / V };
  if (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX) {
    const A ninf = rd_neg_inf(A(0));
    A m = ninf;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if ((it * T + t) * V < count) m = v.vmax(it, m);
    }
    m = rd_reduce_at(m, rd_max(), ninf, sh, T, t, bar);
    A s = A(0);
    if (m == ninf) {
      // The group's max: every element is -inf (adds 1) or NaN (NaN - max is NaN, so is its exp;
      // the sum's addition makes either the same NaN). No exp to take.
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        if ((it * T + t) * V < count) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const A e = v(it, j);
            s += e == ninf ? A(1) : e - m;
          }
        }
      }
    } else {  // the same sums, without a test an element
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        if ((it * T + t) * V < count) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const A e = rd_exp_term<S>(v(it, j) - m);
            if (kOp == RD_SOFTMAX && rd_chunk_exp<S>::value) v.keep(it, j, e);  // rd_chunk_scale
            s += e;
          }
        }
      }
    }
    st0 = m;
    st1 = rd_reduce_at(s, rd_add(), A(0), sh, T, t, bar);
  } else if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
    A ss = A(0);
#pragma unroll
    for (int e = 0; e < E; ++e) ss += v(e / V, e % V) * v(e / V, e % V);  // the padding is 0
    st0 = rd_reduce_at(ss, rd_add(), A(0), sh, T, t, bar);
  } else {
    A sum = A(0);
#pragma unroll
    for (int e = 0; e < E; ++e) sum += v(e / V, e % V);
    const A inv = A(1) / static_cast<A>(count > 0 ? count : 1);
    const A part = sum;
    const A mean = rd_mul_rn(rd_reduce_at(sum, rd_add(), A(0), sh, T, t, bar), inv);
    A dev = A(0), sq = A(0);
    int held = 0;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if ((it * T + t) * V < count) {
        held += V;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A d = v(it, j) - mean;
          if (!rd_thread_dev<S>::value) dev += d;
          sq += d * d;
        }
      }
    }
    if (rd_thread_dev<S>::value) dev = rd_fma_rn(-static_cast<A>(held), mean, part);
    rd_sum2_at(dev, sq, sh, sh2, T, t, bar);
    rd_corrected(mean, dev, sq, inv, st0, st1);
  }
}

// A row's statistics from its `splits` chunks' (stat(k, 0), stat(k, 1)), merged by T threads t
// (barrier `bar`; sh and sh2 32 values each): the online softmax's merge; sums; layer_norm's mean
// from the chunks' means, then its squared deviations as the sum over chunks of M2_i + n_i *
// (mean_i - mean)^2. (s0, s1) as rd_finish takes them, but softmax's s1: the row's sum, which
// rd_chunk_softmax turns into the divisor.
template <int kOp, class S, int T, class A, class St, class B>
__device__ __forceinline__ void rd_chunks_merge(const rd_args& a, long long splits, St stat, int t, A* sh,
                                                A* sh2, B bar, A& s0, A& s1) {
  if (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX) {
    A m = rd_neg_inf(A(0)), s = A(0);
    for (long long k = t; k < splits; k += T) rd_online_merge<S>(m, s, stat(k, 0), stat(k, 1));
    rd_online_reduce_at<S>(m, s, sh, sh2, T, t, bar);
    s0 = m;
    s1 = kOp == RD_SOFTMAX ? s : rd_log(s);  // softmax: the sum (rd_chunk_softmax takes it)
  } else if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
    A ss = A(0);
    for (long long k = t; k < splits; k += T) ss += stat(k, 0);
    ss = rd_reduce_at(ss, rd_add(), A(0), sh, T, t, bar);
    s1 = rd_rms_rstd(ss, a.n, a.eps);
  } else {
    // The mean as chunk 0's plus the chunks' weighted offsets from it (exact where every chunk's
    // mean is the same, as on a constant row), then Chan's merge of the squared deviations.
    const A m0 = stat(0, 0);
    A off = A(0);
    for (long long k = t; k < splits; k += T) {
      const long long lk = a.n - k * a.chunk;
      off = rd_fma_rn(static_cast<A>(lk < a.chunk ? lk : a.chunk), stat(k, 0) - m0, off);
    }
    const A inv = A(1) / static_cast<A>(a.n);
    const A mean = rd_add_rn(m0, rd_mul_rn(rd_reduce_at(off, rd_add(), A(0), sh, T, t, bar), inv));
    A m2 = A(0);
    for (long long k = t; k < splits; k += T) {
      const long long lk = a.n - k * a.chunk;
      const A nk = static_cast<A>(lk < a.chunk ? lk : a.chunk);
      const A d = stat(k, 0) - mean;
      m2 += stat(k, 1) + nk * d * d;
    }
    s0 = mean;
    s1 = rd_rsqrt(rd_mul_rn(rd_reduce_at(m2, rd_add(), A(0), sh, T, t, bar), inv) + static_cast<A>(a.eps));
  }
}

// The split form, first kernel: block b is chunk b % splits of row b / splits, its T * E elements
// in registers (the last chunk of a row may be shorter). Writes the chunk's statistics
// (rd_chunk_stats) to the workspace.
template <int kOp, class S, int V, int E, int T, class P = rd_no_prologue, class Q = rd_no_epilogue,
          int K = 0>
__global__ void __launch_bounds__(T) rd_split_stats(typename rd_args_of<K>::type a) {
  typedef typename ew_traits<S>::op A;
  __shared__ A sh[32], sh2[32];
  const long long splits = (a.n + a.chunk - 1) / a.chunk;
  const long long row = blockIdx.x / splits, base = (blockIdx.x % splits) * a.chunk;
  const long long left = a.n - base;
  const int count = left < a.chunk ? static_cast<int>(left) : static_cast<int>(a.chunk);
  const int t = threadIdx.x;
  rd_row<S, V, E, rd_chunk_store<kOp, S, P, Q, K>::value, T> v;
  rd_chunk_load<kOp, S, V, E, T, P, true>(a, row, base, count, t, v);
  A st0 = A(0), st1 = A(0);
  rd_chunk_stats<kOp, S, V, E, T>(v, count, t, sh, sh2, rd_block_bar(), st0, st1);
  A* ws = static_cast<A*>(a.ws) + 2 * static_cast<long long>(blockIdx.x);
  if (t == 0) {
    ws[0] = st0;
    if (kOp != RD_RMS_NORM && kOp != RD_ADD_RMS_NORM) ws[1] = st1;
  }
}

// The workspace's statistics of a row's chunks.
template <class A>
struct rd_ws_stat {
  const A* ws;
  __device__ __forceinline__ A operator()(long long k, int j) const { return ws[2 * k + j]; }
};

// Softmax's writing of a chunk whose statistics were (cm, ...) once the row's (m, s) are merged:
// `kept` where its outputs are exp(x - cm) * scale (rd_chunk_exp), and s made the divisor of
// exp(x - m) / s for the others.
template <int kOp, class S, class A>
__device__ __forceinline__ bool rd_chunk_softmax(A cm, A m, A& s, A& scale) {
  if (kOp != RD_SOFTMAX) return false;
  const bool kept = rd_chunk_exp<S>::value && cm != rd_neg_inf(A(0));
  scale = kept ? rd_chunk_scale(cm, m, s) : A(0);
  s = rd_divisor<S>(s);
  return kept;
}

// The split form, second kernel (same grid): the row's chunk statistics merged by the block
// (rd_chunks_merge), then this chunk written.
template <int kOp, class S, int V, int E, int T, class P = rd_no_prologue, class Q = rd_no_epilogue,
          int K = 0>
__global__ void __launch_bounds__(T) rd_split_write(typename rd_args_of<K>::type a) {
  typedef typename ew_traits<S>::op A;
  enum { kIters = E / V };
  __shared__ A sh[32], sh2[32];
  const long long splits = (a.n + a.chunk - 1) / a.chunk;
  const long long row = blockIdx.x / splits, base = (blockIdx.x % splits) * a.chunk;
  const long long left = a.n - base;
  const int count = left < a.chunk ? static_cast<int>(left) : static_cast<int>(a.chunk);
  const int t = threadIdx.x;
  const rd_ws_stat<A> stat = {static_cast<const A*>(a.ws) + 2 * row * splits};
  A s0 = A(0), s1 = A(0);
  rd_chunks_merge<kOp, S, T>(a, splits, stat, t, sh, sh2, rd_block_bar(), s0, s1);
  const A cm = kOp == RD_SOFTMAX ? stat(blockIdx.x % splits, 0) : A(0);
  A scale = A(0);
  const bool kept = rd_chunk_softmax<kOp, S>(cm, s0, s1, scale);
  const S* x = static_cast<const S*>(a.x) + row * a.sx + base;
  const S* r = kOp == RD_ADD_RMS_NORM ? static_cast<const S*>(a.r) + row * a.sr + base : 0;
  S* y = static_cast<S*>(a.y) + row * a.sy + base;
  A v[V];
  const typename rd_args_of<K>::type shifted = rd_at_chunk<S>(a, base);
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = (it * T + t) * V;
    if (i < count) {
      if (kOp == RD_ADD_RMS_NORM) {
        rd_load<S, V>(r + i, v);  // written by the first kernel: visible to this one
      } else {
        rd_load_x<S, V, P, true>(x + i, v);
      }
      if (kept) {
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = rd_exp_term<S>(v[j] - cm) * scale;
        rd_store_out<S, V, Q, K>(shifted, row, i, y + i, v);
      } else {
        rd_finish<kOp, S, V, Q, K>(shifted, row, i, v, s0, s1, y);
      }
    }
  }
}

// The cluster form (sm_90 and later): the split form's chunks of a row, each in the registers of
// a group of T threads, G groups a block, the row's ceil(splits / G) blocks one thread block
// cluster of C; the row is read once. Group g of block (cluster rank) q holds chunk q * G + g (none
// past the last: such a group still meets every barrier). Each group's chunk statistics
// (rd_chunk_stats, the split form's) go to its block's shared memory; after the cluster's barrier
// every group reads the row's from the cluster's blocks (distributed shared memory) and merges them
// as the split form's write kernel does (rd_chunks_merge, the same T threads' order), then writes
// its chunk from its registers. So its outputs are the split form's bit for bit, hence the generic
// kernel's (which runs the split form's two phases for it). A block leaves only once every block of
// its cluster has read its statistics (the second cluster barrier).
#ifndef CUINLINE_RD_CLUSTER_HOOKS
// A block's shared array (one a tag), its `rank`'s element i in the cluster, the cluster's barrier
// in two halves (arrive: release; wait: acquire).
template <class A, int N, int kTag>
__device__ __forceinline__ A* rd_cta_shared() {
  __shared__ A s[N];
  return s;
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RD_CLUSTER_DIMS(C) __cluster_dims__(C, 1, 1)
__device__ __forceinline__ unsigned rd_cluster_address(const void* p, int rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(r)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))), "r"(rank));
  return r;
}
template <int N>
__device__ __forceinline__ float rd_cluster_load(const float* local, int i, int rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];"
               : "=f"(v)
               : "r"(rd_cluster_address(local + i, rank))
               : "memory");
  return v;
}
template <int N>
__device__ __forceinline__ double rd_cluster_load(const double* local, int i, int rank) {
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];"
               : "=d"(v)
               : "r"(rd_cluster_address(local + i, rank))
               : "memory");
  return v;
}
__device__ __forceinline__ void rd_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
// An arrive that orders nothing but itself: this thread's reads of the other blocks' shared memory
// have returned (their values used) before it, which is all a block's exit waits for (CUTLASS's
// cluster_arrive_relaxed). Without release it has no fence (ptxas: no MEMBAR.ALL.GPU before it).
__device__ __forceinline__ void rd_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void rd_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
#else  // a target without clusters: the kernel compiles (a warmed spec names no target) and traps
#define RD_CLUSTER_DIMS(C)
#define RD_NO_CLUSTERS 1
template <int N, class A>
__device__ __forceinline__ A rd_cluster_load(const A*, int, int) {
  return A(0);
}
__device__ __forceinline__ void rd_cluster_arrive() {}
__device__ __forceinline__ void rd_cluster_arrive_relaxed() {}
__device__ __forceinline__ void rd_cluster_wait() {}
#endif
#endif  // CUINLINE_RD_CLUSTER_HOOKS

// The cluster's statistics of a row's chunks: chunk k's in block k / G's slots.
template <class A, int G>
struct rd_cluster_stat {
  const A* slots;
  __device__ __forceinline__ A operator()(long long k, int j) const {
    return rd_cluster_load<2 * G>(slots, static_cast<int>(2 * (k % G) + j), static_cast<int>(k / G));
  }
};

// The blocks a multiprocessor that rd_cluster asks ptxas for: four (64 registers a thread) for the
// unchained 16-bit layer_norm with one chunk a block, which held 64 (f16, 4 bytes spilled) and 73
// (bf16, widened at each read) registers unbounded, and no spill bounded (ptxas, sm_90); five (48
// registers, 4 bytes spilled) for the unchained bf16 add_rms_norm with one chunk a block: H200, rows
// of 40000 and 65536, 3297 / 3228 -> 3356 / 3436 GB/s. (bf16 rms_norm there within 2 % either way;
// f16 rms_norm, 28 bytes spilled, lost 3-6 %.) 0 (no bound) for the others, which hold at most 64
// of themselves (f32 layer_norm 79).
template <class S>
struct rd_is_bf16 {
  enum { value = 0 };
};
template <>
struct rd_is_bf16<ew_bf16> {
  enum { value = 1 };
};
template <int kOp, class S, int G, class P, class Q, int K>
struct rd_cluster_min_blocks {
  enum {
    value = sizeof(S) == 2 && G == 1 && rd_unchained<P, Q, K>::value
                ? (kOp == RD_LAYER_NORM                             ? 4
                   : kOp == RD_ADD_RMS_NORM && rd_is_bf16<S>::value ? 5
                                                                    : 0)
                : 0
  };
};

template <int kOp, class S, int V, int E, int T, int G, int C, class P = rd_no_prologue,
          class Q = rd_no_epilogue, int K = 0>
__global__ void RD_CLUSTER_DIMS(C) __launch_bounds__(T * G, (rd_cluster_min_blocks<kOp, S, G, P, Q, K>::value))
    rd_cluster(typename rd_args_of<K>::type a) {
  typedef typename ew_traits<S>::op A;
  enum { kIters = E / V };
#ifdef RD_NO_CLUSTERS
  __trap();  // never launched there (the host plans the split form)
#endif
  const int g = G == 1 ? 0 : static_cast<int>(threadIdx.x) / T;
  const int t = G == 1 ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x) % T;
  A* const sh = rd_cta_shared<A, 64 * G, 0>() + 64 * g;  // a group's two arrays of 32
  A* const slots = rd_cta_shared<A, 2 * G, 1>();
  const rd_group_bar bar = {1 + g, T};
  const long long splits = (a.n + a.chunk - 1) / a.chunk;
  const long long row = blockIdx.x / C, chunk = static_cast<long long>(blockIdx.x % C) * G + g;
  const long long base = chunk * a.chunk, left = a.n - base;
  const int count = left <= 0 ? 0 : left < a.chunk ? static_cast<int>(left) : static_cast<int>(a.chunk);
  rd_row<S, V, E, rd_chunk_store<kOp, S, P, Q, K>::value, T> v;
  rd_chunk_load<kOp, S, V, E, T, P, false>(a, row, base, count, t, v);
  A st0 = A(0), st1 = A(0);
  if (G == 1) {
    rd_chunk_stats<kOp, S, V, E, T>(v, count, t, sh, sh + 32, rd_block_bar(), st0, st1);
  } else {
    rd_chunk_stats<kOp, S, V, E, T>(v, count, t, sh, sh + 32, bar, st0, st1);
  }
  if (t == 0) {
    slots[2 * g] = st0;
    slots[2 * g + 1] = st1;
  }
  rd_cluster_arrive();
  rd_cluster_wait();
  const rd_cluster_stat<A, G> stat = {slots};
  A s0 = A(0), s1 = A(0);
  if (G == 1) {
    rd_chunks_merge<kOp, S, T>(a, splits, stat, t, sh, sh + 32, rd_block_bar(), s0, s1);
  } else {
    rd_chunks_merge<kOp, S, T>(a, splits, stat, t, sh, sh + 32, bar, s0, s1);
  }
  rd_cluster_arrive_relaxed();  // this block is done with the cluster's shared memory
  A scale = A(0);
  const bool kept = rd_chunk_softmax<kOp, S>(st0, s0, s1, scale);  // v holds exp(x - st0)
  S* y = static_cast<S*>(a.y) + row * a.sy + base;
  const typename rd_args_of<K>::type shifted = rd_at_chunk<S>(a, base);
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = (it * T + t) * V;
    if (i >= count) continue;
    if (kept) {
      A* o = v.at(it);
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = o[j] * scale;
      rd_store_out<S, V, Q, K>(shifted, row, i, y + i, o);
    } else {
      rd_finish<kOp, S, V, Q, K>(shifted, row, i, v.at(it), s0, s1, y);
    }
  }
  rd_cluster_wait();  // the others are done with this block's
}

// A row of any length: one block of T threads loops over it (each thread the same elements in
// every pass, so add_rms_norm's second pass reads back what this thread wrote in its first).
template <int kOp, class S, int V, int T, class P = rd_no_prologue, class Q = rd_no_epilogue, int K = 0>
__global__ void __launch_bounds__(T) rd_long(typename rd_args_of<K>::type a) {
  typedef typename ew_traits<S>::op A;
  __shared__ A sh[32], sh2[32];
  const long long row = blockIdx.x, n = a.n;
  const S* x = static_cast<const S*>(a.x) + row * a.sx;
  S* y = static_cast<S*>(a.y) + row * a.sy;
  S* r = kOp == RD_ADD_RMS_NORM ? static_cast<S*>(a.r) + row * a.sr : 0;
  const long long first = static_cast<long long>(threadIdx.x) * V, step = static_cast<long long>(T) * V;
  A v[V];
  A s0 = A(0), s1 = A(0);
  if (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX) {
    A m = rd_neg_inf(A(0)), s = A(0);
    for (long long i = first; i < n; i += step) {
      rd_load_x<S, V, P, true>(x + i, v);
#pragma unroll
      for (int j = 0; j < V; ++j) rd_online_add<S>(m, s, v[j]);
    }
    rd_online_reduce<S, T>(m, s, sh, sh2);
    s0 = m;
    s1 = kOp == RD_SOFTMAX ? rd_divisor<S>(s) : rd_log(s);
  } else if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
    A ss = A(0);
    for (long long i = first; i < n; i += step) {
      rd_load_x<S, V, P, true>(x + i, v);
      if (kOp == RD_ADD_RMS_NORM) rd_add_residual<S, V>(r + i, v);
#pragma unroll
      for (int j = 0; j < V; ++j) ss += v[j] * v[j];
    }
    ss = rd_reduce<T>(ss, rd_add(), A(0), sh);
    s1 = rd_rms_rstd(ss, n, a.eps);
  } else {
    A sum = A(0);
    for (long long i = first; i < n; i += step) {
      rd_load_x<S, V, P, true>(x + i, v);
#pragma unroll
      for (int j = 0; j < V; ++j) sum += v[j];
    }
    const A inv = A(1) / static_cast<A>(n);
    const A part = sum;
    const A mean = rd_mul_rn(rd_reduce<T>(sum, rd_add(), A(0), sh), inv);
    A dev = A(0), sq = A(0);
    long long held = 0;
    for (long long i = first; i < n; i += step) {
      rd_load_x<S, V, P, true>(x + i, v);
      held += V;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A d = v[j] - mean;
        if (!rd_thread_dev<S>::value) dev += d;
        sq += d * d;
      }
    }
    // (As the generic kernel's whole rows, whose bits these are.)
    if (rd_thread_dev<S>::value) dev = rd_fma_rn(-static_cast<A>(held), mean, part);
    rd_sum2_n(dev, sq, sh, sh2, T);
    A m2;
    rd_corrected(mean, dev, sq, inv, s0, m2);
    s1 = rd_rsqrt(rd_mul_rn(m2, inv) + static_cast<A>(a.eps));
  }
  for (long long i = first; i < n; i += step) {
    if (kOp == RD_ADD_RMS_NORM) {
      rd_load_plain<S, V>(r + i, v);
    } else {
      rd_load_x<S, V, P, true>(x + i, v);
    }
    rd_finish<kOp, S, V, Q, K>(a, row, i, v, s0, s1, y);
  }
}

#endif  // CUINLINE_REDUCTIONS_CUH

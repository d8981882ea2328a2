// reductions_generic.cuh — the generic row-reduction kernels (docs/jit.md): one kernel per op and
// storage type, with the row's split (lanes a row, elements an access, accesses a lane) and the
// prologue and epilogue chains as run-time data, so that a never-seen variant runs at once while
// its specialized kernel (reductions.cuh) compiles.
//
// rd_generic_body<S>(a, g, pro, epi), the body of one __global__ kernel per dtype, the op among the
// run-time data (src/ops/reductions/rd_generic.cu): lane t of a row's g.threads lanes takes the elements
// (it * T + t) * V + j, it < g.iters, j < V, in that order — the order in which the specialized
// warp and block forms (rd_regs) hold and sum them, with the same reductions (xor shuffles within a
// warp, then one value a warp through shared memory) and formulas. T <= 32: 128 / T rows a block of
// 128 threads (RD_WARP_BLOCK); T >= 64: one block of T threads a row. Rows the specialized kernels
// split into chunks (rd_split_stats, then rd_split_write over a workspace) take two launches here
// too, phases 1 and 2, with the same chunks, order and merge; rows they loop over (rd_long: no
// workspace could be had) run whole here, on 1024 lanes with as many accesses a lane as the row
// needs. Instead of holding the row in registers, every pass reads it again (the statistics'
// passes, then the write pass): the kernel needs no per-variant register array, and a lane reads
// back only elements it reads or writes itself (x may be y; add_rms_norm's residual is written in
// the first pass and read in the later ones by the same lane).
//
// The chains run through the elementwise generic kernels' step interpreter (ew_generic_steps.cuh)
// on one value at a time: the prologue on each element of x as it is loaded (the specialized
// kernel's P), the epilogue on each output with the K extra tensors' elements at the same place
// (its Q). The arithmetic is the specialized kernels' (rd_exp, rd_div, the same expressions), so
// the results agree with theirs within rounding: where NVVM contracts a multiply and an add into
// one FMA depends on the code around it, which differs.
#ifndef CUINLINE_REDUCTIONS_GENERIC_CUH
#define CUINLINE_REDUCTIONS_GENERIC_CUH

#include "ew_generic_steps.cuh"
#include "reductions.cuh"

// A chain as run-time data (src/ops/reductions/generic.hpp's GenericRowChain): its lowered steps.
struct rdg_chain {
  int steps;
  int pad;
  ewg_step step[EWG_MAX_STEPS];
};

// The row's split: T lanes a row, V elements an access (V == 16 / sizeof(S): one 16-byte access;
// else V single loads), iters accesses a lane; phase 0: whole rows, 1 and 2: the split form's
// chunk statistics to a.ws, then the chunks merged and written (two launches), 3: whole rows as
// the looped form (rd_long) takes them, softmax's statistics by its online softmax.
struct rdg_shape {
  int threads;
  int vector;
  int iters;
  int phase;
  int op;  // RD_SOFTMAX .. RD_LAYER_NORM
};

// The most elements of one access (16 bytes).
template <class S>
struct rdg_widest {
  enum { value = 16 / sizeof(S) };
};

// Operand `k` of a chain at column i of `row`: 0 is the value the chain started from, 1..K the
// epilogue's extra tensors (a prologue has no tensor operand).
template <class S>
__device__ __forceinline__ S rdg_operand(const rd_args_e<7>& a, int k, long long row, long long i, S first) {
  if (k == 0) return first;
  return static_cast<const S*>(a.e[k - 1].p)[row * a.e[k - 1].s + i];
}

// A chain on one storage value: the prologue on an element of x as loaded, the epilogue on an output
// rounded to S (with its tensors' elements at column i of `row`). One function a dtype for both.
template <class S>
__device__ __noinline__ S rdg_chain_value(const rd_args_e<7>& a, const rdg_chain& p, long long row, long long i,
                                          S first) {
  S y[1] = {first};
  for (int s = 0; s < p.steps; ++s) {
    const ewg_step& st = p.step[s];
    const ewg_opmath<S> k(st);
    S o[1] = {first}, c[1] = {first};
    if (st.fn >= EWG_ADD_T && st.fn <= EWG_WHERE_T) o[0] = rdg_operand<S>(a, st.operand, row, i, first);
    if (st.fn == EWG_WHERE_T || st.fn == EWG_WHERE_S) c[0] = rdg_operand<S>(a, st.cond, row, i, first);
    ewg_step_values<S, 1, true>(st, k, y, o, c);
  }
  return y[0];
}

// The V storage values at p: one 16-byte access where V is the widest, else V single loads. Plain
// loads (p may be written by this lane: x == y, the residual).
template <class S>
__device__ __forceinline__ void rdg_load(const S* p, int V, S (&s)[rdg_widest<S>::value]) {
  enum { W = rdg_widest<S>::value };
  if (V == W) {
    rd_pack<S, W> u;
    u.raw = *reinterpret_cast<const typename ew_raw<sizeof(S) * W>::type*>(p);
#pragma unroll
    for (int j = 0; j < W; ++j) s[j] = u.v[j];
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if (j < V) s[j] = p[j];
    }
  }
}
template <class S>
__device__ __forceinline__ void rdg_store(S* p, int V, const S (&s)[rdg_widest<S>::value]) {
  enum { W = rdg_widest<S>::value };
  if (V == W) {
    rd_pack<S, W> u;
#pragma unroll
    for (int j = 0; j < W; ++j) u.v[j] = s[j];
    *reinterpret_cast<typename ew_raw<sizeof(S) * W>::type*>(p) = u.raw;
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if (j < V) p[j] = s[j];
    }
  }
}

// The access at i (of `count` elements from x) as opmath values (rd_regs's v): x through the
// prologue and, for add_rms_norm, plus the residual rounded to S (written back in the first pass
// only; the later passes read that back); zeros where the lane has no row or i is past the end.
template <class S>
__device__ __forceinline__ void rdg_values(int kOp, const rd_args_e<7>& a, const rdg_chain& pro, const S* x, S* r, bool live,
                                           long long i, long long count, int V, bool first_pass,
                                           typename ew_traits<S>::op (&v)[rdg_widest<S>::value]) {
  typedef typename ew_traits<S>::op A;
  enum { W = rdg_widest<S>::value };
  if (!live || i >= count) {
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = A(0);
    return;
  }
  S s[W];
  if (kOp == RD_ADD_RMS_NORM && !first_pass) {
    rdg_load<S>(r + i, V, s);  // z = x + r, written by this lane in the first pass
  } else {
    rdg_load<S>(x + i, V, s);
    if (pro.steps > 0) {
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (j < V) s[j] = rdg_chain_value<S>(a, pro, 0, 0, s[j]);
      }
    }
    if (kOp == RD_ADD_RMS_NORM) {
      S rs[W];
      rdg_load<S>(r + i, V, rs);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (j < V) s[j] = ew_traits<S>::from_op(ew_traits<S>::to_op(s[j]) + ew_traits<S>::to_op(rs[j]));
      }
      if (first_pass) rdg_store<S>(r + i, V, s);
    }
  }
#pragma unroll
  for (int j = 0; j < W; ++j) v[j] = j < V ? ew_traits<S>::to_op(s[j]) : A(0);
}

template <class S>
__device__ __forceinline__ void rd_generic_body(const rd_args_e<7>& a, const rdg_shape& g, const rdg_chain& pro,
                                                const rdg_chain& epi) {
  const int kOp = g.op;
  typedef typename ew_traits<S>::op A;
  enum { W = rdg_widest<S>::value };
  __shared__ A sh[32], sh2[32];
  const int T = g.threads, V = g.vector, iters = g.iters;
  const int t = T <= 32 ? (threadIdx.x & (T - 1)) : threadIdx.x;
  const long long n = a.n;
  // The whole row (phase 0: the warp form's rows of T lanes, or a block a row), or one chunk of it
  // (phases 1 and 2: chunk blockIdx.x % splits of row blockIdx.x / splits, as rd_split_stats and
  // rd_split_write take them).
  long long row, base = 0, count = n;
  bool live = true;
  if (g.phase == 0 || g.phase == 3) {
    const long long mine =
        T <= 32 ? static_cast<long long>(blockIdx.x) * (RD_WARP_BLOCK / T) + threadIdx.x / T : blockIdx.x;
    if (T == 32 && mine >= a.rows) return;  // a whole warp: no block barrier in the warp form
    // A group of fewer lanes past the last row shuffles with the rest of its warp, loading and
    // storing nothing (rd_regs).
    live = T >= 32 || mine < a.rows;
    row = live ? mine : a.rows - 1;
  } else {
    const long long splits = (n + a.chunk - 1) / a.chunk;
    row = blockIdx.x / splits;
    base = (blockIdx.x % splits) * a.chunk;
    count = n - base < a.chunk ? n - base : a.chunk;
  }
  const S* x = static_cast<const S*>(a.x) + row * a.sx + base;
  S* y = static_cast<S*>(a.y) + row * a.sy + base;
  S* r = kOp == RD_ADD_RMS_NORM ? static_cast<S*>(a.r) + row * a.sr + base : 0;
  A v[W];
  A s0 = A(0), s1 = A(0);
  if (g.phase == 2) {
    // The row's chunk statistics merged (rd_split_write).
    const long long splits = (n + a.chunk - 1) / a.chunk;
    const A* ws = static_cast<const A*>(a.ws) + 2 * row * splits;
    if (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX) {
      A m = rd_neg_inf(A(0)), s = A(0);
      for (long long k = t; k < splits; k += T) rd_online_merge<S>(m, s, ws[2 * k], ws[2 * k + 1]);
      rd_online_reduce_n<S>(m, s, sh, sh2, T);
      s0 = m;
      s1 = kOp == RD_SOFTMAX ? s : rd_log(s);
    } else if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
      A ss = A(0);
      for (long long k = t; k < splits; k += T) ss += ws[2 * k];
      ss = rd_reduce_n(ss, rd_add(), A(0), sh, T);
      s1 = rd_rms_rstd(ss, n, a.eps);
    } else {
      const A m0 = ws[0];
      A off = A(0);
      for (long long k = t; k < splits; k += T) {
        const long long lk = n - k * a.chunk;
        off = rd_fma_rn(static_cast<A>(lk < a.chunk ? lk : a.chunk), ws[2 * k] - m0, off);
      }
      const A inv = A(1) / static_cast<A>(n);
      const A mean = rd_add_rn(m0, rd_mul_rn(rd_reduce_n(off, rd_add(), A(0), sh, T), inv));
      A m2 = A(0);
      for (long long k = t; k < splits; k += T) {
        const long long lk = n - k * a.chunk;
        const A nk = static_cast<A>(lk < a.chunk ? lk : a.chunk);
        const A d = ws[2 * k] - mean;
        m2 += ws[2 * k + 1] + nk * d * d;
      }
      s0 = mean;
      s1 = rd_rsqrt(rd_mul_rn(rd_reduce_n(m2, rd_add(), A(0), sh, T), inv) + static_cast<A>(a.eps));
    }
  } else if (kOp == RD_SOFTMAX || kOp == RD_LOG_SOFTMAX) {
    const A ninf = rd_neg_inf(A(0));
    A m = ninf;
    A s = A(0);
    if (g.phase == 3) {
      // The looped form's online softmax: each thread's running (max, sum) in element order, merged.
      for (int it = 0; it < iters; ++it) {
        const long long i = (static_cast<long long>(it) * T + t) * V;
        if (i < count) {
          rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, true, v);
#pragma unroll
          for (int j = 0; j < W; ++j) {
            if (j < V) rd_online_add<S>(m, s, v[j]);
          }
        }
      }
      rd_online_reduce_n<S>(m, s, sh, sh2, T);
    } else {
      for (int it = 0; it < iters; ++it) {
        const long long i = (static_cast<long long>(it) * T + t) * V;
        if (i < count) {
          rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, true, v);
#pragma unroll
          for (int j = 0; j < W; ++j) {
            if (j < V) m = rd_max()(m, v[j]);
          }
        }
      }
      m = rd_reduce_n(m, rd_max(), ninf, sh, T);
      for (int it = 0; it < iters; ++it) {
        const long long i = (static_cast<long long>(it) * T + t) * V;
        if (i < count) {
          rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, false, v);
#pragma unroll
          for (int j = 0; j < W; ++j) {
            // A chunk's -inf elements count 1 each while its max is -inf (rd_split_stats), so the
            // chunks' online merge treats them as the looped form does.
            if (j < V) s += (g.phase == 1 && m == ninf && v[j] == ninf) ? A(1) : rd_exp<S>(v[j] - m);
          }
        }
      }
      s = rd_reduce_n(s, rd_add(), A(0), sh, T);
    }
    s0 = m;
    s1 = kOp == RD_SOFTMAX || g.phase == 1 ? s : rd_log(s);
  } else if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
    A ss = A(0);
    for (int it = 0; it < iters; ++it) {
      const long long i = (static_cast<long long>(it) * T + t) * V;
      rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, true, v);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (j < V) ss += v[j] * v[j];  // the padding is 0, as rd_regs sums it
      }
    }
    ss = rd_reduce_n(ss, rd_add(), A(0), sh, T);
    s0 = ss;
    s1 = rd_rms_rstd(ss, n, a.eps);
  } else {
    A sum = A(0);
    for (int it = 0; it < iters; ++it) {
      const long long i = (static_cast<long long>(it) * T + t) * V;
      rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, true, v);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (j < V) sum += v[j];
      }
    }
    const A inv = A(1) / static_cast<A>(count);  // (phase 0: count is n)
    const A part = sum;
    const A mean = rd_mul_rn(rd_reduce_n(sum, rd_add(), A(0), sh, T), inv);
    A dev = A(0), sq = A(0);
    int held = 0;
    for (int it = 0; it < iters; ++it) {
      const long long i = (static_cast<long long>(it) * T + t) * V;
      if (i < count) {
        held += V;
        rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, false, v);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          if (j < V) {
            const A d = v[j] - mean;
            if (!rd_thread_dev<S>::value) dev += d;
            sq += d * d;
          }
        }
      }
    }
    if (rd_thread_dev<S>::value) dev = rd_fma_rn(-static_cast<A>(held), mean, part);
    rd_sum2_n(dev, sq, sh, sh2, T);
    A m2;
    rd_corrected(mean, dev, sq, inv, s0, m2);
    s1 = g.phase == 1 ? m2 : rd_rsqrt(rd_mul_rn(m2, inv) + static_cast<A>(a.eps));
  }
  if (g.phase == 1) {
    // The chunk's statistics (rd_split_stats): (max, sum), the sum of squares, or (mean, squared
    // deviations from it).
    A* ws = static_cast<A*>(a.ws) + 2 * static_cast<long long>(blockIdx.x);
    if (t == 0) {
      ws[0] = s0;
      if (kOp != RD_RMS_NORM && kOp != RD_ADD_RMS_NORM) ws[1] = s1;
    }
    return;
  }
  if (!live) return;
  // A chunk's softmax (rd_split_write): exp(x - cm) * scale where rd_chunk_exp keeps it.
  A cm = A(0), scale = A(0);
  bool kept = false;
  if (kOp == RD_SOFTMAX && g.phase == 2) {
    cm = static_cast<const A*>(a.ws)[2 * static_cast<long long>(blockIdx.x)];  // this chunk's max
    A divisor = s1;
    kept = rd_chunk_softmax<RD_SOFTMAX, S>(cm, s0, divisor, scale);
  }
  const S* w = static_cast<const S*>(a.w);
  const S* b = static_cast<const S*>(a.b);
  for (int it = 0; it < iters; ++it) {
    const long long i = (static_cast<long long>(it) * T + t) * V;
    if (i >= count) break;
    rdg_values<S>(kOp, a, pro, x, r, live, i, count, V, false, v);
    S ws[W], bs[W], out[W];
    const bool has_w = (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM || kOp == RD_LAYER_NORM) && w != 0;
    const bool has_b = kOp == RD_LAYER_NORM && b != 0;
    if (has_w) rdg_load<S>(w + base + i, V, ws);
    if (has_b) rdg_load<S>(b + base + i, V, bs);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if (j >= V) break;
      A o;
      if (kOp == RD_SOFTMAX)
        o = kept ? rd_exp_term<S>(v[j] - cm) * scale : rd_div<S>(rd_exp<S>(v[j] - s0), s1);
      if (kOp == RD_LOG_SOFTMAX) o = (v[j] - s0) - s1;
      if (kOp == RD_RMS_NORM || kOp == RD_ADD_RMS_NORM) {
        o = v[j] * s1;
        if (has_w) o = o * ew_traits<S>::to_op(ws[j]);
      }
      if (kOp == RD_LAYER_NORM) {
        o = rd_layer_out(v[j] - s0, s1, has_w, has_w ? ew_traits<S>::to_op(ws[j]) : A(1), has_b,
                         has_b ? ew_traits<S>::to_op(bs[j]) : A(0));
      }
      out[j] = epi.steps > 0 ? rdg_chain_value<S>(a, epi, row, base + i + j, ew_traits<S>::from_op(o))
                              : ew_traits<S>::from_op(o);
    }
    rdg_store<S>(y + i, V, out);
  }
}

#endif  // CUINLINE_REDUCTIONS_GENERIC_CUH

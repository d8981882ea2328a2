/* The C API from C (C11, no GPU needed): version, configuration before first use and refused
 * after it, a log sink with its user data, load_inline for sm_90 through the cache (compile, then
 * memory hit), the calls that need a driver returning CUINLINE_ERROR_DRIVER with a message when there
 * is none, bad input (null pointers, bad dtype, bad op text, too many tensors, bad precision) and
 * cuinline_conv2d_run's size rule returning CUINLINE_ERROR_INVALID_ARGUMENT with a message. Prints
 * "N passed, M failed". */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <cuinline/cuinline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed = 0, failed = 0;

#define EXPECT(cond)                                                                        \
  do {                                                                                      \
    if (cond) {                                                                             \
      ++passed;                                                                             \
    } else {                                                                                \
      ++failed;                                                                             \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              cuinline_last_error());                                                       \
    }                                                                                       \
  } while (0)

/* What the log sink saw: messages, those naming the test's program at debug level, those whose
 * length is the NUL-terminated text's, and the set_log_sink calls refused from inside the sink. */
typedef struct log_seen {
  int messages, named, terminated, refused;
} log_seen;

static void on_log(int level, const char* message, size_t length, void* user_data) {
  log_seen* seen = (log_seen*)user_data;
  ++seen->messages;
  if (level == CUINLINE_LOG_DEBUG && strstr(message, "capi_test") != NULL) ++seen->named;
  if (strlen(message) == length) ++seen->terminated;
  if (cuinline_set_log_sink(NULL, NULL) == CUINLINE_ERROR_INVALID_ARGUMENT) ++seen->refused;
}

int main(void) {
  char dir[] = "/tmp/cuinline-capi-XXXXXX";
  if (mkdtemp(dir) == NULL) return 2;
  EXPECT(strlen(cuinline_version()) > 0);
  EXPECT(cuinline_device_count() >= 0);
  EXPECT(cuinline_configure_cache(dir, 64u << 20, 1) == CUINLINE_SUCCESS);
  EXPECT(cuinline_configure_cache("", 0, 1) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(cuinline_configure_remote_cache("", NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(cuinline_configure_remote_cache("redis://127.0.0.1:1", "") == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(cuinline_set_log_level("error") == CUINLINE_SUCCESS);
  EXPECT(cuinline_set_log_level("loud") == CUINLINE_ERROR_INVALID_ARGUMENT);

  const char* source = "extern \"C\" __global__ void add1(float* p, unsigned n) {\n"
                       "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1.0f; }\n"
                       "template <int K> __global__ void addk(float* p) { p[threadIdx.x] += K; }\n";
  const char* functions[] = {"add1"};
  const char* exprs[] = {"addk<3>"};
  cuinline_inline_options o;
  memset(&o, 0, sizeof o);
  o.name = "capi_test";
  o.sources = &source;
  o.num_sources = 1;
  o.functions = functions;
  o.num_functions = 1;
  o.name_expressions = exprs;
  o.num_name_expressions = 1;
  o.device = -1;
  o.arch = "sm_90";
  cuinline_module m = NULL;
  /* The first compile logs at debug level: into the sink, with its user data. */
  log_seen seen = {0, 0, 0, 0};
  EXPECT(cuinline_set_log_sink(on_log, &seen) == CUINLINE_SUCCESS);
  EXPECT(cuinline_set_log_level("debug") == CUINLINE_SUCCESS);
  EXPECT(cuinline_load_inline(&o, &m) == CUINLINE_SUCCESS);
  EXPECT(m != NULL);
  EXPECT(cuinline_set_log_sink(NULL, NULL) == CUINLINE_SUCCESS);
  EXPECT(cuinline_set_log_level("error") == CUINLINE_SUCCESS);
  EXPECT(seen.named >= 1);
  EXPECT(seen.messages > 0 && seen.terminated == seen.messages && seen.refused == seen.messages);
  cuinline_cache_stats s;
  EXPECT(cuinline_get_cache_stats(&s) == CUINLINE_SUCCESS);
  EXPECT(s.compiles == 1);
  cuinline_module m2 = NULL;
  EXPECT(cuinline_load_inline(&o, &m2) == CUINLINE_SUCCESS);
  EXPECT(cuinline_get_cache_stats(&s) == CUINLINE_SUCCESS);
  EXPECT(s.compiles == 1 && s.memory_hits == 1);
  /* The cache is in use now: configuring it again is refused. */
  EXPECT(cuinline_configure_cache(dir, 0, 1) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "already in use") != NULL);
  EXPECT(cuinline_configure_remote_cache("redis://127.0.0.1:6379", NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);

  /* A compile error keeps NVRTC's log. */
  const char* broken = "__global__ void k( { }";
  cuinline_inline_options b = o;
  b.sources = &broken;
  b.num_functions = 0;
  b.num_name_expressions = 0;
  cuinline_module mb = NULL;
  EXPECT(cuinline_load_inline(&b, &mb) == CUINLINE_ERROR_COMPILE);
  EXPECT(mb == NULL);
  EXPECT(strstr(cuinline_last_error(), "error") != NULL);

  cuinline_kernel k = NULL;
  if (cuinline_device_count() == 0) {
    EXPECT(cuinline_module_kernel(m, "add1", &k) == CUINLINE_ERROR_DRIVER);
    EXPECT(strstr(cuinline_last_error(), "driver") != NULL);
  } else {
    EXPECT(cuinline_module_kernel(m, "add1", &k) == CUINLINE_SUCCESS);
    int params = -2;
    EXPECT(cuinline_kernel_param_count(k, &params) == CUINLINE_SUCCESS && params == 2);
    EXPECT(cuinline_module_kernel(m, "nope", &k) == CUINLINE_ERROR_INVALID_ARGUMENT);
  }

  /* Bad input: each refused with a message, nothing launched. */
  float host[8] = {0};
  int64_t shape[1] = {8};
  cuinline_tensor t = {host, CUINLINE_F32, 1, shape, NULL};
  cuinline_tensor bad_dtype = {host, 9, 1, shape, NULL};
  cuinline_tensor many[9];
  for (int i = 0; i < 9; ++i) many[i] = t;
  EXPECT(cuinline_apply(NULL, &t, 1, &t, 1, NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(cuinline_apply("relu|frobnicate", &t, 1, &t, 1, NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "frobnicate") != NULL);
  EXPECT(cuinline_apply("relu", &bad_dtype, 1, &t, 1, NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(cuinline_apply("expr(a + b)", many, 9, &t, 1, NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(cuinline_apply("relu", NULL, 1, &t, 1, NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  int64_t other[1] = {5};
  cuinline_tensor t5 = {host, CUINLINE_F32, 1, other, NULL};
  EXPECT(cuinline_apply("expr([a, b] a + b)", (cuinline_tensor[]){t, t5}, 2, &t, 1, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "broadcast") != NULL);
  int64_t x4[4] = {1, 8, 8, 8}, w4[4] = {4, 8, 3, 3}, y4[4] = {1, 4, 6, 6};
  cuinline_tensor x = {host, CUINLINE_F32, 4, x4, NULL}, w = {host, CUINLINE_F32, 4, w4, NULL},
                  y = {host, CUINLINE_F32, 4, y4, NULL};
  EXPECT(cuinline_conv2d(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, "relu", "fp64", NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  /* Grouped: the weight [4, 8 / groups, 3, 3]; groups 2 wants 4 weight channels, 3 divides nothing. */
  EXPECT(cuinline_conv2d_grouped(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, 2, "relu", NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "groups 2") != NULL);
  EXPECT(cuinline_conv2d_grouped(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, 0, "relu", NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "groups must be positive") != NULL);
  int64_t wg[4] = {6, 4, 3, 3}, yg[4] = {1, 6, 6, 6};
  cuinline_tensor wgt = {host, CUINLINE_F32, 4, wg, NULL}, ygt = {host, CUINLINE_F32, 4, yg, NULL};
  EXPECT(cuinline_conv2d_grouped(&x, &wgt, NULL, NULL, &ygt, NULL, NULL, NULL, 4, "relu", NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "groups 4") != NULL);
  /* Per-channel operands of the epilogue (cuinline_conv2d_ex): a count the epilogue does not read,
   * a count out of range, NULL operands, a vector that is not one of the 4 output channels. */
  static float hx[512], hw[288], hy[144], hc[8];
  int64_t c4[3] = {4, 1, 1}, c5[1] = {5};
  cuinline_tensor ch4 = {hc, CUINLINE_F32, 3, c4, NULL}, ch5 = {hc, CUINLINE_F32, 1, c5, NULL};
  x.data = hx, w.data = hw, y.data = hy;
  EXPECT(cuinline_conv2d_ex(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, 1, "relu|add(in1)", &ch4, 0, NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "reads 1 per-channel operand(s) but 0 were given") != NULL);
  EXPECT(cuinline_conv2d_ex(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, 1, "relu|add(in1)", &ch4, 5, NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "num_channel_operands must be 0-4") != NULL);
  EXPECT(cuinline_conv2d_ex(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, 1, "relu|add(in1)", NULL, 1, NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "channel_operands is NULL") != NULL);
  EXPECT(cuinline_conv2d_ex(&x, &w, NULL, NULL, &y, NULL, NULL, NULL, 1, "relu|add(in1)", &ch5, 1, NULL, NULL) ==
         CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "not a per-channel vector of the 4 output channels") != NULL);
  /* cuinline_conv2d_run: the struct's size rule first, then the checks of the older entry points. */
  cuinline_conv2d_params cp = CUINLINE_CONV2D_PARAMS_INIT;
  cp.input = &x, cp.weight = &w, cp.output = &y, cp.epilogue = "relu", cp.precision = "fp64";
  EXPECT(cuinline_conv2d_run(NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  cuinline_conv2d_params tiny = cp;
  tiny.size = 2 * sizeof(void*);
  EXPECT(cuinline_conv2d_run(&tiny) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "less than the first version's") != NULL);
  tiny.size = 0;
  EXPECT(cuinline_conv2d_run(&tiny) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "params.size is 0") != NULL);
  /* A newer header's larger struct: accepted while the fields this library does not know are zero
   * (the call then gets as far as the precision, which it refuses), refused when one is set. */
  struct {
    cuinline_conv2d_params known;
    uint64_t newer_field;
  } grown;
  memset(&grown, 0, sizeof grown);
  grown.known = cp;
  grown.known.size = sizeof grown;
  EXPECT(cuinline_conv2d_run(&grown.known) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "fp64") != NULL);
  grown.newer_field = 1;
  EXPECT(cuinline_conv2d_run(&grown.known) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "is not zero") != NULL);
  /* The checks of the older entry points, through the struct: a missing tensor, groups (0 is the
   * default, 1), the per-channel operands. */
  cp.precision = NULL;
  cp.weight = NULL;
  EXPECT(cuinline_conv2d_run(&cp) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "conv2d weight: null tensor descriptor") != NULL);
  cp.weight = &w;
  cp.groups = 2;
  EXPECT(cuinline_conv2d_run(&cp) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "groups 2") != NULL);
  cp.groups = -1;
  EXPECT(cuinline_conv2d_run(&cp) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "groups must be positive") != NULL);
  cp.groups = 0;
  cp.epilogue = "relu|add(in1)";
  cp.channel_operands = &ch5, cp.num_channel_operands = 1;
  EXPECT(cuinline_conv2d_run(&cp) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "not a per-channel vector of the 4 output channels") != NULL);
  cp.num_channel_operands = 5;
  EXPECT(cuinline_conv2d_run(&cp) == CUINLINE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(cuinline_last_error(), "num_channel_operands must be 0-4") != NULL);
  EXPECT(cuinline_get_cache_stats(NULL) == CUINLINE_ERROR_INVALID_ARGUMENT);
  /* cuinline_rows_run: the same size rule; an epilogue that reads a tensor not given is refused. */
  {
    int64_t rs[2] = {4, 128};
    static float rx[512], ry[512];
    cuinline_tensor rin = {rx, CUINLINE_F32, 2, rs, NULL}, rout = {ry, CUINLINE_F32, 2, rs, NULL};
    cuinline_rows_params rp = CUINLINE_ROWS_PARAMS_INIT;
    struct {
      cuinline_rows_params known;
      uint64_t newer_field;
    } rgrown;
    rp.op = "rms_norm", rp.input = &rin, rp.output = &rout, rp.eps = 1e-6, rp.epilogue = "mul(in1)";
    EXPECT(cuinline_rows_run(&rp) == CUINLINE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cuinline_last_error(), "takes 1 extra tensor(s)") != NULL);
    memset(&rgrown, 0, sizeof rgrown);
    rgrown.known = rp;
    rgrown.known.size = sizeof rgrown;
    rgrown.newer_field = 1;
    EXPECT(cuinline_rows_run(&rgrown.known) == CUINLINE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cuinline_last_error(), "cuinline_rows_run: params.size") != NULL);
    rp.size = 8;
    EXPECT(cuinline_rows_run(&rp) == CUINLINE_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(cuinline_last_error(), "less than the first version's") != NULL);
  }

  cuinline_kernel_release(k);
  cuinline_module_release(m);
  cuinline_module_release(m2);
  cuinline_module_release(NULL);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

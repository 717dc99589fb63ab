/* The `blas` codegen's native kernels: matmul (optionally with a transposed right operand, a
 * bias and an activation) through `cblas_sgemm`, with the epilogue applied in C right after.
 *
 * Compiled code calls these directly as packed functions (no Python on the way): every argument
 * is an unranked memref, `{int64_t rank; descriptor *}`, so one kernel serves every rank and
 * batch layout. The BLAS itself (OpenBLAS from the scipy-openblas32 wheel, or MKL) is found at
 * run time by relaxmlir/runtime/blas.py, which hands `relaxmlir_blas_init` its sgemm; this file
 * links against no BLAS.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  int64_t rank;
  void *descriptor;
} unranked;

/* A ranked descriptor is {T *allocated, *aligned; int64_t offset, sizes[rank], strides[rank]}. */
typedef struct {
  float *data; /* aligned + offset */
  int64_t rank;
  const int64_t *sizes, *strides;
} view;

static view read_view(const unranked *u) {
  char *d = (char *)u->descriptor;
  float *aligned = *(float **)(d + sizeof(void *));
  const int64_t *rest = (const int64_t *)(d + 2 * sizeof(void *));
  view v = {aligned + rest[0], u->rank, rest + 1, rest + 1 + u->rank};
  return v;
}

/* cblas_sgemm with 32-bit integers (LP64 OpenBLAS/MKL): order, transa, transb, m, n, k, alpha,
 * a, lda, b, ldb, beta, c, ldc. */
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
static sgemm_fn sgemm;

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
enum { ACT_NONE, ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_SILU };

EXPORT void relaxmlir_blas_init(void *fn) { sgemm = (sgemm_fn)fn; }
EXPORT int relaxmlir_blas_ready(void) { return sgemm != 0; }

/* Offset of batch index `b` (over the output's batch dims) in an operand whose batch dims are
 * right-aligned to the output's and broadcast where their extent is 1. */
static int64_t batch_offset(const view *v, const view *out, int64_t b) {
  int64_t out_batch = out->rank - 2, own_batch = v->rank - 2, off = 0;
  for (int64_t i = out_batch - 1; i >= 0; i--) {
    int64_t extent = out->sizes[i], idx = b % extent;
    b /= extent;
    int64_t j = i - (out_batch - own_batch);
    if (j >= 0 && v->sizes[j] != 1) off += idx * v->strides[j];
  }
  return off;
}

static float activate(float x, int act) {
  switch (act) {
  case ACT_RELU: return x > 0.0f ? x : 0.0f;
  case ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case ACT_GELU_TANH: {
    float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
  }
  case ACT_SILU: return x / (1.0f + expf(-x));
  default: return x;
  }
}

/* out[b, m, :] += bias (broadcast to the output's shape), then the activation. */
static void epilogue(const view *out, const view *bias, int act) {
  int64_t r = out->rank, n = out->sizes[r - 1];
  int64_t rows = 1;
  for (int64_t i = 0; i < r - 1; i++) rows *= out->sizes[i];
  for (int64_t row = 0; row < rows; row++) {
    /* the output row's multi-index, one dim at a time from the right */
    int64_t rest = row, out_off = 0, bias_off = 0;
    for (int64_t i = r - 2; i >= 0; i--) {
      int64_t idx = rest % out->sizes[i];
      rest /= out->sizes[i];
      out_off += idx * out->strides[i];
      if (bias) {
        int64_t j = i - (r - bias->rank);
        if (j >= 0 && bias->sizes[j] != 1) bias_off += idx * bias->strides[j];
      }
    }
    float *o = out->data + out_off;
    int64_t os = out->strides[r - 1];
    if (bias) {
      const float *bp = bias->data + bias_off;
      int64_t bs = bias->rank >= 1 && bias->sizes[bias->rank - 1] != 1 ? bias->strides[bias->rank - 1] : 0;
      if (os == 1 && bs == 1 && act == ACT_NONE) {
        for (int64_t k = 0; k < n; k++) o[k] += bp[k];
      } else if (os == 1 && bs == 1 && act == ACT_RELU) {
        for (int64_t k = 0; k < n; k++) { float v = o[k] + bp[k]; o[k] = v > 0.0f ? v : 0.0f; }
      } else {
        for (int64_t k = 0; k < n; k++) o[k * os] = activate(o[k * os] + bp[k * bs], act);
      }
    } else if (act != ACT_NONE) {
      for (int64_t k = 0; k < n; k++) o[k * os] = activate(o[k * os], act);
    }
  }
}

/* A matrix operand is BLAS-ready when its last dim is contiguous and its rows do not overlap. */
static int blas_layout(const view *v, int64_t cols) {
  int64_t r = v->rank;
  int contiguous_rows = v->strides[r - 1] == 1 || v->sizes[r - 1] == 1;
  return contiguous_rows && v->strides[r - 2] >= cols && v->strides[r - 2] < INT32_MAX;
}

static void naive(const view *a, const view *b, const view *out, int trans_b, int64_t batch) {
  int64_t r = out->rank, m = out->sizes[r - 2], n = out->sizes[r - 1];
  int64_t k = a->sizes[a->rank - 1];
  for (int64_t bi = 0; bi < batch; bi++) {
    const float *pa = a->data + batch_offset(a, out, bi);
    const float *pb = b->data + batch_offset(b, out, bi);
    float *pc = out->data + batch_offset(out, out, bi);
    int64_t as0 = a->strides[a->rank - 2], as1 = a->strides[a->rank - 1];
    int64_t bs0 = b->strides[b->rank - 2], bs1 = b->strides[b->rank - 1];
    int64_t cs0 = out->strides[r - 2], cs1 = out->strides[r - 1];
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float acc = 0.0f;
        for (int64_t p = 0; p < k; p++)
          acc += pa[i * as0 + p * as1] * (trans_b ? pb[j * bs0 + p * bs1] : pb[p * bs0 + j * bs1]);
        pc[i * cs0 + j * cs1] = acc;
      }
  }
}

static void matmul(unranked *ua, unranked *ub, unranked *ubias, unranked *uout, int trans_b,
                   int act) {
  view a = read_view(ua), b = read_view(ub), out = read_view(uout);
  view bias_view;
  const view *bias = 0;
  if (ubias) {
    bias_view = read_view(ubias);
    bias = &bias_view;
  }
  int64_t r = out.rank, m = out.sizes[r - 2], n = out.sizes[r - 1];
  int64_t k = a.sizes[a.rank - 1];
  int64_t batch = 1;
  for (int64_t i = 0; i < r - 2; i++) batch *= out.sizes[i];
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    for (int64_t bi = 0; bi < batch; bi++) {
      float *pc = out.data + batch_offset(&out, &out, bi);
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) pc[i * out.strides[r - 2] + j * out.strides[r - 1]] = 0.0f;
    }
  } else if (!sgemm || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX ||
             !blas_layout(&a, k) || !blas_layout(&b, trans_b ? k : n) || !blas_layout(&out, n)) {
    naive(&a, &b, &out, trans_b, batch);
  } else {
    int lda = (int)a.strides[a.rank - 2], ldb = (int)b.strides[b.rank - 2];
    int ldc = (int)out.strides[r - 2];
    /* 2-D weights and a dense batch of rows on the left: one GEMM over all rows. */
    int one_gemm = b.rank == 2 && batch > 1 && lda == k && ldc == n;
    for (int64_t i = 0; i < r - 2 && one_gemm; i++) {
      int64_t j = i - (r - a.rank);
      int64_t inner = 1;
      for (int64_t t = i + 1; t < r - 2; t++) inner *= out.sizes[t];
      one_gemm = j >= 0 && a.sizes[j] == out.sizes[i] && a.strides[j] == inner * m * k &&
                 out.strides[i] == inner * m * n;
    }
    if (one_gemm && batch * m <= INT32_MAX) {
      sgemm(ROW_MAJOR, NO_TRANS, trans_b ? TRANS : NO_TRANS, (int)(batch * m), (int)n, (int)k, 1.0f,
            a.data, lda, b.data, ldb, 0.0f, out.data, ldc);
    } else {
      for (int64_t bi = 0; bi < batch; bi++)
        sgemm(ROW_MAJOR, NO_TRANS, trans_b ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, 1.0f,
              a.data + batch_offset(&a, &out, bi), lda, b.data + batch_offset(&b, &out, bi), ldb,
              0.0f, out.data + batch_offset(&out, &out, bi), ldc);
    }
  }
  if (bias || act != ACT_NONE) epilogue(&out, bias, act);
}

/* One exported kernel per (transposed right operand, bias, activation): the codegen picks the
 * symbol by the composite's name. */
#define NO_BIAS(T, ACT, NAME)                                                                    \
  EXPORT void relaxmlir_blas_##NAME(unranked *a, unranked *b, unranked *out) {                   \
    matmul(a, b, 0, out, T, ACT);                                                               \
  }
#define BIAS(T, ACT, NAME)                                                                       \
  EXPORT void relaxmlir_blas_##NAME(unranked *a, unranked *b, unranked *bias, unranked *out) {   \
    matmul(a, b, bias, out, T, ACT);                                                            \
  }

NO_BIAS(0, ACT_NONE, matmul)
NO_BIAS(1, ACT_NONE, matmul_transposed)
NO_BIAS(0, ACT_RELU, matmul_relu)
NO_BIAS(1, ACT_RELU, matmul_transposed_relu)
BIAS(0, ACT_NONE, matmul_bias)
BIAS(0, ACT_RELU, matmul_bias_relu)
BIAS(0, ACT_GELU, matmul_bias_gelu)
BIAS(0, ACT_GELU_TANH, matmul_bias_gelu_tanh)
BIAS(0, ACT_SILU, matmul_bias_silu)
BIAS(1, ACT_NONE, matmul_transposed_bias)
BIAS(1, ACT_RELU, matmul_transposed_bias_relu)
BIAS(1, ACT_GELU, matmul_transposed_bias_gelu)
BIAS(1, ACT_GELU_TANH, matmul_transposed_bias_gelu_tanh)
BIAS(1, ACT_SILU, matmul_transposed_bias_silu)

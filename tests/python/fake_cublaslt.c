/* A stand-in for libcublasLt and libcuda.so.1 in one library, for testing the cublas kernels
 * (relaxmlir/runtime/native/cublas_kernels.c) on a machine without a GPU: "device" memory is host
 * memory, and cublasLtMatmul computes what the real one does on it (column-major, strided batch,
 * the BIAS / RELU / GELU epilogues) in plain C. It also checks what the real library would refuse
 * or mis-compute quietly: layouts that do not form a product, batch counts that differ, pointers
 * less aligned than the heuristic was told, a missing workspace. Counters and the last stream let
 * tests see the plan cache and the stream at work (fake_stats).
 *
 * Test code only: never on a path that models run.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };

typedef struct {
  int type;
  uint64_t rows, cols;
  int64_t ld, stride;
  int32_t batch;
} layout;

typedef struct {
  int32_t trans_a, trans_b;
  uint32_t epilogue;
  const void *bias;
} desc;

typedef struct {
  uint64_t workspace;
  uint32_t align[4];
} pref;

typedef struct {
  uint64_t data[8];
} algo; /* data[0..3]: the alignments the heuristic assumed */

typedef struct {
  algo algo;
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
} heuristic;

static int64_t n_heuristics, n_matmuls, n_handles;
static void *last_stream;
static void *context = (void *)0x1000; /* what cuCtxGetCurrent answers */
static void *blocks[16]; /* what cuMemAlloc handed out (workspaces) */
static int n_blocks;

/* counters: heuristics, matmuls, handles; the last stream */
void fake_stats(int64_t *out, void **stream) {
  out[0] = n_heuristics, out[1] = n_matmuls, out[2] = n_handles;
  *stream = last_stream;
}

void fake_set_context(void *ctx) { context = ctx; }

/* -- driver ---------------------------------------------------------------------------------- */
int cuInit(unsigned flags) { return flags ? 1 : 0; }
int cuCtxGetCurrent(void **ctx) {
  *ctx = context;
  return 0;
}
int fake_refuse_alloc = 0; /* set by a test: allocations fail as inside a stream capture */
int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
  if (fake_refuse_alloc) return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
  void *block = n_blocks < 16 ? malloc(bytes) : NULL;
  if (!block) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  blocks[n_blocks++] = block;
  *ptr = (unsigned long long)(uintptr_t)block;
  return 0;
}
int cuGetErrorString(int code, const char **text) {
  *text = code ? "fake driver error" : "no error";
  return 0;
}
int cuDeviceGetCount(int *count) {
  *count = 1;
  return 0;
}

/* -- cuBLASLt -------------------------------------------------------------------------------- */
const char *cublasLtGetStatusString(int status) {
  return status == INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_OTHER";
}
size_t cublasLtGetVersion(void) { return 999; }
int cublasLtCreate(void **handle) {
  n_handles++;
  *handle = malloc(1);
  return 0;
}
int cublasLtMatmulDescCreate(desc **d, int compute, int scale) {
  if (compute != 68 || scale != 0) return NOT_SUPPORTED; /* f32 accumulation and scaling */
  *d = calloc(1, sizeof(desc));
  (*d)->epilogue = 1;
  return 0;
}
int cublasLtMatmulDescDestroy(desc *d) {
  free(d);
  return 0;
}
int cublasLtMatmulDescSetAttribute(desc *d, int attr, const void *buf, size_t size) {
  if (attr == 3 && size == 4) memcpy(&d->trans_a, buf, 4);
  else if (attr == 4 && size == 4) memcpy(&d->trans_b, buf, 4);
  else if (attr == 7 && size == 4) memcpy(&d->epilogue, buf, 4);
  else if (attr == 8 && size == sizeof(void *)) memcpy(&d->bias, buf, size);
  else return INVALID_VALUE;
  return 0;
}
int cublasLtMatrixLayoutCreate(layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != 0 && type != 2) return NOT_SUPPORTED;
  if (ld < (int64_t)rows || ld < 1) return INVALID_VALUE; /* column-major: ld >= rows */
  *l = calloc(1, sizeof(layout));
  (*l)->type = type, (*l)->rows = rows, (*l)->cols = cols, (*l)->ld = ld, (*l)->batch = 1;
  return 0;
}
int cublasLtMatrixLayoutDestroy(layout *l) {
  free(l);
  return 0;
}
int cublasLtMatrixLayoutSetAttribute(layout *l, int attr, const void *buf, size_t size) {
  if (attr == 5 && size == 4) memcpy(&l->batch, buf, 4);
  else if (attr == 6 && size == 8) memcpy(&l->stride, buf, 8);
  else return INVALID_VALUE;
  return 0;
}
int cublasLtMatmulPreferenceCreate(pref **p) {
  *p = calloc(1, sizeof(pref));
  for (int i = 0; i < 4; i++) (*p)->align[i] = 256;
  return 0;
}
int cublasLtMatmulPreferenceDestroy(pref *p) {
  free(p);
  return 0;
}
int cublasLtMatmulPreferenceSetAttribute(pref *p, int attr, const void *buf, size_t size) {
  if (attr == 1 && size == 8) memcpy(&p->workspace, buf, 8);
  else if (attr >= 5 && attr <= 8 && size == 4) memcpy(&p->align[attr - 5], buf, 4);
  else return INVALID_VALUE;
  return 0;
}

static void dims(const layout *l, int trans, uint64_t *rows, uint64_t *cols) {
  *rows = trans ? l->cols : l->rows;
  *cols = trans ? l->rows : l->cols;
}

static int shapes_ok(const desc *d, const layout *a, const layout *b, const layout *c,
                     const layout *dl) {
  uint64_t ar, ac, br, bc;
  dims(a, d->trans_a, &ar, &ac);
  dims(b, d->trans_b, &br, &bc);
  return ar == dl->rows && ac == br && bc == dl->cols && c->rows == dl->rows &&
         c->cols == dl->cols && a->batch == dl->batch && b->batch == dl->batch &&
         c->batch == dl->batch && a->type == b->type && c->type == dl->type;
}

int cublasLtMatmulAlgoGetHeuristic(void *handle, desc *d, layout *a, layout *b, layout *c,
                                   layout *dl, pref *p, int requested, heuristic *out, int *count) {
  (void)handle;
  n_heuristics++;
  if (requested < 1) return INVALID_VALUE;
  *count = 0;
  if (!shapes_ok(d, a, b, c, dl)) return OK; /* no algorithm: count 0 */
  memset(out, 0, sizeof *out);
  for (int i = 0; i < 4; i++) out->algo.data[i] = p->align[i];
  out->workspaceSize = p->workspace < 4096 ? p->workspace : 4096;
  *count = 1;
  return OK;
}

static float load(const void *base, int type, int64_t i) {
  if (type == 2) return (float)((const _Float16 *)base)[i];
  return ((const float *)base)[i];
}

static void store(void *base, int type, int64_t i, float v) {
  if (type == 2) ((_Float16 *)base)[i] = (_Float16)v;
  else ((float *)base)[i] = v;
}

static int aligned(const void *p, uint64_t align) { return ((uintptr_t)p % align) == 0; }

int cublasLtMatmul(void *handle, desc *d, const float *alpha, const void *A, layout *a,
                   const void *B, layout *b, const float *beta, const void *C, layout *c, void *D,
                   layout *dl, const algo *al, void *ws, size_t ws_size, void *stream) {
  (void)handle;
  n_matmuls++;
  last_stream = stream;
  if (!shapes_ok(d, a, b, c, dl) || C != D || *beta != 0.0f) return INVALID_VALUE;
  int known = 0;
  for (int i = 0; i < n_blocks; i++) known |= ws == blocks[i];
  if (ws_size && !known) return INVALID_VALUE;
  int esize = a->type == 2 ? 2 : 4;
  for (int32_t bi = 0; bi < dl->batch; bi++) {
    const char *pa = (const char *)A + bi * a->stride * esize;
    const char *pb = (const char *)B + bi * b->stride * esize;
    char *pd = (char *)D + bi * dl->stride * esize;
    if (!aligned(pa, al->data[0]) || !aligned(pb, al->data[1]) || !aligned(pd, al->data[3]))
      return INVALID_VALUE; /* the real library would fault or pick a wrong kernel */
    uint64_t m = dl->rows, n = dl->cols, k;
    uint64_t ar, ac;
    dims(a, d->trans_a, &ar, &ac);
    k = ac;
    for (uint64_t j = 0; j < n; j++)
      for (uint64_t i = 0; i < m; i++) {
        float acc = 0.0f;
        for (uint64_t p = 0; p < k; p++) {
          int64_t ia = d->trans_a ? (int64_t)(i * a->ld + p) : (int64_t)(p * a->ld + i);
          int64_t ib = d->trans_b ? (int64_t)(p * b->ld + j) : (int64_t)(j * b->ld + p);
          acc += load(pa, a->type, ia) * load(pb, b->type, ib);
        }
        acc *= *alpha;
        uint32_t e = d->epilogue;
        if (e & 4) acc += load(d->bias, dl->type, (int64_t)i);
        if (e & 2) acc = acc > 0.0f ? acc : 0.0f;
        if (e & 32)
          acc = 0.5f * acc * (1.0f + tanhf(0.7978845608f * (acc + 0.044715f * acc * acc * acc)));
        store(pd, dl->type, (int64_t)(j * dl->ld + i), acc);
      }
  }
  return OK;
}

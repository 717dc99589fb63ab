/* The `cublas` codegen's native kernels: matmuls on the GPU through cuBLASLt, with its bias /
 * relu / gelu (tanh) epilogues, in float32 or float16 (float32 accumulation).
 *
 * Host code of a CUDA model calls these directly as packed functions (no Python on the way):
 * every argument is an unranked memref, `{int64_t rank; descriptor *}`, whose data pointer is
 * device memory. Nothing is linked: libcublasLt (found by relaxmlir/runtime/cublas.py, which
 * hands its path to relaxmlir_cublas_configure) and the CUDA driver are opened on the first call,
 * so this library loads, and models that call it build, on machines with neither. Failures are
 * recorded (the first one wins) and the caller reads them with relaxmlir_cuda_take_error after the
 * model returns, as it does for the model's own CUDA runtime (cuda_runtime.c): never an abort.
 *
 * Work goes on the caller's stream (relaxmlir_cuda_set_stream, the same value the model's runtime
 * gets), in the context current on the thread (the one the model runs in). Per context: one
 * cuBLASLt handle; per (context, stream): one workspace; per shape/layout/alignment: one plan (the
 * matmul descriptor, the matrix layouts and the algorithm the heuristic chose), cached for the life
 * of the process. Calls are serialized by one lock (they only enqueue work).
 *
 * Row-major to cuBLASLt's column-major: out[m,n] = a[m,k] @ b is computed as
 * out^T[n,m] = op(b^T)[n,k] @ a^T[k,m], so cuBLASLt's A is our right operand, its B our left one,
 * and the bias (one value per output column, n) is its per-row bias vector.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* -- the declarations of cuBLASLt (cublasLt.h, cublas_api.h), CUDA's library_types.h and the
 * driver (cuda.h) that this file uses, written here so that it builds without them. Compiled with
 * -DRELAXMLIR_CUBLAS_CHECK_HEADERS against the real headers, every value and signature below is
 * checked against theirs (tests/python/test_backend_cublas.py does so when they are installed). */

enum {
  LT_STATUS_SUCCESS = 0,          /* CUBLAS_STATUS_SUCCESS */
  LT_OP_N = 0,                    /* CUBLAS_OP_N */
  LT_OP_T = 1,                    /* CUBLAS_OP_T */
  LT_COMPUTE_32F = 68,            /* CUBLAS_COMPUTE_32F: plain f32 accumulation, no TF32 */
  LT_R_32F = 0,                   /* CUDA_R_32F */
  LT_R_16F = 2,                   /* CUDA_R_16F */
  LT_DESC_TRANSA = 3,             /* CUBLASLT_MATMUL_DESC_TRANSA (int32_t) */
  LT_DESC_TRANSB = 4,             /* CUBLASLT_MATMUL_DESC_TRANSB (int32_t) */
  LT_DESC_EPILOGUE = 7,           /* CUBLASLT_MATMUL_DESC_EPILOGUE (uint32_t) */
  LT_DESC_BIAS_POINTER = 8,       /* CUBLASLT_MATMUL_DESC_BIAS_POINTER (const void *) */
  LT_LAYOUT_BATCH_COUNT = 5,      /* CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT (int32_t) */
  LT_LAYOUT_BATCH_STRIDE = 6,     /* CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET (int64_t) */
  LT_PREF_MAX_WORKSPACE = 1,      /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64_t) */
  LT_PREF_ALIGN_A = 5,            /* CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES (uint32_t) */
  LT_PREF_ALIGN_B = 6,            /* ..._B_BYTES */
  LT_PREF_ALIGN_C = 7,            /* ..._C_BYTES */
  LT_PREF_ALIGN_D = 8,            /* ..._D_BYTES */
  LT_EPILOGUE_DEFAULT = 1,        /* CUBLASLT_EPILOGUE_DEFAULT */
  LT_EPILOGUE_RELU = 2,           /* CUBLASLT_EPILOGUE_RELU */
  LT_EPILOGUE_BIAS = 4,           /* CUBLASLT_EPILOGUE_BIAS */
  LT_EPILOGUE_RELU_BIAS = 6,      /* CUBLASLT_EPILOGUE_RELU_BIAS */
  LT_EPILOGUE_GELU = 32,          /* CUBLASLT_EPILOGUE_GELU (the tanh approximation) */
  LT_EPILOGUE_GELU_BIAS = 36,     /* CUBLASLT_EPILOGUE_GELU_BIAS */
};

#ifdef RELAXMLIR_CUBLAS_CHECK_HEADERS
#include <cublasLt.h>
#include <cuda.h>
typedef cublasStatus_t lt_status;
typedef cublasLtHandle_t lt_handle;
typedef cublasLtMatmulDesc_t lt_desc;
typedef cublasLtMatrixLayout_t lt_layout;
typedef cublasLtMatmulPreference_t lt_pref;
typedef cublasComputeType_t lt_compute;
typedef cudaDataType_t lt_dtype;
typedef cublasLtMatmulDescAttributes_t lt_desc_attr;
typedef cublasLtMatrixLayoutAttribute_t lt_layout_attr;
typedef cublasLtMatmulPreferenceAttributes_t lt_pref_attr;
typedef cudaStream_t lt_stream;
typedef CUresult cu_result;
typedef CUcontext cu_context;
typedef CUdeviceptr cu_ptr;
#else
typedef int lt_status;
typedef void *lt_handle;
typedef void *lt_desc;
typedef void *lt_layout;
typedef void *lt_pref;
typedef int lt_compute;
typedef int lt_dtype;
typedef int lt_desc_attr;
typedef int lt_layout_attr;
typedef int lt_pref_attr;
typedef void *lt_stream;
typedef int cu_result;
typedef void *cu_context;
typedef unsigned long long cu_ptr;
#endif

/* cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t, field for field */
typedef struct {
  uint64_t data[8];
} our_algo;

typedef struct {
  our_algo algo;
  size_t workspaceSize;
  lt_status state;
  float wavesCount;
  int reserved[4];
} our_heuristic;

#ifdef RELAXMLIR_CUBLAS_CHECK_HEADERS
typedef cublasLtMatmulAlgo_t lt_algo;
typedef cublasLtMatmulHeuristicResult_t lt_heuristic;
#else
typedef our_algo lt_algo;
typedef our_heuristic lt_heuristic;
#endif

typedef lt_status (*lt_create_fn)(lt_handle *);
typedef const char *(*lt_status_string_fn)(lt_status);
typedef size_t (*lt_version_fn)(void);
typedef lt_status (*lt_desc_create_fn)(lt_desc *, lt_compute, lt_dtype);
typedef lt_status (*lt_desc_set_fn)(lt_desc, lt_desc_attr, const void *, size_t);
typedef lt_status (*lt_desc_destroy_fn)(lt_desc);
typedef lt_status (*lt_layout_create_fn)(lt_layout *, lt_dtype, uint64_t, uint64_t, int64_t);
typedef lt_status (*lt_layout_set_fn)(lt_layout, lt_layout_attr, const void *, size_t);
typedef lt_status (*lt_layout_destroy_fn)(lt_layout);
typedef lt_status (*lt_pref_create_fn)(lt_pref *);
typedef lt_status (*lt_pref_set_fn)(lt_pref, lt_pref_attr, const void *, size_t);
typedef lt_status (*lt_pref_destroy_fn)(lt_pref);
typedef lt_status (*lt_heuristic_fn)(lt_handle, lt_desc, lt_layout, lt_layout, lt_layout,
                                     lt_layout, lt_pref, int, lt_heuristic *, int *);
typedef lt_status (*lt_matmul_fn)(lt_handle, lt_desc, const void *, const void *, lt_layout,
                                  const void *, lt_layout, const void *, const void *, lt_layout,
                                  void *, lt_layout, const lt_algo *, void *, size_t, lt_stream);
typedef cu_result (*cu_init_fn)(unsigned int);
typedef cu_result (*cu_ctx_get_current_fn)(cu_context *);
typedef cu_result (*cu_mem_alloc_fn)(cu_ptr *, size_t);
typedef cu_result (*cu_error_string_fn)(cu_result, const char **);
typedef cu_result (*cu_device_count_fn)(int *);

#ifdef RELAXMLIR_CUBLAS_CHECK_HEADERS
#define SAME_TYPE(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " != " #b)
#define SAME_VALUE(ours, theirs) \
  _Static_assert((long long)(ours) == (long long)(theirs), #ours " != " #theirs)
SAME_VALUE(LT_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS);
SAME_VALUE(LT_OP_N, CUBLAS_OP_N);
SAME_VALUE(LT_OP_T, CUBLAS_OP_T);
SAME_VALUE(LT_COMPUTE_32F, CUBLAS_COMPUTE_32F);
SAME_VALUE(LT_R_32F, CUDA_R_32F);
SAME_VALUE(LT_R_16F, CUDA_R_16F);
SAME_VALUE(LT_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA);
SAME_VALUE(LT_DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB);
SAME_VALUE(LT_DESC_EPILOGUE, CUBLASLT_MATMUL_DESC_EPILOGUE);
SAME_VALUE(LT_DESC_BIAS_POINTER, CUBLASLT_MATMUL_DESC_BIAS_POINTER);
SAME_VALUE(LT_LAYOUT_BATCH_COUNT, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
SAME_VALUE(LT_LAYOUT_BATCH_STRIDE, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
SAME_VALUE(LT_PREF_MAX_WORKSPACE, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
SAME_VALUE(LT_PREF_ALIGN_A, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
SAME_VALUE(LT_PREF_ALIGN_B, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
SAME_VALUE(LT_PREF_ALIGN_C, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
SAME_VALUE(LT_PREF_ALIGN_D, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
SAME_VALUE(LT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_DEFAULT);
SAME_VALUE(LT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU);
SAME_VALUE(LT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_BIAS);
SAME_VALUE(LT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS);
SAME_VALUE(LT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU);
SAME_VALUE(LT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS);
SAME_VALUE(sizeof(our_algo), sizeof(cublasLtMatmulAlgo_t));
SAME_VALUE(sizeof(our_heuristic), sizeof(cublasLtMatmulHeuristicResult_t));
SAME_VALUE(offsetof(our_heuristic, workspaceSize), offsetof(lt_heuristic, workspaceSize));
SAME_VALUE(offsetof(our_heuristic, state), offsetof(lt_heuristic, state));
SAME_VALUE(offsetof(our_heuristic, wavesCount), offsetof(lt_heuristic, wavesCount));
SAME_VALUE(offsetof(our_heuristic, reserved), offsetof(lt_heuristic, reserved));
SAME_TYPE(lt_create_fn, __typeof__(&cublasLtCreate));
SAME_TYPE(lt_status_string_fn, __typeof__(&cublasLtGetStatusString));
SAME_TYPE(lt_version_fn, __typeof__(&cublasLtGetVersion));
SAME_TYPE(lt_desc_create_fn, __typeof__(&cublasLtMatmulDescCreate));
SAME_TYPE(lt_desc_set_fn, __typeof__(&cublasLtMatmulDescSetAttribute));
SAME_TYPE(lt_desc_destroy_fn, __typeof__(&cublasLtMatmulDescDestroy));
SAME_TYPE(lt_layout_create_fn, __typeof__(&cublasLtMatrixLayoutCreate));
SAME_TYPE(lt_layout_set_fn, __typeof__(&cublasLtMatrixLayoutSetAttribute));
SAME_TYPE(lt_layout_destroy_fn, __typeof__(&cublasLtMatrixLayoutDestroy));
SAME_TYPE(lt_pref_create_fn, __typeof__(&cublasLtMatmulPreferenceCreate));
SAME_TYPE(lt_pref_set_fn, __typeof__(&cublasLtMatmulPreferenceSetAttribute));
SAME_TYPE(lt_pref_destroy_fn, __typeof__(&cublasLtMatmulPreferenceDestroy));
SAME_TYPE(lt_heuristic_fn, __typeof__(&cublasLtMatmulAlgoGetHeuristic));
SAME_TYPE(lt_matmul_fn, __typeof__(&cublasLtMatmul));
SAME_TYPE(cu_init_fn, __typeof__(&cuInit));
SAME_TYPE(cu_ctx_get_current_fn, __typeof__(&cuCtxGetCurrent));
SAME_TYPE(cu_mem_alloc_fn, __typeof__(&cuMemAlloc_v2));
SAME_TYPE(cu_error_string_fn, __typeof__(&cuGetErrorString));
SAME_TYPE(cu_device_count_fn, __typeof__(&cuDeviceGetCount));
#endif

/* -- memref descriptors ----------------------------------------------------------------------- */

typedef struct {
  int64_t rank;
  void *descriptor;
} unranked;

/* A ranked descriptor is {T *allocated, *aligned; int64_t offset, sizes[rank], strides[rank]}. */
typedef struct {
  char *data; /* aligned + offset, in bytes (device memory: never dereferenced here) */
  int64_t rank;
  const int64_t *sizes, *strides;
} view;

static view read_view(const unranked *u, int64_t elem) {
  char *d = (char *)u->descriptor;
  char *aligned = *(char **)(d + sizeof(void *));
  const int64_t *rest = (const int64_t *)(d + 2 * sizeof(void *));
  view v = {aligned + rest[0] * elem, u->rank, rest + 1, rest + 1 + u->rank};
  return v;
}

/* -- state: libraries, errors, handles, workspaces, plans -------------------------------------- */

static struct {
  void *lib;
  lt_create_fn create;
  lt_status_string_fn status_string;
  lt_version_fn version;
  lt_desc_create_fn desc_create;
  lt_desc_set_fn desc_set;
  lt_desc_destroy_fn desc_destroy;
  lt_layout_create_fn layout_create;
  lt_layout_set_fn layout_set;
  lt_layout_destroy_fn layout_destroy;
  lt_pref_create_fn pref_create;
  lt_pref_set_fn pref_set;
  lt_pref_destroy_fn pref_destroy;
  lt_heuristic_fn heuristic;
  lt_matmul_fn matmul;
} lt;

static struct {
  void *lib;
  cu_init_fn init;
  cu_ctx_get_current_fn ctx_get_current;
  cu_mem_alloc_fn mem_alloc;
  cu_error_string_fn error_string;
  cu_device_count_fn device_count;
} cu;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char error[1024];
static char lt_path[4096], driver_path[4096] = "libcuda.so.1", hint[1024];
static void *caller_stream; /* the stream the model runs on (relaxmlir_cuda_set_stream) */

#define WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt's larger Hopper kernels want ~32 MiB */

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void set_error(const char *fmt, ...) {
  if (error[0]) return; /* the first error explains the rest */
  va_list args;
  va_start(args, fmt);
  vsnprintf(error, sizeof error, fmt, args);
  va_end(args);
}

static int lt_ok(lt_status status, const char *call) {
  if (status == LT_STATUS_SUCCESS) return 1;
  const char *text = lt.status_string ? lt.status_string(status) : "unknown status";
  set_error("cublas: %s failed (cuBLAS status %d: %s)", call, (int)status, text ? text : "?");
  return 0;
}

static int cu_ok(cu_result code, const char *call) {
  if (code == 0) return 1;
  const char *text = NULL;
  if (cu.error_string) cu.error_string(code, &text);
  set_error("cublas: %s failed (CUDA error %d: %s)", call, (int)code,
            text ? text : "unknown error");
  return 0;
}

#define SYM(table, field, name)                                                   \
  do {                                                                            \
    *(void **)&table.field = dlsym(table.lib, name);                              \
    if (!table.field) {                                                           \
      set_error("cublas: %s lacks the symbol %s", path, name);                    \
      table.lib = NULL;                                                           \
      return 0;                                                                   \
    }                                                                             \
  } while (0)

/* Open libcublasLt (called with the lock held). */
static int open_cublaslt(void) {
  if (lt.lib) return 1;
  const char *path = lt_path;
  if (!path[0]) {
    set_error("cublas: cuBLASLt (libcublasLt) not found: %s", hint);
    return 0;
  }
  lt.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lt.lib) {
    set_error("cublas: cannot load cuBLASLt (%s): %s", path, dlerror());
    return 0;
  }
  SYM(lt, status_string, "cublasLtGetStatusString");
  SYM(lt, create, "cublasLtCreate");
  SYM(lt, version, "cublasLtGetVersion");
  SYM(lt, desc_create, "cublasLtMatmulDescCreate");
  SYM(lt, desc_set, "cublasLtMatmulDescSetAttribute");
  SYM(lt, desc_destroy, "cublasLtMatmulDescDestroy");
  SYM(lt, layout_create, "cublasLtMatrixLayoutCreate");
  SYM(lt, layout_set, "cublasLtMatrixLayoutSetAttribute");
  SYM(lt, layout_destroy, "cublasLtMatrixLayoutDestroy");
  SYM(lt, pref_create, "cublasLtMatmulPreferenceCreate");
  SYM(lt, pref_set, "cublasLtMatmulPreferenceSetAttribute");
  SYM(lt, pref_destroy, "cublasLtMatmulPreferenceDestroy");
  SYM(lt, heuristic, "cublasLtMatmulAlgoGetHeuristic");
  SYM(lt, matmul, "cublasLtMatmul");
  return 1;
}

/* Open and initialize the CUDA driver (called with the lock held). */
static int open_driver(void) {
  if (cu.lib) return 1;
  const char *path = driver_path;
  cu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!cu.lib) {
    set_error("cublas: cannot load the CUDA driver (%s); is an NVIDIA driver installed?: %s",
              path, dlerror());
    return 0;
  }
  SYM(cu, error_string, "cuGetErrorString");
  SYM(cu, init, "cuInit");
  SYM(cu, ctx_get_current, "cuCtxGetCurrent");
  SYM(cu, mem_alloc, "cuMemAlloc_v2");
  SYM(cu, device_count, "cuDeviceGetCount");
  if (!cu_ok(cu.init(0), "cuInit")) {
    cu.lib = NULL;
    return 0;
  }
  return 1;
}

/* One cuBLASLt handle per context, one workspace per (context, stream): never freed (the
 * driver releases them with the context at exit). */
#define MAX_CONTEXTS 64
static struct {
  cu_context ctx;
  lt_handle handle;
} handles[MAX_CONTEXTS];
static int n_handles;

#define MAX_WORKSPACES 256
static struct {
  cu_context ctx;
  void *stream;
  cu_ptr ptr;
} workspaces[MAX_WORKSPACES];
static int n_workspaces;

typedef struct {
  cu_context ctx;
  lt_handle handle;
  cu_ptr workspace;
} device_state;

/* Libraries open, a context current, its handle and this stream's workspace (lock held). */
static int ready(device_state *st) {
  if (error[0] || !open_cublaslt() || !open_driver()) return 0;
  st->ctx = NULL;
  if (!cu_ok(cu.ctx_get_current(&st->ctx), "cuCtxGetCurrent")) return 0;
  if (!st->ctx) {
    set_error("cublas: no CUDA context is current on this thread (the kernels run inside a "
              "model built for cuda, on its device)");
    return 0;
  }
  st->handle = NULL;
  for (int i = 0; i < n_handles; i++)
    if (handles[i].ctx == st->ctx) st->handle = handles[i].handle;
  if (!st->handle) {
    if (n_handles == MAX_CONTEXTS) {
      set_error("cublas: more than %d CUDA contexts", MAX_CONTEXTS);
      return 0;
    }
    if (!lt_ok(lt.create(&st->handle), "cublasLtCreate")) return 0;
    handles[n_handles].ctx = st->ctx;
    handles[n_handles++].handle = st->handle;
  }
  st->workspace = 0;
  for (int i = 0; i < n_workspaces; i++)
    if (workspaces[i].ctx == st->ctx && workspaces[i].stream == caller_stream)
      st->workspace = workspaces[i].ptr;
  if (!st->workspace) {
    if (n_workspaces == MAX_WORKSPACES) {
      set_error("cublas: more than %d (context, stream) pairs", MAX_WORKSPACES);
      return 0;
    }
    if (!cu_ok(cu.mem_alloc(&st->workspace, WORKSPACE_BYTES), "cuMemAlloc (workspace)")) return 0;
    workspaces[n_workspaces].ctx = st->ctx;
    workspaces[n_workspaces].stream = caller_stream;
    workspaces[n_workspaces++].ptr = st->workspace;
  }
  return 1;
}

/* A plan: everything cuBLASLt needs for one problem shape, layout and alignment. */
typedef struct {
  cu_context ctx;
  int dtype, trans_b, epilogue, batch;
  int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
  uint32_t align_a, align_b, align_c, align_bias;
} plan_key;

typedef struct {
  plan_key key;
  lt_desc desc;
  lt_layout la, lb, lc; /* cuBLASLt's A (our b), B (our a), C = D (out) */
  lt_algo algo;
  size_t workspace;
} plan;

static plan **plans; /* open addressing, power-of-two capacity */
static size_t n_plans, cap_plans;

static uint64_t hash_key(const plan_key *k) {
  const unsigned char *p = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the (zero-padded) key */
  for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static plan *find_plan(const plan_key *k) {
  if (!cap_plans) return NULL;
  for (size_t i = hash_key(k) & (cap_plans - 1);; i = (i + 1) & (cap_plans - 1)) {
    if (!plans[i]) return NULL;
    if (!memcmp(&plans[i]->key, k, sizeof *k)) return plans[i];
  }
}

static int insert_plan(plan *p) {
  if (2 * (n_plans + 1) > cap_plans) {
    size_t cap = cap_plans ? 2 * cap_plans : 64;
    plan **grown = (plan **)calloc(cap, sizeof(plan *));
    if (!grown) return 0;
    for (size_t j = 0; j < cap_plans; j++) {
      if (!plans[j]) continue;
      size_t i = hash_key(&plans[j]->key) & (cap - 1);
      while (grown[i]) i = (i + 1) & (cap - 1);
      grown[i] = plans[j];
    }
    free(plans);
    plans = grown, cap_plans = cap;
  }
  size_t i = hash_key(&p->key) & (cap_plans - 1);
  while (plans[i]) i = (i + 1) & (cap_plans - 1);
  plans[i] = p;
  n_plans++;
  return 1;
}

static void destroy_plan(plan *p) {
  if (p->desc) lt.desc_destroy(p->desc);
  if (p->la) lt.layout_destroy(p->la);
  if (p->lb) lt.layout_destroy(p->lb);
  if (p->lc) lt.layout_destroy(p->lc);
  free(p);
}

static int make_layout(lt_layout *out, int dtype, uint64_t rows, uint64_t cols, int64_t ld,
                       int batch, int64_t stride) {
  if (!lt_ok(lt.layout_create(out, dtype, rows, cols, ld), "cublasLtMatrixLayoutCreate")) return 0;
  if (batch > 1) {
    int32_t count = batch;
    if (!lt_ok(lt.layout_set(*out, LT_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)") ||
        !lt_ok(lt.layout_set(*out, LT_LAYOUT_BATCH_STRIDE, &stride, sizeof stride),
               "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"))
      return 0;
  }
  return 1;
}

static const char *dtype_name(int dtype) { return dtype == LT_R_16F ? "float16" : "float32"; }

/* The plan of `k` (made, with the heuristic's algorithm, on first use); NULL: error recorded. */
static plan *get_plan(const plan_key *k, const device_state *st, const void *bias) {
  plan *p = find_plan(k);
  if (p) return p;
  p = (plan *)calloc(1, sizeof(plan));
  if (!p) {
    set_error("cublas: out of host memory");
    return NULL;
  }
  p->key = *k;
  int32_t op_a = k->trans_b ? LT_OP_T : LT_OP_N, op_b = LT_OP_N;
  uint32_t epilogue = (uint32_t)k->epilogue;
  lt_pref pref = NULL;
  int ok =
      lt_ok(lt.desc_create(&p->desc, LT_COMPUTE_32F, LT_R_32F), "cublasLtMatmulDescCreate") &&
      lt_ok(lt.desc_set(p->desc, LT_DESC_TRANSA, &op_a, sizeof op_a), "set TRANSA") &&
      lt_ok(lt.desc_set(p->desc, LT_DESC_TRANSB, &op_b, sizeof op_b), "set TRANSB") &&
      lt_ok(lt.desc_set(p->desc, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue), "set EPILOGUE") &&
      /* the heuristic reads the bias pointer's alignment: a stand-in of the keyed alignment */
      (!bias || lt_ok(lt.desc_set(p->desc, LT_DESC_BIAS_POINTER, &bias, sizeof bias),
                      "set BIAS_POINTER")) &&
      make_layout(&p->la, k->dtype, k->trans_b ? k->k : k->n, k->trans_b ? k->n : k->k, k->ldb,
                  k->batch, k->stride_b) &&
      make_layout(&p->lb, k->dtype, k->k, k->m, k->lda, k->batch, k->stride_a) &&
      make_layout(&p->lc, k->dtype, k->n, k->m, k->ldc, k->batch, k->stride_c) &&
      lt_ok(lt.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  if (ok) {
    uint64_t ws = WORKSPACE_BYTES;
    /* cuBLASLt's A is our b, its B our a */
    uint32_t aligns[4] = {k->align_b, k->align_a, k->align_c, k->align_c};
    int attrs[4] = {LT_PREF_ALIGN_A, LT_PREF_ALIGN_B, LT_PREF_ALIGN_C, LT_PREF_ALIGN_D};
    ok = lt_ok(lt.pref_set(pref, LT_PREF_MAX_WORKSPACE, &ws, sizeof ws), "set MAX_WORKSPACE");
    for (int i = 0; i < 4 && ok; i++)
      ok = lt_ok(lt.pref_set(pref, attrs[i], &aligns[i], sizeof aligns[i]), "set MIN_ALIGNMENT");
  }
  if (ok) {
    lt_heuristic found;
    int count = 0;
    memset(&found, 0, sizeof found);
    ok = lt_ok(lt.heuristic(st->handle, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &found,
                            &count),
               "cublasLtMatmulAlgoGetHeuristic");
    if (ok && (count < 1 || found.state != LT_STATUS_SUCCESS)) {
      set_error("cublas: cuBLASLt has no algorithm for a %s matmul m=%lld n=%lld k=%lld "
                "batch=%d (epilogue %d)",
                dtype_name(k->dtype), (long long)k->m, (long long)k->n, (long long)k->k, k->batch,
                k->epilogue);
      ok = 0;
    }
    p->algo = found.algo;
    p->workspace = found.workspaceSize;
  }
  if (pref) lt.pref_destroy(pref);
  if (ok && !insert_plan(p)) {
    set_error("cublas: out of host memory");
    ok = 0;
  }
  if (!ok) {
    destroy_plan(p);
    return NULL;
  }
  return p;
}

/* -- the matmul -------------------------------------------------------------------------------- */

static uint32_t alignment_of(uint64_t value) {
  uint32_t a = 256; /* cuBLASLt asks for no more than 256 bytes */
  while (a > 1 && value % a) a >>= 1;
  return a;
}

/* The stride of an operand's batch dims (right-aligned to the output's, broadcast where its
 * extent is 1 or missing), in elements: 1 and *stride when batch b starts at b * stride for every
 * b (one strided-batched call), 0 otherwise. *align gets the alignment of all its batch offsets. */
static int flat_batch(const view *v, const view *out, int64_t elem, int64_t *stride,
                      uint32_t *align) {
  int64_t out_batch = out->rank - 2, own_batch = v->rank - 2, inner = 1, flat = -1;
  int ok = 1;
  uint64_t offsets_gcd = 0;
  for (int64_t i = out_batch - 1; i >= 0; i--) {
    int64_t j = i - (out_batch - own_batch);
    int64_t s = (j >= 0 && v->sizes[j] != 1) ? v->strides[j] : 0;
    if (out->sizes[i] > 1) {
      if (flat < 0 && inner == 1) flat = s; /* the innermost batch dim that varies */
      if (s != (flat < 0 ? 0 : flat) * inner) ok = 0;
      offsets_gcd |= (uint64_t)(s * elem);
    }
    inner *= out->sizes[i];
  }
  *stride = flat < 0 ? 0 : flat;
  uint32_t a = alignment_of((uint64_t)(uintptr_t)v->data);
  uint32_t b = offsets_gcd ? alignment_of(offsets_gcd) : 256;
  *align = a < b ? a : b;
  return ok;
}

/* Offset, in elements, of batch index `b` in an operand (see flat_batch). */
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

/* The row stride of a row-major matrix operand (rows x cols), 0 if its rows are not contiguous.
 * A matrix of one row or column may have any stride there: cuBLASLt gets the smallest valid one. */
static int64_t row_stride(const view *v, int64_t cols) {
  int64_t r = v->rank, rows = v->sizes[r - 2];
  if (v->strides[r - 1] != 1 && cols > 1) return 0;
  if (rows <= 1) return cols;
  return v->strides[r - 2] >= cols ? v->strides[r - 2] : 0;
}

/* One call (the lock held): check the operands, find the plan, enqueue on the caller's stream. */
static void matmul_locked(unranked *ua, unranked *ub, unranked *ubias, unranked *uout, int dtype,
                          int trans_b, int act) {
  int64_t elem = dtype == LT_R_16F ? 2 : 4;
  view a = read_view(ua, elem), b = read_view(ub, elem), out = read_view(uout, elem);
  int64_t r = out.rank, m = out.sizes[r - 2], n = out.sizes[r - 1], k = a.sizes[a.rank - 1];
  int64_t batch = 1;
  for (int64_t i = 0; i < r - 2; i++) batch *= out.sizes[i];
  if (error[0]) return; /* an earlier failure is pending: the caller reports it */
  if (a.rank < 2 || b.rank < 2 || r < 2 || a.sizes[a.rank - 2] != m ||
      b.sizes[b.rank - (trans_b ? 1 : 2)] != k || b.sizes[b.rank - (trans_b ? 2 : 1)] != n) {
    set_error("cublas: operand shapes do not form a matmul (lhs rank %lld, rhs rank %lld, "
              "out %lldx%lld, k %lld)",
              (long long)a.rank, (long long)b.rank, (long long)m, (long long)n, (long long)k);
    return;
  }
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    set_error("cublas: a matmul with an empty contraction (k = 0) is not supported");
    return;
  }
  const void *bias = NULL;
  uint32_t align_bias = 0;
  if (ubias) {
    view v = read_view(ubias, elem);
    int vector = v.rank >= 1 && v.sizes[v.rank - 1] == n && (v.strides[v.rank - 1] == 1 || n == 1);
    for (int64_t i = 0; i + 1 < v.rank; i++) vector = vector && v.sizes[i] == 1;
    if (!vector) {
      set_error("cublas: the bias must be a contiguous vector of the output's %lld columns",
                (long long)n);
      return;
    }
    bias = v.data;
    align_bias = alignment_of((uint64_t)(uintptr_t)bias);
  }
  int64_t lda = row_stride(&a, k), ldb = row_stride(&b, trans_b ? k : n), ldc = row_stride(&out, n);
  if (!lda || !ldb || !ldc) {
    set_error("cublas: an operand's rows are not contiguous (row strides %lld, %lld, %lld)",
              (long long)a.strides[a.rank - 2], (long long)b.strides[b.rank - 2],
              (long long)out.strides[r - 2]);
    return;
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) {
    set_error("cublas: a dimension exceeds 2^31-1 (m=%lld n=%lld k=%lld batch=%lld)",
              (long long)m, (long long)n, (long long)k, (long long)batch);
    return;
  }
  plan_key key;
  memset(&key, 0, sizeof key); /* the key is hashed and compared bytewise, padding included */
  int64_t sa, sb, sc;
  int flat = flat_batch(&a, &out, elem, &sa, &key.align_a) &
             flat_batch(&b, &out, elem, &sb, &key.align_b) &
             flat_batch(&out, &out, elem, &sc, &key.align_c);
  key.dtype = dtype, key.trans_b = trans_b, key.m = m, key.n = n, key.k = k;
  key.lda = lda, key.ldb = ldb, key.ldc = ldc, key.align_bias = align_bias;
  static const int epilogues[2][3] = {
      {LT_EPILOGUE_DEFAULT, LT_EPILOGUE_RELU, LT_EPILOGUE_GELU},
      {LT_EPILOGUE_BIAS, LT_EPILOGUE_RELU_BIAS, LT_EPILOGUE_GELU_BIAS},
  };
  key.epilogue = epilogues[bias != NULL][act];
  int64_t calls = 1;
  if (flat && batch > 1 && sb == 0 && sa == m * lda && sc == m * ldc && batch * m <= INT32_MAX) {
    key.m = batch * m; /* shared weights, stacked rows: one plain GEMM over every row */
    key.batch = 1;
  } else if (flat) {
    key.batch = (int)batch;
    key.stride_a = sa, key.stride_b = sb, key.stride_c = sc;
  } else {
    key.batch = 1; /* batch dims no single stride describes: one call per batch index */
    calls = batch;
  }
  float alpha = 1.0f, beta = 0.0f;
  device_state st;
  if (ready(&st)) {
    key.ctx = st.ctx;
    plan *p = get_plan(&key, &st, bias);
    if (p && bias)
      lt_ok(lt.desc_set(p->desc, LT_DESC_BIAS_POINTER, &bias, sizeof bias), "set BIAS_POINTER");
    for (int64_t i = 0; p && i < calls && !error[0]; i++) {
      const char *pa = a.data, *pb = b.data;
      char *pc = out.data;
      if (calls > 1) {
        pa += batch_offset(&a, &out, i) * elem;
        pb += batch_offset(&b, &out, i) * elem;
        pc += batch_offset(&out, &out, i) * elem;
      }
      lt_ok(lt.matmul(st.handle, p->desc, &alpha, pb, p->la, pa, p->lb, &beta, pc, p->lc, pc,
                      p->lc, &p->algo, (void *)(uintptr_t)st.workspace, p->workspace,
                      (lt_stream)caller_stream),
            "cublasLtMatmul");
    }
  }
}

static void matmul(unranked *a, unranked *b, unranked *bias, unranked *out, int dtype, int trans_b,
                   int act) {
  pthread_mutex_lock(&lock);
  matmul_locked(a, b, bias, out, dtype, trans_b, act);
  pthread_mutex_unlock(&lock);
}

/* -- the caller's side ------------------------------------------------------------------------- */

/* Where libcublasLt and the driver are (call before the first kernel); `why` says how to install
 * cuBLASLt, for the error when `cublaslt` is NULL (not found). */
EXPORT void relaxmlir_cublas_configure(const char *cublaslt, const char *driver, const char *why) {
  pthread_mutex_lock(&lock);
  snprintf(lt_path, sizeof lt_path, "%s", cublaslt ? cublaslt : "");
  if (driver) snprintf(driver_path, sizeof driver_path, "%s", driver);
  snprintf(hint, sizeof hint, "%s", why ? why : "");
  pthread_mutex_unlock(&lock);
}

/* Same names as the model's CUDA runtime (cuda_runtime.c): the caller treats both alike. */
EXPORT void relaxmlir_cuda_set_stream(void *stream) { caller_stream = stream; }

/* Sets up what the kernels need on `stream` (the handle, the stream's workspace) ahead of its
 * first kernel: a CUDA graph capture on it refuses the workspace's allocation. 1 when ready, 0
 * with the error recorded. */
EXPORT int relaxmlir_cuda_prepare_stream(void *stream) {
  pthread_mutex_lock(&lock);
  void *saved = caller_stream;
  caller_stream = stream;
  device_state st;
  int ok = ready(&st);
  caller_stream = saved;
  pthread_mutex_unlock(&lock);
  return ok;
}

EXPORT int relaxmlir_cuda_take_error(char *buf, int size) {
  pthread_mutex_lock(&lock);
  int n = (int)strlen(error);
  if (n && buf && size > 0) snprintf(buf, (size_t)size, "%s", error);
  error[0] = 0;
  pthread_mutex_unlock(&lock);
  return n;
}

/* cuBLASLt's version (e.g. 131000), 0 when it cannot be loaded (error recorded). */
EXPORT size_t relaxmlir_cublas_version(void) {
  pthread_mutex_lock(&lock);
  size_t v = open_cublaslt() ? lt.version() : 0;
  pthread_mutex_unlock(&lock);
  return v;
}

/* 1 when cuBLASLt and the driver load and a device exists; 0 with the reason recorded. */
EXPORT int relaxmlir_cublas_probe(void) {
  pthread_mutex_lock(&lock);
  int count = 0;
  int ok = !error[0] && open_cublaslt() && open_driver() &&
           cu_ok(cu.device_count(&count), "cuDeviceGetCount");
  if (ok && count < 1) {
    set_error("cublas: no CUDA device");
    ok = 0;
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

/* One exported kernel per (dtype, transposed right operand, bias, activation): the codegen picks
 * the symbol by the composite's name and dtype. */
enum { ACT_NONE, ACT_RELU, ACT_GELU_TANH };
#define NO_BIAS(D, T, ACT, NAME)                                                            \
  EXPORT void relaxmlir_cublas_##NAME(unranked *a, unranked *b, unranked *out) {            \
    matmul(a, b, NULL, out, D, T, ACT);                                                     \
  }
#define BIAS(D, T, ACT, NAME)                                                               \
  EXPORT void relaxmlir_cublas_##NAME(unranked *a, unranked *b, unranked *bias,             \
                                      unranked *out) {                                      \
    matmul(a, b, bias, out, D, T, ACT);                                                     \
  }
#define KERNELS(D, DT)                                                                      \
  NO_BIAS(D, 0, ACT_NONE, DT##_matmul)                                                      \
  NO_BIAS(D, 0, ACT_RELU, DT##_matmul_relu)                                                 \
  NO_BIAS(D, 0, ACT_GELU_TANH, DT##_matmul_gelu_tanh)                                       \
  BIAS(D, 0, ACT_NONE, DT##_matmul_bias)                                                    \
  BIAS(D, 0, ACT_RELU, DT##_matmul_bias_relu)                                               \
  BIAS(D, 0, ACT_GELU_TANH, DT##_matmul_bias_gelu_tanh)                                     \
  NO_BIAS(D, 1, ACT_NONE, DT##_matmul_transposed)                                           \
  NO_BIAS(D, 1, ACT_RELU, DT##_matmul_transposed_relu)                                      \
  NO_BIAS(D, 1, ACT_GELU_TANH, DT##_matmul_transposed_gelu_tanh)                            \
  BIAS(D, 1, ACT_NONE, DT##_matmul_transposed_bias)                                         \
  BIAS(D, 1, ACT_RELU, DT##_matmul_transposed_bias_relu)                                    \
  BIAS(D, 1, ACT_GELU_TANH, DT##_matmul_transposed_bias_gelu_tanh)

KERNELS(LT_R_32F, f32)
KERNELS(LT_R_16F, f16)

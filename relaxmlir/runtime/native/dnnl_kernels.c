/* The `dnnl` codegen's native kernels: conv2d (NCHW/OIHW, any stride, padding, dilation and
 * groups) and matmul through oneDNN, their epilogues (bias, residual add, relu/gelu/silu) fused
 * as oneDNN post-ops.
 *
 * Compiled code calls these directly (no Python on the way). Every argument is an unranked
 * memref, `{int64_t rank; descriptor *}`, as for the blas kernels; the last input is a small
 * int64 tensor of parameters the codegen computed (convolution geometry, where the residual
 * sits, and a digest of a constant weight). Primitives are made once per problem (shapes,
 * strides, parameters, thread count) and kept in a cache; a constant weight is reordered into
 * the primitive's own layout once and kept with it.
 *
 * oneDNN (libdnnl.so.3 of the onednn-cpu-iomp or onednn-cpu-gomp wheel, or the file
 * RELAXMLIR_DNNL_LIB names) is opened here with dlopen when relaxmlir/runtime/libraries.py loads
 * these kernels (relaxmlir/runtime/dnnl.py has loaded what it needs first); this file
 * links against no oneDNN and uses no header of it: the few C API entries and enum values it
 * needs are declared below, as oneDNN v3.2 defines them.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- oneDNN v3.2 C API, the part used here (include/oneapi/dnnl/dnnl_types.h,
 * dnnl_common_types.h, dnnl.h). Handles are opaque pointers; enums are passed as int. */
enum { DNNL_MAX_NDIMS = 12 };
typedef struct {
  int arg;
  void *memory;
} dnnl_exec_arg;
typedef struct {
  int major, minor, patch;
  const char *hash;
  unsigned cpu_runtime, gpu_runtime;
} dnnl_version_info;

enum { DNNL_SUCCESS = 0 };                                          /* dnnl_status_t */
enum { DNNL_F32 = 3 };                                              /* dnnl_data_type_t */
enum { DNNL_CPU = 1 };                                              /* dnnl_engine_kind_t */
enum { DNNL_STREAM_IN_ORDER = 1 };                                  /* dnnl_stream_flags_t */
enum { DNNL_FORMAT_TAG_ANY = 1 };                                   /* dnnl_format_tag_t */
enum { DNNL_FORWARD_INFERENCE = 96 };                               /* dnnl_prop_kind_t */
enum { DNNL_SCRATCHPAD_USER = 1 };                                  /* dnnl_scratchpad_mode_t */
enum {                                                              /* dnnl_alg_kind_t */
  DNNL_CONVOLUTION_DIRECT = 0x1,
  DNNL_ELTWISE_RELU = 0x20,
  DNNL_ELTWISE_GELU_TANH = 0x2b,
  DNNL_ELTWISE_SWISH = 0x2c,
  DNNL_ELTWISE_GELU_ERF = 0x31,
};
enum { DNNL_QUERY_SRC_MD = 129, DNNL_QUERY_WEIGHTS_MD = 131, DNNL_QUERY_DST_MD = 133,
       DNNL_QUERY_SCRATCHPAD_MD = 136 };                            /* dnnl_query_t */
enum { DNNL_ARG_SRC = 1, DNNL_ARG_DST = 17, DNNL_ARG_WEIGHTS = 33, DNNL_ARG_BIAS = 41,
       DNNL_ARG_SCRATCHPAD = 80 };                                  /* DNNL_ARG_* */

typedef const int64_t *dims;
/* X(return type, name without the dnnl_ prefix, parameters) */
#define DNNL_FUNCTIONS(X)                                                                        \
  X(int, engine_create, (void **engine, int kind, size_t index))                                 \
  X(int, stream_create, (void **stream, void *engine, unsigned flags))                           \
  X(int, stream_destroy, (void *stream))                                                         \
  X(int, stream_wait, (void *stream))                                                            \
  X(int, memory_desc_create_with_strides, (void **md, int ndims, dims d, int dt, dims strides))  \
  X(int, memory_desc_create_with_tag, (void **md, int ndims, dims d, int dt, int tag))           \
  X(int, memory_desc_clone, (void **md, const void *existing))                                   \
  X(int, memory_desc_destroy, (void *md))                                                        \
  X(int, memory_desc_equal, (const void *lhs, const void *rhs))                                  \
  X(size_t, memory_desc_get_size, (const void *md))                                              \
  X(int, memory_create, (void **memory, const void *md, void *engine, void *handle))             \
  X(int, memory_destroy, (void *memory))                                                         \
  X(int, primitive_attr_create, (void **attr))                                                   \
  X(int, primitive_attr_destroy, (void *attr))                                                   \
  X(int, primitive_attr_set_post_ops, (void *attr, const void *post_ops))                        \
  X(int, primitive_attr_set_scratchpad_mode, (void *attr, int mode))                             \
  X(int, post_ops_create, (void **post_ops))                                                     \
  X(int, post_ops_destroy, (void *post_ops))                                                     \
  X(int, post_ops_append_eltwise, (void *post_ops, int alg, float alpha, float beta))            \
  X(int, post_ops_append_sum, (void *post_ops, float scale, int32_t zero_point, int dt))         \
  X(int, convolution_forward_primitive_desc_create,                                              \
    (void **pd, void *engine, int prop, int alg, const void *src, const void *weights,           \
     const void *bias, const void *dst, dims strides, dims dilates, dims pad_l, dims pad_r,      \
     const void *attr))                                                                          \
  X(int, matmul_primitive_desc_create,                                                           \
    (void **pd, void *engine, const void *src, const void *weights, const void *bias,            \
     const void *dst, const void *attr))                                                         \
  X(int, reorder_primitive_desc_create,                                                          \
    (void **pd, const void *src, void *src_engine, const void *dst, void *dst_engine,            \
     const void *attr))                                                                          \
  X(const void *, primitive_desc_query_md, (const void *pd, int what, int index))                \
  X(int, primitive_desc_destroy, (void *pd))                                                     \
  X(int, primitive_create, (void **primitive, const void *pd))                                   \
  X(int, primitive_destroy, (void *primitive))                                                   \
  X(int, primitive_execute, (const void *primitive, void *stream, int nargs,                     \
                             const dnnl_exec_arg *args))                                         \
  X(const dnnl_version_info *, version, (void))

#define DECLARE(ret, name, params) ret(*name) params;
static struct {
  DNNL_FUNCTIONS(DECLARE)
} dnnl;
#undef DECLARE

static void *engine;                    /* the CPU engine; set once by relaxmlir_dnnl_init */
static void (*omp_set_threads)(int);    /* of the OpenMP runtime oneDNN uses */
static int (*omp_max_threads)(void);
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- memrefs */
typedef struct {
  int64_t rank;
  void *descriptor;
} unranked;

/* A ranked descriptor is {T *allocated, *aligned; int64_t offset, sizes[rank], strides[rank]}. */
typedef struct {
  char *data; /* aligned + offset * element size */
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

static int64_t volume(const view *v) {
  int64_t n = 1;
  for (int64_t i = 0; i < v->rank; i++) n *= v->sizes[i];
  return n;
}

/* ---- errors: a kernel cannot raise; it fills its output with NaN, says why on stderr and
 * keeps the message for relaxmlir_dnnl_last_error. The codegen's checks keep this off the
 * paths it offloads. */
static char last_error[512];

EXPORT const char *relaxmlir_dnnl_last_error(void) { return last_error; }

static void fill_nan(const view *out) {
  int64_t n = volume(out);
  for (int64_t flat = 0; flat < n; flat++) {
    int64_t rest = flat, off = 0;
    for (int64_t i = out->rank - 1; i >= 0; i--) {
      off += (rest % out->sizes[i]) * out->strides[i];
      rest /= out->sizes[i];
    }
    ((float *)out->data)[off] = NAN;
  }
}

static void fail(const char *kernel, const char *what, int status, const view *out) {
  snprintf(last_error, sizeof last_error, "%s: %s (oneDNN status %d)", kernel, what, status);
  fprintf(stderr, "relaxmlir dnnl: %s; the output is NaN\n", last_error);
  fill_nan(out);
}

/* ---- threads: oneDNN's OpenMP runtime gets the team size that the OpenMP runtime of our
 * compiled code (libiomp5) has on the calling thread, so RELAXMLIR_NUM_THREADS and
 * relaxmlir.runtime.set_num_threads reach both; set per calling thread (an OpenMP ICV). For the
 * Intel-OpenMP build the two are the same libiomp5 and nothing is set; the GNU-OpenMP build's
 * libgomp is a second runtime, set here before each call when the counts differ. */
static int (*follow_threads)(void); /* libiomp5's omp_get_max_threads, when loaded */
static int want_threads;            /* else a fixed count (0: the runtime's own default) */

EXPORT void relaxmlir_dnnl_follow_threads(void *omp_get_max_threads) {
  *(void **)&follow_threads = omp_get_max_threads;
}

EXPORT void relaxmlir_dnnl_set_num_threads(int n) {
  __atomic_store_n(&want_threads, n > 0 ? n : 0, __ATOMIC_RELAXED);
}

static int threads_for_call(void) {
  if (!omp_max_threads) return 0; /* a oneDNN without OpenMP (TBB, threadpool) */
  int want = follow_threads ? follow_threads() : __atomic_load_n(&want_threads, __ATOMIC_RELAXED);
  if (want > 0 && omp_max_threads() != want) omp_set_threads(want);
  return omp_max_threads();
}

/* The team size a kernel called from this thread would give oneDNN (0: not OpenMP). */
EXPORT int relaxmlir_dnnl_team_size(void) { return threads_for_call(); }

/* ---- per-thread state: a stream and a growing scratch arena, freed when the thread ends */
typedef struct {
  void *stream;
  char *arena;
  size_t arena_size;
} thread_state;

static pthread_key_t state_key;
static __thread thread_state *state;

static void free_state(void *p) {
  thread_state *s = (thread_state *)p;
  if (s->stream) dnnl.stream_destroy(s->stream);
  free(s->arena);
  free(s);
}

static thread_state *this_thread(void) {
  if (state) return state;
  thread_state *s = (thread_state *)calloc(1, sizeof *s);
  if (!s || dnnl.stream_create(&s->stream, engine, DNNL_STREAM_IN_ORDER) != DNNL_SUCCESS) {
    free(s);
    return 0;
  }
  pthread_setspecific(state_key, s);
  state = s;
  return s;
}

/* `bytes` of scratch memory, 64-byte aligned, valid until the next call on this thread. */
static char *arena(thread_state *s, size_t bytes) {
  if (bytes <= s->arena_size) return s->arena;
  void *p = 0;
  if (posix_memalign(&p, 64, bytes)) return 0;
  free(s->arena);
  s->arena = (char *)p;
  s->arena_size = bytes;
  return s->arena;
}

static size_t round_up(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- init (called once by the loader with the library's path) */
EXPORT int relaxmlir_dnnl_init(const char *path, char *err, int err_size) {
  pthread_mutex_lock(&init_lock);
  int rc = 0;
  if (engine) goto done;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(err, err_size, "%s", dlerror());
    rc = 1;
    goto done;
  }
#define RESOLVE(ret, name, params)                                                               \
  *(void **)&dnnl.name = dlsym(lib, "dnnl_" #name);                                              \
  if (!dnnl.name) {                                                                              \
    snprintf(err, err_size, "%s defines no dnnl_" #name " (oneDNN 3.x expected)", path);         \
    rc = 1;                                                                                      \
    goto done;                                                                                   \
  }
  DNNL_FUNCTIONS(RESOLVE)
#undef RESOLVE
  const dnnl_version_info *v = dnnl.version();
  if (v->major != 3) {
    snprintf(err, err_size, "%s is oneDNN %d.%d; these kernels use the 3.x C API", path, v->major,
             v->minor);
    rc = 1;
    goto done;
  }
  /* found in libdnnl's own dependencies: the OpenMP runtime it was built with */
  *(void **)&omp_set_threads = dlsym(lib, "omp_set_num_threads");
  *(void **)&omp_max_threads = dlsym(lib, "omp_get_max_threads");
  if (!omp_set_threads || !omp_max_threads) omp_set_threads = 0, omp_max_threads = 0;
  if (pthread_key_create(&state_key, free_state)) {
    snprintf(err, err_size, "pthread_key_create failed");
    rc = 1;
    goto done;
  }
  void *e = 0;
  int status = dnnl.engine_create(&e, DNNL_CPU, 0);
  if (status != DNNL_SUCCESS) {
    snprintf(err, err_size, "dnnl_engine_create(cpu) failed (status %d)", status);
    rc = 1;
    goto done;
  }
  engine = e;
done:
  pthread_mutex_unlock(&init_lock);
  return rc;
}

EXPORT int relaxmlir_dnnl_version(void) {
  if (!engine) return 0;
  const dnnl_version_info *v = dnnl.version();
  return v->major * 10000 + v->minor * 100 + v->patch;
}

enum { ACT_NONE, ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_SILU }; /* the epilogue's activation */

/* ---- primitives and the cache */
typedef struct {
  void *p;
  void *scratch_md;
  size_t scratch;
} prim;

/* A reorder between two layouts; scratchpad managed here (see make_prim). */
static void *user_scratch_attr(void) {
  void *attr = 0;
  if (dnnl.primitive_attr_create(&attr) != DNNL_SUCCESS) return 0;
  dnnl.primitive_attr_set_scratchpad_mode(attr, DNNL_SCRATCHPAD_USER);
  return attr;
}

/* A primitive from its descriptor (destroyed here). User scratchpads everywhere: the library's
 * shared scratchpad would tie each primitive to the thread that made it. */
static int make_prim(prim *out, void *pd) {
  const void *smd = dnnl.primitive_desc_query_md(pd, DNNL_QUERY_SCRATCHPAD_MD, 0);
  out->scratch = smd ? dnnl.memory_desc_get_size(smd) : 0;
  out->scratch_md = 0;
  if (out->scratch) dnnl.memory_desc_clone(&out->scratch_md, smd);
  int status = dnnl.primitive_create(&out->p, pd);
  dnnl.primitive_desc_destroy(pd);
  return status;
}

static int make_reorder(prim *out, const void *from, const void *to) {
  void *attr = user_scratch_attr(), *pd = 0;
  int status = dnnl.reorder_primitive_desc_create(&pd, from, engine, to, engine, attr);
  dnnl.primitive_attr_destroy(attr);
  return status == DNNL_SUCCESS ? make_prim(out, pd) : status;
}

static void free_prim(prim *p) {
  if (p->p) dnnl.primitive_destroy(p->p);
  if (p->scratch_md) dnnl.memory_desc_destroy(p->scratch_md);
  p->p = p->scratch_md = 0;
}

/* One cached problem. The main primitive reads src/weights/dst in its own layouts (`*_md`);
 * reorders move the user's tensors (`*_user`) in and out where those differ. */
typedef struct entry {
  struct entry *next;
  uint64_t hash;
  int nkey;
  int64_t *key;
  prim main, src_in, weights_in, dst_out, residual_in;
  void *src_user, *src_md, *weights_user, *weights_md, *dst_user, *dst_md, *bias_md, *res_user;
  size_t src_bytes, weights_bytes, dst_bytes; /* temporaries when reordered */
  void *packed;                               /* a constant weight in weights_md, or 0 */
  size_t packed_bytes;
  int refs;
  uint64_t last_use;
} entry;

enum { BUCKETS = 1024, MAX_ENTRIES = 4096, KEY_MAX = 96 };
static entry *table[BUCKETS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t n_entries, packed_total;
static uint64_t use_clock, hits, misses;
static size_t packed_limit = (size_t)1 << 30; /* bytes of reordered constant weights kept */

static void free_md(void *md) {
  if (md) dnnl.memory_desc_destroy(md);
}

static void free_entry(entry *e) {
  free_prim(&e->main);
  free_prim(&e->src_in);
  free_prim(&e->weights_in);
  free_prim(&e->dst_out);
  free_prim(&e->residual_in);
  void *mds[] = {e->src_user, e->src_md, e->weights_user, e->weights_md,
                 e->dst_user, e->dst_md, e->bias_md, e->res_user};
  for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) free_md(mds[i]);
  free(e->packed);
  free(e->key);
  free(e);
}

typedef struct {
  int64_t v[KEY_MAX];
  int n;
} key;

static void key_push(key *k, int64_t x) {
  if (k->n < KEY_MAX) k->v[k->n] = x;
  k->n++; /* n > KEY_MAX: too long to cache (see lookup) */
}

static void key_view(key *k, const view *v) {
  key_push(k, v->rank);
  for (int64_t i = 0; i < v->rank; i++) key_push(k, v->sizes[i]);
  for (int64_t i = 0; i < v->rank; i++) key_push(k, v->strides[i]);
}

static uint64_t key_hash(const key *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the words */
  for (int i = 0; i < k->n; i++) {
    h ^= (uint64_t)k->v[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* The cached entry for `k`, with a reference taken (release it with `release`), or 0. */
static entry *lookup(const key *k, uint64_t h) {
  pthread_mutex_lock(&cache_lock);
  entry *e = table[h % BUCKETS];
  while (e && !(e->hash == h && e->nkey == k->n && !memcmp(e->key, k->v, k->n * sizeof(int64_t))))
    e = e->next;
  if (e) {
    e->refs++;
    e->last_use = ++use_clock;
    hits++;
  }
  pthread_mutex_unlock(&cache_lock);
  return e;
}

static void release(entry *e) {
  pthread_mutex_lock(&cache_lock);
  e->refs--;
  pthread_mutex_unlock(&cache_lock);
}

/* Drop least recently used entries nobody is running until the cache is within its limits. */
static void evict_locked(void) {
  while (n_entries > MAX_ENTRIES || packed_total > packed_limit) {
    entry **victim = 0;
    for (int b = 0; b < BUCKETS; b++)
      for (entry **p = &table[b]; *p; p = &(*p)->next)
        if ((*p)->refs == 0 && (!victim || (*p)->last_use < (*victim)->last_use)) victim = p;
    if (!victim) return;
    entry *e = *victim;
    *victim = e->next;
    n_entries--;
    packed_total -= e->packed_bytes;
    free_entry(e);
  }
}

/* Add a new entry (reference taken); if another thread added the same key meanwhile, keep
 * theirs and free ours. */
static entry *insert(entry *fresh, const key *k, uint64_t h) {
  fresh->hash = h;
  fresh->nkey = k->n;
  fresh->key = (int64_t *)malloc(k->n * sizeof(int64_t));
  if (!fresh->key) {
    free_entry(fresh);
    return 0;
  }
  memcpy(fresh->key, k->v, k->n * sizeof(int64_t));
  pthread_mutex_lock(&cache_lock);
  entry *e = table[h % BUCKETS];
  while (e && !(e->hash == h && e->nkey == k->n && !memcmp(e->key, k->v, k->n * sizeof(int64_t))))
    e = e->next;
  if (e) {
    e->refs++;
    e->last_use = ++use_clock;
  } else {
    e = fresh;
    fresh = 0;
    e->refs = 1;
    e->last_use = ++use_clock;
    e->next = table[h % BUCKETS];
    table[h % BUCKETS] = e;
    n_entries++;
    misses++;
    packed_total += e->packed_bytes;
    evict_locked();
  }
  pthread_mutex_unlock(&cache_lock);
  if (fresh) free_entry(fresh);
  return e;
}

/* entries, hits, misses (entries made), bytes of reordered constant weights */
EXPORT void relaxmlir_dnnl_cache_info(uint64_t out[4]) {
  pthread_mutex_lock(&cache_lock);
  out[0] = n_entries;
  out[1] = hits;
  out[2] = misses;
  out[3] = packed_total;
  pthread_mutex_unlock(&cache_lock);
}

EXPORT void relaxmlir_dnnl_cache_set_limit(uint64_t bytes) {
  pthread_mutex_lock(&cache_lock);
  packed_limit = bytes;
  evict_locked();
  pthread_mutex_unlock(&cache_lock);
}

/* Free every entry not running now (their primitives and reordered weights). */
EXPORT void relaxmlir_dnnl_cache_clear(void) {
  pthread_mutex_lock(&cache_lock);
  for (int b = 0; b < BUCKETS; b++) {
    entry **p = &table[b];
    while (*p) {
      entry *e = *p;
      if (e->refs) {
        p = &e->next;
        continue;
      }
      *p = e->next;
      n_entries--;
      packed_total -= e->packed_bytes;
      free_entry(e);
    }
  }
  pthread_mutex_unlock(&cache_lock);
}

/* ---- making an entry: layouts, reorders, the constant weight reordered once */
static int md_strided(void **md, int ndims, const int64_t *d, const int64_t *strides) {
  return dnnl.memory_desc_create_with_strides(md, ndims, d, DNNL_F32, strides);
}

static int md_any(void **md, int ndims, const int64_t *d) {
  return dnnl.memory_desc_create_with_tag(md, ndims, d, DNNL_F32, DNNL_FORMAT_TAG_ANY);
}

static int clone_query(void **out, const void *pd, int what) {
  return dnnl.memory_desc_clone(out, dnnl.primitive_desc_query_md(pd, what, 0));
}

static int run(const prim *p, thread_state *ts, char *scratch, int nargs, dnnl_exec_arg *args);

/* Reorders for whatever the primitive's layouts differ in from the user's, and the constant
 * weight (when `weights` is given) reordered into `packed` now. */
static int finish_entry(entry *e, thread_state *ts, const void *weights, int has_residual) {
  int status = DNNL_SUCCESS;
  if (!dnnl.memory_desc_equal(e->src_user, e->src_md)) {
    status = make_reorder(&e->src_in, e->src_user, e->src_md);
    e->src_bytes = dnnl.memory_desc_get_size(e->src_md);
  }
  if (status == DNNL_SUCCESS && !dnnl.memory_desc_equal(e->dst_user, e->dst_md)) {
    status = make_reorder(&e->dst_out, e->dst_md, e->dst_user);
    e->dst_bytes = dnnl.memory_desc_get_size(e->dst_md);
  }
  if (status == DNNL_SUCCESS && has_residual)
    status = make_reorder(&e->residual_in, e->res_user, e->dst_md);
  if (status == DNNL_SUCCESS && !dnnl.memory_desc_equal(e->weights_user, e->weights_md)) {
    status = make_reorder(&e->weights_in, e->weights_user, e->weights_md);
    e->weights_bytes = dnnl.memory_desc_get_size(e->weights_md);
    if (status == DNNL_SUCCESS && weights) {
      if (posix_memalign(&e->packed, 64, e->weights_bytes)) return 1; /* dnnl_out_of_memory */
      e->packed_bytes = e->weights_bytes;
      void *from = 0, *to = 0;
      dnnl.memory_create(&from, e->weights_user, engine, (void *)weights);
      dnnl.memory_create(&to, e->weights_md, engine, e->packed);
      char *scratch = arena(ts, round_up(e->weights_in.scratch));
      dnnl_exec_arg args[3] = {{DNNL_ARG_SRC, from}, {DNNL_ARG_DST, to}};
      status = scratch || !e->weights_in.scratch ? run(&e->weights_in, ts, scratch, 2, args) : 1;
      dnnl.memory_destroy(from);
      dnnl.memory_destroy(to);
    }
  }
  return status;
}

/* ---- running */
static int run(const prim *p, thread_state *ts, char *scratch, int nargs, dnnl_exec_arg *args) {
  void *smem = 0;
  if (p->scratch) {
    dnnl.memory_create(&smem, p->scratch_md, engine, scratch);
    args[nargs].arg = DNNL_ARG_SCRATCHPAD;
    args[nargs].memory = smem;
    nargs++;
  }
  int status = dnnl.primitive_execute(p->p, ts->stream, nargs, args);
  if (status == DNNL_SUCCESS) status = dnnl.stream_wait(ts->stream);
  if (smem) dnnl.memory_destroy(smem);
  return status;
}

static int reorder(const prim *p, thread_state *ts, char *scratch, const void *from_md,
                   void *from, const void *to_md, void *to) {
  void *a = 0, *b = 0;
  dnnl.memory_create(&a, from_md, engine, from);
  dnnl.memory_create(&b, to_md, engine, to);
  dnnl_exec_arg args[3] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_DST, b}};
  int status = run(p, ts, scratch, 2, args);
  dnnl.memory_destroy(a);
  dnnl.memory_destroy(b);
  return status;
}

/* Executes an entry: reorders in, the primitive, the reorder out. `weights` is the user's
 * weight tensor (ignored when the entry holds it packed), `residual` may be 0. */
static int execute(const entry *e, thread_state *ts, char *src, char *weights, char *bias,
                   char *residual, char *dst) {
  size_t scratch = e->main.scratch;
  const prim *others[] = {&e->src_in, &e->weights_in, &e->dst_out, &e->residual_in};
  for (int i = 0; i < 4; i++)
    if (others[i]->scratch > scratch) scratch = others[i]->scratch;
  size_t o_src = 0, o_wei = round_up(e->src_in.p ? e->src_bytes : 0);
  size_t o_dst = o_wei + round_up(e->weights_in.p && !e->packed ? e->weights_bytes : 0);
  size_t o_scr = o_dst + round_up(e->dst_out.p ? e->dst_bytes : 0);
  char *base = arena(ts, o_scr + round_up(scratch));
  if (!base && o_scr + scratch) return 1; /* out of memory */
  char *scr = base + o_scr;
  int status = DNNL_SUCCESS;
  char *prim_src = src, *prim_wei = weights, *prim_dst = dst;
  if (e->src_in.p) {
    prim_src = base + o_src;
    status = reorder(&e->src_in, ts, scr, e->src_user, src, e->src_md, prim_src);
  }
  if (e->packed) {
    prim_wei = (char *)e->packed;
  } else if (e->weights_in.p && status == DNNL_SUCCESS) {
    prim_wei = base + o_wei;
    status = reorder(&e->weights_in, ts, scr, e->weights_user, weights, e->weights_md, prim_wei);
  }
  if (e->dst_out.p) prim_dst = base + o_dst;
  if (residual && status == DNNL_SUCCESS) /* the sum post-op adds what dst holds */
    status = reorder(&e->residual_in, ts, scr, e->res_user, residual, e->dst_md, prim_dst);
  if (status != DNNL_SUCCESS) return status;

  void *m_src = 0, *m_wei = 0, *m_bias = 0, *m_dst = 0;
  dnnl.memory_create(&m_src, e->src_md, engine, prim_src);
  dnnl.memory_create(&m_wei, e->weights_md, engine, prim_wei);
  dnnl.memory_create(&m_dst, e->dst_md, engine, prim_dst);
  dnnl_exec_arg args[5] = {{DNNL_ARG_SRC, m_src}, {DNNL_ARG_WEIGHTS, m_wei}, {DNNL_ARG_DST, m_dst}};
  int nargs = 3;
  if (bias) {
    dnnl.memory_create(&m_bias, e->bias_md, engine, bias);
    args[nargs].arg = DNNL_ARG_BIAS;
    args[nargs++].memory = m_bias;
  }
  status = run(&e->main, ts, scr, nargs, args);
  dnnl.memory_destroy(m_src);
  dnnl.memory_destroy(m_wei);
  dnnl.memory_destroy(m_dst);
  if (m_bias) dnnl.memory_destroy(m_bias);
  if (status == DNNL_SUCCESS && e->dst_out.p)
    status = reorder(&e->dst_out, ts, scr, e->dst_md, prim_dst, e->dst_user, dst);
  return status;
}

/* ---- epilogues, as post-ops */

static void *make_attr(int residual, int act) {
  void *attr = user_scratch_attr(), *ops = 0;
  if (!attr) return 0;
  dnnl.post_ops_create(&ops);
  if (residual) dnnl.post_ops_append_sum(ops, 1.0f, 0, DNNL_F32);
  switch (act) {
  case ACT_RELU: dnnl.post_ops_append_eltwise(ops, DNNL_ELTWISE_RELU, 0.0f, 0.0f); break;
  case ACT_GELU: dnnl.post_ops_append_eltwise(ops, DNNL_ELTWISE_GELU_ERF, 0.0f, 0.0f); break;
  case ACT_GELU_TANH: dnnl.post_ops_append_eltwise(ops, DNNL_ELTWISE_GELU_TANH, 0.0f, 0.0f); break;
  case ACT_SILU: dnnl.post_ops_append_eltwise(ops, DNNL_ELTWISE_SWISH, 1.0f, 0.0f); break;
  default: break;
  }
  dnnl.primitive_attr_set_post_ops(attr, ops);
  dnnl.post_ops_destroy(ops);
  return attr;
}

/* An empty reduction (no input channels, K = 0) oneDNN does not compute: the output is the
 * epilogue of zeros, act(bias + residual). `bias_step` walks the bias along output axis `axis`. */
static float activate(float x, int act) {
  switch (act) {
  case ACT_RELU: return x > 0.0f ? x : 0.0f;
  case ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  case ACT_SILU: return x / (1.0f + expf(-x));
  default: return x;
  }
}

static void empty_reduction(const view *out, const float *bias, int64_t bias_step, int axis,
                            const view *res, int act) {
  int64_t n = volume(out);
  for (int64_t flat = 0; flat < n; flat++) {
    int64_t rest = flat, off = 0, roff = 0, along = 0;
    for (int64_t i = out->rank - 1; i >= 0; i--) {
      int64_t idx = rest % out->sizes[i];
      rest /= out->sizes[i];
      off += idx * out->strides[i];
      if (res) roff += idx * res->strides[i];
      if (i == axis) along = idx;
    }
    float v = (bias ? bias[along * bias_step] : 0.0f) + (res ? ((float *)res->data)[roff] : 0.0f);
    ((float *)out->data)[off] = activate(v, act);
  }
}

/* ---- parameters (written by relaxmlir/relax/backend/dnnl.py; keep the two in step) */
enum { P_VERSION, P_FLAGS, P_WEIGHT_DIGEST, P_CONV_STRIDE, P_CONV_PAD = P_CONV_STRIDE + 2,
       P_CONV_DILATION = P_CONV_PAD + 4, P_CONV_GROUPS = P_CONV_DILATION + 2, P_CONV_COUNT };
enum { P_MATMUL_COUNT = P_WEIGHT_DIGEST + 1 };
enum { PARAMS_VERSION = 1 };
enum { FLAG_RESIDUAL_FIRST = 1 }; /* add(residual, conv): the residual is the first input */

static const int64_t *read_params(const unranked *u, int64_t want, const char *kernel,
                                  const view *out) {
  view p = read_view(u, sizeof(int64_t));
  const int64_t *v = (const int64_t *)p.data;
  if (p.rank != 1 || p.sizes[0] != want || p.strides[0] != 1 || v[P_VERSION] != PARAMS_VERSION) {
    fail(kernel, "malformed parameter tensor (codegen and kernels out of step)", 0, out);
    return 0;
  }
  return v;
}

/* ---- conv2d */
typedef struct {
  const char *name;
  int bias, residual, act;
} kernel_info;

static void conv2d(const kernel_info *k, unranked *in[], int n_in, unranked *uout) {
  view out = read_view(uout, sizeof(float));
  const int64_t *p = read_params(in[n_in - 1], P_CONV_COUNT, k->name, &out);
  if (!p) return;
  /* inputs: src, weights[, bias][, residual] or residual, src, weights[, bias] */
  int first = k->residual && (p[P_FLAGS] & FLAG_RESIDUAL_FIRST) ? 1 : 0;
  view src = read_view(in[first], sizeof(float)), wei = read_view(in[first + 1], sizeof(float));
  view bias = {0}, res = {0};
  if (k->bias) bias = read_view(in[first + 2], sizeof(float));
  if (k->residual) res = read_view(in[first ? 0 : 2 + k->bias], sizeof(float));
  if (volume(&out) == 0) return;
  int64_t groups = p[P_CONV_GROUPS];
  if (src.rank != 4 || wei.rank != 4 || out.rank != 4 || groups < 1 || wei.sizes[0] % groups ||
      src.sizes[1] != wei.sizes[1] * groups || (k->residual && res.rank != 4)) {
    fail(k->name, "unsupported operand shapes", 0, &out);
    return;
  }
  if (k->residual)
    for (int i = 0; i < 4; i++)
      if (res.sizes[i] != out.sizes[i]) {
        fail(k->name, "the residual's shape differs from the output's", 0, &out);
        return;
      }
  if (src.sizes[1] == 0) {
    empty_reduction(&out, k->bias ? (float *)bias.data : 0, k->bias ? bias.strides[bias.rank - 3] : 0,
                    1, k->residual ? &res : 0, k->act);
    return;
  }
  if (!engine) {
    fail(k->name, "oneDNN is not initialized", 0, &out);
    return;
  }
  thread_state *ts = this_thread();
  if (!ts) {
    fail(k->name, "no oneDNN stream for this thread", 0, &out);
    return;
  }
  int threads = threads_for_call();
  key kk = {.n = 0};
  key_push(&kk, 1); /* conv2d */
  key_push(&kk, k->bias | k->residual << 1 | k->act << 2);
  key_push(&kk, threads);
  for (int i = P_CONV_STRIDE; i < P_CONV_COUNT; i++) key_push(&kk, p[i]);
  key_view(&kk, &src);
  key_view(&kk, &wei);
  key_view(&kk, &out);
  if (k->bias) key_view(&kk, &bias);
  if (k->residual) key_view(&kk, &res);
  /* A constant weight is reordered once and kept: the entry is tied to its address and to the
   * digest of its contents the codegen computed, so memory reused for other weights (another
   * executable loaded where this one was) cannot hit it. */
  int64_t digest = p[P_WEIGHT_DIGEST];
  if (digest) {
    key_push(&kk, digest);
    key_push(&kk, (int64_t)(intptr_t)wei.data);
  }
  uint64_t h = key_hash(&kk);
  entry *e = kk.n <= KEY_MAX ? lookup(&kk, h) : 0;
  if (!e) {
    e = (entry *)calloc(1, sizeof *e);
    int status = e ? DNNL_SUCCESS : 1;
    int64_t o = wei.sizes[0], ci = wei.sizes[1], kh = wei.sizes[2], kw = wei.sizes[3];
    int64_t wdims[5], wstrides[5];
    int wnd = groups > 1 ? 5 : 4;
    if (groups > 1) { /* (G, O/G, C/G, KH, KW) over the same OIHW memory */
      int64_t d[5] = {groups, o / groups, ci, kh, kw};
      int64_t s[5] = {o / groups * wei.strides[0], wei.strides[0], wei.strides[1],
                      wei.strides[2], wei.strides[3]};
      memcpy(wdims, d, sizeof d);
      memcpy(wstrides, s, sizeof s);
    } else {
      memcpy(wdims, wei.sizes, 4 * sizeof(int64_t));
      memcpy(wstrides, wei.strides, 4 * sizeof(int64_t));
    }
    int64_t strides[2] = {p[P_CONV_STRIDE], p[P_CONV_STRIDE + 1]};
    int64_t pad_l[2] = {p[P_CONV_PAD], p[P_CONV_PAD + 1]};
    int64_t pad_r[2] = {p[P_CONV_PAD + 2], p[P_CONV_PAD + 3]};
    int64_t dil[2] = {p[P_CONV_DILATION] - 1, p[P_CONV_DILATION + 1] - 1}; /* oneDNN: 0 = dense */
    void *bias_md = 0, *attr = 0;
    if (status == DNNL_SUCCESS) {
      status |= md_strided(&e->src_user, 4, src.sizes, src.strides);
      status |= md_strided(&e->weights_user, wnd, wdims, wstrides);
      status |= md_strided(&e->dst_user, 4, out.sizes, out.strides);
      if (k->residual) status |= md_strided(&e->res_user, 4, res.sizes, res.strides);
      if (k->bias) { /* (1, O, 1, 1) or (O, 1, 1): one value per output channel */
        int64_t bstride[1] = {bias.strides[bias.rank - 3]}, bdim[1] = {o};
        status |= md_strided(&e->bias_md, 1, bdim, bstride);
        bias_md = e->bias_md;
      }
      attr = make_attr(k->residual, k->act);
      if (!attr) status = 1;
    }
    /* oneDNN's own layouts for src/dst (reordered in and out; its fast kernels read blocked or
     * channels-last data), or the user's NCHW as it is. A 1x1 kernel is a GEMM over the NCHW
     * data as it lies: reordering its (large) activations costs more than it saves (ResNet's
     * 1x1 convs, 1 thread: 0.58 vs 1.0 ms); for the others the reorders pay (3x3, 64 channels
     * at 56x56: 1.2 vs 2.2 ms; depthwise 0.13 vs 0.58 ms). Weights: the primitive's layout. */
    int plain_first = kh == 1 && kw == 1;
    void *pd = 0;
    for (int attempt = 0; attempt < 2 && status == DNNL_SUCCESS && !pd; attempt++) {
      int any = (attempt == 0) != plain_first;
      void *s = 0, *w = 0, *d = 0;
      int st = md_any(&w, wnd, wdims);
      if (any) {
        st |= md_any(&s, 4, src.sizes);
        st |= md_any(&d, 4, out.sizes);
      }
      if (st == DNNL_SUCCESS)
        st = dnnl.convolution_forward_primitive_desc_create(
            &pd, engine, DNNL_FORWARD_INFERENCE, DNNL_CONVOLUTION_DIRECT, any ? s : e->src_user, w,
            bias_md, any ? d : e->dst_user, strides, dil, pad_l, pad_r, attr);
      if (st != DNNL_SUCCESS) pd = 0;
      if (attempt == 1 && !pd) status = st ? st : 3;
      free_md(s);
      free_md(w);
      free_md(d);
    }
    if (attr) dnnl.primitive_attr_destroy(attr);
    if (status == DNNL_SUCCESS) {
      status |= clone_query(&e->src_md, pd, DNNL_QUERY_SRC_MD);
      status |= clone_query(&e->weights_md, pd, DNNL_QUERY_WEIGHTS_MD);
      status |= clone_query(&e->dst_md, pd, DNNL_QUERY_DST_MD);
      status = status ? status : make_prim(&e->main, pd);
      pd = 0;
    }
    if (pd) dnnl.primitive_desc_destroy(pd);
    if (status == DNNL_SUCCESS)
      status = finish_entry(e, ts, digest ? wei.data : 0, k->residual);
    if (status != DNNL_SUCCESS) {
      if (e) free_entry(e);
      fail(k->name, "no oneDNN convolution for this problem", status, &out);
      return;
    }
    if (kk.n > KEY_MAX) {
      e->refs = 1; /* not cached: freed after this call */
    } else if (!(e = insert(e, &kk, h))) {
      fail(k->name, "out of memory", 1, &out);
      return;
    }
  }
  int status = execute(e, ts, src.data, wei.data, k->bias ? bias.data : 0,
                       k->residual ? res.data : 0, out.data);
  if (kk.n > KEY_MAX) free_entry(e);
  else release(e);
  if (status != DNNL_SUCCESS) fail(k->name, "the convolution failed", status, &out);
}

/* ---- matmul: lhs [..., M, K] x rhs [..., K, N] (or [..., N, K], transposed) -> [..., M, N];
 * batch dims right-aligned and broadcast where 1 (relax.matmul's rules). */
static void pad_view(const view *v, int nd, int64_t *d, int64_t *s) {
  int lead = nd - (int)v->rank;
  int64_t inner = 1;
  for (int i = 0; i < (int)v->rank; i++) inner *= v->sizes[i] ? v->sizes[i] : 1;
  for (int i = 0; i < lead; i++) d[i] = 1, s[i] = inner;
  for (int i = 0; i < (int)v->rank; i++) d[lead + i] = v->sizes[i], s[lead + i] = v->strides[i];
}

static void matmul(const kernel_info *k, int transposed, unranked *in[], int n_in,
                   unranked *uout) {
  view out = read_view(uout, sizeof(float));
  const int64_t *p = read_params(in[n_in - 1], P_MATMUL_COUNT, k->name, &out);
  if (!p) return;
  view a = read_view(in[0], sizeof(float)), b = read_view(in[1], sizeof(float)), bias = {0};
  if (k->bias) bias = read_view(in[2], sizeof(float));
  int nd = (int)out.rank;
  if (nd < 2 || nd > DNNL_MAX_NDIMS || a.rank < 2 || b.rank < 2 || a.rank > nd || b.rank > nd) {
    fail(k->name, "unsupported operand ranks", 0, &out);
    return;
  }
  if (volume(&out) == 0) return;
  if (a.sizes[a.rank - 1] == 0) {
    empty_reduction(&out, k->bias ? (float *)bias.data : 0,
                    k->bias ? bias.strides[bias.rank - 1] * (bias.sizes[bias.rank - 1] != 1) : 0,
                    nd - 1, 0, k->act);
    return;
  }
  if (!engine) {
    fail(k->name, "oneDNN is not initialized", 0, &out);
    return;
  }
  thread_state *ts = this_thread();
  if (!ts) {
    fail(k->name, "no oneDNN stream for this thread", 0, &out);
    return;
  }
  int threads = threads_for_call();
  key kk = {.n = 0};
  key_push(&kk, 2); /* matmul */
  key_push(&kk, k->bias | transposed << 1 | k->act << 2);
  key_push(&kk, threads);
  key_view(&kk, &a);
  key_view(&kk, &b);
  key_view(&kk, &out);
  if (k->bias) key_view(&kk, &bias);
  int64_t digest = p[P_WEIGHT_DIGEST];
  if (digest) { /* see conv2d */
    key_push(&kk, digest);
    key_push(&kk, (int64_t)(intptr_t)b.data);
  }
  uint64_t h = key_hash(&kk);
  entry *e = kk.n <= KEY_MAX ? lookup(&kk, h) : 0;
  if (!e) {
    e = (entry *)calloc(1, sizeof *e);
    int status = e ? DNNL_SUCCESS : 1;
    int64_t ad[DNNL_MAX_NDIMS], as[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS], bs[DNNL_MAX_NDIMS];
    pad_view(&a, nd, ad, as);
    pad_view(&b, nd, bd, bs);
    if (transposed) { /* [..., N, K] read as [..., K, N] */
      int64_t t = bd[nd - 1];
      bd[nd - 1] = bd[nd - 2], bd[nd - 2] = t;
      t = bs[nd - 1];
      bs[nd - 1] = bs[nd - 2], bs[nd - 2] = t;
    }
    void *attr = 0;
    if (status == DNNL_SUCCESS) {
      status |= md_strided(&e->src_user, nd, ad, as);
      status |= md_strided(&e->weights_user, nd, bd, bs);
      status |= md_strided(&e->dst_user, nd, out.sizes, out.strides);
      status |= dnnl.memory_desc_clone(&e->src_md, e->src_user);
      status |= dnnl.memory_desc_clone(&e->dst_md, e->dst_user);
      if (k->bias) { /* [..., N] with leading 1s, as the codegen's check requires */
        int64_t d[DNNL_MAX_NDIMS], s[DNNL_MAX_NDIMS];
        pad_view(&bias, nd, d, s);
        status |= md_strided(&e->bias_md, nd, d, s);
      }
      attr = make_attr(0, k->act);
      if (!attr) status = 1;
    }
    /* A constant weight in the primitive's own layout (packed once); a weight that changes per
     * call as it is, unless the primitive cannot read it (then reordered per call). */
    void *pd = 0;
    for (int attempt = 0; attempt < 2 && status == DNNL_SUCCESS && !pd; attempt++) {
      void *w = 0;
      int any = (attempt == 0) == (digest != 0);
      int st = any ? md_any(&w, nd, bd) : dnnl.memory_desc_clone(&w, e->weights_user);
      if (st == DNNL_SUCCESS)
        st = dnnl.matmul_primitive_desc_create(&pd, engine, e->src_md, w, e->bias_md, e->dst_md,
                                               attr);
      if (st != DNNL_SUCCESS) pd = 0;
      if (attempt == 1 && !pd) status = st ? st : 3;
      free_md(w);
    }
    if (attr) dnnl.primitive_attr_destroy(attr);
    if (status == DNNL_SUCCESS) {
      status |= clone_query(&e->weights_md, pd, DNNL_QUERY_WEIGHTS_MD);
      status = status ? status : make_prim(&e->main, pd);
      pd = 0;
    }
    if (pd) dnnl.primitive_desc_destroy(pd);
    if (status == DNNL_SUCCESS) status = finish_entry(e, ts, digest ? b.data : 0, 0);
    if (status != DNNL_SUCCESS) {
      if (e) free_entry(e);
      fail(k->name, "no oneDNN matmul for this problem", status, &out);
      return;
    }
    if (kk.n > KEY_MAX) {
      e->refs = 1;
    } else if (!(e = insert(e, &kk, h))) {
      fail(k->name, "out of memory", 1, &out);
      return;
    }
  }
  int status = execute(e, ts, a.data, b.data, k->bias ? bias.data : 0, 0, out.data);
  if (kk.n > KEY_MAX) free_entry(e);
  else release(e);
  if (status != DNNL_SUCCESS) fail(k->name, "the matmul failed", status, &out);
}

/* One exported kernel per pattern of relaxmlir/relax/backend/dnnl.py (`dnnl.<name>` ->
 * `relaxmlir_dnnl_<name>`); the arity is the pattern's inputs + the parameters + the output. */
#define A2 unranked *a0, unranked *a1
#define A3 unranked *a0, unranked *a1, unranked *a2
#define A4 unranked *a0, unranked *a1, unranked *a2, unranked *a3
#define CONV2(NAME, BIAS, RES, ACT)                                                              \
  EXPORT void relaxmlir_dnnl_##NAME(A2, unranked *params, unranked *out) {                       \
    static const kernel_info k = {"dnnl." #NAME, BIAS, RES, ACT};                                \
    unranked *in[] = {a0, a1, params};                                                           \
    conv2d(&k, in, 3, out);                                                                      \
  }
#define CONV3(NAME, BIAS, RES, ACT)                                                              \
  EXPORT void relaxmlir_dnnl_##NAME(A3, unranked *params, unranked *out) {                       \
    static const kernel_info k = {"dnnl." #NAME, BIAS, RES, ACT};                                \
    unranked *in[] = {a0, a1, a2, params};                                                       \
    conv2d(&k, in, 4, out);                                                                      \
  }
#define CONV4(NAME, BIAS, RES, ACT)                                                              \
  EXPORT void relaxmlir_dnnl_##NAME(A4, unranked *params, unranked *out) {                       \
    static const kernel_info k = {"dnnl." #NAME, BIAS, RES, ACT};                                \
    unranked *in[] = {a0, a1, a2, a3, params};                                                   \
    conv2d(&k, in, 5, out);                                                                      \
  }
#define MATMUL2(NAME, T, ACT)                                                                    \
  EXPORT void relaxmlir_dnnl_##NAME(A2, unranked *params, unranked *out) {                       \
    static const kernel_info k = {"dnnl." #NAME, 0, 0, ACT};                                     \
    unranked *in[] = {a0, a1, params};                                                           \
    matmul(&k, T, in, 3, out);                                                                   \
  }
#define MATMUL3(NAME, T, ACT)                                                                    \
  EXPORT void relaxmlir_dnnl_##NAME(A3, unranked *params, unranked *out) {                       \
    static const kernel_info k = {"dnnl." #NAME, 1, 0, ACT};                                     \
    unranked *in[] = {a0, a1, a2, params};                                                       \
    matmul(&k, T, in, 4, out);                                                                   \
  }

CONV2(conv2d, 0, 0, ACT_NONE)
CONV2(conv2d_relu, 0, 0, ACT_RELU)
CONV3(conv2d_bias, 1, 0, ACT_NONE)
CONV3(conv2d_bias_relu, 1, 0, ACT_RELU)
CONV3(conv2d_add, 0, 1, ACT_NONE)
CONV3(conv2d_add_relu, 0, 1, ACT_RELU)
CONV4(conv2d_bias_add, 1, 1, ACT_NONE)
CONV4(conv2d_bias_add_relu, 1, 1, ACT_RELU)

MATMUL2(matmul, 0, ACT_NONE)
MATMUL2(matmul_relu, 0, ACT_RELU)
MATMUL3(matmul_bias, 0, ACT_NONE)
MATMUL3(matmul_bias_relu, 0, ACT_RELU)
MATMUL3(matmul_bias_gelu, 0, ACT_GELU)
MATMUL3(matmul_bias_gelu_tanh, 0, ACT_GELU_TANH)
MATMUL3(matmul_bias_silu, 0, ACT_SILU)
MATMUL2(matmul_transposed, 1, ACT_NONE)
MATMUL2(matmul_transposed_relu, 1, ACT_RELU)
MATMUL3(matmul_transposed_bias, 1, ACT_NONE)
MATMUL3(matmul_transposed_bias_relu, 1, ACT_RELU)
MATMUL3(matmul_transposed_bias_gelu, 1, ACT_GELU)
MATMUL3(matmul_transposed_bias_gelu_tanh, 1, ACT_GELU_TANH)
MATMUL3(matmul_transposed_bias_silu, 1, ACT_SILU)

/* relaxmlir's native runtime: what compiled kernels call besides libc.
 *
 * Workspace allocator. Kernels allocate packing panels and intermediates with
 * `_mlir_memref_to_llvm_alloc` / `_aligned_alloc` / `_free` (finalize-memref-to-llvm with
 * use-generic-functions). Large blocks are kept in a cache and handed out again at the next
 * call, instead of going back to the OS: glibc serves them with fresh mmap pages, and a 1024^3
 * matmul page-faulted on its 12 MB of panels at every call (17.4 ms -> 12.1 ms once kept). The
 * process's malloc settings are left alone.
 *
 * Among cached blocks of the size asked for, an allocation takes the one that its call site, on
 * the same thread, had before. A kernel's buffers then keep their addresses, and a thread that
 * writes the same part of a buffer at every call writes lines its own core holds: a store to a
 * line that another core has read must first invalidate that copy, which cost 10x a plain store
 * on one L3 and 45x across two (Zen 4). A 2-thread 256^3 matmul whose per-thread B panels traded
 * places between calls ran 11% slower with its threads on two L3s.
 *
 * Every block carries a header just below the pointer handed out: the size asked for, the raw
 * pointer from malloc and the alignment, so `free` knows whether and where to cache it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RMLIR_EXPORT __attribute__((visibility("default")))

typedef struct {
  uint64_t size;      /* bytes usable from the returned pointer */
  void *raw;          /* what malloc returned */
  uint64_t alignment; /* of the returned pointer */
  uint64_t site;      /* the allocating call site and thread (see `site_of`) */
  uint64_t magic;
} header_t;

#define MAGIC 0x726d6c6972616c63ull /* "rmliralc" */
#define MIN_CACHED (64u << 10)      /* smaller blocks go straight back to malloc */

/* The cached blocks, packed at the front of a growable array (a taken block's place gets the
   last entry), so a lookup scans only the blocks cached now. Only the byte limit evicts: with
   a fixed 64 entries, BERT-base's 387 blocks of 64 KB or more per call missed 134 times at
   every call (each miss a fresh block from malloc, page faults included), and two models run
   in turns in one process evicted each other's blocks (the same build measured 1.11-1.49x
   its static twin from one run to the next). */
typedef struct {
  void *ptr;
  uint64_t size, alignment, stamp, site;
} entry_t;

static struct {
  entry_t *entry;
  int count, capacity;
  uint64_t bytes, limit, clock, hits, misses;
  int configured;
} cache;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void configure(void) {
  if (cache.configured) return;
  cache.configured = 1;
  cache.limit = 1ull << 30; /* 1 GiB unless RELAXMLIR_WORKSPACE_CACHE_MB says otherwise */
  const char *env = getenv("RELAXMLIR_WORKSPACE_CACHE_MB");
  if (env && *env) cache.limit = (uint64_t)strtoull(env, NULL, 10) << 20;
}

static void *fresh(uint64_t size, uint64_t alignment, uint64_t site) {
  if (alignment < 16) alignment = 16;
  char *raw = malloc(size + sizeof(header_t) + alignment);
  if (!raw) return NULL;
  uintptr_t at = ((uintptr_t)raw + sizeof(header_t) + alignment - 1) & ~(uintptr_t)(alignment - 1);
  header_t *h = (header_t *)at - 1;
  h->size = size;
  h->raw = raw;
  h->alignment = alignment;
  h->site = site;
  h->magic = MAGIC;
  return (void *)at;
}

/* Remove entry i (the lock held): the last entry takes its place. */
static void drop_entry(int i) {
  cache.bytes -= cache.entry[i].size;
  cache.entry[i] = cache.entry[--cache.count];
}

static void *take_cached(uint64_t size, uint64_t alignment, uint64_t site) {
  void *out = NULL;
  pthread_mutex_lock(&lock);
  int best = -1;
  for (int i = 0; i < cache.count; i++) {
    /* exact size first (the same kernel asks again); a block up to 1/8 larger also serves;
       among equals, the block this call site and thread had last time */
    const entry_t *e = &cache.entry[i];
    if (e->size >= size && e->size - size <= size / 8 && e->alignment % alignment == 0 &&
        (best < 0 || e->size < cache.entry[best].size ||
         (e->size == cache.entry[best].size && e->site == site &&
          cache.entry[best].site != site)))
      best = i;
  }
  if (best >= 0) {
    out = cache.entry[best].ptr;
    drop_entry(best);
    cache.hits++;
    ((header_t *)out - 1)->site = site;
  } else {
    cache.misses++;
  }
  pthread_mutex_unlock(&lock);
  return out;
}

/* Cached sizes are rounded up to classes, multiples of 1/16 to 1/32 of their power of two (at
   least a 4 KB page): a buffer that grows a little at every call (a decode step's KV cache and
   its transpose: one row more each time) takes the block of the same class that an earlier call
   gave back. Exact sizes missed at every step, and filled the cache with blocks a row too small
   for any later call (up to its limit), each miss page-faulting on a fresh block. */
static uint64_t size_class(uint64_t size) {
  int bits = 64 - __builtin_clzll(size);
  uint64_t step = 1ull << (bits > 17 ? bits - 5 : 12);
  return (size + step - 1) & ~(step - 1);
}

static void *allocate(uint64_t size, uint64_t alignment, uint64_t site) {
  if (size >= MIN_CACHED) {
    size = size_class(size);
    void *p = take_cached(size, alignment < 16 ? 16 : alignment, site);
    if (p) return p;
  }
  return fresh(size, alignment, site);
}

/* The call site (return address into the kernel) and the calling thread: a kernel's buffer
   gets the block it had at the previous call, so each thread writes lines it already owns. */
static uint64_t site_of(void *ret) {
  return (uint64_t)(uintptr_t)ret * 31u ^ (uint64_t)pthread_self();
}

/* A model library carries its own copy of this file, so that it runs without the Python
   package. Loaded into a process that has the package's runtime, the loader points the copy at
   that runtime (`relaxmlir_workspace_forward`), before any call: every model then shares one
   cache, its limit and its statistics, instead of each holding up to a limit of its own, for
   good, in a library that is never unloaded. */
static void *(*forward_alloc)(uint64_t size, uint64_t alignment, uint64_t site);
static void (*forward_free)(void *ptr);

RMLIR_EXPORT void relaxmlir_workspace_forward(void *alloc_at, void *free_fn) {
  forward_alloc = (void *(*)(uint64_t, uint64_t, uint64_t))alloc_at;
  forward_free = (void (*)(void *))free_fn;
}

/* What a forwarding copy calls: an allocation for the call site it has already identified. */
RMLIR_EXPORT void *relaxmlir_workspace_alloc_at(uint64_t size, uint64_t alignment, uint64_t site) {
  return allocate(size, alignment, site);
}

RMLIR_EXPORT void *_mlir_memref_to_llvm_alloc(uint64_t size) {
  uint64_t site = site_of(__builtin_return_address(0));
  return forward_alloc ? forward_alloc(size, 16, site) : allocate(size, 16, site);
}

RMLIR_EXPORT void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  uint64_t site = site_of(__builtin_return_address(0));
  return forward_alloc ? forward_alloc(size, alignment, site) : allocate(size, alignment, site);
}

/* Free the least recently cached block (the lock held); 0, or -1 when none is cached. */
static int evict_oldest(void) {
  int old = -1;
  for (int i = 0; i < cache.count; i++)
    if (old < 0 || cache.entry[i].stamp < cache.entry[old].stamp) old = i;
  if (old < 0) return -1;
  header_t *o = (header_t *)cache.entry[old].ptr - 1;
  drop_entry(old);
  o->magic = 0;
  free(o->raw);
  return 0;
}

/* Room for one more entry (the lock held): the array doubles; where it cannot, the least
   recently cached block makes room. 0, or -1 when there is none. */
static int make_room(void) {
  if (cache.count < cache.capacity) return 0;
  int capacity = cache.capacity ? 2 * cache.capacity : 256;
  entry_t *grown = realloc(cache.entry, (size_t)capacity * sizeof(entry_t));
  if (grown) {
    cache.entry = grown;
    cache.capacity = capacity;
    return 0;
  }
  return cache.count ? evict_oldest() : -1;
}

RMLIR_EXPORT void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr) return;
  if (forward_free) {
    forward_free(ptr);
    return;
  }
  header_t *h = (header_t *)ptr - 1;
  if (h->magic != MAGIC) return; /* not ours: never free what we did not allocate */
  if (h->size >= MIN_CACHED) {
    pthread_mutex_lock(&lock);
    configure();
    if (h->size <= cache.limit) {
      /* evict the least recently cached blocks until this one fits */
      while (cache.bytes + h->size > cache.limit && evict_oldest() == 0) {
      }
      if (make_room() == 0) {
        cache.entry[cache.count++] =
            (entry_t){ptr, h->size, h->alignment, ++cache.clock, h->site};
        cache.bytes += h->size;
        pthread_mutex_unlock(&lock);
        return;
      }
    }
    pthread_mutex_unlock(&lock);
  }
  h->magic = 0;
  free(h->raw);
}

/* Statistics and control for the Python side (rm.runtime.workspace_cache_info / release). */
RMLIR_EXPORT void relaxmlir_workspace_stats(uint64_t out[4]) {
  pthread_mutex_lock(&lock);
  configure(); /* the limit, also before the first block is cached */
  out[0] = cache.bytes;
  out[1] = cache.limit;
  out[2] = cache.hits;
  out[3] = cache.misses;
  pthread_mutex_unlock(&lock);
}

RMLIR_EXPORT void relaxmlir_workspace_set_limit(uint64_t bytes) {
  pthread_mutex_lock(&lock);
  configure();
  cache.limit = bytes;
  pthread_mutex_unlock(&lock);
}

RMLIR_EXPORT void relaxmlir_workspace_release(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < cache.count; i++) {
    header_t *h = (header_t *)cache.entry[i].ptr - 1;
    h->magic = 0;
    free(h->raw);
  }
  cache.count = 0;
  cache.bytes = 0;
  pthread_mutex_unlock(&lock);
}

/* Kernel timers for vm.profile (lowering/profile_hooks.py brackets every kernel call of an entry
 * point with begin/end, `name` the address of the callee's name). Off, a hook reads one flag.
 * On, each end adds the time since its begin to the callee's row; a call runs its kernels one
 * after another on the calling thread, so one start time per thread suffices. */
typedef struct {
  const char *name;
  int64_t calls;
  double ns;
} profile_row_t;

static volatile int profile_on;
static profile_row_t *profile_rows;
static int profile_count, profile_cap;
static __thread struct timespec profile_start;

RMLIR_EXPORT void relaxmlir_profile_begin(int64_t name) {
  (void)name;
  if (profile_on) clock_gettime(CLOCK_MONOTONIC, &profile_start);
}

RMLIR_EXPORT void relaxmlir_profile_end(int64_t name) {
  if (!profile_on) return;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double ns = (double)(now.tv_sec - profile_start.tv_sec) * 1e9 +
              (double)(now.tv_nsec - profile_start.tv_nsec);
  const char *key = (const char *)(intptr_t)name;
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < profile_count && profile_rows[i].name != key && strcmp(profile_rows[i].name, key))
    i++;
  if (i == profile_count) {
    if (profile_count == profile_cap) {
      int cap = profile_cap ? 2 * profile_cap : 64;
      profile_row_t *grown = (profile_row_t *)realloc(profile_rows, (size_t)cap * sizeof *grown);
      if (!grown) {
        pthread_mutex_unlock(&lock);
        return; /* out of memory: this call goes unreported */
      }
      profile_rows = grown, profile_cap = cap;
    }
    profile_rows[profile_count++] = (profile_row_t){key, 0, 0.0};
  }
  profile_rows[i].calls++;
  profile_rows[i].ns += ns;
  pthread_mutex_unlock(&lock);
}

/* Turns the timers on (rows cleared) or off. */
RMLIR_EXPORT void relaxmlir_profile_enable(int on) {
  pthread_mutex_lock(&lock);
  if (on) profile_count = 0;
  profile_on = on;
  pthread_mutex_unlock(&lock);
}

/* Copies up to `cap` rows out (name pointers, call counts, nanoseconds); returns how many. The
 * names point into the code of the entry that was profiled. */
RMLIR_EXPORT int relaxmlir_profile_rows(const char **names, int64_t *calls, double *ns, int cap) {
  pthread_mutex_lock(&lock);
  int n = profile_count < cap ? profile_count : cap;
  for (int i = 0; i < n; i++) {
    names[i] = profile_rows[i].name;
    calls[i] = profile_rows[i].calls;
    ns[i] = profile_rows[i].ns;
  }
  pthread_mutex_unlock(&lock);
  return n;
}

/* memref.copy between non-identity layouts lowers to a call of `memrefCopy` (MLIR's C runner
 * utils define it, but they live in the MLIR wheel, which a deployed model must not need).
 * Arguments: the element size in bytes and two unranked memrefs {rank, descriptor}, where a
 * descriptor is {allocated, aligned, offset, sizes[rank], strides[rank]} (strides in elements). */
typedef struct {
  int64_t rank;
  void *descriptor;
} unranked_memref;

RMLIR_EXPORT void memrefCopy(int64_t elem_size, unranked_memref *src, unranked_memref *dst) {
  int64_t rank = src->rank;
  char *sd = (char *)src->descriptor, *dd = (char *)dst->descriptor;
  const int64_t *s_rest = (const int64_t *)(sd + 2 * sizeof(void *));
  const int64_t *d_rest = (const int64_t *)(dd + 2 * sizeof(void *));
  char *s_ptr = *(char **)(sd + sizeof(void *)) + s_rest[0] * elem_size;
  char *d_ptr = *(char **)(dd + sizeof(void *)) + d_rest[0] * elem_size;
  const int64_t *sizes = s_rest + 1, *s_strides = s_rest + 1 + rank, *d_strides = d_rest + 1 + rank;
  if (rank == 0) {
    memcpy(d_ptr, s_ptr, (size_t)elem_size);
    return;
  }
  for (int64_t i = 0; i < rank; i++)
    if (sizes[i] == 0) return;
  /* the innermost run is contiguous on both sides: copy it in one memcpy */
  int64_t inner = 1;
  int64_t dims = rank;
  while (dims > 0 && s_strides[dims - 1] == inner && d_strides[dims - 1] == inner) {
    inner *= sizes[dims - 1];
    dims--;
  }
  size_t run = (size_t)(inner * elem_size);
  if (dims == 0) {
    memcpy(d_ptr, s_ptr, run);
    return;
  }
  int64_t small[16] = {0};
  int64_t *index = dims <= 16 ? small : (int64_t *)calloc((size_t)dims, sizeof(int64_t));
  if (!index) abort(); /* out of memory for a rank-17+ copy: nothing sensible to return */
  int64_t s_off = 0, d_off = 0;
  for (;;) {
    memcpy(d_ptr + d_off * elem_size, s_ptr + s_off * elem_size, run);
    int64_t axis = dims - 1;
    for (; axis >= 0; axis--) {
      index[axis]++;
      s_off += s_strides[axis];
      d_off += d_strides[axis];
      if (index[axis] < sizes[axis]) break;
      s_off -= sizes[axis] * s_strides[axis];
      d_off -= sizes[axis] * d_strides[axis];
      index[axis] = 0;
    }
    if (axis < 0) break;
  }
  if (index != small) free(index);
}

/* Conversions to and from 16-bit floats that LLVM leaves to a library call when the CPU has no
 * instruction for them: f64 -> f16 always (F16C converts only from f32), f32/f64 -> bf16 without
 * AVX512-BF16, f32 <-> f16 without F16C. The JIT has no compiler-rt, so the code that casts a
 * double constant to float16 failed to link on a CPU without AVX512-FP16 (AMD Zen 5). Every
 * narrowing rounds once, to nearest even, from the exact source value (f64 -> f32 -> f16 would
 * round twice). x86-64 passes and returns half/bfloat in the low 16 bits of xmm0, which is where
 * a float argument or result lives. */
#if defined(__x86_64__)
static uint32_t narrow_f64(double d, int exp_bits, int mant_bits) {
  uint64_t x;
  memcpy(&x, &d, sizeof x);
  uint32_t sign = (uint32_t)(x >> 63) << (exp_bits + mant_bits);
  uint64_t a = x & 0x7fffffffffffffffull;
  uint32_t inf = ((1u << exp_bits) - 1) << mant_bits;
  if (a >= 0x7ff0000000000000ull) { /* inf, or a NaN kept quiet with its top payload bits */
    if (a == 0x7ff0000000000000ull) return sign | inf;
    uint32_t payload = (uint32_t)(a >> (52 - mant_bits)) & ((1u << mant_bits) - 1);
    return sign | inf | (1u << (mant_bits - 1)) | payload;
  }
  int e = (int)(a >> 52);
  if (e == 0) return sign; /* f64 subnormals lie far below either format's smallest value */
  uint64_t m = (a & ((1ull << 52) - 1)) | (1ull << 52);
  int bias = (1 << (exp_bits - 1)) - 1;
  int he = e - 1023 + bias;
  if (he >= (1 << exp_bits) - 1) return sign | inf;
  int shift = 52 - mant_bits + (he < 1 ? 1 - he : 0); /* subnormal results keep fewer bits */
  if (shift > 53) return sign;                         /* below half the smallest subnormal */
  uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) q++;
  /* a carry out of the significand moves into the exponent field, up to inf */
  uint32_t bits = he < 1 ? (uint32_t)q : ((uint32_t)he << mant_bits) + (uint32_t)q - (1u << mant_bits);
  return sign | (bits >= inf ? inf : bits);
}

static float in_xmm(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

RMLIR_EXPORT float __truncdfhf2(double d) { return in_xmm(narrow_f64(d, 5, 10)); }
RMLIR_EXPORT float __truncsfhf2(float f) { return in_xmm(narrow_f64((double)f, 5, 10)); }
RMLIR_EXPORT float __truncdfbf2(double d) { return in_xmm(narrow_f64(d, 8, 7)); }
RMLIR_EXPORT float __truncsfbf2(float f) { return in_xmm(narrow_f64((double)f, 8, 7)); }

RMLIR_EXPORT float __extendhfsf2(float h_in_xmm) {
  uint32_t h;
  memcpy(&h, &h_in_xmm, sizeof h);
  h &= 0xffff;
  uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, out;
  if (e == 0x1f) {
    out = sign | 0x7f800000u | (m << 13);
  } else if (e) {
    out = sign | ((e + 112) << 23) | (m << 13);
  } else if (m) { /* subnormal half: normalize */
    int shift = 0;
    while (!(m & 0x400)) {
      m <<= 1;
      shift++;
    }
    out = sign | ((uint32_t)(113 - shift) << 23) | ((m & 0x3ff) << 13);
  } else {
    out = sign;
  }
  float f;
  memcpy(&f, &out, sizeof f);
  return f;
}
#endif

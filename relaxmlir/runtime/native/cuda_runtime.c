/* The CUDA runtime of exported relaxmlir models: the mgpu* entry points that MLIR's gpu-to-llvm
 * host code calls, over the CUDA driver API opened lazily with dlopen("libcuda.so.1").
 *
 * Why not MLIR's libmlir_cuda_runtime.so: it links libLLVM (~136 MB, absent where models run)
 * and creates a stream per launch, unordered with the caller's (torch's) work. Here:
 * - nothing touches the driver until the first launch or allocation, so a library loads on a
 *   machine without a GPU; every failure is recorded (first one wins) and later work is skipped,
 *   and the caller reads it with relaxmlir_cuda_take_error() after each call: never an abort;
 * - the context is the thread's current one, else the primary context of the chosen device
 *   (the one torch uses), so pointers are shared with torch;
 * - every "stream" the host code creates is the caller's stream (relaxmlir_cuda_set_stream;
 *   default: the legacy stream 0): work is ordered after the caller's, synchronizing it is
 *   left to the caller (as in torch), allocations are stream-ordered (cuMemAllocAsync), and
 *   freed blocks are kept for the next allocation of their size on their stream (as torch's
 *   caching allocator; a stream destroyed while its work runs must not be reused as a handle
 *   by the caller before that work ends, the rule torch's streams follow too);
 * - constants are copied to the device once per context (relaxmlir_cuda_constant).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;

static struct {
  void *lib;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
} cu;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded = 0; /* 1: libcuda opened and initialized, -1: failed (error recorded) */
static char error[1024];
static CUstream caller_stream = 0;
static int device_ordinal = 0;

static void set_error(const char *fmt, const char *what, CUresult code) {
  if (error[0]) return; /* the first error explains the rest */
  const char *text = "unknown error";
  if (code && cu.cuGetErrorString) cu.cuGetErrorString(code, &text);
  if (code)
    snprintf(error, sizeof error, "%s: %s (CUDA error %d: %s)", fmt, what, code, text);
  else
    snprintf(error, sizeof error, "%s: %s", fmt, what);
}

static int check(CUresult code, const char *call) {
  if (code == 0) return 1;
  set_error("CUDA driver call failed", call, code);
  return 0;
}

#define SYM(name, symbol)                                          \
  do {                                                             \
    *(void **)&cu.name = dlsym(cu.lib, symbol);                    \
    if (!cu.name) {                                                \
      set_error("libcuda.so.1 lacks a symbol", symbol, 0);         \
      return -1;                                                   \
    }                                                              \
  } while (0)

static int open_driver(void) {
  cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu.lib) {
    set_error("cannot load the CUDA driver (libcuda.so.1); is an NVIDIA driver installed?",
              dlerror(), 0);
    return -1;
  }
  SYM(cuGetErrorString, "cuGetErrorString");
  SYM(cuInit, "cuInit");
  SYM(cuDeviceGet, "cuDeviceGet");
  SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  SYM(cuCtxGetCurrent, "cuCtxGetCurrent");
  SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
  SYM(cuModuleLoadData, "cuModuleLoadData");
  SYM(cuModuleUnload, "cuModuleUnload");
  SYM(cuModuleGetFunction, "cuModuleGetFunction");
  SYM(cuLaunchKernel, "cuLaunchKernel");
  SYM(cuFuncSetAttribute, "cuFuncSetAttribute");
  SYM(cuStreamSynchronize, "cuStreamSynchronize");
  SYM(cuMemAllocAsync, "cuMemAllocAsync");
  SYM(cuMemFreeAsync, "cuMemFreeAsync");
  SYM(cuMemAlloc, "cuMemAlloc_v2");
  SYM(cuMemcpyAsync, "cuMemcpyAsync");
  SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  SYM(cuMemsetD32Async, "cuMemsetD32Async");
  SYM(cuMemsetD16Async, "cuMemsetD16Async");
  SYM(cuEventCreate, "cuEventCreate");
  SYM(cuEventRecord, "cuEventRecord");
  SYM(cuEventSynchronize, "cuEventSynchronize");
  SYM(cuEventElapsedTime, "cuEventElapsedTime");
  SYM(cuEventDestroy, "cuEventDestroy_v2");
  if (!check(cu.cuInit(0), "cuInit")) return -1;
  return 1;
}

/* The driver opened and a context current on this thread (stored in *ctx when ctx is given);
 * 0 (error recorded) otherwise. */
static int ready_in(CUcontext *ctx_out) {
  if (error[0]) return 0;
  if (loaded == 0) {
    pthread_mutex_lock(&lock);
    if (loaded == 0) loaded = open_driver();
    pthread_mutex_unlock(&lock);
  }
  if (loaded < 0) return 0;
  CUcontext ctx = 0;
  if (!check(cu.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent")) return 0;
  if (!ctx) {
    CUdevice dev;
    if (!check(cu.cuDeviceGet(&dev, device_ordinal), "cuDeviceGet")) return 0;
    if (!check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain")) return 0;
    if (!check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")) return 0;
  }
  if (ctx_out) *ctx_out = ctx;
  return 1;
}

static int ready(void) { return ready_in(NULL); }

/* -- the caller's side ---------------------------------------------------------------------- */

/* Copies the first recorded error into buf (if any), clears it, returns its length (0: none). */
int relaxmlir_cuda_take_error(char *buf, int size) {
  int n = (int)strlen(error);
  if (n && buf && size > 0) {
    snprintf(buf, (size_t)size, "%s", error);
  }
  error[0] = 0;
  if (loaded < 0) loaded = 0; /* a later call may find the driver (or report again) */
  return n;
}

void relaxmlir_cuda_set_stream(void *stream) { caller_stream = (CUstream)stream; }

void relaxmlir_cuda_set_device(int ordinal) { device_ordinal = ordinal; }

/* While the caller captures a call into a CUDA graph, allocations become the graph's own
 * memory nodes: no block is taken from the kept ones, none is kept. */
static volatile int capturing;

void relaxmlir_cuda_set_capture(int on) { capturing = on; }

/* -- kernel timers (vm.profile): a pair of events around every launch while profiling is on -- */

/* The kernel the host code looked up last on this thread, and its name: the host code asks for
 * each kernel by name right before launching it, so a timed launch knows what it runs. */
static __thread CUfunction looked_up;
static __thread const char *looked_up_name;

static const char *name_of(CUfunction fn) {
  return fn == looked_up ? looked_up_name : "(unnamed kernel)";
}

typedef struct {
  const char *name;
  CUevent start, stop;
} Timed;

static volatile int profiling;
static Timed *timed;
static int n_timed, cap_timed;

static void drop_timed(void) { /* the lock is held */
  for (int i = 0; i < n_timed; i++) {
    cu.cuEventDestroy(timed[i].start);
    cu.cuEventDestroy(timed[i].stop);
  }
  n_timed = 0;
}

/* Turns the timers on (earlier records dropped) or off. */
void relaxmlir_cuda_profile_enable(int on) {
  pthread_mutex_lock(&lock);
  if (on && loaded > 0) drop_timed();
  profiling = on;
  pthread_mutex_unlock(&lock);
}

/* Waits for the last timed launch, then copies up to `cap` launches out (kernel names and
 * milliseconds, in launch order); returns how many, or -1 (error recorded). */
int relaxmlir_cuda_profile_rows(const char **names, float *ms, int cap) {
  pthread_mutex_lock(&lock);
  int n = n_timed < cap ? n_timed : cap;
  if (n_timed && !check(cu.cuEventSynchronize(timed[n_timed - 1].stop), "cuEventSynchronize")) n = -1;
  for (int i = 0; i < n; i++) {
    names[i] = timed[i].name;
    if (!check(cu.cuEventElapsedTime(&ms[i], timed[i].start, timed[i].stop), "cuEventElapsedTime")) {
      n = -1;
      break;
    }
  }
  if (loaded > 0) drop_timed();
  pthread_mutex_unlock(&lock);
  return n;
}

/* Records the start event of a launch about to happen; the slot to pass to time_stop, or -1. */
static int time_start(CUfunction fn, CUstream stream) {
  pthread_mutex_lock(&lock);
  int slot = -1;
  if (n_timed == cap_timed) {
    int cap = cap_timed ? 2 * cap_timed : 256;
    Timed *grown = (Timed *)realloc(timed, (size_t)cap * sizeof *grown);
    if (grown) timed = grown, cap_timed = cap;
  }
  if (n_timed < cap_timed) {
    Timed *t = &timed[n_timed];
    if (check(cu.cuEventCreate(&t->start, 0), "cuEventCreate") &&
        check(cu.cuEventCreate(&t->stop, 0), "cuEventCreate") &&
        check(cu.cuEventRecord(t->start, stream), "cuEventRecord")) {
      t->name = name_of(fn);
      slot = n_timed++;
    }
  }
  pthread_mutex_unlock(&lock);
  return slot;
}

static void time_stop(int slot, CUstream stream) {
  if (slot < 0) return;
  pthread_mutex_lock(&lock);
  check(cu.cuEventRecord(timed[slot].stop, stream), "cuEventRecord");
  pthread_mutex_unlock(&lock);
}

/* -- modules: the PTX/cubin is loaded into the current context on first use ----------------- */

/* The host code asks for its kernel by name before every launch; the driver's lookup
 * (cuModuleGetFunction) is kept per module, keyed by the address of the host code's name
 * constant, and forgotten when the module is loaded into another context. */
#define FUNCTION_SLOTS 8

typedef struct {
  const void *image;
  CUmodule module;
  CUcontext context;
  const char *names[FUNCTION_SLOTS];
  CUfunction functions[FUNCTION_SLOTS];
} Module;

static void *new_module(const void *image) {
  Module *m = (Module *)calloc(1, sizeof(Module));
  if (m) m->image = image;
  return m;
}

void *mgpuModuleLoad(void *data, size_t size) {
  (void)size;
  return new_module(data);
}

void *mgpuModuleLoadJIT(void *data, int opt_level) {
  (void)opt_level; /* the driver JIT-compiles PTX at its default level */
  return new_module(data);
}

void mgpuModuleUnload(void *module) {
  /* Runs from a destructor at dlclose/exit, when the context may be gone: the driver frees
   * modules with their context, so only the handle is released here. */
  free(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  Module *m = (Module *)module;
  CUcontext ctx = 0;
  if (!m || !ready_in(&ctx)) return NULL;
  CUfunction fn = NULL;
  pthread_mutex_lock(&lock);
  if (!m->module || m->context != ctx) {
    CUmodule loaded_module;
    if (!check(cu.cuModuleLoadData(&loaded_module, m->image), "cuModuleLoadData")) {
      pthread_mutex_unlock(&lock);
      return NULL;
    }
    m->module = loaded_module;
    m->context = ctx;
    memset(m->names, 0, sizeof m->names);
  }
  int slot = -1;
  for (int i = 0; i < FUNCTION_SLOTS && slot < 0; i++) {
    if (m->names[i] == name) fn = m->functions[i];
    if (fn || !m->names[i]) slot = i;
  }
  if (!fn && check(cu.cuModuleGetFunction(&fn, m->module, name), name) && slot >= 0) {
    m->names[slot] = name;
    m->functions[slot] = fn;
  }
  pthread_mutex_unlock(&lock);
  looked_up = fn, looked_up_name = name;
  return fn;
}

/* A kernel may take more than 48 KiB of dynamic shared memory only once it has opted in
 * (cuFuncSetAttribute); the kernels that did, with their sizes, so each opts in once. */
#define OPT_IN_SLOTS 256
#define STATIC_SHARED_LIMIT (48 * 1024)
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
static struct {
  void *function;
  int32_t bytes;
} opted_in[OPT_IN_SLOTS];

static int opt_in(void *function, int32_t bytes) {
  int free_slot = -1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < OPT_IN_SLOTS; i++) {
    if (opted_in[i].function == function && opted_in[i].bytes >= bytes) {
      pthread_mutex_unlock(&lock);
      return 1;
    }
    if (free_slot < 0 && (!opted_in[i].function || opted_in[i].function == function))
      free_slot = i;
  }
  pthread_mutex_unlock(&lock);
  if (!check(cu.cuFuncSetAttribute((CUfunction)function,
                                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))
    return 0;
  if (free_slot >= 0) {
    pthread_mutex_lock(&lock);
    opted_in[free_slot].function = function;
    opted_in[free_slot].bytes = bytes;
    pthread_mutex_unlock(&lock);
  }
  return 1;
}

void mgpuLaunchKernel(void *function, intptr_t gx, intptr_t gy, intptr_t gz, intptr_t bx,
                      intptr_t by, intptr_t bz, int32_t smem, void *stream, void **params,
                      void **extra, size_t nparams) {
  (void)nparams;
  if (!function || error[0]) return; /* an earlier failure is already recorded */
  if (gx <= 0 || gy <= 0 || gz <= 0) return; /* an empty tensor: nothing to compute (CUDA
                                              * refuses a grid with a zero extent) */
  if (smem > STATIC_SHARED_LIMIT && !opt_in(function, smem)) return;
  int slot = profiling && !capturing ? time_start((CUfunction)function, (CUstream)stream) : -1;
  check(cu.cuLaunchKernel((CUfunction)function, (unsigned)gx, (unsigned)gy, (unsigned)gz,
                          (unsigned)bx, (unsigned)by, (unsigned)bz, (unsigned)smem,
                          (CUstream)stream, params, extra),
        "cuLaunchKernel");
  time_stop(slot, (CUstream)stream);
}

/* -- streams: always the caller's ------------------------------------------------------------ */

void *mgpuStreamCreate(void) { return caller_stream; }

void mgpuStreamDestroy(void *stream) { (void)stream; }

void mgpuStreamSynchronize(void *stream) {
  /* Host code never reads device memory, so work on the caller's stream needs no wait here;
   * a foreign stream is waited for. */
  if (stream != caller_stream && ready()) check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

void mgpuStreamWaitEvent(void *stream, void *event) { (void)stream, (void)event; }
void *mgpuEventCreate(void) { return NULL; }
void mgpuEventDestroy(void *event) { (void)event; }
void mgpuEventSynchronize(void *event) { (void)event; }
void mgpuEventRecord(void *event, void *stream) { (void)event, (void)stream; }

/* -- memory ---------------------------------------------------------------------------------- */

/* The host code allocates each intermediate before the kernel that writes it and frees it
 * after its last reader: one pair per launch. Freed blocks are kept by (size, stream, context)
 * and handed to the next allocation of that size on the same stream, which stream order makes
 * safe (as torch's caching allocator does); the driver's pool (cuMemAllocAsync) serves the
 * rest. Kept blocks go back to the driver when an allocation fails for memory and on
 * relaxmlir_cuda_release_blocks(). */
#define LIVE_SLOTS 1024 /* blocks handed out (a block not listed is freed to the driver) */
#define KEPT_SLOTS 1024
#define BLOCK_ROUND 512
#define CUDA_ERROR_OUT_OF_MEMORY 2

typedef struct {
  CUdeviceptr ptr;
  size_t bytes;
  CUstream stream;
  CUcontext context;
} Block;

static Block live[LIVE_SLOTS], kept[KEPT_SLOTS];
static int n_live, n_kept;

/* Gives every kept block back to the driver (in stream order); the lock is held. */
static void release_kept(void) {
  for (int i = 0; i < n_kept; i++) cu.cuMemFreeAsync(kept[i].ptr, kept[i].stream);
  n_kept = 0;
}

void relaxmlir_cuda_release_blocks(void) {
  pthread_mutex_lock(&lock);
  if (loaded > 0) release_kept();
  pthread_mutex_unlock(&lock);
}

void *mgpuMemAlloc(uint64_t bytes, void *stream, int8_t host_shared) {
  (void)host_shared;
  CUdeviceptr ptr = 0;
  CUcontext ctx = 0;
  if (!ready_in(&ctx)) return NULL;
  size_t size = bytes ? ((size_t)bytes + BLOCK_ROUND - 1) / BLOCK_ROUND * BLOCK_ROUND : BLOCK_ROUND;
  if (capturing) {
    check(cu.cuMemAllocAsync(&ptr, size, (CUstream)stream), "cuMemAllocAsync");
    return (void *)(uintptr_t)ptr;
  }
  pthread_mutex_lock(&lock);
  for (int i = n_kept - 1; i >= 0; i--) {
    if (kept[i].bytes == size && kept[i].stream == (CUstream)stream && kept[i].context == ctx) {
      ptr = kept[i].ptr;
      kept[i] = kept[--n_kept];
      break;
    }
  }
  if (!ptr) {
    CUresult code = cu.cuMemAllocAsync(&ptr, size, (CUstream)stream);
    if (code == CUDA_ERROR_OUT_OF_MEMORY && n_kept) {
      release_kept();
      code = cu.cuMemAllocAsync(&ptr, size, (CUstream)stream);
    }
    if (!check(code, "cuMemAllocAsync")) ptr = 0;
  }
  if (ptr) {
    for (int i = n_live - 1; i >= 0; i--) /* a block freed by someone else, its address reused */
      if (live[i].ptr == ptr) live[i] = live[--n_live];
    if (n_live < LIVE_SLOTS) {
      Block b = {ptr, size, (CUstream)stream, ctx};
      live[n_live++] = b;
    }
  }
  pthread_mutex_unlock(&lock);
  return (void *)(uintptr_t)ptr;
}

void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr || loaded <= 0) return;
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
  pthread_mutex_lock(&lock);
  for (int i = n_live - 1; i >= 0; i--) {
    if (live[i].ptr != p) continue;
    Block b = live[i];
    live[i] = live[--n_live];
    if (b.stream == (CUstream)stream && n_kept < KEPT_SLOTS) {
      kept[n_kept++] = b;
      pthread_mutex_unlock(&lock);
      return;
    }
    break;
  }
  pthread_mutex_unlock(&lock);
  check(cu.cuMemFreeAsync(p, (CUstream)stream), "cuMemFreeAsync");
}

void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  if (!ready()) return;
  check(cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes,
                         (CUstream)stream),
        "cuMemcpyAsync");
}

void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream) {
  if (!ready()) return;
  check(cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, value, count, (CUstream)stream),
        "cuMemsetD32Async");
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream) {
  if (!ready()) return;
  check(cu.cuMemsetD16Async((CUdeviceptr)(uintptr_t)dst, value, count, (CUstream)stream),
        "cuMemsetD16Async");
}

/* -- constants: uploaded once per context, kept for the life of the process ------------------ */

typedef struct {
  const void *host;
  CUcontext context;
  void *device;
} Constant;

static Constant *constants;
static size_t n_constants, cap_constants;

void *relaxmlir_cuda_constant(const void *host, int64_t bytes) {
  CUcontext ctx = 0;
  if (!ready_in(&ctx)) return NULL;
  void *found = NULL;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < n_constants; ++i)
    if (constants[i].host == host && constants[i].context == ctx) found = constants[i].device;
  if (!found) {
    CUdeviceptr ptr = 0;
    if (check(cu.cuMemAlloc(&ptr, bytes > 0 ? (size_t)bytes : 1), "cuMemAlloc") &&
        check(cu.cuMemcpyHtoD(ptr, host, (size_t)bytes), "cuMemcpyHtoD")) {
      if (n_constants == cap_constants) {
        size_t cap = cap_constants ? 2 * cap_constants : 16;
        Constant *grown = (Constant *)realloc(constants, cap * sizeof(Constant));
        if (grown) constants = grown, cap_constants = cap;
      }
      if (n_constants < cap_constants) {
        constants[n_constants].host = host;
        constants[n_constants].context = ctx;
        constants[n_constants].device = (void *)(uintptr_t)ptr;
        ++n_constants;
      }
      found = (void *)(uintptr_t)ptr;
    }
  }
  pthread_mutex_unlock(&lock);
  return found;
}

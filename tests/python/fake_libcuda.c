/* A stand-in libcuda.so.1 for tests of the host side of relaxmlir's CUDA calls on machines without
 * a GPU (tests/python/test_cuda_host.py): every call succeeds, device memory is host memory,
 * freed blocks are kept for reuse by size (as the driver's pool), launches do nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef int CUresult;
static int ctx_token = 1;
CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDeviceGetCount(int *c) { *c = 1; return 0; }
CUresult cuDeviceGet(int *d, int o) { *d = o; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = &ctx_token; return 0; }
static void *current = 0;
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) { *p = (uint64_t)(uintptr_t)malloc(n); return 0; }
CUresult cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
/* a pool as the driver's: freed blocks are reused by size, never returned to the system */
#define SLOTS 4096
static uint64_t pool_ptr[SLOTS]; static size_t pool_size[SLOTS]; static int pool_free[SLOTS]; static int pool_n = 0;
int fake_allocs = 0, fake_frees = 0; /* read by the tests */
/* set by a test: after fake_oom_skip more allocations, fake_oom_next of them fail for memory */
int fake_oom_next = 0, fake_oom_skip = 0;
CUresult cuMemAllocAsync(uint64_t *p, size_t n, void *s) {
  (void)s;
  if (fake_oom_next > 0 && fake_oom_skip-- <= 0) { fake_oom_next--; return 2; /* CUDA_ERROR_OUT_OF_MEMORY */ }
  fake_allocs++;
  for (int i = 0; i < pool_n; i++) if (pool_free[i] && pool_size[i] == n) { pool_free[i] = 0; *p = pool_ptr[i]; return 0; }
  *p = (uint64_t)(uintptr_t)malloc(n);
  if (pool_n < SLOTS) { pool_ptr[pool_n] = *p; pool_size[pool_n] = n; pool_free[pool_n] = 0; pool_n++; }
  return 0;
}
CUresult cuMemFreeAsync(uint64_t p, void *s) {
  (void)s;
  fake_frees++;
  for (int i = 0; i < pool_n; i++) if (pool_ptr[i] == p) { pool_free[i] = 1; return 0; }
  free((void *)(uintptr_t)p); return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) { memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyAsync(uint64_t d, uint64_t s, size_t n, void *st) { (void)st; memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *s) { (void)d, (void)v, (void)n, (void)s; return 0; }
CUresult cuMemsetD16Async(uint64_t d, unsigned short v, size_t n, void *s) { (void)d, (void)v, (void)n, (void)s; return 0; }
CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }
CUresult cuGetErrorString(int e, const char **s) { (void)e; *s = "fake"; return 0; }
static int module_token = 1;
CUresult cuModuleLoadData(void **m, const void *img) { (void)img; *m = &module_token; return 0; }
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
static int fn_token = 1;
int fake_launches = 0; /* read by the test */
static double fake_clock_ms = 0;
static void *capturing_on = 0; /* the stream being captured into a graph */
static int captured_launches = 0;
CUresult cuModuleGetFunction(void **f, void *m, const char *n) { (void)m, (void)n; *f = &fn_token; return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *s, void **params, void **extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)params, (void)extra;
  if (capturing_on && s == capturing_on) captured_launches++; /* recorded into the graph */
  else fake_launches++, fake_clock_ms += 0.25;                 /* every kernel takes 250 us */
  return 0;
}
int fake_opt_ins = 0, fake_opt_in_bytes = 0; /* read by the test */
CUresult cuFuncSetAttribute(void *f, int attr, int value) {
  (void)f;
  if (attr == 8) fake_opt_ins++, fake_opt_in_bytes = value;
  return 0;
}
CUresult cuDeviceGetDefaultMemPool(void **pool, int dev) { (void)dev; *pool = &ctx_token; return 0; }
unsigned long long fake_release_threshold = 0; /* read by the test */
CUresult cuMemPoolSetAttribute(void *pool, int attr, void *value) {
  (void)pool;
  if (attr == 4) fake_release_threshold = *(unsigned long long *)value;
  return 0;
}

/* CUDA graphs: launches on a capturing stream are recorded, not counted; a graph launch counts
 * the launches it recorded. fake_capture_fail makes the next captures end invalidated. */
int fake_captures = 0, fake_graph_launches = 0, fake_graphs_destroyed = 0, fake_capture_fail = 0;
CUresult cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = malloc(16); return 0; }
CUresult cuStreamDestroy_v2(void *s) { free(s); return 0; }
CUresult cuStreamBeginCapture_v2(void *s, int mode) { (void)mode; capturing_on = s; captured_launches = 0; return 0; }
CUresult cuStreamEndCapture(void *s, void **graph) {
  (void)s;
  capturing_on = 0;
  if (fake_capture_fail) { *graph = 0; return 901; /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */ }
  int *g = (int *)malloc(sizeof(int));
  *g = captured_launches;
  *graph = g;
  fake_captures++;
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  (void)flags;
  int *e = (int *)malloc(sizeof(int));
  *e = *(int *)graph;
  *exec = e;
  return 0;
}
CUresult cuGraphDestroy(void *graph) { free(graph); return 0; }
/* a graph's nodes: one kernel node per launch it recorded */
CUresult cuGraphGetNodes(void *graph, void **nodes, size_t *count) {
  size_t n = (size_t)*(int *)graph;
  if (nodes)
    for (size_t i = 0; i < n && i < *count; i++) nodes[i] = (void *)(uintptr_t)(i + 1);
  *count = n;
  return 0;
}
CUresult cuGraphNodeGetType(void *node, int *type) { (void)node; *type = 0; return 0; }
CUresult cuGraphLaunch(void *exec, void *s) { (void)s; fake_launches += *(int *)exec; fake_graph_launches++; return 0; }
CUresult cuGraphExecDestroy(void *exec) { free(exec); fake_graphs_destroyed++; return 0; }
/* Events read the fake clock, which each kernel launch advances by 0.25 ms. */
int fake_events_live = 0;
CUresult cuEventCreate(void **e, unsigned flags) { (void)flags; *e = calloc(1, sizeof(double)); fake_events_live++; return 0; }
CUresult cuEventRecord(void *e, void *s) { (void)s; *(double *)e = fake_clock_ms; return 0; }
CUresult cuEventSynchronize(void *e) { (void)e; return 0; }
CUresult cuEventElapsedTime(float *ms, void *start, void *stop) { *ms = (float)(*(double *)stop - *(double *)start); return 0; }
CUresult cuEventDestroy_v2(void *e) { free(e); fake_events_live--; return 0; }

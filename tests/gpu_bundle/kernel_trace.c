/* GPU kernel trace of any CUDA program, for the GPU bundle (docs/gpu.md, "Where a step's GPU time goes"): loaded
 * by the CUDA driver when CUDA_INJECTION64_PATH names this library, it records through CUPTI's activity API every
 * kernel, memcpy and memset the process runs, with device timestamps, into the file $KTRACE_OUT (default
 * ktrace.txt in the working directory); libexec/kernel_time.sh sums it per step. The program itself is unchanged
 * and runs at its own speed (records are buffered and written by CUPTI's worker thread).
 *   K start_ns end_ns stream name       a kernel (name as the driver reports it: mangled C++ names)
 *   C start_ns end_ns stream bytes      a memcpy
 *   S start_ns end_ns stream bytes      a memset
 * Lines starting with '#' are remarks (dropped records are reported so: a trace that lost records is no sum). */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static FILE* g_out;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
enum { kBufferBytes = 8 << 20 };

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = (uint8_t*)aligned_alloc(8, kBufferBytes);
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  CUpti_Activity* r = NULL;
  size_t dropped = 0;
  (void)size;
  pthread_mutex_lock(&g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*)r;
      fprintf(g_out, "K %llu %llu %u %s\n", (unsigned long long)k->start, (unsigned long long)k->end, k->streamId,
              k->name ? k->name : "?");
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const CUpti_ActivityMemcpy6* m = (const CUpti_ActivityMemcpy6*)r;
      fprintf(g_out, "C %llu %llu %u %llu\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId,
              (unsigned long long)m->bytes);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const CUpti_ActivityMemset4* m = (const CUpti_ActivityMemset4*)r;
      fprintf(g_out, "S %llu %llu %u %llu\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId,
              (unsigned long long)m->bytes);
    }
  }
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
    fprintf(g_out, "# dropped %zu records\n", dropped);
  fflush(g_out);
  pthread_mutex_unlock(&g_mu);
  free(buffer);
}

static void flush_at_exit(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (g_out) fflush(g_out);
}

/* The entry point the CUDA driver calls once, at cuInit, in the process that set CUDA_INJECTION64_PATH. */
int InitializeInjection(void) {
  const char* path = getenv("KTRACE_OUT");
  const char* what = "";
  g_out = fopen(path && *path ? path : "ktrace.txt", "w");
  if (!g_out) {
    fprintf(stderr, "kernel_trace: cannot write %s: no trace\n", path && *path ? path : "ktrace.txt");
    return 0;
  }
  fprintf(g_out, "# kernel_trace\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
    what = "cuptiActivityRegisterCallbacks";
  else if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
    what = "cuptiActivityEnable(CONCURRENT_KERNEL)";
  else if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS)
    what = "cuptiActivityEnable(MEMCPY)";
  else if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS)
    what = "cuptiActivityEnable(MEMSET)";
  if (*what) {
    fprintf(g_out, "# error: %s failed: no trace\n", what);
    fprintf(stderr, "kernel_trace: %s failed: no trace\n", what);
    fflush(g_out);
    return 0;
  }
  cuptiActivityFlushPeriod(2000);  /* also written while the program runs: a killed run keeps most of its trace */
  atexit(flush_at_exit);
  fflush(g_out);
  return 1;
}

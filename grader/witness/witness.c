/* The grader's witness: what the GPU ran in a child, recorded where student Python cannot reach it.
 *
 * The CUDA driver loads this library into the child's process when CUDA starts (it is named by
 * CUDA_INJECTION64_PATH, and the driver calls InitializeInjection at cuInit), before any student
 * code runs. It asks CUPTI's activity API for a record of every kernel, every memory copy and
 * every memset the process runs on the GPU, and of the host calls that launched them, and writes
 * each record as one line of text to a pipe whose other end the grader's parent process reads
 * (the descriptor's number comes in GRADER_WITNESS_FD, the API calls worth keeping in
 * GRADER_WITNESS_CBIDS). No Python object holds the records: the harness in the child only asks
 * for a flush (witness_flush) at the end of each task and writes marks (memsets of sizes that
 * encode them) on the GPU's own stream around each graded call.
 *
 * Lines (fields separated by one space; the kernel's name, last, may hold spaces):
 *   I <pid> <thread that started CUDA>
 *   K <start> <end> <stream> <correlation> <grid> <block> <registers> <static smem> <dynamic smem> <local> <name>
 *   C <start> <end> <stream> <correlation> <copy kind> <bytes>
 *   S <start> <end> <stream> <correlation> <value> <bytes>
 *   A <start> <end> <thread> <correlation> <domain R|D> <callback id>
 *   F <sequence>                     a flush the harness asked for is complete
 *   X <what>                         something the witness could not do (the parent treats it as lost)
 * Times are CUPTI's, in ns, on one clock for host and GPU records.
 *
 * CUPTI hands its buffers to one client a process, the last to register. torch's profiler (Kineto)
 * registers as it starts, even for a session that records host ops only, and would then be handed
 * the witness's records (and drop them). So the library is also preloaded (LD_PRELOAD) and answers
 * the calls by which another client would take CUPTI over (registering buffers, switching off a
 * kind the witness records, finalizing) with success, doing nothing, while the witness records.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUFFER_BYTES (8u << 20)
#define MAX_CBID 4096
#define LINE_BYTES 4608

extern char *__cxa_demangle(const char *mangled, char *out, size_t *length, int *status);

static int out_fd = -1;
static unsigned char keep_runtime[MAX_CBID], keep_driver[MAX_CBID];
static unsigned long long flushes;
static int started;
static pthread_mutex_t writing = PTHREAD_MUTEX_INITIALIZER;  /* one line at a time, whole */
static unsigned long long given, taken;  /* CUPTI's buffers handed out and handed back */

static void write_all(const char *data, size_t length) {
  while (length > 0 && out_fd >= 0) {
    ssize_t n = write(out_fd, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) { out_fd = -1; return; }  /* the parent is gone: nothing left to tell */
    data += n;
    length -= (size_t)n;
  }
}

static void line(const char *format, ...) {
  char text[LINE_BYTES];
  va_list arguments;
  va_start(arguments, format);
  int n = vsnprintf(text, sizeof text - 1, format, arguments);
  va_end(arguments);
  if (n < 0) return;
  if ((size_t)n > sizeof text - 2) n = (int)sizeof text - 2;
  text[n] = '\n';
  pthread_mutex_lock(&writing);
  write_all(text, (size_t)n + 1);
  pthread_mutex_unlock(&writing);
}

/* Names as the profiler shows them: demangled, with no newline to break a line. */
static void kernel_name(const char *raw, char *out, size_t size) {
  int status = -1;
  char *plain = raw ? __cxa_demangle(raw, NULL, NULL, &status) : NULL;
  const char *name = (status == 0 && plain) ? plain : (raw ? raw : "?");
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++) out[i] = (name[i] == '\n' || name[i] == '\r') ? ' ' : name[i];
  out[i] = 0;
  free(plain);
}

static void CUPTIAPI give_buffer(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
  *max_records = 0;
  if (*buffer) __atomic_add_fetch(&given, 1, __ATOMIC_SEQ_CST);
}

static void record(CUpti_Activity *entry) {
  char name[4096];
  switch (entry->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)entry;
      kernel_name(k->name, name, sizeof name);
      line("K %llu %llu %u %u %lld %lld %u %d %d %u %s", (unsigned long long)k->start, (unsigned long long)k->end,
           k->streamId, k->correlationId, (long long)k->gridX * k->gridY * k->gridZ,
           (long long)k->blockX * k->blockY * k->blockZ, (unsigned)k->registersPerThread, k->staticSharedMemory,
           k->dynamicSharedMemory, k->localMemoryPerThread, name);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      CUpti_ActivityMemcpy6 *c = (CUpti_ActivityMemcpy6 *)entry;
      line("C %llu %llu %u %u %u %llu", (unsigned long long)c->start, (unsigned long long)c->end, c->streamId,
           c->correlationId, (unsigned)c->copyKind, (unsigned long long)c->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      CUpti_ActivityMemset4 *s = (CUpti_ActivityMemset4 *)entry;
      line("S %llu %llu %u %u %u %llu", (unsigned long long)s->start, (unsigned long long)s->end, s->streamId,
           s->correlationId, s->value, (unsigned long long)s->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)entry;
      int runtime = entry->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      if (a->cbid >= MAX_CBID || !(runtime ? keep_runtime : keep_driver)[a->cbid]) break;
      line("A %llu %llu %u %u %c %u", (unsigned long long)a->start, (unsigned long long)a->end, a->threadId,
           a->correlationId, runtime ? 'R' : 'D', (unsigned)a->cbid);
      break;
    }
    default:
      break;
  }
}

static void CUPTIAPI take_buffer(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  CUpti_Activity *entry = NULL;
  (void)size;
  while (cuptiActivityGetNextRecord(buffer, valid, &entry) == CUPTI_SUCCESS) record(entry);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
    line("X dropped %zu records", dropped);
  free(buffer);
  __atomic_add_fetch(&taken, 1, __ATOMIC_SEQ_CST);
}

/* "R:1,2,3;D:4,5": the API calls worth a line (launches, copies, memsets), chosen by the parent. */
static void parse_cbids(const char *text) {
  unsigned char *table = NULL;
  for (const char *p = text; p && *p;) {
    if ((p[0] == 'R' || p[0] == 'D') && p[1] == ':') {
      table = p[0] == 'R' ? keep_runtime : keep_driver;
      p += 2;
      continue;
    }
    char *end;
    unsigned long id = strtoul(p, &end, 10);
    if (end == p) { p++; continue; }
    if (table && id < MAX_CBID) table[id] = 1;
    p = end;
  }
}

typedef CUptiResult (*register_function)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*kind_function)(CUpti_ActivityKind);
typedef CUptiResult (*context_kind_function)(CUcontext, CUpti_ActivityKind);
typedef CUptiResult (*plain_function)(void);

static void *real(const char *name) { return dlsym(RTLD_NEXT, name); }

static int recorded(CUpti_ActivityKind kind) {
  return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL ||
         kind == CUPTI_ACTIVITY_KIND_MEMCPY || kind == CUPTI_ACTIVITY_KIND_MEMSET ||
         kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  if (started && request != give_buffer) return CUPTI_SUCCESS;  /* the buffers stay the witness's */
  register_function next = (register_function)real("cuptiActivityRegisterCallbacks");
  return next ? next(request, complete) : CUPTI_ERROR_UNKNOWN;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (started && recorded(kind)) return CUPTI_SUCCESS;
  kind_function next = (kind_function)real("cuptiActivityDisable");
  return next ? next(kind) : CUPTI_ERROR_UNKNOWN;
}

CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind) {
  if (started && recorded(kind)) return CUPTI_SUCCESS;
  context_kind_function next = (context_kind_function)real("cuptiActivityDisableContext");
  return next ? next(context, kind) : CUPTI_ERROR_UNKNOWN;
}

CUptiResult CUPTIAPI cuptiFinalize(void) {
  if (started) return CUPTI_SUCCESS;
  plain_function next = (plain_function)real("cuptiFinalize");
  return next ? next() : CUPTI_ERROR_UNKNOWN;
}

/* Whether CUPTI took the witness's buffers at the driver's start: the harness asks before it marks. */
int witness_started(void) { return started; }

/* Called by the harness (never by student code: the guard refuses ctypes to it) at the end of each
 * task: every record so far reaches the pipe before the task's report does. */
int witness_flush(void) {
  unsigned long long before = __atomic_load_n(&given, __ATOMIC_SEQ_CST);
  if (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) return -1;
  /* CUPTI may hand the buffers back on a thread of its own: the line that ends the task waits for
   * every buffer handed out before the flush to come back written (two seconds at most). */
  struct timespec pause = {0, 100000};
  for (int i = 0; i < 20000 && __atomic_load_n(&taken, __ATOMIC_SEQ_CST) < before; i++) nanosleep(&pause, NULL);
  line("F %llu", ++flushes);
  return 0;
}

static int enable(CUpti_ActivityKind kind, const char *what) {
  CUptiResult result = cuptiActivityEnable(kind);
  if (result == CUPTI_SUCCESS) return 0;
  const char *text = NULL;
  cuptiGetResultString(result, &text);
  line("X cannot record %s: %s", what, text ? text : "?");
  return -1;
}

int InitializeInjection(void) {
  const char *fd = getenv("GRADER_WITNESS_FD");
  if (!fd) return 1;
  out_fd = atoi(fd);
  fcntl(out_fd, F_SETFD, FD_CLOEXEC);  /* ptxas and every other process the child starts: not theirs */
  parse_cbids(getenv("GRADER_WITNESS_CBIDS"));
  const char *kinds = getenv("GRADER_WITNESS_KINDS");  /* "KCSA" by default: kernels, copies, memsets, API */
  if (!kinds) kinds = "KCSA";
  line("I %d %ld", (int)getpid(), (long)syscall(SYS_gettid));
  if (cuptiActivityRegisterCallbacks(give_buffer, take_buffer) != CUPTI_SUCCESS) {
    line("X cannot register CUPTI's buffers");
    return 1;
  }
  if (strchr(kinds, 'K')) enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels");
  if (strchr(kinds, 'C')) enable(CUPTI_ACTIVITY_KIND_MEMCPY, "copies");
  if (strchr(kinds, 'S')) enable(CUPTI_ACTIVITY_KIND_MEMSET, "memsets");
  if (strchr(kinds, 'A')) {
    enable(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime calls");
    enable(CUPTI_ACTIVITY_KIND_DRIVER, "driver calls");
  }
  unsetenv("GRADER_WITNESS_FD");
  started = 1;
  return 1;
}

// Stand-in for build/cnntrain in the Slurm tests: an MPI program with the trainer's preemption contract, so the
// batch scripts and the cluster can be tested before (and independently of) the real trainer.
//   fake_trainer --config F --run-dir D --resume auto|none [--train.max_steps N] [other --key value ignored]
// Each step sleeps FAKE_STEP_MS (default 100) ms, then all ranks agree on a stop flag (one-int allreduce).
// SIGUSR1/SIGTERM set the flag; at the next step boundary rank 0 writes D/checkpoints/step-%08d (via .tmp and
// rename), logs, appends {"event":"end","status":"preempted"} to D/metrics.jsonl, and every rank exits 75.
// With --resume auto it continues after the newest committed checkpoint. Exit 0 when max_steps are done, after
// writing a final checkpoint. The "weights" are one number updated every step by a step-dependent rule that
// does not commute, so a resumed run ends with the same final checkpoint as an uninterrupted one only if it
// restarted from exactly the checkpointed state. FAKE_EXIT_CODE=N makes it fail with N right after start-up;
// FAKE_CRASH makes it die on SIGSEGV (crash_if_asked). FAKE_DIE_LEAVING=1: after a preemption checkpoint and its
// end record, rank 0 dies on SIGKILL before MPI_Finalize (a rank lost on its way out; srun then reports 137).
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_signal = 0;
static void on_signal(int sig) { g_signal = sig; }

static const char* run_dir = NULL;
static int rank = 0;

static void append(const char* name, const char* fmt, ...) {
  if (rank != 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", run_dir, name);
  FILE* f = fopen(path, "a");
  if (!f) { fprintf(stderr, "fake_trainer: cannot open %s: %s\n", path, strerror(errno)); MPI_Abort(MPI_COMM_WORLD, 1); }
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}

static unsigned long long update_weights(unsigned long long w, int step) {
  return (w * 6364136223846793005ULL + (unsigned long long)step) % 1000000007ULL;
}

// FAKE_CRASH=before|after:FILE makes rank 0 die on SIGSEGV before or after the start event, once: FILE is
// created first, so a relaunched step finds it and goes on. FAKE_CRASH=before|after (no FILE): every time.
static void crash_if_asked(const char* when) {
  const char* spec = getenv("FAKE_CRASH");
  size_t n = strlen(when);
  if (rank != 0 || !spec || strncmp(spec, when, n) != 0 || (spec[n] != '\0' && spec[n] != ':')) return;
  if (spec[n] == ':') {
    FILE* f = fopen(spec + n + 1, "r");
    if (f) { fclose(f); return; }
    f = fopen(spec + n + 1, "w");
    if (f) fclose(f);
  }
  fprintf(stderr, "fake_trainer: crashing %s the start event as FAKE_CRASH asks\n", when);
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
}

// Newest committed checkpoint step in D/checkpoints (names step-NNNNNNNN; *.tmp are uncommitted), or 0.
static int newest_checkpoint(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoints", run_dir);
  DIR* d = opendir(path);
  if (!d) return 0;
  int best = 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    int s; char tail;
    if (sscanf(e->d_name, "step-%d%c", &s, &tail) == 1 && s > best) best = s;
  }
  closedir(d);
  return best;
}

static void write_checkpoint(int step, unsigned long long w) {
  if (rank != 0) return;
  char tmp[4096], dst[4096];
  snprintf(tmp, sizeof tmp, "%s/checkpoints/step-%08d.tmp", run_dir, step);
  snprintf(dst, sizeof dst, "%s/checkpoints/step-%08d", run_dir, step);
  FILE* f = fopen(tmp, "w");
  if (!f || fprintf(f, "step %d weights %llu\n", step, w) < 0 || fclose(f) != 0 || rename(tmp, dst) != 0) {
    fprintf(stderr, "fake_trainer: cannot write checkpoint %s: %s\n", dst, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
}

int main(int argc, char** argv) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  MPI_Init(&argc, &argv);
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  const char* resume = "none";
  const char* config = "";
  int max_steps = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--run-dir")) run_dir = argv[i + 1];
    else if (!strcmp(argv[i], "--resume")) resume = argv[i + 1];
    else if (!strcmp(argv[i], "--config")) config = argv[i + 1];
    else if (!strcmp(argv[i], "--train.max_steps")) max_steps = atoi(argv[i + 1]);
  }
  if (!run_dir) {
    if (rank == 0) fprintf(stderr, "fake_trainer: --run-dir is required\n");
    MPI_Finalize();
    return 2;
  }
  const char* ms_env = getenv("FAKE_STEP_MS");
  long step_ms = ms_env ? atol(ms_env) : 100;

  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoints", run_dir);
  if (rank == 0) { mkdir(run_dir, 0755); mkdir(path, 0755); }
  MPI_Barrier(MPI_COMM_WORLD);

  const char* exit_env = getenv("FAKE_EXIT_CODE");   // to test that a failure's exit code passes through
  if (exit_env && atoi(exit_env) != 0) {
    if (rank == 0) fprintf(stderr, "fake_trainer: failing with exit code %s as FAKE_EXIT_CODE asks\n", exit_env);
    MPI_Finalize();
    return atoi(exit_env);
  }

  crash_if_asked("before");   // a start-up crash (as in MPI_Init): the batch script relaunches the step

  int start = 0;
  unsigned long long w = 1;
  if (!strcmp(resume, "auto")) start = newest_checkpoint();
  if (start > 0 && rank == 0) {
    snprintf(path, sizeof path, "%s/checkpoints/step-%08d", run_dir, start);
    FILE* f = fopen(path, "r");
    int s = -1;
    if (!f || fscanf(f, "step %d weights %llu", &s, &w) != 2 || s != start) {
      fprintf(stderr, "fake_trainer: unreadable checkpoint %s\n", path);
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
    fclose(f);
  }
  MPI_Bcast(&start, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(&w, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  char host[256] = "?";
  gethostname(host, sizeof host);
  append("log.txt", "fake_trainer: %d ranks on %s, config '%s', slurm job %s restart %s, %s\n", world, host, config,
         getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "-",
         getenv("SLURM_RESTART_COUNT") ? getenv("SLURM_RESTART_COUNT") : "0",
         start ? "resuming" : "starting fresh");
  const char* gpus = getenv("CUDA_VISIBLE_DEVICES");
  append("metrics.jsonl",
         "{\"event\":\"start\",\"world_size\":%d,\"device\":\"cpu\",\"model\":\"fake\",\"step\":%d,\"visible_gpus\":\"%s\"}\n",
         world, start, gpus ? gpus : "");
  crash_if_asked("after");    // a crash of a started trainer: never relaunched

  for (int step = start + 1; step <= max_steps; ++step) {
    struct timespec ts = {step_ms / 1000, (step_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
    int local = g_signal, stop = 0;
    MPI_Allreduce(&local, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (stop) {
      write_checkpoint(step - 1, w);
      append("metrics.jsonl", "{\"event\":\"checkpoint\",\"step\":%d,\"path\":\"checkpoints/step-%08d\"}\n", step - 1,
             step - 1);
      append("log.txt", "fake_trainer: got signal %d; checkpoint at step %d written; exiting 75\n", stop, step - 1);
      append("metrics.jsonl", "{\"event\":\"end\",\"status\":\"preempted\",\"steps\":%d}\n", step - 1);
      if (rank == 0 && getenv("FAKE_DIE_LEAVING")) {
        fprintf(stderr, "fake_trainer: dying on SIGKILL after the end record as FAKE_DIE_LEAVING asks\n");
        raise(SIGKILL);
      }
      MPI_Finalize();
      return 75;
    }
    w = update_weights(w, step);
    append("metrics.jsonl", "{\"event\":\"train\",\"epoch\":0,\"step\":%d,\"loss\":%.4f}\n", step, 2.3 / step);
  }
  write_checkpoint(max_steps, w);
  append("metrics.jsonl", "{\"event\":\"checkpoint\",\"step\":%d,\"path\":\"checkpoints/step-%08d\"}\n", max_steps,
         max_steps);
  append("metrics.jsonl", "{\"event\":\"end\",\"status\":\"completed\",\"steps\":%d}\n", max_steps);
  MPI_Finalize();
  return 0;
}

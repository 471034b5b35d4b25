// Errors and exit codes: the lowest layer, used by kernels/, io/ and src/ alike. User-facing problems are
// thrown as cnn::Error carrying the process exit code; the program's top level turns them into one message
// and an exit (or a job-wide abort once ranks may be inside collectives). Internal invariants use CNN_CHECK, which ends the whole job at once.
#pragma once
#include <cstdarg>
#include <stdexcept>
#include <string>

namespace cnn {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,     // anything else (internal error, MPI failure, out of memory)
  kExitUsage = 2,       // bad command line or config
  kExitData = 3,        // bad or unreadable data
  kExitCheckpoint = 4,  // checkpoint error
  kExitNonFinite = 5,   // a NaN/inf loss or gradient stopped training (--train.on_nonfinite stop)
  kExitPreempted = 75,  // stopped on a signal after writing a checkpoint
};

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// An error that every rank raises at the same point with the same message, after agreeing on it through the
// comm layer (e.g. a checkpoint that could not be written): the program can end cleanly on every rank
// (MPI_Finalize, then exit with the code) instead of aborting the job.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list ap);

// Throws Error(code, printf-style message).
[[noreturn]] void raise(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Prints "cnntrain: error [rank R/W on HOST]: msg" to stderr (and to the run log when one is open), then
// ends the whole job with `code`: MPI_Abort when other ranks exist, exit() otherwise. Never returns.
[[noreturn]] void fatal(int code, const std::string& msg);

// fatal()'s message without the ending: "cnntrain: error [rank R/W on HOST]: msg" (without the tag when
// with_rank_tag is false) to stderr and to the run log. Also for a thread that must not end the job itself (the
// collective watchdog reports, then lets the main thread abort).
void report_error(const std::string& msg, bool with_rank_tag = true);

// Where fatal() also appends its message (set once the run directory exists); empty = nowhere.
void set_error_log_path(const std::string& path);

// Prefix used in every message: "[rank R/W on HOST]" (or "" before the comm layer has set the identity).
std::string rank_tag();

// The base layer knows nothing of MPI: the comm layer tells it who this process is and how to end the job.
// Until then messages carry no rank tag, every process counts as the logging one, and fatal() exits.
void set_process_identity(int rank, int size, const std::string& host);
void clear_process_identity();
// Called by fatal() after the message is out; must not return (MPI_Abort once ranks exist).
using AbortHandler = void (*)(int code);
void set_abort_handler(AbortHandler handler);
// Whether this process prints job-wide warnings: rank 0, or a process without ranks (tools, tests).
bool is_log_rank();

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace cnn

#define CNN_CHECK(cond, ...)                                                  \
  do {                                                                        \
    if (__builtin_expect(!(cond), 0)) ::cnn::check_failed(#cond, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

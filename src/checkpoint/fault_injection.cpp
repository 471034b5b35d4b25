#include "src/checkpoint/fault_injection.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "src/base/error.h"
#include "src/comm/comm.h"

namespace cnn {

namespace {

struct Spec {
  bool on = false;
  CkptFault kind = CkptFault::kWrite;
  int rank = 0;
  long nth = 1;  // which operation of that kind fails
};

const char* kVar = "CNNTRAIN_TEST_CKPT_FAULT";

Spec parse(const char* v) {
  Spec s;
  if (!v || !*v) return s;
  char kind[16] = {0};
  int rank = -1;
  long nth = 1;
  const int got = std::sscanf(v, "%15[a-z]:%d:%ld", kind, &rank, &nth);
  const struct {
    const char* name;
    CkptFault kind;
  } kinds[] = {{"write", CkptFault::kWrite}, {"attr", CkptFault::kAttr}, {"open", CkptFault::kOpen},
               {"stat", CkptFault::kStat}};
  for (const auto& k : kinds)
    if (got >= 2 && std::strcmp(kind, k.name) == 0 && rank >= 0 && nth >= 1) {
      s = {true, k.kind, rank, nth};
      return s;
    }
  raise(kExitUsage, "%s='%s': expected write:RANK:N, attr:RANK:N, open:RANK or stat:RANK (a test hook, see "
        "docs/checkpoints.md)", kVar, v);
}

struct State {
  bool parsed = false;
  Spec spec;
  long seen[4] = {0, 0, 0, 0};
};

State& state() {
  static State s;
  if (!s.parsed) {
    s.parsed = true;
    s.spec = parse(std::getenv(kVar));
  }
  return s;
}

}  // namespace

bool inject_ckpt_fault(CkptFault kind) {
  State& s = state();
  if (!s.spec.on || s.spec.kind != kind || s.spec.rank != world_rank()) return false;
  return ++s.seen[static_cast<int>(kind)] == s.spec.nth;
}

void set_ckpt_fault(const std::string& spec) {
  State& s = state();
  s.spec = parse(spec.c_str());
  for (long& n : s.seen) n = 0;
}

void ckpt_fault_delay() {
  static const long ms = [] {
    const char* v = std::getenv("CNNTRAIN_TEST_CKPT_SLEEP_MS");
    return v ? std::atol(v) : 0L;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace cnn

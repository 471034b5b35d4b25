// The environment variables cnntrain and its libraries read (docs/environment.md), in one table with their
// kind. Options are recorded in config.ini; these are not options, so the trainer logs the ones that are set
// at start and records them in the start event of metrics.jsonl, where two runs' results can be told apart
// and a test run from a production one.
#pragma once
#include <string>
#include <vector>

namespace cnn {

class Json;
class RunLog;

enum class EnvKind {
  kResults,   // changes what a run computes (kernel choices, parallel thresholds, the emulator's schedule)
  kTestHook,  // a planted fault, delay or fake library for tests: the run's results are not production ones
  kSetting,   // leaves the results alone (where libraries are, the checkpoint I/O mode, diagnostics)
};

struct EnvVar {
  const char* name;
  EnvKind kind;
  const char* what;  // for the log line of an armed test hook
};

// Every CNNTRAIN_* variable read below src/main*.cpp, in a fixed order.
const std::vector<EnvVar>& known_env_vars();

// "NAME=value" for each variable of that kind that is set (to anything, even empty), in the table's order.
std::vector<std::string> env_set(EnvKind kind);

// At start: one log line naming the result-changing variables that are set, and one warning per armed test
// hook saying what it does and that the results are not production ones.
void log_env_switches(RunLog& log);
// The start event's "env" (result-changing variables) and "test_hooks" (armed hooks), each only when set.
void add_env_switches(Json& start);

}  // namespace cnn

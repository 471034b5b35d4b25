// Environment variables that change what a run computes (kernel choices, parallel thresholds; docs/
// environment.md). Options are recorded in config.ini; these are not options, so the trainer logs the ones
// that are set at start and records them in the start event, where two runs' results can be told apart.
#pragma once
#include <string>
#include <vector>

namespace cnn {

// "NAME=value" for each result-changing variable that is set, in a fixed order; empty when none is.
std::vector<std::string> result_env_switches();

}  // namespace cnn

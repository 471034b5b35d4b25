// Fine-tuning's choice of what trains (docs/models.md "Fine-tuning"): name patterns, the frozen parameters
// (--train.freeze), per-parameter learning-rate factors (--train.lr_mult) and where backward may stop.
// A pattern is a comma-separated list of name prefixes ("layer1" matches "layer1" and "layer1.0.conv1.weight",
// not "layer10.x"), or "re:REGEX" (the rest of the string, searched in the name; anchor it with ^ and $).
#pragma once
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "src/model/net.h"

namespace cnn {

class NamePattern {
 public:
  NamePattern() = default;
  // `option` names the option in errors (Error(kExitUsage) for a bad regex or an empty prefix).
  NamePattern(const std::string& spec, const char* option);
  bool empty() const { return prefixes_.empty() && !re_; }
  bool matches(const std::string& name) const;

 private:
  std::vector<std::string> prefixes_;
  bool re_ = false;
  std::regex regex_;
};

struct FreezePlan {
  std::vector<float> lr_mult;  // per param_table() entry: the learning-rate factor, 0 for a frozen parameter
  std::vector<std::string> frozen;  // names of the frozen parameters
  // Layers before this one hold only frozen parameters and precede every trainable one: they run no backward
  // (Net::set_frozen_below), and their gradient, from offset 0 to trainable_offset, is never allreduced.
  size_t stop_layer = 0;
  size_t trainable_offset = 0;
  // [begin, end) of the frozen parameters above trainable_offset (between trainable ones): their layers'
  // backward still runs (the layers below need it), but their gradient is neither allreduced nor used.
  std::vector<std::pair<size_t, size_t>> frozen_inside;
};

// `freeze` (empty or not in force: nothing frozen) and `lr_mult` ("PATTERN=X,...", the first matching entry
// wins) over the net's parameters. Throws Error(kExitUsage) naming the option for a pattern that matches no
// parameter, a bad factor, or a net with nothing left to train.
FreezePlan plan_freeze(const Net& net, const std::string& freeze, const std::string& lr_mult);

}  // namespace cnn

#include "src/train/freeze.h"

#include <cstdlib>

#include "src/base/error.h"

namespace cnn {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  size_t at = 0;
  while (at <= s.size()) {
    size_t end = s.find(sep, at);
    if (end == std::string::npos) end = s.size();
    v.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return v;
}

// The learning-rate factor of each "PATTERN=X" entry.
std::vector<std::pair<NamePattern, float>> parse_lr_mult(const std::string& spec) {
  std::vector<std::pair<NamePattern, float>> v;
  if (spec.empty()) return v;
  for (const std::string& item : split(spec, ',')) {
    const size_t eq = item.rfind('=');
    char* end = nullptr;
    const double x = eq == std::string::npos ? -1 : std::strtod(item.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || end == item.c_str() + eq + 1 || *end || !(x >= 0 && x <= 1e6))
      raise(kExitUsage, "option --train.lr_mult: '%s' is not PATTERN=X with X a number >= 0 (e.g. layer1=0.1)",
            item.c_str());
    v.emplace_back(NamePattern(item.substr(0, eq), "train.lr_mult"), static_cast<float>(x));
  }
  return v;
}

}  // namespace

NamePattern::NamePattern(const std::string& spec, const char* option) {
  if (spec.empty()) return;
  if (spec.compare(0, 3, "re:") == 0) {
    try {
      regex_ = std::regex(spec.substr(3), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      raise(kExitUsage, "option --%s: '%s' is not a valid regular expression (%s)", option, spec.c_str(), e.what());
    }
    re_ = true;
    return;
  }
  for (const std::string& p : split(spec, ',')) {
    if (p.empty()) raise(kExitUsage, "option --%s: empty name prefix in '%s'", option, spec.c_str());
    prefixes_.push_back(p);
  }
}

bool NamePattern::matches(const std::string& name) const {
  if (re_) return std::regex_search(name, regex_);
  for (const std::string& p : prefixes_)
    if (name.compare(0, p.size(), p) == 0 &&
        (name.size() == p.size() || p.back() == '.' || name[p.size()] == '.'))
      return true;
  return false;
}

FreezePlan plan_freeze(const Net& net, const std::string& freeze, const std::string& lr_mult) {
  const NamePattern frozen(freeze, "train.freeze");
  const auto mults = parse_lr_mult(lr_mult);
  const std::vector<ParamInfo>& table = net.param_table();
  FreezePlan plan;
  std::vector<int> used(mults.size(), 0);
  for (const ParamInfo& p : table) {
    float m = 1.f;
    for (size_t k = 0; k < mults.size(); ++k)
      if (mults[k].first.matches(p.name)) {
        m = mults[k].second;
        used[k] = 1;
        break;
      }
    if (frozen.matches(p.name)) {
      m = 0.f;
      plan.frozen.push_back(p.name);
    }
    plan.lr_mult.push_back(m);
  }
  if (!freeze.empty() && plan.frozen.empty())
    raise(kExitUsage, "option --train.freeze: '%s' matches no parameter of the model (names as in the checkpoints, "
          "e.g. %s)", freeze.c_str(), table.empty() ? "-" : table.front().name.c_str());
  for (size_t k = 0; k < mults.size(); ++k)
    if (!used[k])
      raise(kExitUsage, "option --train.lr_mult: entry %zu of '%s' matches no parameter (or only ones an earlier "
            "entry took)", k + 1, lr_mult.c_str());
  // The layers in order own consecutive entries of the table.
  size_t t = 0;
  const auto& layers = net.layers();
  for (plan.stop_layer = 0; plan.stop_layer < layers.size(); ++plan.stop_layer) {
    const size_t k = layers[plan.stop_layer]->param_specs().size();
    bool trainable = false;
    for (size_t j = t; j < t + k; ++j) trainable = trainable || plan.lr_mult[j] > 0.f;
    if (trainable) break;
    t += k;
  }
  if (plan.stop_layer == layers.size())
    raise(kExitUsage, "options --train.freeze/--train.lr_mult leave no parameter to train");
  plan.trainable_offset = t < table.size() ? table[t].offset : net.num_params();
  for (; t < table.size(); ++t) {
    if (plan.lr_mult[t] > 0.f) continue;
    auto& in = plan.frozen_inside;
    if (!in.empty() && in.back().second == table[t].offset) in.back().second += table[t].size;
    else in.emplace_back(table[t].offset, table[t].offset + table[t].size);
  }
  return plan;
}

}  // namespace cnn

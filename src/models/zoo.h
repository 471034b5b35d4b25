// The model zoo: networks by name, sized from the dataset (input shape, number of classes).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/net.h"

namespace cnn {

std::vector<std::string> model_names();
bool is_model(const std::string& name);
// Adds the named model's layers to `net`. Throws Error(kExitUsage) for unknown names.
void build_model(const std::string& name, Net& net);

}  // namespace cnn

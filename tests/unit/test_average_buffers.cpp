// average_buffers sums batch norm's running statistics through the Collectives it is given, in the backend's
// memory (NCCL on GPUs), and divides by that collectives' rank count; without collectives (one process) it
// leaves them alone. A recording stand-in for three ranks holding the same values checks both.
#include <string>
#include <vector>

#include "kernels/collectives.h"
#include "kernels/cpu/cpu_backend.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "src/train/recipe.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// Three ranks that all hold this rank's values: every sum triples them.
class ThreeSameRanks final : public Collectives {
 public:
  std::string describe() const override { return "test: three ranks holding the same values"; }
  int ranks() const override { return 3; }
  void allreduce_sum(float* data, size_t n, const std::string& what) override {
    calls.push_back({data, n, what});
    for (size_t i = 0; i < n; ++i) data[i] *= 3;
  }
  void allreduce_sum(double*, size_t, const std::string& what) override { ADD_FAILURE() << "double sum: " << what; }
  void allreduce_sum_host(double*, size_t, const std::string& what) override {
    ADD_FAILURE() << "host sum: " << what;
  }
  std::unique_ptr<GradSync> make_grad_sync(float*, size_t, const GradSyncOptions&) override { return nullptr; }

  struct Call {
    const float* data;
    size_t n;
    std::string what;
  };
  std::vector<Call> calls;
};

TEST(AverageBuffers, SumsTheBuffersInPlaceThroughTheCollectivesAndDividesByTheirRanks) {
  auto be = make_cpu_backend(1);
  Net net(*be, Dims{4, 4, 3}, 2);
  net.add(make_conv2d("conv", 5, {3, 1, 1, false}));
  net.add(make_batchnorm("bn"));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", 2));
  net.build(2, 1);
  const size_t n = net.num_buffers();
  for (size_t i = 0; i < n; ++i) net.buffers()[i] = 0.25f * static_cast<float>(i) - 1;
  ThreeSameRanks comm;
  average_buffers(*be, net, &comm);
  ASSERT_EQ(comm.calls.size(), 1u);
  EXPECT_EQ(comm.calls[0].data, net.buffers()) << "not summed in place, in the backend's memory";
  EXPECT_EQ(comm.calls[0].n, n);
  EXPECT_EQ(comm.calls[0].what, "batch-norm running statistics");
  for (size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(net.buffers()[i], 0.25f * static_cast<float>(i) - 1) << i;

  average_buffers(*be, net, nullptr);  // one process: nothing to average, nothing changes
  for (size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(net.buffers()[i], 0.25f * static_cast<float>(i) - 1) << i;
}

}  // namespace
}  // namespace cnn

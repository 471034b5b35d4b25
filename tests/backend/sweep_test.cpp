// The backend sweep's driver (see tests/backend/sweep.h): one test per (op, backend) runs the op's cases on
// the backend and on the oracle (the reference kernels, or the case's independent oracle) and compares every
// output; one test checks that every virtual op of kernels/backend.h has a case of its own, one that the ops
// the fast CPU backend runs on the reference kernels are never checked against those kernels.
#include <algorithm>
#include <map>
#include <set>

#include "tests/backend/sweep.h"
#include "tests/common/backend_targets.h"

namespace cnn::sweep {
namespace {

using test::BackendTarget;
using test::TargetBackend;

// Interface members that compute nothing to compare, with the reason.
const std::map<std::string, std::string> kNotOps = {
    {"name", "identifies the backend in messages; no result to compare"},
    {"caps", "what the backend is, for callers that choose a path (tests/unit/test_device_input.cpp)"},
    {"blocked_conv_ok", "which layouts a convolution may take: a capability (tests/unit/test_winograd_choice.cpp, "
                        "test_blocked_layout.cpp); the convolution ops have their cases"},
    {"blocked_batchnorm_ok", "whether batch norm takes nChw16c operands: a capability, which the layout cases "
                             "(cases_layout.cpp) use to pick what each backend is given"},
    {"conv2d_backward_data_adds", "whether a convolution's input gradient can be added into dx: a capability, which "
                                  "the conv2d_backward_data_add cases (cases_conv_linear.cpp) follow"},
};

// Ops that the fast CPU backend runs on their reference kernel (kernels/cpu/cpu_backend.cpp calls the *_cpu
// function, or the conversion the reference variant uses too): compared with the reference, the CPU targets
// would be compared with themselves, so every case of these ops needs an independent oracle.
const std::set<std::string> kSelfReferenced = {
    "softmax_xent",          "softmax_xent_totals",          "batchnorm_stats", "batchnorm_forward_from_stats",
    "batchnorm_backward_sums", "batchnorm_backward_from_sums", "upload_images",   "convert",
    "mix_images",            "softmax_xent_mix_totals",
};

TEST(BackendSweep, EveryOpHasACase) {
  const std::vector<std::string> ops = backend_ops();
  // Guards the parser: if it found nothing (or lost the first ops) the checks below would prove nothing.
  ASSERT_GE(ops.size(), 20u) << "parsed too few virtual ops from kernels/backend.h";
  ASSERT_NE(std::find(ops.begin(), ops.end(), "conv2d_forward"), ops.end());
  // Only a case's own op counts: an op merely called along (`also`) is not tested on inputs of its own.
  std::set<std::string> covered, named;
  for (const Case& c : all_cases()) {
    covered.insert(c.op);
    named.insert(c.op);
    named.insert(c.also.begin(), c.also.end());
  }
  std::string missing, unknown;
  for (const auto& op : ops)
    if (!covered.count(op) && !kNotOps.count(op)) missing += " " + op;
  const std::set<std::string> declared(ops.begin(), ops.end());
  for (const auto& op : named)
    if (!declared.count(op)) unknown += " " + op;
  EXPECT_EQ(missing, "") << "Backend ops without a case of their own in tests/backend/cases_*.cpp (see "
                            "tests/backend/sweep.h; a case's `also` list does not count)";
  EXPECT_EQ(unknown, "") << "cases name ops that kernels/backend.h does not declare";
}

TEST(BackendSweep, SelfReferencedOpsHaveIndependentOracles) {
  const std::vector<std::string> ops = backend_ops();
  const std::set<std::string> declared(ops.begin(), ops.end());
  std::string stale, without;
  for (const auto& op : kSelfReferenced)
    if (!declared.count(op)) stale += " " + op;
  for (const Case& c : all_cases())
    if (kSelfReferenced.count(c.op) && !c.oracle) without += " " + c.op + " (" + c.shape + ")";
  EXPECT_EQ(stale, "") << "kSelfReferenced names ops that kernels/backend.h does not declare";
  EXPECT_EQ(without, "") << "cases of ops the fast CPU backend runs on the reference kernels, without an "
                            "independent oracle (Case::oracle): the CPU targets would be compared with themselves";
}

// Cases with an independent oracle are not compared with the reference kernels by the sweep; where the fast
// CPU backend has a kernel of its own for them (the ops outside kSelfReferenced: the grouped, dilated and
// asymmetric convolutions), the reference kernels are checked against the oracle here.
TEST(BackendSweep, ReferenceKernelsMatchTheIndependentOracles) {
  std::unique_ptr<Backend> ref = test::make_reference_backend();
  int ran = 0;
  for (const Case& c : all_cases()) {
    if (!c.oracle || kSelfReferenced.count(c.op)) continue;
    ++ran;
    sweep::Run got_run(*ref), want_run(*ref);
    c.body(got_run);
    c.oracle(want_run);
    ASSERT_EQ(got_run.outputs.size(), want_run.outputs.size()) << c.op << " " << c.shape;
    for (size_t k = 0; k < want_run.outputs.size(); ++k) {
      const Output &got = got_run.outputs[k], &want = want_run.outputs[k];
      EXPECT_TRUE(test::all_close(got.values, want.values, want.tol.atol, want.tol.rtol,
                                  "reference " + c.op + " " + c.shape + ": " + want.name));
    }
  }
  EXPECT_GT(ran, 0);
}

TEST(BackendSweep, HeaderParserFindsEveryVirtualMember) {
  const std::string header = R"(
    // class Backend { virtual void in_a_comment() = 0; };
    struct Desc { virtual int not_this_class(); };
    class Backend : public Base {
     public:
      virtual ~Backend() = default;
      virtual std::string name() const = 0;
      /* virtual void commented_out(int) = 0; */
      virtual void multi_line(int a,
                              const float* b) = 0;
      virtual double with_default(int n, const Ctx& c = {}) { return 0; }
      void not_virtual(int);
      struct Nested { virtual void nested_member(); };
      virtual void
          name_on_next_line(float* x) = 0;
    };
    class Other { virtual void other_member() = 0; };
  )";
  EXPECT_EQ(parse_virtual_methods(header, "Backend"),
            (std::vector<std::string>{"name", "multi_line", "with_default", "name_on_next_line"}));
}

// The oracle's outputs, computed once per case: the case's own oracle, else the case on the reference kernels.
const std::vector<Output>& oracle_outputs(size_t index) {
  static std::map<size_t, std::vector<Output>> cache;
  auto it = cache.find(index);
  if (it != cache.end()) return it->second;
  static std::unique_ptr<Backend> ref = test::make_reference_backend();
  Run run(*ref);
  const Case& c = all_cases()[index];
  (c.oracle ? c.oracle : c.body)(run);
  return cache.emplace(index, std::move(run.outputs)).first->second;
}

struct SweepParam {
  BackendTarget target;
  std::string op;
};

std::vector<SweepParam> sweep_params() {
  std::set<std::string> ops;
  for (const Case& c : all_cases()) ops.insert(c.op);
  std::vector<SweepParam> v;
  for (const auto& op : ops)
    for (const auto& t : test::backend_targets()) v.push_back({t, op});
  return v;
}

class Sweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Sweep, MatchesReference) {
  TargetBackend tb(GetParam().target);
  if (!tb.skip_reason().empty()) GTEST_SKIP() << tb.skip_reason();
  int ran = 0;
  for (size_t i = 0; i < all_cases().size(); ++i) {
    const Case& c = all_cases()[i];
    if (c.op != GetParam().op) continue;
    ++ran;
    const std::vector<Output>& want = oracle_outputs(i);
    std::vector<Output> got;
    {
      sweep::Run run(*tb.get());
      c.body(run);
      got = std::move(run.outputs);
    }
    ASSERT_EQ(got.size(), want.size()) << c.op << " " << c.shape;
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(got[k].name, want[k].name);
      EXPECT_TRUE(test::all_close(got[k].values, want[k].values, want[k].tol.atol, want[k].tol.rtol,
                                  c.op + " " + c.shape + ": " + want[k].name));
    }
  }
  EXPECT_GT(ran, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Sweep, ::testing::ValuesIn(sweep_params()),
                         [](const ::testing::TestParamInfo<SweepParam>& i) {
                           return i.param.op + "__" + i.param.target.name;
                         });

}  // namespace
}  // namespace cnn::sweep

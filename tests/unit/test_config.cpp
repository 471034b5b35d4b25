// Option parsing: INI + command-line overrides, validation messages and the resolved-config round trip.
#include <fstream>

#include "src/train/config.h"
#include "src/train/setup.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

ParseResult parse(std::vector<std::string> args, Config& c) {
  args.insert(args.begin(), "cnntrain");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  return parse_config(static_cast<int>(argv.size()), argv.data(), c);
}

void expect_usage_error(std::vector<std::string> args, const std::string& needle) {
  Config c;
  test::expect_throws([&] { parse(args, c); }, kExitUsage, needle);
}

TEST(Config, IniThenCommandLineOverrides) {
  test::TempDir d;
  std::ofstream(d.file("a.ini")) << "model = lenet5\nseed = 5\n[data]\ntrain = t.h5\n[train]\nbatch = 64\nlr = 0.2\n";
  Config c;
  auto r = parse({"--config", d.file("a.ini"), "--train.lr", "0.5", "--train.nesterov=true", "--train.lr", "0.01"}, c);
  EXPECT_EQ(r.action, ParseAction::kRun);
  EXPECT_EQ(c.model, "lenet5");
  EXPECT_EQ(c.seed, 5u);
  EXPECT_EQ(c.data.train, "t.h5");
  EXPECT_EQ(c.train.batch, 64);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.01);
  EXPECT_TRUE(c.train.nesterov);
}

// The GPU settings: by default the workspace cap is automatic (1/16 of the GPU's memory, decided by the backend)
// and batch norm runs on the custom kernels (cuDNN's chose 10x slower kernels for ResNet-50's projection
// shortcuts on an H100, docs/perf.md); both can be set.
TEST(Config, GpuOptionsDefaultsAndOverrides) {
  Config c;
  ASSERT_EQ(parse({"--data.train", "t.h5"}, c).action, ParseAction::kRun);
  GpuOptions o = make_gpu_options(c);
  EXPECT_EQ(o.workspace_bytes, GpuOptions::kWorkspaceAuto);
  EXPECT_FALSE(o.vendor_batchnorm);
  EXPECT_TRUE(o.tf32);
  Config d;
  parse({"--data.train", "t.h5", "--cudnn.workspace_mb", "256", "--cudnn.batchnorm", "true", "--gpu.tf32", "false", "--cudnn.algo", "search"},
        d);
  o = make_gpu_options(d);
  EXPECT_EQ(o.workspace_bytes, size_t{256} << 20);
  EXPECT_TRUE(o.vendor_batchnorm);
  EXPECT_FALSE(o.tf32);
  EXPECT_TRUE(o.algo_search);
  Config z;
  parse({"--data.train", "t.h5", "--cudnn.workspace_mb", "0"}, z);
  EXPECT_EQ(make_gpu_options(z).workspace_bytes, 0u);  // no workspace at all: a valid, if slow, choice
  expect_usage_error({"--data.train", "t.h5", "--cudnn.workspace_mb", "-2"}, "--cudnn.workspace_mb");
}

TEST(Config, ResolvedIniRoundTrips) {
  test::TempDir d;
  Config a;
  parse({"--data.train", "x.h5", "--train.lr", "0.0123456789", "--train.warmup_epochs", "0.5", "--run-dir", "r"},
        a);
  std::ofstream(d.file("r.ini")) << config_to_ini(a);
  Config b;
  parse({"--config", d.file("r.ini")}, b);
  b.config_file = a.config_file;
  b.program = a.program;
  EXPECT_DOUBLE_EQ(b.train.lr, 0.0123456789);
  // The invocation's options are comments: --config RUN_DIR/config.ini repeats the run in a new directory.
  EXPECT_EQ(b.run_dir, "");
  b.run_dir = a.run_dir;
  EXPECT_EQ(config_to_ini(a), config_to_ini(b));
}

TEST(Config, InvocationOptionsAreCommentsInTheRunsIni) {
  Config a;
  parse({"--data.train", "x.h5", "--run-dir", "runs/r", "--resume", "auto", "--train.stop_at_step", "7"}, a);
  const std::string ini = config_to_ini(a), full = config_to_ini(a, true);
  EXPECT_NE(ini.find("# run-dir = runs/r\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("# resume = auto\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("# stop_at_step = 7\n"), std::string::npos) << ini;
  EXPECT_NE(full.find("\nrun-dir = runs/r\n"), std::string::npos) << full;
  EXPECT_NE(full.find("\nstop_at_step = 7\n"), std::string::npos) << full;
}

TEST(Config, RealsAsWritten) {
  Config c;
  parse({"--data.train", "x.h5", "--train.lr", "0.1", "--train.weight_decay", "5e-4"}, c);
  const std::string ini = config_to_ini(c);
  EXPECT_NE(ini.find("\nlr = 0.1\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("\nweight_decay = 0.0005\n"), std::string::npos) << ini;
  const std::string help = parse({"--help"}, c).text;
  EXPECT_EQ(help.find("0.10000000000000001"), std::string::npos) << help;
  EXPECT_NE(help.find("peak learning rate [0.1]"), std::string::npos) << help;
}

TEST(Config, HelpListsChoices) {
  Config c;
  const std::string help = parse({"--help"}, c).text;
  EXPECT_NE(help.find("{auto|hdf5|lmdb} [auto]"), std::string::npos) << help;
  EXPECT_NE(help.find("{cosine|constant|step|multistep} [cosine]"), std::string::npos) << help;
  EXPECT_NE(help.find("130 stopped by Ctrl-C"), std::string::npos) << help;
}

TEST(Config, AbbreviationsAreRefused) {
  // Boost.ProgramOptions would take a unique prefix for the option it begins.
  expect_usage_error({"--data.train", "x", "--train.epoch", "3"}, "train.epoch");
  expect_usage_error({"--data.train", "x", "--mod", "lenet5"}, "'--mod'");
  expect_usage_error({"--data.train", "x", "--train.stop_at", "3"}, "train.stop_at");
}

TEST(Config, Errors) {
  expect_usage_error({"--data.train", "x", "--no-such-option", "1"}, "no-such-option");
  expect_usage_error({"--data.train", "x", "--train.batch", "abc"}, "--train.batch");
  expect_usage_error({"--data.train", "x", "--train.batch", "0"}, "--train.batch");
  expect_usage_error({"--data.train", "x", "--train.lr", "-0.1"}, "--train.lr");
  expect_usage_error({"--data.train", "x", "--train.lr", "nan"}, "--train.lr");
  expect_usage_error({"--data.train", "x", "--model", "resnet9000"}, "--model");
  expect_usage_error({"--data.train", "x", "--device", "tpu"}, "--device");
  expect_usage_error({"--data.train", "x", "--train.nesterov", "maybe"}, "--train.nesterov");
  expect_usage_error({"--config", "/nonexistent/x.ini"}, "/nonexistent/x.ini");
  expect_usage_error({}, "--data.train is required");
  expect_usage_error({"--data.train", "x", "stray"}, "stray");
  test::TempDir d;
  std::ofstream(d.file("bad.ini")) << "[train]\nbatchsize = 3\n";
  expect_usage_error({"--config", d.file("bad.ini")}, "train.batchsize");
}

TEST(Config, HelpVersionPrintConfig) {
  Config c;
  auto h = parse({"--help"}, c);
  EXPECT_EQ(h.action, ParseAction::kExitHelp);
  EXPECT_NE(h.text.find("--train.batch"), std::string::npos);
  EXPECT_EQ(parse({"--version"}, c).action, ParseAction::kExitVersion);
  auto p = parse({"--data.train", "q.h5", "--print-config"}, c);
  EXPECT_EQ(p.action, ParseAction::kExitPrintConfig);
  EXPECT_NE(p.text.find("train = q.h5"), std::string::npos) << p.text;
  // No data needed to print the configuration (the defaults, or what a --config file sets).
  Config d;
  auto q = parse({"--print-config", "--model", "lenet5"}, d);
  EXPECT_EQ(q.action, ParseAction::kExitPrintConfig);
  EXPECT_NE(q.text.find("model = lenet5"), std::string::npos) << q.text;
}

}  // namespace
}  // namespace cnn

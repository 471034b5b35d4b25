// Option parsing: INI + command-line overrides, validation messages and the resolved-config round trip.
#include <fstream>

#include "src/train/config.h"
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
  try {
    parse(args, c);
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Config, IniThenCommandLineOverrides) {
  test::TempDir d;
  std::ofstream(d.file("a.ini")) << "model = lenet5\nseed = 5\n[data]\ntrain = t.h5\n[train]\nbatch = 64\nlr = 0.2\n";
  Config c;
  auto r = parse({"--config", d.file("a.ini"), "--train.lr", "0.5", "--train.nesterov=true", "--train.lr", "0.01"}, c);
  EXPECT_EQ(r.action, ParseAction::kRun);
  EXPECT_EQ(c.model, "lenet5");
  EXPECT_EQ(c.seed, 5u);
  EXPECT_EQ(c.data_train, "t.h5");
  EXPECT_EQ(c.batch, 64);
  EXPECT_DOUBLE_EQ(c.lr, 0.01);
  EXPECT_TRUE(c.nesterov);
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
  EXPECT_EQ(config_to_ini(a), config_to_ini(b));
  EXPECT_DOUBLE_EQ(b.lr, 0.0123456789);
  EXPECT_EQ(b.run_dir, "r");
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
}

}  // namespace
}  // namespace cnn

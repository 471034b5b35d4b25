// One run per run directory (src/train/run_dir.h) and the rotation of checkpoints (prune_checkpoints).
#include <sys/stat.h>

#include <fstream>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/train/run_dir.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

RunIdentity fmnist() {
  RunIdentity id;
  id.model = "fmnist_cnn";
  id.graph = "00112233aabbccdd";
  id.params = 206970;
  id.data = "data/a \"b\"\\c.h5";
  id.global_batch = 128;
  id.seed = (1ull << 62) + 3;
  return id;
}

int refusal_code(const std::string& dir, const Config& cfg, const RunIdentity& id, std::string* msg = nullptr) {
  try {
    check_run_dir(dir, cfg, id);
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return 0;
}

TEST(RunDir, IdentityRoundTrips) {
  const RunIdentity a = fmnist();
  RunIdentity b;
  ASSERT_TRUE(parse_identity_json(identity_json(a), b)) << identity_json(a);
  EXPECT_EQ(b.model, a.model);
  EXPECT_EQ(b.graph, a.graph);
  EXPECT_EQ(b.params, a.params);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(b.global_batch, a.global_batch);
  EXPECT_EQ(b.seed, a.seed);
  EXPECT_FALSE(parse_identity_json("{\"model\":\"x\"}", b));
}

TEST(RunDir, NewRunIntoADirectoryThatHoldsOneIsRefused) {
  test::TempDir d;
  Config cfg;  // --resume none
  EXPECT_EQ(refusal_code(d.path(), cfg, fmnist()), 0);  // empty: fine
  std::ofstream(d.file("metrics.jsonl")) << "{\"event\":\"start\"}\n";
  std::string msg;
  EXPECT_EQ(refusal_code(d.path(), cfg, fmnist(), &msg), kExitUsage);
  EXPECT_NE(msg.find("--resume auto"), std::string::npos) << msg;
  EXPECT_NE(msg.find(d.path()), std::string::npos) << msg;
  cfg.resume = "auto";  // no run.json, no checkpoint: nothing says which run it was
  EXPECT_EQ(refusal_code(d.path(), cfg, fmnist()), 0);
}

TEST(RunDir, ResumeOfAnotherModelOrBatchIsRefused) {
  test::TempDir d;
  write_run_identity(d.path(), fmnist());
  Config cfg;
  cfg.resume = "auto";
  EXPECT_EQ(refusal_code(d.path(), cfg, fmnist()), 0);
  RunIdentity other = fmnist();
  other.model = "lenet5";
  std::string msg;
  EXPECT_EQ(refusal_code(d.path(), cfg, other, &msg), kExitCheckpoint);
  EXPECT_NE(msg.find("model fmnist_cnn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model lenet5"), std::string::npos) << msg;
  other = fmnist();
  other.graph = "ffffffffffffffff";  // same name, another graph (e.g. other model options)
  EXPECT_EQ(refusal_code(d.path(), cfg, other), kExitCheckpoint);
  other = fmnist();
  other.global_batch = 256;
  EXPECT_EQ(refusal_code(d.path(), cfg, other), kExitCheckpoint);
  other = fmnist();
  other.data = "moved/train.h5";  // the data moved: a warning, not a refusal
  const auto warnings = check_run_dir(d.path(), cfg, other);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("moved/train.h5"), std::string::npos) << warnings[0];
  // run.json is written once: a resumed run keeps the first one's.
  write_run_identity(d.path(), other);
  RunIdentity back;
  std::ifstream in(d.file("run.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(parse_identity_json(text, back));
  EXPECT_EQ(back.data, fmnist().data);
}

TEST(RunDir, KeepLastKNeverRemovesTheCheckpointJustWritten) {
  test::TempDir d;
  for (int step : {1, 2, 3, 9}) std::ofstream(d.file(checkpoint_name(step))) << "x";
  // Step 3 was just written (a resume from an older checkpoint; 9 is another timeline's).
  const auto gone = prune_checkpoints(d.path(), 2, 3);
  EXPECT_EQ(gone, std::vector<std::string>{d.file(checkpoint_name(1))});
  EXPECT_EQ(list_checkpoints(d.path()),
            (std::vector<std::string>{d.file(checkpoint_name(9)), d.file(checkpoint_name(3)),
                                      d.file(checkpoint_name(2))}));
  prune_checkpoints(d.path(), 1, 3);
  EXPECT_EQ(list_checkpoints(d.path()),
            (std::vector<std::string>{d.file(checkpoint_name(9)), d.file(checkpoint_name(3))}));
}

}  // namespace
}  // namespace cnn

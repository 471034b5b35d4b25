// A checkpoint's network for inference (src/train/checkpoint_model.h), as `cnntrain-data export --format onnx`
// (load_checkpoint_model) and `cnntrain-data predict` (load_predict_model) rebuild it: with the batch-norm
// epsilon of the run (--bn.eps; predict used the default before both went through one loader); the moving
// average for --weights ema and the SWA average for --weights swa (and the ways out for a checkpoint without
// one, or whose SWA statistics are not recomputed yet); an imported model's checkpoint
// without a stored graph from its ONNX file while that is there, refused (exit 4, naming the way out) when it
// is not; an older checkpoint without its input shape from the caller's stand-in when its training set is
// gone, refused otherwise. Checkpoints are written collectively, as training writes them; rank 0 loads them.
#include <cstdio>
#include <memory>

#include "kernels/cpu/cpu_backend.h"
#include "src/checkpoint/checkpoint.h"
#include "src/comm/comm.h"
#include "src/model/onnx/onnx_export.h"
#include "src/model/zoo.h"
#include "src/predict/predict_model.h"
#include "src/train/checkpoint_model.h"
#include "src/train/config.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

constexpr int kH = 8, kW = 8, kC = 1, kClasses = 3, kBatch = 4;

// fmnist_cnn at kH x kW x kC with batch-norm epsilon `eps` and seeded random weights and statistics (the same on
// every rank); the running variances are small, so that the epsilon shows in the logits.
struct Reference {
  std::unique_ptr<Net> net;
  std::vector<float> params, buffers;
};
Reference reference(Backend& be, float eps, uint64_t seed = 2) {
  Reference r;
  ModelOptions mo;
  mo.bn.eps = eps;
  r.net = std::make_unique<Net>(be, Dims{kH, kW, kC}, kClasses);
  build_model("fmnist_cnn", *r.net, mo);
  r.net->build(kBatch, 1);
  r.params = test::random_vec(r.net->num_params(), seed);
  r.buffers = test::random_vec(r.net->num_buffers(), seed + 1, 0.01f, 0.1f);
  be.upload(r.net->params(), r.params.data(), sizeof(float) * r.params.size());
  be.upload(r.net->buffers(), r.buffers.data(), sizeof(float) * r.buffers.size());
  r.net->sync_weight_copy();
  return r;
}

// The evaluation-mode logits of kBatch seeded images.
std::vector<float> logits(Net& net) {
  Backend& be = net.backend();
  const std::vector<float> x = test::random_vec(static_cast<size_t>(kBatch) * kH * kW * kC, 4);
  float* dx = static_cast<float*>(be.alloc(sizeof(float) * x.size()));
  be.upload(dx, x.data(), sizeof(float) * x.size());
  std::vector<float> z(static_cast<size_t>(kBatch) * kClasses);
  be.download(z.data(), net.forward(dx, kBatch, false), sizeof(float) * z.size());
  be.release(dx);
  return z;
}

// `r`'s weights as a checkpoint of `model` trained with `cfg`; `with_input`: the input shape stored (older
// checkpoints lack it); `ema`: the moving average of the weights and statistics (/ema, a --train.ema run's);
// `swa`: the SWA average and its recomputed statistics (/swa, a --train.swa_start_epoch run's) over `swa_models`
// models, the statistics recomputed for `swa_bn_models` of them (the final checkpoint: all). Collective.
struct Swa {
  Reference* average = nullptr;
  int64_t models = 0, bn_models = 0;
};
void write(const std::string& path, const std::string& model, Reference& r, const Config& cfg, bool with_input,
           Reference* ema = nullptr, const Swa& swa = {}) {
  std::vector<CheckpointArray> arrays;
  for (const ParamInfo& p : r.net->param_table()) arrays.push_back({"params/" + p.name, p.shape, &r.params[p.offset]});
  for (const ParamInfo& b : r.net->buffer_table())
    arrays.push_back({"buffers/" + b.name, b.shape, &r.buffers[b.offset]});
  for (const ParamInfo& p : ema ? r.net->param_table() : std::vector<ParamInfo>())
    arrays.push_back({"ema/" + p.name, p.shape, &ema->params[p.offset]});
  for (const ParamInfo& b : ema ? r.net->buffer_table() : std::vector<ParamInfo>())
    arrays.push_back({"ema/" + b.name, b.shape, &ema->buffers[b.offset]});
  for (const ParamInfo& p : swa.average ? r.net->param_table() : std::vector<ParamInfo>())
    arrays.push_back({"swa/params/" + p.name, p.shape, &swa.average->params[p.offset]});
  for (const ParamInfo& b : swa.average ? r.net->buffer_table() : std::vector<ParamInfo>())
    arrays.push_back({"swa/buffers/" + b.name, b.shape, &swa.average->buffers[b.offset]});
  CheckpointMeta m;
  m.swa_models = swa.models;
  m.swa_bn_models = swa.bn_models;
  m.step = 3;
  m.global_batch = kBatch;
  m.world_size = world_size();
  m.seed = 1;
  m.model = model;
  m.config = config_to_ini(cfg);
  if (with_input) m.graph.input_h = kH, m.graph.input_w = kW, m.graph.input_c = kC, m.graph.classes = kClasses;
  write_checkpoint(path, arrays, m);
}

// A directory of rank 0's and the path of `name` in it, on every rank.
std::string shared_path(std::unique_ptr<test::TempDir>& dir, const char* name) {
  std::string path;
  if (world_rank() == 0) dir = std::make_unique<test::TempDir>(), path = dir->file(name);
  broadcast(path, 0);
  return path;
}

std::vector<float> predicted(const std::string& checkpoint, Backend& be, const ModelInfo& fallback = {},
                             ExportWeights which = ExportWeights::kRaw) {
  PredictSource src;
  src.path = checkpoint;
  src.weights = which;
  return logits(*load_predict_model(src, be, fallback, kBatch).net);
}

std::vector<float> exported(const std::string& checkpoint, const ModelInfo& fallback = {},
                            ExportWeights which = ExportWeights::kRaw) {
  CheckpointLoad how;
  how.which = which;
  how.max_batch = kBatch;
  how.fallback = fallback;
  return logits(*load_checkpoint_model(checkpoint, how).net);
}

TEST(CheckpointModel, BothLoadersComputeWithTheRunsBatchNormEpsilon) {
  std::unique_ptr<test::TempDir> dir;
  const std::string path = shared_path(dir, "ckpt-0000000003.h5");
  auto be = make_cpu_backend(1);
  Reference r = reference(*be, 0.25f);
  Config cfg;
  cfg.bn.eps = 0.25;
  write(path, "fmnist_cnn", r, cfg, true);
  if (world_rank() == 0) {
    const std::vector<float> want = logits(*r.net);
    Reference plain = reference(*be, BnOptions().eps);
    ASSERT_FALSE(test::all_close(logits(*plain.net), want, 1e-4, 1e-4, "default epsilon"))
        << "the epsilon does not change the logits: this test could not fail";
    EXPECT_TRUE(test::all_close(exported(path), want, 1e-6, 1e-6, "load_checkpoint_model"));
    EXPECT_TRUE(test::all_close(predicted(path, *be), want, 1e-6, 1e-6, "load_predict_model"));
  }
  barrier();  // rank 0 removes the directory
}

TEST(CheckpointModel, BothLoadersTakeTheMovingAverageForWeightsEma) {
  std::unique_ptr<test::TempDir> dir;
  const std::string path = shared_path(dir, "ckpt-0000000003.h5"), plain = path + ".plain.h5";
  auto be = make_cpu_backend(1);
  Reference r = reference(*be, BnOptions().eps), ema = reference(*be, BnOptions().eps, 7);
  write(path, "fmnist_cnn", r, Config(), true, &ema);
  write(plain, "fmnist_cnn", r, Config(), true);
  if (world_rank() == 0) {
    const std::vector<float> want = logits(*ema.net), raw = logits(*r.net);
    ASSERT_FALSE(test::all_close(raw, want, 1e-4, 1e-4, "raw")) << "the same logits: this test could not fail";
    EXPECT_TRUE(test::all_close(exported(path, {}, ExportWeights::kEma), want, 1e-6, 1e-6, "load_checkpoint_model"));
    EXPECT_TRUE(test::all_close(predicted(path, *be, {}, ExportWeights::kEma), want, 1e-6, 1e-6, "predict"));
    EXPECT_TRUE(test::all_close(predicted(path, *be), raw, 1e-6, 1e-6, "predict --weights raw"));
    test::expect_throws([&] { exported(plain, {}, ExportWeights::kEma); }, kExitCheckpoint,
                        "without --train.ema; export it with --weights raw");
    test::expect_throws([&] { predicted(plain, *be, {}, ExportWeights::kEma); }, kExitCheckpoint,
                        "without --train.ema; predict from it with --weights raw");
  }
  barrier();
}

// --weights swa: the SWA average with its recomputed statistics; refused for a checkpoint without one and for
// one written before the statistics were recomputed (mid-run), naming the way out.
TEST(CheckpointModel, BothLoadersTakeTheSwaAverageForWeightsSwa) {
  std::unique_ptr<test::TempDir> dir;
  const std::string path = shared_path(dir, "ckpt-0000000003.h5"), plain = path + ".plain.h5",
                    mid = path + ".mid.h5";
  auto be = make_cpu_backend(1);
  Reference r = reference(*be, BnOptions().eps), swa = reference(*be, BnOptions().eps, 9);
  write(path, "fmnist_cnn", r, Config(), true, nullptr, {&swa, 4, 4});
  write(plain, "fmnist_cnn", r, Config(), true);
  write(mid, "fmnist_cnn", r, Config(), true, nullptr, {&swa, 4, 0});
  if (world_rank() == 0) {
    const std::vector<float> want = logits(*swa.net), raw = logits(*r.net);
    ASSERT_FALSE(test::all_close(raw, want, 1e-4, 1e-4, "raw")) << "the same logits: this test could not fail";
    EXPECT_TRUE(test::all_close(exported(path, {}, ExportWeights::kSwa), want, 1e-6, 1e-6, "load_checkpoint_model"));
    EXPECT_TRUE(test::all_close(predicted(path, *be, {}, ExportWeights::kSwa), want, 1e-6, 1e-6, "predict"));
    EXPECT_TRUE(test::all_close(predicted(path, *be), raw, 1e-6, 1e-6, "predict --weights raw"));
    test::expect_throws([&] { predicted(plain, *be, {}, ExportWeights::kSwa); }, kExitCheckpoint,
                        "without --train.swa_start_epoch; predict from it with --weights raw");
    test::expect_throws([&] { exported(mid, {}, ExportWeights::kSwa); }, kExitCheckpoint,
                        "has no batch-norm statistics yet");
  }
  barrier();
}

TEST(CheckpointModel, ImportedModelWithoutStoredGraphNeedsItsOnnxFile) {
  std::unique_ptr<test::TempDir> dir;
  const std::string path = shared_path(dir, "ckpt-0000000003.h5");
  const std::string onnx = path.substr(0, path.rfind('/')) + "/net.onnx";
  auto be = make_cpu_backend(1);
  Reference r = reference(*be, BnOptions().eps);
  if (world_rank() == 0) write_onnx(export_onnx(*r.net, r.params.data(), r.buffers.data()), onnx);
  write(path, onnx, r, Config(), true);  // no /graph, as before checkpoints stored it
  if (world_rank() == 0) {
    const std::vector<float> want = logits(*r.net);
    EXPECT_TRUE(test::all_close(exported(path), want, 1e-5, 1e-5, "load_checkpoint_model"));
    EXPECT_TRUE(test::all_close(predicted(path, *be), want, 1e-5, 1e-5, "load_predict_model"));
    std::remove(onnx.c_str());
    const std::vector<std::string> says = {path, "stores no graph", "resume the run once"};
    test::expect_throws([&] { exported(path); }, kExitCheckpoint, says);
    test::expect_throws([&] { predicted(path, *be); }, kExitCheckpoint, says);
  }
  barrier();
}

TEST(CheckpointModel, OlderCheckpointWithoutInputShapeTakesTheCallersWhenItsTrainingSetIsGone) {
  std::unique_ptr<test::TempDir> dir;
  const std::string path = shared_path(dir, "ckpt-0000000003.h5");
  auto be = make_cpu_backend(1);
  Reference r = reference(*be, BnOptions().eps);
  Config cfg;
  cfg.data.train = path + ".gone.h5";
  write(path, "fmnist_cnn", r, cfg, false);
  if (world_rank() == 0) {
    ModelInfo stand_in;
    stand_in.height = kH, stand_in.width = kW, stand_in.channels = kC, stand_in.num_classes = kClasses;
    const std::vector<float> want = logits(*r.net);
    EXPECT_TRUE(test::all_close(exported(path, stand_in), want, 1e-6, 1e-6, "load_checkpoint_model"));
    EXPECT_TRUE(test::all_close(predicted(path, *be, stand_in), want, 1e-6, 1e-6, "load_predict_model"));
    test::expect_throws([&] { exported(path); }, kExitCheckpoint,
                        std::vector<std::string>{".gone.h5", "make that file available"});
    test::expect_throws([&] { predicted(path, *be); }, kExitUsage,
                        std::vector<std::string>{".gone.h5", "--stats-from TRAIN"});
  }
  barrier();
}

}  // namespace
}  // namespace cnn

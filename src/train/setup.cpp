#include "src/train/setup.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "io/hdf5_dataset.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_env.h"
#include "io/resized_dataset.h"
#include "io/stage.h"
#include "io/synthetic_dataset.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/checkpoint/checkpoint.h"
#include "src/model/graph_rewrite.h"
#include "src/model/onnx/onnx_graph_store.h"
#include "src/model/onnx/onnx_import.h"
#include "src/base/error.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/model/zoo.h"
#include "src/train/recipe.h"

namespace cnn {

namespace {

// --data.image_size for a set of one stored size (HDF5): the resize of io/resize.h; none at the stored size, so
// such runs read exactly what they read without the option.
std::unique_ptr<Dataset> fit_hdf5(const Config& cfg, std::unique_ptr<Dataset> ds, bool train) {
  ResizeOptions o;
  if (cfg.data.image_size.empty()) return ds;
  std::sscanf(cfg.data.image_size.c_str(), "%dx%d", &o.height, &o.width);  // checked by the option parser
  if (o.height == ds->info().height && o.width == ds->info().width) return ds;
  o.train = train;
  const std::array<double, 2> scale = parse_range("augment.rrc_scale", cfg.augment.rrc_scale),
                              ratio = parse_range("augment.rrc_ratio", cfg.augment.rrc_ratio);
  o.min_scale = scale[0], o.max_scale = scale[1], o.min_ratio = ratio[0], o.max_ratio = ratio[1];
  o.test_resize = cfg.data.test_resize;
  o.seed = cfg.seed;
  return std::make_unique<ResizedDataset>(std::move(ds), o, cfg.data.read_threads);
}

std::unique_ptr<Dataset> open_data(const Config& cfg, const std::string& path, bool train) {
  if (cfg.data.format == "hdf5" || (cfg.data.format == "auto" && !looks_like_lmdb(path))) {
    Hdf5ReadOptions o;
    o.chunk_cache_mb = static_cast<size_t>(cfg.data.cache_mb);
    return fit_hdf5(cfg, open_hdf5_dataset(path, o), train);
  }
  LmdbOptions o;
  o.on_bad_sample = cfg.data.on_bad_sample;
  o.read_threads = cfg.data.read_threads;
  if (!cfg.data.image_size.empty()) {
    std::sscanf(cfg.data.image_size.c_str(), "%dx%d", &o.transform.height, &o.transform.width);
    o.transform.mode = train ? ResizeMode::kRandomResizedCrop : ResizeMode::kCenterCrop;
    o.transform.seed = cfg.seed;
    const std::array<double, 2> scale = parse_range("augment.rrc_scale", cfg.augment.rrc_scale),
                                ratio = parse_range("augment.rrc_ratio", cfg.augment.rrc_ratio);
    o.transform.min_scale = scale[0], o.transform.max_scale = scale[1];
    o.transform.min_ratio = ratio[0], o.transform.max_ratio = ratio[1];
    // The central crop_fraction of the shorter side is Resize(test_resize) + CenterCrop for square targets.
    if (cfg.data.test_resize > 0)
      o.transform.crop_fraction = std::min(o.transform.height, o.transform.width) / float(cfg.data.test_resize);
  }
  return open_lmdb_dataset(path, o);
}

// "3 classes: cat, dog, fox" or "3 unnamed classes".
std::string describe_classes(const DatasetInfo& i) {
  if (i.class_names.empty()) return strprintf("%d unnamed classes", i.num_classes);
  std::string s = strprintf("%d classes: ", i.num_classes);
  for (size_t c = 0; c < i.class_names.size(); ++c) s += (c ? ", " : "") + i.class_names[c];
  return s;
}

// A label means the same class in both sets: a test set converted from a folder that lacks one class would
// otherwise be relabelled silently (its labels shift) and score near chance.
void check_classes_agree(const Dataset& train, const Dataset& test) {
  const DatasetInfo &t = train.info(), &e = test.info();
  const bool names_differ = !t.class_names.empty() && !e.class_names.empty() && t.class_names != e.class_names;
  if (t.num_classes != e.num_classes || names_differ)
    raise(kExitData, "the training set '%s' and the test set '%s' disagree on their classes: the training set has "
          "%s; the test set has %s. Convert the test set with the training set's classes (cnntrain-data "
          "convert-folder --classes-from TRAIN)", train.path().c_str(), test.path().c_str(),
          describe_classes(t).c_str(), describe_classes(e).c_str());
}

// --data.stage_dir: the node-local copy (io/stage.h), made before any rank of the node opens the dataset.
std::string staged_path(const Config& cfg, const std::string& path, const char* tag) {
  if (cfg.data.stage_dir.empty() || path.empty()) return path;
  const StageResult r = stage_for_node(path, cfg.data.stage_dir, tag);
  if (r.copied) {
    std::printf("staged %s to %s on %s: %.1f MiB in %.1f s, size and CRC-32 verified\n", path.c_str(),
                r.path.c_str(), host_name().c_str(), r.bytes / 1048576.0, r.seconds);
    std::fflush(stdout);
  }
  return r.path;
}

std::unique_ptr<Backend> make_backend(const Config& cfg, BindingRow& row) {
  row.rank = world_rank();
  row.host = host_name();
  row.local_rank = local_rank();
  if (cfg.device == "cpu") return make_cpu_backend(cfg.threads);
  if (cfg.device == "emu") {
    // Every process runs its own emulator: nothing is shared whatever the rank count.
    const DeviceInfo info = emu_device_info();
    row.binding.visible_id = "emulated";
    row.name = info.name;
    row.pci_bus_id = info.pci_bus_id;
    row.memory_gib = info.memory_gib;
    return make_emu_backend(make_gpu_options(cfg));
  }
#ifdef CNN_WITH_CUDA
  if (cfg.device == "cuda") {
    row.binding = choose_device(local_rank(), node_ranks(), load_cuda_device_count(),
                                std::getenv("CUDA_VISIBLE_DEVICES"), cfg.gpu.share, host_name());
    const DeviceInfo info = load_cuda_device_info(row.binding.device);
    row.name = info.name;
    row.pci_bus_id = info.pci_bus_id;
    row.memory_gib = info.memory_gib;
    return load_cuda_backend(row.binding.device, make_gpu_options(cfg));
  }
#endif
  raise(kExitUsage, "option --device: '%s' is not available in this build (built without CUDA: USE_CUDA=0 or no "
        "nvcc); use --device cpu or emu", cfg.device.c_str());
}

// The checkpoint --resume is to load, for the model it stores: PATH, or with auto the newest one in the run
// directory whose metadata reads (the one resume() tries first). False when there is none.
bool resume_candidate(const Config& cfg, std::string& path, CheckpointMeta& meta) {
  std::vector<std::string> paths;
  if (cfg.resume == "auto") {
    if (!cfg.run_dir.empty()) paths = list_checkpoints(cfg.run_dir + "/checkpoints");
  } else if (cfg.resume != "none") {
    paths = {cfg.resume};
  }
  std::string err;
  for (const std::string& p : paths)
    if (read_checkpoint_meta(p, meta, err)) {
      path = p;
      return true;
    }
  return false;
}

// --model FILE.onnx: the file's graph, or when a resume finds the file gone, the graph its checkpoint stores
// (docs/checkpoints.md, "The model's graph"). A checkpoint of another model or of another graph is refused
// (exit 4), naming both. s.graph gets the graph the run's checkpoints store.
OnnxImport import_graph(const Config& cfg, Setup& s) {
  std::string ckpt;
  CheckpointMeta meta;
  const bool resuming = resume_candidate(cfg, ckpt, meta);
  if (resuming && !is_onnx_model(meta.model))
    raise(kExitCheckpoint, "--resume %s: checkpoint '%s' belongs to model %s, but this run builds --model %s: "
          "resume with --model %s, or start this run in a new --run-dir", cfg.resume.c_str(), ckpt.c_str(),
          meta.model.c_str(), cfg.model.c_str(), meta.model.c_str());
  struct stat st;
  const bool have_file = ::stat(cfg.model.c_str(), &st) == 0;
  const BnOptions bn = make_model_options(cfg).bn;
  if (!have_file && resuming && !meta.graph.onnx.empty()) {
    s.warnings.push_back(strprintf("model file %s is gone: the network is built from the graph that checkpoint %s "
                                   "stores", cfg.model.c_str(), ckpt.c_str()));
    s.graph = meta.graph.onnx;
    return import_onnx(restore_onnx_graph(s.graph, ckpt + " (stored graph of " + meta.model + ")"), *s.net, bn);
  }
  const OnnxModel model = read_onnx(cfg.model);
  OnnxImport imported = import_onnx(model, *s.net, bn);
  std::vector<std::string> weights;
  for (const auto& kv : imported.values) weights.push_back(kv.first);
  s.graph = stored_onnx_graph(model, weights);
  if (resuming && !meta.graph.onnx.empty() && meta.graph.onnx != s.graph)
    raise(kExitCheckpoint, "--resume %s: checkpoint '%s' was trained on %s, whose graph differs from that of --model "
          "%s (other nodes, or weights of other names or shapes): resume with the model it was trained on (the "
          "checkpoint stores its graph, so that file may be gone), or start this run in a new --run-dir",
          cfg.resume.c_str(), ckpt.c_str(), meta.model.c_str(), cfg.model.c_str());
  return imported;
}

}  // namespace

GpuOptions make_gpu_options(const Config& cfg) {
  GpuOptions o;
  o.conv_impl = parse_conv_impl(cfg.conv.impl);
  o.workspace_bytes = cfg.cudnn.workspace_mb < 0 ? GpuOptions::kWorkspaceAuto
                                                 : static_cast<size_t>(cfg.cudnn.workspace_mb) << 20;
  o.vendor_batchnorm = cfg.cudnn.batchnorm;
  o.algo_search = cfg.cudnn.algo == "search";
  o.deterministic = cfg.deterministic;
  o.tf32 = cfg.gpu.tf32;
  return o;
}

void mkdir_p(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)
        raise(kExitUsage, "cannot create run directory '%s': %s (check --run-dir)", cur.c_str(),
              std::strerror(errno));
    }
    if (i < path.size()) cur += path[i];
  }
}

Setup local_setup(const Config& cfg) {
  Setup s;
  if (cfg.device == "cpu") {
    const std::string why = cpu_precision_unsupported(activation_dtype(cfg));
    if (!why.empty())
      raise(kExitUsage, "option --precision %s: %s; train with --precision fp32 here (or fp16, which on a CPU "
            "saves memory but not time)", cfg.precision.c_str(), why.c_str());
  }
  const int world = world_size();
  if (cfg.train.batch % world != 0)
    raise(kExitUsage, "option --train.batch: the global batch %lld is not divisible by the %d ranks; choose a "
          "multiple of %d", (long long)cfg.train.batch, world, world);
  s.local_batch = static_cast<int>(cfg.train.batch / world);
  check_mix_batch(make_augment_config(cfg).mix, cfg.train.batch, world);
  if (s.local_batch % cfg.train.accum_steps != 0)
    raise(kExitUsage, "option --train.accum_steps: the per-rank batch %d (%lld / %d ranks) is not divisible by %d "
          "micro-batches", s.local_batch, (long long)cfg.train.batch, world, cfg.train.accum_steps);
  const int micro = s.local_batch / cfg.train.accum_steps;
  if (cfg.bn.group_size > 0 && micro % cfg.bn.group_size != 0)
    raise(kExitUsage, "option --bn.group_size: the per-rank micro-batch of %d samples is not a multiple of %d",
          micro, cfg.bn.group_size);
  // --eval-only without a training set: the test set gives the net its shape and classes.
  const std::string train = cfg.eval_only && cfg.data.train.empty() ? cfg.data.test : cfg.data.train;
  s.train = cfg.data.synthetic.empty() ? open_data(cfg, staged_path(cfg, train, "train"), !cfg.eval_only)
                                       : make_synthetic_dataset(parse_synthetic_spec(cfg.data.synthetic), cfg.seed);
  const DatasetInfo& ti = s.train->info();
  if (ti.count < cfg.train.batch && !cfg.eval_only)
    raise(kExitData, "training set '%s' has %lld samples, fewer than one global batch (%lld); lower "
          "--train.batch", s.train->path().c_str(), (long long)ti.count, (long long)cfg.train.batch);
  if (!cfg.data.test.empty()) {
    s.test = open_data(cfg, staged_path(cfg, cfg.data.test, "test"), false);
    const DatasetInfo& e = s.test->info();
    if (e.height != ti.height || e.width != ti.width || e.channels != ti.channels)
      raise(kExitData, "test set '%s' has %dx%dx%d images but the training set '%s' has %dx%dx%d",
            cfg.data.test.c_str(), e.height, e.width, e.channels, s.train->path().c_str(), ti.height, ti.width,
            ti.channels);
    check_classes_agree(*s.train, *s.test);
  }
  s.be = make_backend(cfg, s.binding);
  s.net = std::make_unique<Net>(*s.be, Dims{ti.height, ti.width, ti.channels}, ti.num_classes);
  s.net->set_dtype(activation_dtype(cfg));
  OnnxImport imported;
  if (is_onnx_model(cfg.model)) {
    imported = import_graph(cfg, s);
    // The zoo builds its fused layers directly; an imported graph gets them by rewriting (same names and layout).
    fuse_graph(*s.net);
    if (imported.batchnorm_folded)
      s.warnings.push_back(strprintf(
          "model %s has no BatchNormalization: the exporter folded it into the convolutions (PyTorch's default "
          "export in eval mode), so the network trains without batch norm. To train with it, export with "
          "torch.onnx.export(model, x, f, dynamo=False, training=torch.onnx.TrainingMode.TRAINING, "
          "do_constant_folding=False) (docs/models.md)", cfg.model.c_str()));
  } else {
    build_model(cfg.model, *s.net, make_model_options(cfg));
  }
  s.net->set_recompute(cfg.train.recompute);
  s.net->build(std::max(s.local_batch / cfg.train.accum_steps, cfg.eval.batch), cfg.seed);
  // The file's initializers are the initial weights (pretrained or PyTorch-initialised), unless asked not to; a
  // graph restored from a checkpoint has none (resume() loads that checkpoint's).
  struct stat st;
  if (is_onnx_model(cfg.model) && !cfg.init_random && ::stat(cfg.model.c_str(), &st) == 0)
    load_onnx_values(imported, *s.net);
  if (!cfg.init.from.empty()) {
    // A resumed run continues from its own weights; starting it over from others is a new run.
    if (cfg.resume != "none" && cfg.resume != "auto")
      raise(kExitUsage, "options --init.from and --resume %s: a run either starts from weights (--init.from, step 0, "
            "fresh optimizer) or continues a checkpoint (--resume), not both; --resume auto continues a fine-tuning "
            "run in progress", cfg.resume.c_str());
    s.init = init_from_file(*s.net, {cfg.init.from, cfg.init.skip, cfg.init.strict});
  }
  return s;
}

std::unique_ptr<Collectives> make_collectives(const Config& cfg, Setup& s) {
  if (world_size() == 1) return nullptr;
  const bool shared = allreduce_max(s.binding.binding.shared ? 1 : 0) != 0;
  std::string backend = cfg.comm.backend;
  if (backend == "auto") backend = cfg.device == "cpu" || shared ? "mpi" : "nccl";
  if (backend == "mpi") return cfg.device == "cpu" ? make_mpi_collectives() : make_host_staged_collectives(*s.be);
  if (cfg.device == "emu") return make_emu_collectives(*s.be);
#ifdef CNN_WITH_CUDA
  return load_cuda_collectives(*s.be);
#else
  raise(kExitUsage, "option --comm.backend nccl: this build has no NCCL (built without CUDA)");
#endif
}

std::string default_run_dir(const Config& cfg) {
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::localtime(&t));
  // An ONNX model is named by its file's stem: models/net.onnx -> runs/net-<date>-<time>.
  std::string name = cfg.model;
  if (is_onnx_model(name)) {
    name = name.substr(name.rfind('/') + 1);
    name = name.substr(0, name.size() - 5);
  }
  return "runs/" + name + "-" + ts;
}

}  // namespace cnn

// cnntrain-data: dataset converters and inspection (docs/data.md), ONNX file inspection (docs/models.md), and
// the plot command (docs/observability.md).
#include <sys/stat.h>
#include <sys/wait.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>

#include "io/convert_cifar.h"
#include "io/convert_idx.h"
#include "io/convert_lmdb.h"
#include "io/lmdb_dataset.h"
#include "io/dataset.h"
#include "io/hdf5_dataset.h"
#include "src/checkpoint/export.h"
#include "src/model/onnx/onnx_model.h"
#include "src/train/checkpoint_model.h"
#include "src/predict/predict.h"
#include "src/train/config.h"
#include "src/base/error.h"

namespace po = boost::program_options;
using namespace cnn;

namespace cnn {
extern const char kPlotScript[];  // src/obs/plot_run.py, compiled in by src/obs/obs.mk
}

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

po::variables_map parse(const std::string& cmd, po::options_description& desc, int argc, char** argv,
                        const char* positional = nullptr) {
  desc.add_options()("help,h", "print this help");
  po::positional_options_description pos;
  if (positional) pos.add(positional, 1);
  po::variables_map vm;
  try {
    // No guessing: an abbreviated option would silently stand for whichever option it prefixes.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).style(style).run(), vm);
    if (vm.count("help")) {
      std::ostringstream s;
      s << desc;
      std::printf("Usage: cnntrain-data %s [options]\n%s", cmd.c_str(), s.str().c_str());
      std::exit(0);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    raise(kExitUsage, "%s: %s (see cnntrain-data %s --help)", cmd.c_str(), e.what(), cmd.c_str());
  }
  return vm;
}

// An existing output file is replaced only when asked (the writers write NAME.tmp and rename it over NAME).
// LMDB outputs are checked by LmdbWriter, which names --overwrite the same way.
void check_output(const char* cmd, const std::string& out, bool overwrite) {
  struct stat st;
  if (!overwrite && ::stat(out.c_str(), &st) == 0)
    raise(kExitUsage, "%s: '%s' already exists; pass --overwrite to replace it, or choose another --out", cmd,
          out.c_str());
}

int cmd_convert_idx(int argc, char** argv) {
  po::options_description d("convert-idx: IDX (MNIST-style, .gz or plain) images + labels -> HDF5");
  d.add_options()("images", po::value<std::string>()->required(), "IDX images file (uint8 [N,rows,cols])")(
      "labels", po::value<std::string>()->required(), "IDX labels file (uint8 [N])")(
      "out", po::value<std::string>()->required(), "output HDF5 file")(
      "num-classes", po::value<int>()->default_value(0), "number of classes (0: max label + 1)")(
      "class-names", po::value<std::string>()->default_value(""), "comma-separated class names")(
      "stats-from", po::value<std::string>()->default_value(""),
      "copy mean/std from this HDF5 file (use the training set's statistics for a test set)")(
      "format", po::value<std::string>()->default_value("hdf5"), "output format: hdf5 or lmdb (a directory)")(
      "overwrite", po::bool_switch(), "replace an existing output");
  auto vm = parse("convert-idx", d, argc, argv);
  IdxConvertOptions o;
  o.images = vm["images"].as<std::string>();
  o.labels = vm["labels"].as<std::string>();
  o.out = vm["out"].as<std::string>();
  o.num_classes = vm["num-classes"].as<int>();
  o.class_names = split_commas(vm["class-names"].as<std::string>());
  o.stats_from = vm["stats-from"].as<std::string>();
  const std::string fmt = vm["format"].as<std::string>();
  if (fmt != "hdf5" && fmt != "lmdb") raise(kExitUsage, "convert-idx: --format must be hdf5 or lmdb, not '%s'", fmt.c_str());
  o.overwrite = vm["overwrite"].as<bool>();
  if (fmt == "hdf5") check_output("convert-idx", o.out, o.overwrite);
  DatasetInfo info = fmt == "lmdb" ? convert_idx_to_lmdb(o) : convert_idx_to_hdf5(o);
  std::printf("wrote %s: %lld images %dx%dx1, %d classes, mean %.3f std %.3f\n", o.out.c_str(),
              (long long)info.count, info.height, info.width, info.num_classes, info.mean[0], info.std[0]);
  return 0;
}

int cmd_convert_cifar(int argc, char** argv) {
  po::options_description d("convert-cifar: CIFAR-10/100 binary version (*.bin) -> HDF5");
  d.add_options()("input", po::value<std::string>()->required(),
                  "comma-separated .bin files, e.g. data_batch_1.bin,...,data_batch_5.bin")(
      "out", po::value<std::string>()->required(), "output HDF5 file")(
      "variant", po::value<int>()->default_value(10), "10 (1 label byte) or 100 (coarse + fine label bytes)")(
      "coarse", po::bool_switch(), "CIFAR-100: use the 20 coarse labels instead of the 100 fine ones")(
      "class-names", po::value<std::string>()->default_value(""), "comma-separated class names")(
      "stats-from", po::value<std::string>()->default_value(""),
      "copy mean/std from this HDF5 file (use the training set's statistics for a test set)")(
      "overwrite", po::bool_switch(), "replace an existing output");
  auto vm = parse("convert-cifar", d, argc, argv);
  CifarConvertOptions o;
  o.inputs = split_commas(vm["input"].as<std::string>());
  o.out = vm["out"].as<std::string>();
  o.variant = vm["variant"].as<int>();
  o.coarse = vm["coarse"].as<bool>();
  o.class_names = split_commas(vm["class-names"].as<std::string>());
  o.stats_from = vm["stats-from"].as<std::string>();
  check_output("convert-cifar", o.out, vm["overwrite"].as<bool>());
  DatasetInfo info = convert_cifar_to_hdf5(o);
  std::printf("wrote %s: %lld images 32x32x3, %d classes, mean %.2f %.2f %.2f\n", o.out.c_str(),
              (long long)info.count, info.num_classes, info.mean[0], info.mean[1], info.mean[2]);
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  po::options_description d("inspect: counts, shapes, statistics, label histogram and first records");
  d.add_options()("file", po::value<std::string>()->required(), "dataset (HDF5 file or LMDB directory)")(
      "format", po::value<std::string>()->default_value("auto"), "hdf5, lmdb or auto")(
      "first", po::value<int>()->default_value(5), "records to describe");
  auto vm = parse("inspect", d, argc, argv, "file");
  std::fputs(inspect_dataset(vm["file"].as<std::string>(), vm["format"].as<std::string>(), vm["first"].as<int>())
                 .c_str(),
             stdout);
  return 0;
}

int cmd_onnx_info(int argc, char** argv) {
  po::options_description d("onnx-info: what an ONNX file holds and whether cnntrain can load it (docs/models.md)");
  d.add_options()("file", po::value<std::string>()->required(), "model file (FILE.onnx)")(
      "any-op", po::bool_switch(), "describe models with op types cnntrain cannot build too");
  auto vm = parse("onnx-info", d, argc, argv, "file");
  const std::string file = vm["file"].as<std::string>();
  const OnnxModel m = vm["any-op"].as<bool>() ? read_onnx(file, {}) : read_onnx(file);
  std::fputs(describe_onnx(m).c_str(), stdout);
  return 0;
}

int cmd_convert_h5_lmdb(int argc, char** argv) {
  po::options_description d("convert-hdf5-lmdb: HDF5 dataset -> LMDB of Caffe Datum records (raw)");
  d.add_options()("in", po::value<std::string>()->required(), "HDF5 file")(
      "out", po::value<std::string>()->required(), "LMDB directory to create")(
      "overwrite", po::bool_switch(), "replace an existing output");
  auto vm = parse("convert-hdf5-lmdb", d, argc, argv);
  DatasetInfo i = convert_hdf5_to_lmdb(vm["in"].as<std::string>(), vm["out"].as<std::string>(),
                                       vm["overwrite"].as<bool>());
  std::printf("wrote %s: %lld records %dx%dx%d, %d classes\n", vm["out"].as<std::string>().c_str(),
              (long long)i.count, i.height, i.width, i.channels, i.num_classes);
  return 0;
}

int cmd_convert_lmdb_h5(int argc, char** argv) {
  po::options_description d("convert-lmdb-hdf5: LMDB (raw or encoded Datums) -> HDF5 dataset");
  d.add_options()("in", po::value<std::string>()->required(), "LMDB directory or data.mdb")(
      "out", po::value<std::string>()->required(), "HDF5 file")(
      "size", po::value<std::string>()->default_value(""), "resize encoded images to HxW")(
      "on-bad-sample", po::value<std::string>()->default_value("fail"), "fail or skip")(
      "overwrite", po::bool_switch(), "replace an existing output");
  auto vm = parse("convert-lmdb-hdf5", d, argc, argv);
  check_output("convert-lmdb-hdf5", vm["out"].as<std::string>(), vm["overwrite"].as<bool>());
  LmdbOptions o;
  o.on_bad_sample = vm["on-bad-sample"].as<std::string>();
  const std::string size = vm["size"].as<std::string>();
  if (!size.empty()) {
    if (std::sscanf(size.c_str(), "%dx%d", &o.transform.height, &o.transform.width) != 2)
      raise(kExitUsage, "convert-lmdb-hdf5: --size must be HxW, not '%s'", size.c_str());
    o.transform.mode = ResizeMode::kResize;
  }
  DatasetInfo i = convert_lmdb_to_hdf5(vm["in"].as<std::string>(), vm["out"].as<std::string>(), o);
  std::printf("wrote %s: %lld images %dx%dx%d, %d classes\n", vm["out"].as<std::string>().c_str(),
              (long long)i.count, i.height, i.width, i.channels, i.num_classes);
  return 0;
}

int cmd_convert_folder(int argc, char** argv) {
  po::options_description d("convert-folder: an image folder ROOT/<class_name>/*.jpg|png -> LMDB or HDF5 "
                            "(classes sorted by name)");
  d.add_options()("root", po::value<std::string>()->required(), "folder with one sub-folder per class")(
      "out", po::value<std::string>()->required(), "output LMDB directory or HDF5 file")(
      "format", po::value<std::string>()->default_value("lmdb"), "lmdb or hdf5")(
      "raw", po::bool_switch(), "LMDB: store decoded pixels instead of the encoded files")(
      "size", po::value<std::string>()->default_value(""), "resize to HxW (needed for raw/HDF5 output of mixed sizes)")(
      "gray", po::bool_switch(), "one channel")(
      "shuffle", po::bool_switch(), "random record order (from --seed)")(
      "seed", po::value<uint64_t>()->default_value(0), "seed for --shuffle")(
      "on-bad-image", po::value<std::string>()->default_value("fail"), "fail or skip unreadable files")(
      "classes-from", po::value<std::string>()->default_value(""),
      "label by this dataset's class names (the training set's, for a test set; refuses unknown folders)")(
      "stats-from", po::value<std::string>()->default_value(""),
      "copy mean/std from this dataset (use the training set's statistics for a test set)")(
      "overwrite", po::bool_switch(), "replace an existing output");
  auto vm = parse("convert-folder", d, argc, argv, "root");
  ImageFolderOptions o;
  o.format = vm["format"].as<std::string>();
  o.encoded = !vm["raw"].as<bool>();
  const std::string size = vm["size"].as<std::string>();
  if (!size.empty() && std::sscanf(size.c_str(), "%dx%d", &o.height, &o.width) != 2)
    raise(kExitUsage, "convert-folder: --size must be HxW, not '%s'", size.c_str());
  o.channels = vm["gray"].as<bool>() ? 1 : 3;
  o.shuffle = vm["shuffle"].as<bool>();
  o.seed = vm["seed"].as<uint64_t>();
  o.on_bad_image = vm["on-bad-image"].as<std::string>();
  o.classes_from = vm["classes-from"].as<std::string>();
  o.stats_from = vm["stats-from"].as<std::string>();
  o.overwrite = vm["overwrite"].as<bool>();
  if (o.format == "hdf5") check_output("convert-folder", vm["out"].as<std::string>(), o.overwrite);
  ImageFolderResult r = convert_image_folder(vm["root"].as<std::string>(), vm["out"].as<std::string>(), o);
  std::printf("wrote %s: %lld images, %d classes%s\n", vm["out"].as<std::string>().c_str(), (long long)r.info.count,
              r.info.num_classes, r.skipped ? strprintf(", %lld unreadable files skipped",
                                                        (long long)r.skipped).c_str() : "");
  return 0;
}

int cmd_export(int argc, char** argv) {
  po::options_description d("export: a checkpoint's weights as HDF5 (layout in docs/checkpoints.md) or the whole "
                            "model as ONNX (docs/models.md)");
  d.add_options()("checkpoint", po::value<std::string>()->required(), "checkpoint file (ckpt-*.h5)")(
      "out", po::value<std::string>()->required(), "output file (HDF5, or FILE.onnx with --format onnx)")(
      "format", po::value<std::string>()->default_value("hdf5"),
      "hdf5 (the weights in cnntrain's layouts) or onnx (the network for inference, opset 17)")(
      "overwrite", po::bool_switch(), "replace an existing output")(
      "weights", po::value<std::string>()->default_value("raw"),
      "raw (the trained weights), ema (their moving average, from a --train.ema run) or swa (their SWA "
      "average with its batch-norm statistics, from the final checkpoint of a --train.swa_start_epoch run)");
  auto vm = parse("export", d, argc, argv, "checkpoint");
  const std::string in = vm["checkpoint"].as<std::string>(), out = vm["out"].as<std::string>();
  const std::string weights = vm["weights"].as<std::string>(), format = vm["format"].as<std::string>();
  const ExportWeights which = parse_export_weights(weights, "export");
  if (format != "hdf5" && format != "onnx")
    raise(kExitUsage, "export: --format must be hdf5 or onnx, not '%s'", format.c_str());
  check_output("export", out, vm["overwrite"].as<bool>());
  if (format == "onnx") {
    const OnnxModel m = export_checkpoint_onnx(in, out, which);
    std::printf("wrote %s: ONNX opset %lld, %zu nodes, %zu initializers, %lld %sparameter and buffer values "
                "(model %s, step %s)\n", out.c_str(), static_cast<long long>(m.opset), m.nodes.size(),
                m.initializers.size(), static_cast<long long>(m.float_initializer_elements()),
                which == ExportWeights::kEma ? "EMA " : which == ExportWeights::kSwa ? "SWA " : "",
                m.metadata.at("model").c_str(), m.metadata.at("step").c_str());
    return 0;
  }
  ExportStats st = export_weights(in, out, which);
  std::printf("wrote %s: %zu tensors, %zu %sparameters and %zu buffer values (model %s, step %lld)\n", out.c_str(),
              st.tensors, st.params, which == ExportWeights::kEma ? "EMA " : which == ExportWeights::kSwa ? "SWA " : "",
              st.buffers, st.model.c_str(), (long long)st.step);
  return 0;
}

int cmd_predict(int argc, char** argv) {
  po::options_description d("predict: logits or top-k classes of a trained model for a dataset, an image or a "
                            "folder of images (docs/models.md, \"Prediction\"); runs on the CPU");
  d.add_options()("source", po::value<std::string>()->required(),
                  "checkpoint (ckpt-*.h5), ONNX file (FILE.onnx), HDF5 weights export or PyTorch state dict "
                  "(.safetensors)")(
      "input", po::value<std::string>()->required(), "HDF5 or LMDB dataset, image file or folder of images")(
      "out", po::value<std::string>()->required(), "OUT.h5 (/logits, /labels) or OUT.csv (top-k classes)")(
      "model", po::value<std::string>()->default_value(""), "zoo model of a weights export or safetensors file")(
      "topk", po::value<int>()->default_value(5), "CSV: classes per row")(
      "weights", po::value<std::string>()->default_value("raw"), "checkpoint weights: raw, ema or swa")(
      "stats-from", po::value<std::string>()->default_value(""),
      "training set whose mean/std, classes and input size stand in for what SOURCE lacks (an older "
      "checkpoint, a safetensors file)")(
      "test-resize", po::value<int>()->default_value(0), "as --data.test_resize (0: the size / 0.875)")(
      "batch", po::value<int>()->default_value(64), "images per forward pass")(
      "threads", po::value<int>()->default_value(1), "CPU threads")(
      "overwrite", po::bool_switch(), "replace an existing output");
  po::positional_options_description pos;
  pos.add("source", 1).add("input", 1);
  d.add_options()("help,h", "print this help");
  po::variables_map vm;
  try {
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(d).positional(pos).style(style).run(), vm);
    if (vm.count("help")) {
      std::ostringstream s;
      s << d;
      std::printf("Usage: cnntrain-data predict SOURCE INPUT --out OUT [options]\n%s", s.str().c_str());
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    raise(kExitUsage, "predict: %s (usage: cnntrain-data predict SOURCE INPUT --out OUT.h5|OUT.csv)", e.what());
  }
  PredictOptions o;
  o.source.path = vm["source"].as<std::string>();
  o.source.model = vm["model"].as<std::string>();
  o.source.weights = parse_export_weights(vm["weights"].as<std::string>(), "predict");
  o.input = vm["input"].as<std::string>();
  o.out = vm["out"].as<std::string>();
  o.stats_from = vm["stats-from"].as<std::string>();
  o.topk = vm["topk"].as<int>();
  o.test_resize = vm["test-resize"].as<int>();
  o.batch = std::max(1, vm["batch"].as<int>());
  o.threads = std::max(1, vm["threads"].as<int>());
  check_output("predict", o.out, vm["overwrite"].as<bool>());
  const PredictResult r = run_predict(o);
  std::printf("wrote %s: %lld samples, %d classes (model %s)%s\n", o.out.c_str(), (long long)r.count, r.classes,
              r.model.c_str(), r.labelled ? strprintf("; top-1 accuracy %.4f against the labels",
                                                      r.count ? double(r.correct) / r.count : 0.0).c_str() : "");
  return 0;
}

// Single quotes for /bin/sh (popen): a run directory may contain spaces.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int cmd_plot(int argc, char** argv) {
  po::options_description d("plot: PNG plots of one or more run directories (overlaid), also of a run in progress: "
                            "loss and accuracy by step and epoch with the learning rate, throughput, per-rank "
                            "step time; needs python3-matplotlib (python: $CNNTRAIN_PYTHON or /usr/bin/python3)");
  d.add_options()("runs", po::value<std::vector<std::string>>()->required(), "run directories (RUN_DIR ...)")(
      "out", po::value<std::string>()->required(), "directory for the PNG files");
  d.add_options()("help,h", "print this help");
  po::positional_options_description pos;
  pos.add("runs", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(d).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::ostringstream s;
      s << d;
      std::printf("Usage: cnntrain-data plot RUN_DIR [RUN_DIR...] --out DIR\n%s", s.str().c_str());
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    raise(kExitUsage, "plot: %s (usage: cnntrain-data plot RUN_DIR [RUN_DIR...] --out DIR)", e.what());
  }
  const char* env = std::getenv("CNNTRAIN_PYTHON");
  const std::string python = env && *env ? env : "/usr/bin/python3";
  std::string cmd = shell_quote(python) + " - --out " + shell_quote(vm["out"].as<std::string>());
  for (const auto& r : vm["runs"].as<std::vector<std::string>>()) cmd += " " + shell_quote(r);
  std::fflush(stdout);
  FILE* p = ::popen(cmd.c_str(), "w");
  if (!p) raise(kExitFailure, "plot: cannot start %s: %s", python.c_str(), std::strerror(errno));
  std::fputs(kPlotScript, p);
  const int st = ::pclose(p);
  if (st == -1 || !WIFEXITED(st))
    raise(kExitFailure, "plot: %s did not finish (set CNNTRAIN_PYTHON to a python3 with matplotlib)", python.c_str());
  if (WEXITSTATUS(st) == 127)
    raise(kExitFailure, "plot: %s not found; install python3 and python3-matplotlib (make deps) or set "
          "CNNTRAIN_PYTHON", python.c_str());
  // The script exits with 2 for bad input (a directory without metrics.jsonl), as the other commands do.
  return WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == kExitUsage ? WEXITSTATUS(st) : kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<int(int, char**)>> cmds = {
      {"convert-cifar", cmd_convert_cifar},
      {"convert-idx", cmd_convert_idx},
      {"inspect", cmd_inspect},
      {"onnx-info", cmd_onnx_info},
      {"export", cmd_export},
      {"convert-hdf5-lmdb", cmd_convert_h5_lmdb},
      {"convert-lmdb-hdf5", cmd_convert_lmdb_h5},
      {"convert-folder", cmd_convert_folder},
      {"plot", cmd_plot},
      {"predict", cmd_predict},
  };
  auto usage = [&] {
    std::string s = "Usage: cnntrain-data COMMAND [options]   (COMMAND --help for its options)\nCommands:";
    for (const auto& kv : cmds) s += " " + kv.first;
    return s + "\n";
  };
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::printf("%s\n", version_string().c_str());
    return 0;
  }
  auto it = cmds.find(argv[1]);
  if (it == cmds.end()) {
    std::fprintf(stderr, "cnntrain-data: unknown command '%s'\n%s", argv[1], usage().c_str());
    return kExitUsage;
  }
  try {
    return it->second(argc - 1, argv + 1);
  } catch (const Error& e) {
    std::fprintf(stderr, "cnntrain-data: error: %s\n", e.what());
    return e.code();
  }
}

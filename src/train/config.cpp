#include "src/train/config.h"

#include <arpa/inet.h>

#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "src/base/error.h"
#include "src/model/zoo.h"
#include "src/train/config_opt.h"

namespace po = boost::program_options;

namespace cnn {

namespace {

using namespace config_detail;

// The options without a section: what runs, on what, where its run directory is, how it resumes.
std::vector<Opt> general_options() {
  return {
      {"model", "network: an ONNX file (FILE.onnx, docs/models.md) or one from the model zoo (" + [] {
         std::string s;
         for (const auto& n : model_names()) s += (s.empty() ? "" : ", ") + n;
         return s;
       }() + ")",
       [](Config& c, const std::string& x) {
         // An ONNX file is looked for in check_combinations: a resume builds it from its checkpoint if it is gone.
         if (!is_onnx_model(x) && !is_model(x)) {
           bad("model", x, "unknown model; give a zoo name (see --help) or an ONNX file (FILE.onnx)");
         }
         c.model = x;
       },
       [](const Config& c) { return c.model; }},
      real_opt("model.stochastic_depth", field(&Config::model_stochastic_depth), 0, 1, false,
               "efficientnet_b0: block b of 16 drops its residual branch per sample with probability P * b / 16 in "
               "training (torchvision's stochastic_depth_prob); 0: off; other models have no stochastic depth"),
      str_opt("device", field(&Config::device), {"cpu", "cuda", "emu"},
              "cpu, cuda (one GPU per rank) or emu (CUDA kernels on the SIMT emulator)"),
      int_opt("threads", field(&Config::threads), 1, 1024, "CPU threads per rank for the compute kernels"),
      {"seed", "seed of initialisation, data order and augmentation",
       [](Config& c, const std::string& x) {
         c.seed = static_cast<uint64_t>(to_int("seed", x, 0, (1LL << 62)));
       },
       [](const Config& c) { return std::to_string(c.seed); }},
      str_opt("precision", field(&Config::precision), {"fp32", "bf16", "fp16"},
              "activations, their gradients and the weights convolution/linear read in fp32, bf16 or fp16; "
              "master weights, gradients and optimizer state stay fp32 (docs/mixed_precision.md)"),
      bool_opt("deterministic", field(&Config::deterministic),
               "CUDA: reproducible algorithms only, no cross-block atomics in reductions (slower)"),
      invocation(str_opt("run-dir", field(&Config::run_dir), {}, "run directory, one run each (default "
                         "runs/<model>-<date>-<time>; docs/run_directory.md)")),
      invocation(str_opt("resume", field(&Config::resume), {},
                         "none, auto (newest checkpoint of the run directory that verifies) or a checkpoint path")),
  };
}

// Every option, one table per INI section (the part of the name before the dot), in the order --help lists them.
const std::vector<Opt>& options() {
  static const std::vector<Opt> opts = [] {
    std::vector<Opt> v;
    for (auto table : {general_options, init_options, data_options, conv_options, cudnn_options, gpu_options,
                       train_options, checkpoint_options, bn_options, comm_options, augment_options, eval_options,
                       log_options, amp_options}) {
      std::vector<Opt> t = table();
      v.insert(v.end(), t.begin(), t.end());
    }
    return v;
  }();
  return opts;
}

std::string help_text(const po::options_description& generic) {
  std::ostringstream s;
  s << "Usage: cnntrain [--config FILE.ini] [--section.option VALUE ...]\n"
       "Data-parallel CNN training; launch with mpirun/srun for several ranks. See README.md, docs/options.md.\n\n"
    << generic << "\nTraining options (INI: [section] option = value; command line wins):\n";
  const Config defaults;
  for (const auto& o : options()) {
    std::string def = o.get(defaults), choices;
    for (const auto& c : o.choices) choices += (choices.empty() ? " {" : "|") + c;
    s << "  --" << o.name << std::string(o.name.size() < 24 ? 24 - o.name.size() : 1, ' ') << o.help
      << (choices.empty() ? "" : choices + "}") << (def.empty() ? "" : " [" + def + "]") << "\n";
  }
  s << "\nExit codes: 0 completed, 2 bad command line/config, 3 bad data, 4 checkpoint error,\n"
       "5 non-finite loss or gradient (--train.on_nonfinite stop), 75 stopped by SIGUSR1/SIGTERM after a\n"
       "checkpoint, 130 stopped by Ctrl-C (SIGINT) after a checkpoint, 1 anything else.\n";
  return s.str();
}

// Options that contradict each other (the data options are checked by parse_config, after --print-config).
void check_combinations(const Config& cfg) {
  if (!cfg.data.train.empty() && !cfg.data.synthetic.empty())
    raise(kExitUsage, "options --data.train and --data.synthetic exclude each other; give one");
  if (cfg.train.schedule == "multistep" && cfg.train.milestones.empty())
    raise(kExitUsage, "option --train.schedule multistep needs --train.milestones (epochs, e.g. 80,120)");
  if (cfg.train.batch % cfg.train.accum_steps != 0)
    raise(kExitUsage, "option --train.accum_steps: the global batch %lld is not divisible by %d micro-batches",
          (long long)cfg.train.batch, cfg.train.accum_steps);
  if (cfg.train.min_lr > cfg.train.lr)
    raise(kExitUsage, "option --train.min_lr (%g) is larger than --train.lr (%g)", cfg.train.min_lr, cfg.train.lr);
  if (cfg.bn.sync && cfg.bn.group_size > 0)
    raise(kExitUsage, "options --bn.sync and --bn.group_size exclude each other: synchronised batch norm uses the "
          "whole global batch, ghost batch norm fixed groups of it");
  if (cfg.bn.sync && cfg.precision != "fp32")
    raise(kExitUsage, "options --bn.sync and --precision %s exclude each other: synchronised batch norm runs on fp32 "
          "activations only; use --precision fp32, or drop --bn.sync (docs/mixed_precision.md)",
          cfg.precision.c_str());
  if (cfg.train.swa_start_epoch > 0 && cfg.train.swa_lr <= 0)
    raise(kExitUsage, "option --train.swa_start_epoch needs --train.swa_lr, the learning rate SWA anneals to "
          "(e.g. 0.05)");
  if (cfg.train.swa_start_epoch >= cfg.train.epochs)
    raise(kExitUsage, "option --train.swa_start_epoch %d: SWA averages the weights at the ends of the epochs after it, "
          "and --train.epochs is %d; start it earlier or train longer", cfg.train.swa_start_epoch, cfg.train.epochs);
  if (cfg.comm.backend == "nccl" && cfg.device == "cpu")
    raise(kExitUsage, "option --comm.backend nccl needs --device cuda or emu (NCCL sums device memory)");
  if (cfg.resume.empty())
    raise(kExitUsage, "option --resume: empty; use none, auto or the path of a checkpoint file");
  if (is_onnx_model(cfg.model) && cfg.resume == "none" && access(cfg.model.c_str(), R_OK) != 0)
    raise(kExitUsage, "option --model: bad value '%s': cannot read the ONNX file: %s", cfg.model.c_str(),
          std::strerror(errno));
}

}  // namespace

std::string version_string() {
#ifndef CNN_GIT_VERSION
#define CNN_GIT_VERSION "unknown"
#endif
  return std::string("cnntrain 0.1.0 (") + CNN_GIT_VERSION + ")";
}

ParseResult parse_config(int argc, char** argv, Config& cfg) {
  po::options_description generic("General");
  generic.add_options()("help,h", "print this help and exit")("version", "print the version and exit")(
      "print-config", "print the resolved configuration (INI) and exit")(
      "eval-only", "evaluate the weights that --resume or --init.from loads on the test set, distributed over the "
      "ranks, and exit (docs/models.md, \"Evaluation\")")(
      "gpu-info", "check the GPU set-up (driver, CUDA runtime, GPUs, cuDNN/cuBLASLt/NCCL) and exit: 0 usable, 1 not")(
      "config", po::value<std::string>(), "INI file with options (command-line options override it)");
  po::options_description all;
  all.add(generic);
  // Vectors so an option may be repeated (the last occurrence wins, e.g. when a script appends overrides).
  for (const auto& o : options())
    all.add_options()(o.name.c_str(), po::value<std::vector<std::string>>(), o.help.c_str());

  po::variables_map vm;
  try {
    // Stray words are collected so the error can name them instead of silently ignoring them.
    po::options_description with_stray = all;
    with_stray.add_options()("stray-words", po::value<std::vector<std::string>>());
    po::positional_options_description pos;
    pos.add("stray-words", -1);
    // No guessing: an abbreviation (--train.epoch, --mod) would silently pick whichever option it prefixes.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(with_stray).positional(pos).style(style).run(), vm);
  } catch (const po::error& e) {
    raise(kExitUsage, "command line: %s (see --help)", e.what());
  }
  if (vm.count("stray-words"))
    raise(kExitUsage, "command line: unexpected argument '%s' (options are written --name value; see --help)",
          vm["stray-words"].as<std::vector<std::string>>().front().c_str());
  if (vm.count("help")) return {ParseAction::kExitHelp, help_text(generic)};
  if (vm.count("version")) return {ParseAction::kExitVersion, version_string() + "\n"};
  if (vm.count("gpu-info")) return {ParseAction::kGpuInfo, ""};
  if (vm.count("config")) {
    cfg.config_file = vm["config"].as<std::string>();
    std::ifstream in(cfg.config_file);
    if (!in)
      raise(kExitUsage, "option --config: cannot read '%s': %s", cfg.config_file.c_str(), std::strerror(errno));
    try {
      po::store(po::parse_config_file(in, all, false), vm);
    } catch (const po::error& e) {
      raise(kExitUsage, "config file '%s': %s (options are listed by --help)", cfg.config_file.c_str(), e.what());
    }
  }
  for (const auto& o : options())
    if (vm.count(o.name)) o.set(cfg, vm[o.name].as<std::vector<std::string>>().back());
  cfg.program = argc > 0 ? argv[0] : "cnntrain";
  cfg.eval_only = vm.count("eval-only") > 0;
  check_combinations(cfg);
  // Before the data check: printing the configuration needs no data.
  if (vm.count("print-config")) return {ParseAction::kExitPrintConfig, config_to_ini(cfg, true)};
  if (cfg.eval_only) {
    // The weights come from --resume (or --init.from, which loads weights only): --eval-only with neither would
    // evaluate a fresh initialisation. The training set is optional: its classes are checked when given.
    if (cfg.resume == "none" && cfg.init.from.empty())
      raise(kExitUsage, "option --eval-only needs the weights to evaluate: --resume PATH (a checkpoint), "
            "--resume auto with --run-dir of the run, or --init.from FILE (a checkpoint, export, ONNX or "
            "safetensors file)");
    if (cfg.data.test.empty()) raise(kExitUsage, "option --eval-only needs --data.test, the set to evaluate on");
    return {};
  }
  if (cfg.data.train.empty() && cfg.data.synthetic.empty())
    raise(kExitUsage, "option --data.train is required (the training set; `make data` prepares Fashion-MNIST), "
          "or --data.synthetic for generated images");
  return {};
}

std::vector<double> parse_milestones(const std::string& s) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const double m = to_real("train.milestones", item, 0, 1e9, true);
    if (!v.empty() && m <= v.back()) bad("train.milestones", s, "milestones must increase");
    v.push_back(m);
  }
  return v;
}

std::array<double, 3> parse_color_jitter(const std::string& s) {
  std::array<double, 3> v{};
  std::stringstream ss(s);
  std::string item;
  size_t k = 0;
  while (std::getline(ss, item, ',')) {
    if (k == v.size()) bad("augment.color_jitter", s, "expected three numbers B,C,S");
    v[k++] = to_real("augment.color_jitter", item, 0, 1e6, false);
  }
  if (k != v.size()) bad("augment.color_jitter", s, "expected three numbers B,C,S");
  return v;
}

std::array<double, 2> parse_range(const std::string& name, const std::string& s) {
  std::array<double, 2> v{};
  std::stringstream ss(s);
  std::string item;
  size_t k = 0;
  const double hi = name == "augment.rrc_scale" ? 1.0 : 1e6;
  while (std::getline(ss, item, ',')) {
    if (k == v.size()) bad(name, s, "expected MIN,MAX");
    const size_t slash = item.find('/');
    v[k++] = slash == std::string::npos ? to_real(name, item, 0, hi, true)
                                        : to_real(name, item.substr(0, slash), 0, 1e6, true) /
                                              to_real(name, item.substr(slash + 1), 0, 1e6, true);
  }
  if (k != v.size() || v[0] > v[1] || v[1] > hi)
    bad(name, s, strprintf("expected MIN,MAX with 0 < MIN <= MAX <= %g", hi));
  return v;
}

std::string config_to_ini(const Config& cfg, bool with_invocation) {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sections;
  std::string out = "# cnntrain resolved configuration (" + version_string() + ")\n";
  for (const auto& o : options()) {
    // This invocation's options as comments: they say how the run was started but are not repeated.
    const std::string prefix = o.invocation && !with_invocation ? "# " : "";
    const auto dot = o.name.find('.');
    if (dot == std::string::npos) {
      out += prefix + o.name + " = " + o.get(cfg) + "\n";
    } else {
      sections[o.name.substr(0, dot)].push_back({prefix + o.name.substr(dot + 1), o.get(cfg)});
    }
  }
  for (const auto& [sec, kv] : sections) {
    out += "\n[" + sec + "]\n";
    for (const auto& [k, v] : kv) out += k + " = " + v + "\n";
  }
  return out;
}

}  // namespace cnn

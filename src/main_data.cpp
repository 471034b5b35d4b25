// cnntrain-data: dataset converters and inspection (see README.md, "Datasets").
#include <boost/program_options.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "io/convert_cifar.h"
#include "io/convert_idx.h"
#include "io/dataset.h"
#include "io/hdf5_dataset.h"
#include "src/config.h"
#include "src/error.h"

namespace po = boost::program_options;
using namespace cnn;

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
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
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

int cmd_convert_idx(int argc, char** argv) {
  po::options_description d("convert-idx: IDX (MNIST-style, .gz or plain) images + labels -> HDF5");
  d.add_options()("images", po::value<std::string>()->required(), "IDX images file (uint8 [N,rows,cols])")(
      "labels", po::value<std::string>()->required(), "IDX labels file (uint8 [N])")(
      "out", po::value<std::string>()->required(), "output HDF5 file")(
      "num-classes", po::value<int>()->default_value(0), "number of classes (0: max label + 1)")(
      "class-names", po::value<std::string>()->default_value(""), "comma-separated class names")(
      "stats-from", po::value<std::string>()->default_value(""),
      "copy mean/std from this HDF5 file (use the training set's statistics for a test set)");
  auto vm = parse("convert-idx", d, argc, argv);
  IdxConvertOptions o;
  o.images = vm["images"].as<std::string>();
  o.labels = vm["labels"].as<std::string>();
  o.out = vm["out"].as<std::string>();
  o.num_classes = vm["num-classes"].as<int>();
  o.class_names = split_commas(vm["class-names"].as<std::string>());
  o.stats_from = vm["stats-from"].as<std::string>();
  DatasetInfo info = convert_idx_to_hdf5(o);
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
      "copy mean/std from this HDF5 file (use the training set's statistics for a test set)");
  auto vm = parse("convert-cifar", d, argc, argv);
  CifarConvertOptions o;
  o.inputs = split_commas(vm["input"].as<std::string>());
  o.out = vm["out"].as<std::string>();
  o.variant = vm["variant"].as<int>();
  o.coarse = vm["coarse"].as<bool>();
  o.class_names = split_commas(vm["class-names"].as<std::string>());
  o.stats_from = vm["stats-from"].as<std::string>();
  DatasetInfo info = convert_cifar_to_hdf5(o);
  std::printf("wrote %s: %lld images 32x32x3, %d classes, mean %.2f %.2f %.2f\n", o.out.c_str(),
              (long long)info.count, info.num_classes, info.mean[0], info.mean[1], info.mean[2]);
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  po::options_description d("inspect: counts, shapes, statistics and label histogram of a dataset");
  d.add_options()("file", po::value<std::string>()->required(), "dataset file")(
      "format", po::value<std::string>()->default_value("auto"), "hdf5 or auto");
  auto vm = parse("inspect", d, argc, argv, "file");
  auto ds = open_dataset(vm["file"].as<std::string>(), vm["format"].as<std::string>());
  const DatasetInfo& i = ds->info();
  std::printf("%s: %lld samples, %dx%dx%d (HxWxC) uint8, %d classes\n", ds->path().c_str(), (long long)i.count,
              i.height, i.width, i.channels, i.num_classes);
  for (int c = 0; c < i.channels; ++c) std::printf("  channel %d: mean %.4f std %.4f\n", c, i.mean[c], i.std[c]);
  std::vector<int64_t> hist(i.num_classes, 0);
  for (int64_t s = 0; s < i.count; ++s) ++hist[ds->label(s)];
  for (int k = 0; k < i.num_classes; ++k)
    std::printf("  label %d%s%s: %lld\n", k, i.class_names.empty() ? "" : " ",
                i.class_names.empty() ? "" : i.class_names[k].c_str(), (long long)hist[k]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<int(int, char**)>> cmds = {
      {"convert-cifar", cmd_convert_cifar},
      {"convert-idx", cmd_convert_idx},
      {"inspect", cmd_inspect},
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

// The job files users submit: every jobs/*.ini parses (options exist, values are valid), and every config a
// Slurm script names exists and parses, so that a typo is found here instead of after hours in a queue.
#include <dirent.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "src/base/error.h"
#include "src/train/config.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// The repository root: tests run from it (`make test`), or from anywhere when built in-tree.
std::string root() {
  std::string f = __FILE__;
  return f.substr(0, f.rfind("tests/unit/"));
}

std::vector<std::string> jobs_files(const std::string& suffix) {
  std::vector<std::string> out;
  const std::string dir = root() + "jobs";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back("jobs/" + n);
    }
    closedir(d);
  }
  return out;
}

// parse_config on --config FILE; "" when it parses, else the error.
std::string parse_error(const std::string& rel) {
  std::string a0 = "cnntrain", a1 = "--config", a2 = root() + rel;
  char* argv[] = {&a0[0], &a1[0], &a2[0]};
  Config c;
  try {
    const ParseResult r = parse_config(3, argv, c);
    if (r.action != ParseAction::kRun) return "parse_config did not ask to run";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Jobs, EveryIniParses) {
  const auto inis = jobs_files(".ini");
  ASSERT_GE(inis.size(), 4u) << "jobs/*.ini not found under " << root();
  for (const auto& f : inis) EXPECT_EQ(parse_error(f), "") << f;
}

TEST(Jobs, EveryConfigAnSbatchScriptNamesExistsAndParses) {
  const auto scripts = jobs_files(".sbatch");
  ASSERT_GE(scripts.size(), 3u);
  const std::regex named(R"(jobs/[A-Za-z0-9_.-]+\.ini)");
  std::set<std::string> seen;
  for (const auto& s : scripts) {
    std::ifstream in(root() + s);
    std::stringstream text;
    text << in.rdbuf();
    const std::string body = text.str();
    for (auto it = std::sregex_iterator(body.begin(), body.end(), named); it != std::sregex_iterator(); ++it) {
      const std::string cfg = it->str();
      seen.insert(cfg);
      EXPECT_TRUE(std::ifstream(root() + cfg).good()) << s << " names " << cfg << ", which does not exist";
      EXPECT_EQ(parse_error(cfg), "") << s << " names " << cfg;
    }
  }
  EXPECT_TRUE(seen.count("jobs/resnet50_imagenet.ini")) << "the GPU scripts should name the ImageNet recipe";
}

// The ImageNet recipe is the standard one: global batch and learning rate scaled per 256 images, warmup,
// label smoothing, 90 epochs.
TEST(Jobs, ResNet50RecipeIsTheStandardOne) {
  std::string a0 = "cnntrain", a1 = "--config", a2 = root() + "jobs/resnet50_imagenet.ini";
  char* argv[] = {&a0[0], &a1[0], &a2[0]};
  Config c;
  parse_config(3, argv, c);
  EXPECT_EQ(c.model, "resnet50");
  EXPECT_EQ(c.train.epochs, 90);
  EXPECT_EQ(c.train.batch % 256, 0);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.1 * c.train.batch / 256);
  EXPECT_GT(c.train.warmup_epochs, 0);
  EXPECT_DOUBLE_EQ(c.train.label_smoothing, 0.1);
  EXPECT_DOUBLE_EQ(c.train.weight_decay, 1e-4);
  EXPECT_EQ(c.data.image_size, "224x224");
}

// docs/options.md is the reference users read: every option the program has (the keys of the resolved
// configuration, which lists them all, and the general options of --help) must be in it as `--section.key`.
TEST(Docs, EveryOptionIsInOptionsMd) {
  std::ifstream in(root() + "docs/options.md");
  ASSERT_TRUE(in.good()) << "docs/options.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  Config cfg;
  std::istringstream ini(config_to_ini(cfg, true));  // with the invocation's options
  std::string section;
  int checked = 0;
  for (std::string line; std::getline(ini, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1) + ".";
      continue;
    }
    const std::string opt = "--" + section + line.substr(0, line.find(" ="));
    ++checked;
    EXPECT_NE(doc.find("`" + opt + "`"), std::string::npos) << opt << " is not documented in docs/options.md";
  }
  EXPECT_GT(checked, 40) << "the resolved configuration lists fewer options than expected";
  // The general options (--help, --version, --gpu-info, ...), from the first part of --help.
  std::string a0 = "cnntrain", a1 = "--help";
  char* argv[] = {a0.data(), a1.data()};
  Config c;
  const std::string help = parse_config(2, argv, c).text;
  const size_t from = help.find("General:");
  ASSERT_NE(from, std::string::npos) << help;
  const std::string general = help.substr(from, help.find("Training options") - from);
  int generic = 0;
  for (size_t at = general.find("--"); at != std::string::npos; at = general.find("--", at + 2)) {
    const std::string opt = general.substr(at, general.find_first_of(" ]\n", at) - at);
    ++generic;
    EXPECT_NE(doc.find("`" + opt), std::string::npos) << opt << " is not documented in docs/options.md";
  }
  EXPECT_GE(generic, 5) << "--help lists fewer general options than expected:\n" << general;
}

// ... and every job file users may submit or pass to --config.
TEST(Docs, EveryJobFileIsInOptionsMd) {
  std::ifstream in(root() + "docs/options.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  auto files = jobs_files(".ini");
  for (const auto& f : jobs_files(".sbatch")) files.push_back(f);
  ASSERT_GE(files.size(), 7u);
  for (const auto& f : files)
    EXPECT_NE(doc.find("`" + f + "`"), std::string::npos) << f << " is not listed in docs/options.md";
}

}  // namespace
}  // namespace cnn

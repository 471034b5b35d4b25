// Node-local staging (io/stage.h) in one process: the copy is byte-identical and verified, a corrupted copy
// is caught, a directory that cannot be created or written is an error naming it and what to do.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "io/stage.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// Data of more than one copy chunk (4 MiB) with a ragged tail.
std::string big_data() {
  std::string s((9 << 20) + 123, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  return s;
}

TEST(Stage, CopiesAFileIntoTheNodeLocalDirectory) {
  test::TempDir d;
  const std::string data = big_data();
  write_text(d.file("train.h5"), data);
  const StageResult r = stage_for_node(d.file("train.h5"), d.file("local/stage"), "train");
  EXPECT_TRUE(r.copied) << "a single process is its node's rank 0";
  EXPECT_EQ(r.path, d.file("local/stage/train-train.h5"));
  EXPECT_EQ(r.bytes, data.size());
  EXPECT_EQ(read_text(r.path), data);
  EXPECT_FALSE(exists(r.path + ".part"));
}

TEST(Stage, CopiesTheFilesOfADirectoryDataset) {
  test::TempDir d;
  ::mkdir(d.file("db").c_str(), 0755);
  write_text(d.file("db/data.mdb"), "records");
  write_text(d.file("db/lock.mdb"), "lock");
  const StageResult r = stage_for_node(d.file("db/"), d.file("stage"), "test");
  EXPECT_EQ(r.path, d.file("stage/test-db"));
  EXPECT_EQ(read_text(r.path + "/data.mdb"), "records");
  EXPECT_EQ(read_text(r.path + "/lock.mdb"), "lock");
}

void flip_first_byte(const std::string& part) {
  std::fstream f(part, std::ios::in | std::ios::out | std::ios::binary);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(~c);
  f.seekp(0);
  f.write(&c, 1);
}

TEST(Stage, ACorruptedCopyIsCaughtAndRemoved) {
  test::TempDir d;
  write_text(d.file("train.h5"), big_data());
  set_stage_after_copy_hook(flip_first_byte);
  try {
    stage_copy(d.file("train.h5"), d.file("stage/x.h5"));
    set_stage_after_copy_hook(nullptr);
    FAIL() << "a copy that differs from its source must not pass verification";
  } catch (const Error& e) {
    set_stage_after_copy_hook(nullptr);
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(exists(d.file("stage/x.h5")));
  EXPECT_FALSE(exists(d.file("stage/x.h5.part")));
}

TEST(Stage, AnUncreatableDirectoryIsADataErrorNamingIt) {
  test::TempDir d;
  write_text(d.file("train.h5"), "data");
  write_text(d.file("not_a_dir"), "");
  // Root ignores permission bits, so the directory is made uncreatable by a file in its path.
  try {
    stage_for_node(d.file("train.h5"), d.file("not_a_dir/stage"), "train");
    FAIL() << "staging below a regular file must fail";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(m.find("--data.stage_dir"), std::string::npos) << m;
    EXPECT_NE(m.find(d.file("not_a_dir/stage")), std::string::npos) << m;
    EXPECT_NE(m.find("leave --data.stage_dir out"), std::string::npos) << m;
  }
}

TEST(Stage, AMissingSourceIsADataError) {
  test::TempDir d;
  try {
    stage_for_node(d.file("nope.h5"), d.file("stage"), "train");
    FAIL() << "a missing dataset must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find(d.file("nope.h5")), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cnn

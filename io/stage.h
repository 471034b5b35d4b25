// Node-local staging of dataset files (--data.stage_dir DIR, docs/data.md): before training, one rank per node
// (node-local rank 0) copies each dataset file into DIR on node-local storage and verifies the copy (size, and
// CRC-32 of the copy read back against the CRC-32 of the source as it was read); the node's other ranks wait
// for it, and then every rank of the node reads the staged copy instead of the shared file system.
// A node stages the whole file, not a slice: the epoch order is a permutation of all sample ids drawn anew
// each epoch (io/sampler.h), so every rank reads samples from anywhere in the file.
#pragma once
#include <string>

namespace cnn {

struct StageResult {
  std::string path;     // the staged copy, DIR/TAG-BASENAME
  bool copied = false;  // this rank made the copy (node-local rank 0)
  double seconds = 0;   // how long the node's copy and check took
  size_t bytes = 0;
};

// Collective over the ranks of this node (src/comm node_broadcast; no deadline, a copy takes what it takes).
// `tag` keeps apart datasets with the same file name ("train", "test"). `src` is a file or a directory of
// files (LMDB). Throws Error(kExitData) on every rank of a node whose staging failed, naming DIR, the host and
// what to do.
StageResult stage_for_node(const std::string& src, const std::string& dir, const std::string& tag);

// The node leader's part, one process: copies `src` to `dst` through `dst`.part, verifies, renames. Returns
// the bytes copied. Throws Error(kExitData).
size_t stage_copy(const std::string& src, const std::string& dst);

// Tests: runs on the finished copy `dst`.part before it is verified (to plant a corruption).
void set_stage_after_copy_hook(void (*hook)(const std::string& part_path));

}  // namespace cnn

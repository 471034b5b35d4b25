// What each rank sets up on its own before the first collective of a run: datasets, backend and model. Every
// failure here is a cnn::Error with its exit code, so the ranks can agree on it (agree_or_exit) instead of
// one rank leaving the others waiting in a collective.
#pragma once
#include <memory>
#include <string>

#include "io/dataset.h"
#include "kernels/backend.h"
#include "kernels/collectives.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/device_binding.h"
#include "src/model/net.h"
#include "src/train/config.h"
#include "src/train/init_from.h"

namespace cnn {

struct Setup {
  std::unique_ptr<Dataset> train, test;
  std::unique_ptr<Backend> be;
  std::unique_ptr<Net> net;
  int local_batch = 0;  // this rank's share of the global batch
  BindingRow binding;   // the device this rank uses (--device cuda/emu)
  std::vector<std::string> warnings;  // for the run log, once it exists (e.g. an imported model's folded batch norm)
  // An imported model's graph as its checkpoints store it (src/model/onnx/onnx_graph_store.h); empty for the zoo.
  std::string graph;
  InitFromReport init;                // --init.from: what the file initialised
};

// Checks the batch arithmetic against the rank count, opens the datasets, creates the backend of
// --device and builds the model for the data's shape. Throws cnn::Error.
Setup local_setup(const Config& cfg);

// The collectives of a multi-rank run (null on one rank): --comm.backend, by default MPI for --device cpu and
// NCCL for cuda/emu unless ranks share GPUs (then MPI on host copies). Collective: after local_setup has
// succeeded on every rank.
std::unique_ptr<Collectives> make_collectives(const Config& cfg, Setup& s);

// The CUDA backend's settings from --conv.impl, --cudnn.*, --gpu.tf32 and --deterministic (also for emu).
GpuOptions make_gpu_options(const Config& cfg);

// mkdir -p with mode 0700; throws Error(kExitUsage) naming the directory.
void mkdir_p(const std::string& path);

// runs/<model>-<date>-<time> by this process's clock (rank 0 decides it for everyone).
std::string default_run_dir(const Config& cfg);

}  // namespace cnn

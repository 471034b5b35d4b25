// Which GPU each rank uses. A rank takes the GPU of its node-local rank (MPI_COMM_TYPE_SHARED) modulo the
// GPUs it can see; CUDA_VISIBLE_DEVICES, already applied by CUDA to that count, names the physical device.
// More ranks on a node than visible GPUs is an error (exit 2) unless sharing is asked for (--gpu.share): NCCL
// refuses two ranks of one communicator on one GPU, so shared GPUs sum through MPI on host copies, and silently
// doubling up would halve every rank's speed. The
// decision is a pure function of its inputs (tested with made-up device counts).
#pragma once
#include <string>
#include <vector>

namespace cnn {

struct DeviceBinding {
  // CUDA ordinal among the visible devices: the backend selects it on the main thread (cudaSetDevice), and every
  // other thread that calls CUDA must select it too (the NCCL watchdog probe does), or it works on device 0.
  int device = 0;
  std::string visible_id;  // its entry of CUDA_VISIBLE_DEVICES (index, GPU-/MIG- UUID), or the ordinal
  bool shared = false;     // other ranks of the node use it too
};

// node_ranks: the world ranks on this node in node-local order (node_ranks[local_rank] is this rank).
// cuda_visible_devices: the environment variable's value, or null when unset. Throws cnn::Error: kExitUsage
// for more ranks than GPUs without allow_share (naming the host, the ranks and the count), kExitFailure for
// no visible GPU.
DeviceBinding choose_device(int local_rank, const std::vector<int>& node_ranks, int device_count,
                            const char* cuda_visible_devices, bool allow_share, const std::string& host);

// One row of the binding table rank 0 logs, and the table of all ranks' rows (collective: every rank passes
// its own row, rank 0 gets the table, the others an empty string).
struct BindingRow {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  DeviceBinding binding;
  std::string name, pci_bus_id;
  double memory_gib = 0;
};
std::string format_binding_table(const std::vector<BindingRow>& rows);
std::string gather_binding_table(const BindingRow& mine);

}  // namespace cnn

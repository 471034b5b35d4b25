#include "src/comm/device_binding.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/heartbeat.h"

namespace cnn {

namespace {

std::vector<std::string> split_list(const char* s) {
  std::vector<std::string> out;
  if (!s) return out;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == '\0') {
      out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      cur += *p;
    }
  }
  return out;
}

// Rows travel as fixed-size text records, fields separated by '\t'.
constexpr size_t kRowBytes = 512;

std::string encode(const BindingRow& r) {
  return strprintf("%d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%.3f", r.rank, r.host.c_str(), r.local_rank, r.binding.device,
                   r.binding.visible_id.c_str(), r.binding.shared ? 1 : 0, r.name.c_str(), r.pci_bus_id.c_str(),
                   r.memory_gib);
}

BindingRow decode(const std::string& s) {
  std::vector<std::string> f;
  size_t a = 0;
  for (size_t b; (b = s.find('\t', a)) != std::string::npos; a = b + 1) f.push_back(s.substr(a, b - a));
  f.push_back(s.substr(a));
  BindingRow r;
  if (f.size() != 9) return r;
  r.rank = std::atoi(f[0].c_str());
  r.host = f[1];
  r.local_rank = std::atoi(f[2].c_str());
  r.binding.device = std::atoi(f[3].c_str());
  r.binding.visible_id = f[4];
  r.binding.shared = f[5] == "1";
  r.name = f[6];
  r.pci_bus_id = f[7];
  r.memory_gib = std::atof(f[8].c_str());
  return r;
}

}  // namespace

DeviceBinding choose_device(int local_rank, const std::vector<int>& node_ranks, int device_count,
                            const char* cuda_visible_devices, bool allow_share, const std::string& host) {
  const int local_size = static_cast<int>(node_ranks.size());
  const std::string visible = cuda_visible_devices ? strprintf(" (CUDA_VISIBLE_DEVICES=%s)", cuda_visible_devices)
                                                   : std::string(" (CUDA_VISIBLE_DEVICES unset)");
  if (device_count <= 0)
    raise(kExitFailure, "host %s: no GPU visible to rank %d%s; check the job's GPU allocation, or use --device cpu",
          host.c_str(), local_rank < local_size ? node_ranks[local_rank] : -1, visible.c_str());
  CNN_CHECK(local_rank >= 0 && local_rank < local_size, "local rank %d of %d", local_rank, local_size);
  if (local_size > device_count && !allow_share)
    raise(kExitUsage, "host %s: %d ranks (%s) run on this node but only %d GPU%s visible%s; start one rank per "
          "GPU (mpirun --map-by ppr:%d:node, srun --ntasks-per-node=%d), or let ranks share GPUs with --gpu.share "
          "true (slower: NCCL needs one GPU per rank, so sums then go through MPI on host copies)",
          host.c_str(), local_size, format_rank_list(node_ranks).c_str(), device_count,
          device_count == 1 ? " is" : "s are", visible.c_str(), device_count, device_count);
  DeviceBinding b;
  b.device = local_rank % device_count;
  b.shared = local_size > device_count;
  const auto ids = split_list(cuda_visible_devices);
  b.visible_id = b.device < static_cast<int>(ids.size()) ? ids[b.device] : std::to_string(b.device);
  return b;
}

std::string format_binding_table(const std::vector<BindingRow>& rows) {
  std::string s = strprintf("device binding (%zu rank%s):\n  %-5s %-20s %-5s %-6s %-12s %-34s %-14s %s", rows.size(),
                            rows.size() == 1 ? "" : "s", "rank", "host", "local", "device", "visible id", "GPU",
                            "PCI bus id", "memory");
  for (const BindingRow& r : rows)
    s += strprintf("\n  %-5d %-20s %-5d %-6d %-12s %-34s %-14s %.1f GiB%s", r.rank, r.host.c_str(), r.local_rank,
                   r.binding.device, r.binding.visible_id.c_str(), r.name.c_str(), r.pci_bus_id.c_str(), r.memory_gib,
                   r.binding.shared ? " (shared)" : "");
  return s;
}

std::string gather_binding_table(const BindingRow& mine) {
  const int world = world_size();
  std::vector<char> all(kRowBytes * world, '\0');
  const std::string enc = encode(mine);
  std::memcpy(&all[kRowBytes * world_rank()], enc.data(), std::min(enc.size(), kRowBytes - 1));
  std::vector<size_t> offsets(world + 1);
  for (int r = 0; r <= world; ++r) offsets[r] = kRowBytes * r;
  allgather_bytes(all.data(), offsets);
  if (world_rank() != 0) return "";
  std::vector<BindingRow> rows;
  for (int r = 0; r < world; ++r) rows.push_back(decode(std::string(&all[kRowBytes * r])));
  return format_binding_table(rows);
}

}  // namespace cnn

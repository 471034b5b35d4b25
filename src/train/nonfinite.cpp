#include "src/train/nonfinite.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"
#include "src/comm/comm.h"

namespace cnn {

namespace {

constexpr size_t kRecord = 4;  // int64 values of the device record
// Steps between a step's end and the host reading its verdict: by then its copy has landed on any backend,
// and one value for all backends keeps the ranks of any run in step.
constexpr size_t kLag = 1;

// "fc2.weight of layer fc2" for a flat gradient offset.
std::string where(const Net& net, int64_t offset) {
  for (const ParamInfo& p : net.param_table()) {
    if (offset < static_cast<int64_t>(p.offset) || offset >= static_cast<int64_t>(p.offset + p.size)) continue;
    std::string layer;
    for (const auto& l : net.layers())
      if (p.name.compare(0, l->name().size() + 1, l->name() + ".") == 0 && l->name().size() > layer.size())
        layer = l->name();
    return layer.empty() ? p.name : p.name + " of layer " + layer;
  }
  return strprintf("gradient offset %lld", (long long)offset);
}

}  // namespace

NonFiniteGuard::NonFiniteGuard(Backend& be, float* grads, size_t n, bool local_checks)
    : be_(be), grads_(grads), n_(n), local_checks_(local_checks) {
  d_rec_ = static_cast<int64_t*>(be_.alloc(sizeof(int64_t) * kRecord));
  d_zero_ = static_cast<int64_t*>(be_.alloc(sizeof(int64_t) * kRecord));
  const int64_t zero[kRecord] = {0, 0, 0, 0};
  be_.upload(d_zero_, zero, sizeof zero);
  be_.upload(d_rec_, zero, sizeof zero);
}

NonFiniteGuard::~NonFiniteGuard() {
  slots_.clear();  // mirrors wait for their copies before d_rec_ goes
  be_.release(d_rec_);
  be_.release(d_zero_);
}

void NonFiniteGuard::arm_test_injection(const Net& net, int rank) {
  const char* env = std::getenv("CNNTRAIN_TEST_NAN");
  if (!env || !*env) return;
  int r = -1;
  long long step = -1;
  char name[128] = {0};
  if (std::sscanf(env, "%d:%127[^:]:%lld", &r, name, &step) != 3 || step < 0)
    raise(kExitUsage, "CNNTRAIN_TEST_NAN='%s': expected RANK:PARAM:STEP (a test-only hook)", env);
  for (const ParamInfo& p : net.param_table())
    if (p.name == name) {
      if (r == rank) {
        inject_step_ = step;
        inject_offset_ = p.offset + p.size / 2;
      }
      return;
    }
  raise(kExitUsage, "CNNTRAIN_TEST_NAN='%s': no parameter '%s' in this model", env, name);
}

void NonFiniteGuard::inject(size_t begin, size_t end) {
  if (step_ == inject_step_ && inject_offset_ >= begin && inject_offset_ < end)
    be_.fill(grads_ + inject_offset_, 1, NAN);
}

void NonFiniteGuard::begin_step(int64_t step) {
  be_.copy(d_rec_, d_zero_, sizeof(int64_t) * kRecord);
  checked_from_ = n_;
  step_ = step;
}

void NonFiniteGuard::check_ready(size_t offset) {
  if (offset >= checked_from_) return;
  inject(offset, checked_from_);
  be_.count_nonfinite(checked_from_ - offset, grads_ + offset, static_cast<int64_t>(offset), d_rec_ + 2);
  checked_from_ = offset;
}

void NonFiniteGuard::check_agreed() {
  if (local_checks_) check_ready(0);
  else inject(0, n_);
  be_.count_nonfinite(n_, grads_, 0, d_rec_);
}

void NonFiniteGuard::end_step(int64_t step, bool local_loss_finite) {
  if (free_.empty()) {
    slots_.push_back({be_.make_host_mirror(d_rec_, sizeof(int64_t) * kRecord)});
    free_.push_back(slots_.size() - 1);
  }
  const size_t i = free_.back();
  free_.pop_back();
  Slot& s = slots_[i];
  s.step = step;
  s.loss_finite = local_loss_finite;
  s.mirror->refresh();
  in_flight_.push_back(i);
}

NonFiniteRecord NonFiniteGuard::read(Slot& s, const void* host) const {
  int64_t v[kRecord];
  std::memcpy(v, host, sizeof v);
  NonFiniteRecord r;
  r.step = s.step;
  r.agreed_count = v[0];
  r.agreed_last = v[1];
  r.local_count = local_checks_ ? v[2] : v[0];
  r.local_last = local_checks_ ? v[3] : v[1];
  r.local_loss_finite = s.loss_finite;
  return r;
}

std::vector<NonFiniteRecord> NonFiniteGuard::take(size_t keep) {
  std::vector<NonFiniteRecord> out;
  while (in_flight_.size() > keep) {
    Slot& s = slots_[in_flight_.front()];
    out.push_back(read(s, s.mirror->wait()));
    free_.push_back(in_flight_.front());
    in_flight_.pop_front();
  }
  return out;
}

std::vector<NonFiniteRecord> NonFiniteGuard::poll() { return take(kLag); }

std::vector<NonFiniteRecord> NonFiniteGuard::drain() { return take(0); }

std::string describe_nonfinite(const NonFiniteRecord& r, const Net& net, const std::vector<std::string>& hosts) {
  const int n = world_size();
  const uint64_t mine[3] = {static_cast<uint64_t>(r.local_count), static_cast<uint64_t>(r.local_last),
                            r.local_loss_finite ? 0u : 1u};
  std::vector<uint64_t> all(3 * static_cast<size_t>(n));
  allgather(mine, 3, all.data());
  // The rank whose bad value comes first in backward order leads: that is where the problem started.
  int first = -1;
  std::string ranks;
  int listed = 0;
  for (int q = 0; q < n; ++q) {
    const uint64_t* a = all.data() + 3 * q;
    if (a[0] == 0 && a[2] == 0) continue;
    if (a[0] > 0 && (first < 0 || a[1] > all[3 * first + 1])) first = q;
    if (listed++ < 8)
      ranks += strprintf("%s rank %d on %s (%s%s%s)", ranks.empty() ? "" : ";", q,
                         q < static_cast<int>(hosts.size()) ? hosts[q].c_str() : "?",
                         a[0] ? strprintf("%llu values, first in backward order in %s", (unsigned long long)a[0],
                                          where(net, static_cast<int64_t>(a[1]) - 1).c_str()).c_str()
                              : "gradient finite",
                         a[0] && a[2] ? ", " : "", a[2] ? "loss non-finite" : "");
  }
  if (listed > 8) ranks += strprintf("; and %d more ranks", listed - 8);
  if (first < 0)
    return strprintf("non-finite gradient at step %lld: every rank's own gradient is finite but their sum is not "
                     "(overflow); first in backward order in %s", (long long)r.step + 1,
                     where(net, r.agreed_last - 1).c_str());
  return strprintf("non-finite gradient at step %lld, started on rank %d in %s:%s", (long long)r.step + 1, first,
                   where(net, static_cast<int64_t>(all[3 * first + 1]) - 1).c_str(), ranks.c_str());
}

}  // namespace cnn

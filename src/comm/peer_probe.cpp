#include "src/comm/peer_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>

namespace cnn {

namespace {

std::mutex g_mu;
std::atomic<int> g_listen_fd{-1};
std::string g_addr;

std::string first_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string ip;
  for (ifaddrs* i = list; i && ip.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    ip = buf;
  }
  ::freeifaddrs(list);
  return ip;
}

bool parse_addr(const std::string& s, sockaddr_in* out) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  *out = sockaddr_in{};
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(std::atoi(s.c_str() + colon + 1)));
  return ::inet_pton(AF_INET, s.substr(0, colon).c_str(), &out->sin_addr) == 1;
}

}  // namespace

std::string open_probe_listener() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_listen_fd.load() >= 0) return g_addr;
  const std::string ip = first_ipv4();
  if (ip.empty()) return "";
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return "";
  }
  g_addr = ip + ":" + std::to_string(ntohs(a.sin_port));
  g_listen_fd.store(fd);
  return g_addr;
}

void drain_probe_listener() {
  const int fd = g_listen_fd.load();
  if (fd < 0) return;
  for (int c; (c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) ::close(c);
}

std::vector<ProbeResult> probe_peers(const std::vector<std::string>& addrs, double timeout_s) {
  std::vector<ProbeResult> out(addrs.size(), ProbeResult::kUnknown);
  std::vector<pollfd> fds;
  std::vector<size_t> who;
  for (size_t i = 0; i < addrs.size(); ++i) {
    sockaddr_in a{};
    if (addrs[i].empty() || !parse_addr(addrs[i], &a)) continue;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    out[i] = ProbeResult::kSilent;
    const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc == 0 || errno == ECONNREFUSED) {
      out[i] = ProbeResult::kReached;
      ::close(fd);
    } else if (errno == EINPROGRESS) {
      fds.push_back(pollfd{fd, POLLOUT, 0});
      who.push_back(i);
    } else {
      ::close(fd);  // no route, network unreachable: silent
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  size_t open = fds.size();
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fds[k].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      // Accepted, or refused by a host whose process is gone: either way the host answered.
      if (err == 0 || err == ECONNREFUSED) out[who[k]] = ProbeResult::kReached;
      ::close(fds[k].fd);
      fds[k].fd = -1;
      --open;
    }
  }
  for (const pollfd& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  return out;
}

}  // namespace cnn

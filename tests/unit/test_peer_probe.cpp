// The watchdog's network probe (src/comm/peer_probe.h): a listening rank is reached, a host whose process is
// gone (connection refused) is reached too, an address nobody answers for is silent, no address is unknown.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "src/comm/peer_probe.h"

namespace cnn {
namespace {

// A TCP socket bound to a free loopback port, and that address.
int bound_loopback_socket(sockaddr_in* a) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  *a = sockaddr_in{};
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *a;
  ::bind(fd, reinterpret_cast<sockaddr*>(a), sizeof *a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(a), &len);
  return fd;
}

std::string address_of(const sockaddr_in& a) { return "127.0.0.1:" + std::to_string(ntohs(a.sin_port)); }

// A loopback port that nothing listens on: bound once, then closed.
std::string closed_loopback_port() {
  sockaddr_in a;
  ::close(bound_loopback_socket(&a));
  return address_of(a);
}

// A loopback listener whose accept queue is full (backlog 0, one connection queued, never accepted): Linux
// drops further SYNs, as a host behind a cut link never answers them. Returns "IP:port"; fds to close.
std::string unanswering_listener(std::vector<int>* fds) {
  sockaddr_in a;
  const int l = bound_loopback_socket(&a);
  ::listen(l, 0);
  const int c = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
  fds->insert(fds->end(), {l, c});
  return address_of(a);
}

TEST(PeerProbe, ReachedRefusedSilentAndUnknown) {
  const std::string mine = open_probe_listener();
  if (mine.empty()) GTEST_SKIP() << "no non-loopback IPv4 interface is up here, so there is nothing to listen on";
  EXPECT_EQ(open_probe_listener(), mine) << "one listener per process";
  std::vector<int> fds;
  const auto r = probe_peers({mine, closed_loopback_port(), "", unanswering_listener(&fds)}, 0.5);
  for (int fd : fds) ::close(fd);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], ProbeResult::kReached) << mine;
  EXPECT_EQ(r[1], ProbeResult::kReached) << "a refused connection means the host answered";
  EXPECT_EQ(r[2], ProbeResult::kUnknown);
  EXPECT_EQ(r[3], ProbeResult::kSilent);
  drain_probe_listener();
}

}  // namespace
}  // namespace cnn

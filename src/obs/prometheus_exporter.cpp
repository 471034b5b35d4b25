#include "src/obs/prometheus_exporter.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/obs/rank_report.h"

namespace cnn {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxRequest = 8192;

// Waits until fd is ready for `events`, the deadline passes (false) or the server is stopped (false).
bool wait_ready(int fd, short events, int wake_fd, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = ::poll(p, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || p[1].revents) return false;
    return true;
  }
}

std::string response(int status, const char* reason, const char* extra_headers, const std::string& body,
                     bool head) {
  const char* type = status == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8";
  std::string r = strprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                            status, reason, type, body.size(), extra_headers);
  if (!head) r += body;
  return r;
}

std::string host_port(const std::string& addr, int port) {
  return addr.find(':') != std::string::npos ? strprintf("[%s]:%d", addr.c_str(), port)
                                             : strprintf("%s:%d", addr.c_str(), port);
}

}  // namespace

std::unique_ptr<MetricsHttpServer> MetricsHttpServer::start(const std::string& addr, int port,
                                                             std::function<std::string()> body, std::string* why,
                                                             double exchange_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res)) {
    *why = strprintf("'%s' is not a numeric IPv4 or IPv6 address (%s)", addr.c_str(), ::gai_strerror(rc));
    return nullptr;
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer);
  s->listen_fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int one = 1;
  const bool ok = s->listen_fd_ >= 0 &&
                  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
                  ::bind(s->listen_fd_, res->ai_addr, res->ai_addrlen) == 0 && ::listen(s->listen_fd_, 16) == 0;
  const int err = errno;
  ::freeaddrinfo(res);
  if (!ok) {
    *why = strprintf("cannot listen on %s: %s", host_port(addr, port).c_str(), std::strerror(err));
    return nullptr;  // the destructor closes the socket
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(s->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    *why = strprintf("pipe2: %s", std::strerror(errno));
    return nullptr;
  }
  s->body_ = std::move(body);
  s->exchange_ = std::chrono::milliseconds(static_cast<int64_t>(exchange_s * 1000));
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (thread_.joinable()) {
    const char c = 0;
    while (::write(wake_[1], &c, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
}

void MetricsHttpServer::run() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // Out of descriptors: back off instead of spinning on a listening socket that stays readable.
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    serve(fd);
    ::close(fd);
  }
}

void MetricsHttpServer::serve(int fd) {
  const Clock::time_point deadline = Clock::now() + exchange_;
  std::string req;
  char buf[1024];
  auto complete = [&] { return req.find("\r\n\r\n") != std::string::npos || req.find("\n\n") != std::string::npos; };
  while (!complete() && req.size() < kMaxRequest) {
    if (!wait_ready(fd, POLLIN, wake_[0], deadline)) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    req.append(buf, static_cast<size_t>(n));
  }
  const std::string out = answer(req, complete());
  size_t sent = 0;
  while (sent < out.size()) {
    if (!wait_ready(fd, POLLOUT, wake_[0], deadline)) return;
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

std::string MetricsHttpServer::answer(const std::string& req, bool complete) const {
  if (!complete && req.size() >= kMaxRequest)
    return response(431, "Request Header Fields Too Large", "", "request over 8 KiB\n", false);
  char method[16] = {0}, target[1024] = {0}, version[16] = {0};
  const std::string line = req.substr(0, req.find_first_of("\r\n"));
  if (std::sscanf(line.c_str(), "%15s %1023s %15s", method, target, version) != 3 ||
      std::strncmp(version, "HTTP/", 5) != 0)
    return response(400, "Bad Request", "", "malformed request line\n", false);
  const bool head = std::strcmp(method, "HEAD") == 0;
  if (!head && std::strcmp(method, "GET") != 0)
    return response(405, "Method Not Allowed", "Allow: GET, HEAD\r\n", "only GET and HEAD\n", false);
  const std::string path(target, std::strcspn(target, "?"));
  if (path != "/metrics") return response(404, "Not Found", "", "cnntrain serves /metrics only\n", head);
  return response(200, "OK", "", body_(), head);
}

bool write_file_atomically(const std::string& path, const std::string& text, std::string* why) {
  const std::string tmp = strprintf("%s.tmp.%d", path.c_str(), static_cast<int>(::getpid()));
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = errno;
  if (f && std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    *why = strprintf("cannot write '%s': %s", path.c_str(), std::strerror(err));
    std::remove(tmp.c_str());
  }
  return ok;
}

std::string prometheus_file_path(const std::string& pattern, const std::string& host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "%h") == 0) {
      out += host;
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

PrometheusExporter::PrometheusExporter(const ObsOptions& opt, const std::vector<std::string>& hosts,
                                       const std::string& run_dir, RunLog& log)
    : log_(log) {
  const bool serve = opt.prometheus_port > 0 && world_rank() == 0;
  if (!opt.prometheus_file.empty() && local_rank() == 0)
    file_ = prometheus_file_path(opt.prometheus_file, host_name());
  if (!serve && file_.empty()) return;
  metrics_ = std::make_unique<PromMetrics>(
      hosts, std::vector<std::pair<std::string, std::string>>{{"model", opt.model}, {"device", opt.device},
                                                               {"precision", opt.precision},
                                                               {"version", opt.version}, {"run_dir", run_dir}});
  if (!serve) return;
  std::string why;
  http_ = MetricsHttpServer::start(opt.prometheus_addr, opt.prometheus_port,
                                   [m = metrics_.get()] { return m->render(true); }, &why);
  if (http_)
    log_.info("Prometheus: serving http://%s/metrics", host_port(opt.prometheus_addr, http_->port()).c_str());
  else
    rank_warning(log_, strprintf("--log.prometheus_port %d: %s; the job continues without its Prometheus endpoint (choose a free "
                   "port)", opt.prometheus_port, why.c_str()));
}

PrometheusExporter::~PrometheusExporter() {
  http_.reset();  // before the figures it renders
  if (file_written_) std::remove(file_.c_str());
}

void PrometheusExporter::interval_done() {
  if (file_.empty() || !metrics_) return;
  std::string why;
  if (write_file_atomically(file_, metrics_->render(world_rank() == 0, node_ranks()), &why)) {
    file_written_ = true;
  } else if (!file_warned_) {
    file_warned_ = true;
    rank_warning(log_, strprintf("--log.prometheus_file: %s; the job continues without it (this warning is not repeated)",
                   why.c_str()));
  }
}


}  // namespace cnn

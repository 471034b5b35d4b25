// Where the Prometheus figures (src/obs/prometheus_metrics.h) go: an HTTP endpoint on rank 0
// (--log.prometheus_port, GET /metrics) served by its own thread, and a per-node file for node_exporter's
// textfile collector (--log.prometheus_file, written by each node's first rank for its node's ranks). Neither
// can fail or slow the job: a port in use or an unwritable file is one warning, and the endpoint's thread only
// reads the figures the training thread leaves at each log interval. docs/observability.md.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/obs/obs_options.h"
#include "src/obs/prometheus_metrics.h"
#include "src/obs/runlog.h"

namespace cnn {

// A minimal HTTP/1.1 server for one resource: GET (or HEAD) /metrics answers 200 with `body()` as
// `text/plain; version=0.0.4`, any other path 404, any other method 405; one request per connection
// (Connection: close), requests of at most 8 KiB, one connection at a time, each given at most `exchange_s`
// seconds for its whole exchange (a stalled client delays the next scrape by that much, never longer).
// body() runs on the server's thread.
class MetricsHttpServer {
 public:
  // Listens on addr:port (a numeric IPv4 or IPv6 address; port 0 takes a free port, for tests). Returns null
  // with the reason in *why (e.g. "cannot listen on 0.0.0.0:9400: Address already in use").
  static std::unique_ptr<MetricsHttpServer> start(const std::string& addr, int port,
                                                   std::function<std::string()> body, std::string* why,
                                                   double exchange_s = 5);
  ~MetricsHttpServer();  // stops the thread, closes the socket
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  void run();
  void serve(int fd);
  // The response to a request (`complete`: its header ended within the size limit).
  std::string answer(const std::string& req, bool complete) const;
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  int port_ = 0;
  std::chrono::milliseconds exchange_{0};
  std::function<std::string()> body_;
  std::thread thread_;
};

// Writes `text` to `path` through a temporary file in the same directory and a rename, so a reader
// (node_exporter) never sees a partial file. Returns false with the reason in *why.
bool write_file_atomically(const std::string& path, const std::string& text, std::string* why);

// The run's exporter: rank 0 serves every rank's figures; the first rank of each node writes its node's file
// (the job's figures only on rank 0's node: node_exporter adds the node's own labels, and one copy of
// the job-wide series keeps sums over nodes right). A process with neither holds nothing.
class PrometheusExporter {
 public:
  // hosts: every rank's host. Starts the endpoint on rank 0 (a failure is a warning).
  PrometheusExporter(const ObsOptions& opt, const std::vector<std::string>& hosts, const std::string& run_dir,
                     RunLog& log);
  ~PrometheusExporter();  // stops the endpoint, removes this node's file (the job is over)
  bool active() const { return metrics_ != nullptr; }
  void on_event(const Json& j) {
    if (metrics_) metrics_->on_event(j);
  }
  // At each log interval, after the ranks event: writes this node's file.
  void interval_done();
  int port() const { return http_ ? http_->port() : 0; }

 private:
  RunLog& log_;
  std::unique_ptr<PromMetrics> metrics_;
  std::unique_ptr<MetricsHttpServer> http_;
  std::string file_;
  bool file_written_ = false, file_warned_ = false;
};

// --log.prometheus_file with "%h" replaced by the host name (a shared filesystem needs one file per node).
std::string prometheus_file_path(const std::string& pattern, const std::string& host);

}  // namespace cnn

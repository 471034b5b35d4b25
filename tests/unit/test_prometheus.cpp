// The Prometheus exposition built from metrics events (names, units, labels, the per-node subset), the HTTP
// endpoint over loopback (status codes, limits, a stalled client, a port in use) and the textfile's atomic
// write. promtool's lint of a whole run's output is in tests/e2e/test_prometheus.sh.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "src/obs/prometheus_exporter.h"
#include "src/obs/prometheus_metrics.h"
#include "src/base/error.h"
#include "src/train/config.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream s(text);
  for (std::string l; std::getline(s, l);)
    if (l == line) return true;
  return false;
}

// Every one of `lines` is a line of `text`; names the missing ones.
::testing::AssertionResult has_lines(const std::string& text, const std::vector<std::string>& lines) {
  std::string missing;
  for (const std::string& l : lines)
    if (!has_line(text, l)) missing += "\n  " + l;
  if (missing.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "missing:" << missing << "\nin:\n" << text;
}

Json train_event() {
  Json j;
  j.add("event", "train").add("epoch", 2).add("step", 300).add("loss", 0.5).add("train_acc", 0.75)
      .add("lr", 0.05).add("samples_per_s", 1500.0).add("data_s", 1.0).add("compute_s", 2.0).add("comm_s", 1.0)
      .add("loss_scale", 1.0).add("gpu_util_pct", 90.0);
  return j;
}

Json ranks_event() {
  Json j;
  j.add("event", "ranks").add("step", 300).add("steps", std::vector<int64_t>{10, 10});
  for (const char* p : {"data_s", "h2d_s", "forward_s", "backward_s", "comm_s", "optimizer_s", "checkpoint_s"})
    j.add(p, std::vector<double>{0.125, 0.25});
  j.add("busy_s", std::vector<double>{0.5, 1.0}).add("mem_in_use", std::vector<double>{1024, 2048})
      .add("gpu_util_pct", std::vector<double>{50, NAN}).add("straggler", std::vector<int64_t>{0, 1});
  return j;
}

PromMetrics metrics() { return PromMetrics({"node\"a", "node-b"}, {{"model", "fmnist_cnn"}, {"device", "cpu"}}); }

TEST(PromMetrics, JobFiguresFromTheTrainEvent) {
  PromMetrics m = metrics();
  EXPECT_FALSE(has_line(m.render(true), "cnntrain_step 300"));
  m.on_event(train_event());
  const std::string t = m.render(true);
  // data and exposed communication as shares of the interval (data + compute + comm = 4 s).
  EXPECT_TRUE(has_lines(t, {"cnntrain_info{model=\"fmnist_cnn\",device=\"cpu\"} 1", "cnntrain_world_size 2",
                            "# TYPE cnntrain_samples_per_second gauge", "cnntrain_samples_per_second 1500",
                            "cnntrain_step 300", "cnntrain_epoch 2", "cnntrain_loss 0.5", "cnntrain_learning_rate 0.05",
                            "cnntrain_data_wait_ratio 0.25", "cnntrain_exposed_comm_ratio 0.25"}));
  // Rank 0's GPU figures in the train event are per-rank figures, exported from the ranks event only.
  EXPECT_EQ(t.find("cnntrain_gpu_utilization_ratio"), std::string::npos) << t;
  EXPECT_EQ(t.find("cnntrain_checkpoint_age_seconds"), std::string::npos) << "no checkpoint yet";
  EXPECT_EQ(m.render(false), "") << "a node file without the job's figures and no ranks event yet";
}

TEST(PromMetrics, CheckpointAgeCountsFromTheCheckpointEvent) {
  PromMetrics m = metrics();
  Json c;
  c.add("event", "checkpoint").add("step", 200).add("path", "x.h5").add("bytes", int64_t{4096}).add("seconds", 0.5);
  m.on_event(c);
  const std::string t = m.render(true);
  EXPECT_TRUE(has_line(t, "cnntrain_checkpoint_step 200")) << t;
  EXPECT_TRUE(has_line(t, "cnntrain_checkpoint_size_bytes 4096")) << t;
  EXPECT_TRUE(has_line(t, "cnntrain_checkpoint_write_seconds 0.5")) << t;
  const size_t at = t.find("\ncnntrain_checkpoint_age_seconds ");
  ASSERT_NE(at, std::string::npos) << t;
  const double age = std::stod(t.substr(at + 33));
  EXPECT_GE(age, 0);
  EXPECT_LT(age, 60);
}

TEST(PromMetrics, PerRankFiguresWithRankAndHostLabels) {
  PromMetrics m = metrics();
  m.on_event(ranks_event());
  const std::string t = m.render(true);
  // Step time: the sum of the seven phases; the host's quote escaped; GPU utilisation from percent to ratio, and
  // a rank without GPU figures (null) has no sample.
  EXPECT_TRUE(has_lines(t, {"cnntrain_rank_step_seconds{rank=\"0\",host=\"node\\\"a\"} 0.875",
                            "cnntrain_rank_step_seconds{rank=\"1\",host=\"node-b\"} 1.75",
                            "cnntrain_rank_phase_seconds{rank=\"1\",host=\"node-b\",phase=\"backward\"} 0.25",
                            "cnntrain_rank_busy_seconds{rank=\"1\",host=\"node-b\"} 1",
                            "cnntrain_rank_straggler{rank=\"1\",host=\"node-b\"} 1",
                            "cnntrain_rank_memory_in_use_bytes{rank=\"1\",host=\"node-b\"} 2048",
                            "cnntrain_gpu_utilization_ratio{rank=\"0\",host=\"node\\\"a\"} 0.5"}));
  EXPECT_EQ(t.find("cnntrain_gpu_utilization_ratio{rank=\"1\""), std::string::npos) << t;
  // Each family's HELP and TYPE once, before its samples.
  EXPECT_EQ(t.find("# TYPE cnntrain_rank_phase_seconds gauge"), t.rfind("# TYPE cnntrain_rank_phase_seconds gauge"));
  EXPECT_LT(t.find("# TYPE cnntrain_rank_phase_seconds"), t.find("cnntrain_rank_phase_seconds{"));
  // A node's file: its ranks only, no job figures.
  const std::string node = m.render(false, {1});
  EXPECT_EQ(node.find("rank=\"0\""), std::string::npos) << node;
  EXPECT_EQ(node.find("cnntrain_info"), std::string::npos) << node;
  EXPECT_TRUE(has_line(node, "cnntrain_rank_busy_seconds{rank=\"1\",host=\"node-b\"} 1")) << node;
}

// One HTTP exchange with the server on loopback: sends `request`, returns all it answers until it closes.
std::string exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::unique_ptr<MetricsHttpServer> serve(double exchange_s = 5) {
  std::string why;
  auto s = MetricsHttpServer::start("127.0.0.1", 0, [] { return std::string("cnntrain_step 7\n"); }, &why,
                                    exchange_s);
  EXPECT_TRUE(s) << why;
  return s;
}

TEST(MetricsHttpServer, ServesMetricsAndNothingElse) {
  auto s = serve();
  ASSERT_TRUE(s);
  const std::string ok = exchange(s->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(ok, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                "Content-Length: 16\r\nConnection: close\r\n\r\ncnntrain_step 7\n");
  EXPECT_EQ(exchange(s->port(), "GET /metrics?x=1 HTTP/1.0\n\n").substr(0, 15), "HTTP/1.1 200 OK");
  const std::string head = exchange(s->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_NE(head.find("Content-Length: 16\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "HEAD: no body";
  EXPECT_EQ(exchange(s->port(), "GET / HTTP/1.1\r\n\r\n").substr(0, 22), "HTTP/1.1 404 Not Found");
  const std::string post = exchange(s->port(), "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(post.substr(0, 31), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos);
  EXPECT_EQ(exchange(s->port(), "hello\r\n\r\n").substr(0, 24), "HTTP/1.1 400 Bad Request");
  const std::string big = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a') + "\r\n\r\n";
  EXPECT_EQ(exchange(s->port(), big).substr(0, 12), "HTTP/1.1 431");
  EXPECT_EQ(exchange(s->port(), "GET /metrics HTTP/1.1\r\n\r\n").substr(0, 15), "HTTP/1.1 200 OK") << "still serving";
}

TEST(MetricsHttpServer, AStalledClientDelaysTheNextOnlyByTheExchangeTime) {
  auto s = serve(0.3);
  ASSERT_TRUE(s);
  const int idle = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(s->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(idle, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::send(idle, "GET /met", 8, MSG_NOSIGNAL);  // and then nothing
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(s->port(), "GET /metrics HTTP/1.1\r\n\r\n").substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // Stopping does not wait for a client either.
  const int idle2 = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(idle2, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const auto t1 = std::chrono::steady_clock::now();
  s.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(250));
  ::close(idle);
  ::close(idle2);
}

TEST(MetricsHttpServer, APortInUseOrABadAddressIsAReason) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string why;
  EXPECT_FALSE(MetricsHttpServer::start("127.0.0.1", s->port(), [] { return std::string(); }, &why));
  EXPECT_EQ(why, "cannot listen on 127.0.0.1:" + std::to_string(s->port()) + ": Address already in use");
  EXPECT_FALSE(MetricsHttpServer::start("localhost", 9400, [] { return std::string(); }, &why));
  EXPECT_NE(why.find("'localhost' is not a numeric IPv4 or IPv6 address"), std::string::npos) << why;
}

TEST(PromTextfile, WrittenWholeThroughARename) {
  test::TempDir dir;
  std::string why;
  const std::string path = dir.file("cnntrain.prom");
  ASSERT_TRUE(write_file_atomically(path, "cnntrain_step 1\n", &why)) << why;
  ASSERT_TRUE(write_file_atomically(path, "cnntrain_step 2\n", &why)) << why;
  std::ifstream f(path);
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "cnntrain_step 2\n");
  EXPECT_FALSE(write_file_atomically(dir.file("no/such/dir/x.prom"), "x", &why));
  EXPECT_EQ(why, "cannot write '" + dir.file("no/such/dir/x.prom") + "': No such file or directory");
  // Only the file itself is left: no temporary beside it.
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.path().c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    ::closedir(d);
  }
  EXPECT_EQ(names, std::vector<std::string>{"cnntrain.prom"});
  EXPECT_EQ(prometheus_file_path("/var/lib/textfile/cnntrain-%h.prom", "node7"),
            "/var/lib/textfile/cnntrain-node7.prom");
}

// Parses `args` (after the program name) into a Config; "" or the error message.
std::string parse(std::vector<std::string> args, Config* c) {
  args.insert(args.begin(), {"cnntrain", "--data.train", "train.h5"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    parse_config(static_cast<int>(argv.size()), argv.data(), *c);
  } catch (const Error& e) {
    return e.code() == kExitUsage ? e.what() : "wrong exit code";
  }
  return "";
}

TEST(MonitoringOptions, DefaultsAndChecks) {
  Config c;
  EXPECT_EQ(parse({}, &c), "");
  EXPECT_EQ(c.log.prometheus_port, 0) << "off unless asked for";
  EXPECT_EQ(c.log.prometheus_addr, "0.0.0.0");
  EXPECT_EQ(c.log.gpu_stats_s, 1);
  EXPECT_EQ(parse({"--log.prometheus_port", "9400", "--log.prometheus_addr", "::1", "--log.prometheus_file",
                   "/var/lib/textfile/cnntrain-%h.prom", "--log.gpu_stats_s", "0.5"}, &c), "");
  EXPECT_EQ(c.log.prometheus_port, 9400);
  EXPECT_EQ(c.log.prometheus_addr, "::1");
  EXPECT_EQ(c.log.prometheus_file, "/var/lib/textfile/cnntrain-%h.prom");
  EXPECT_EQ(c.log.gpu_stats_s, 0.5);
  EXPECT_EQ(parse({"--log.prometheus_addr", "localhost"}, &c),
            "option --log.prometheus_addr: bad value 'localhost': expected a numeric IPv4 or IPv6 address, e.g. "
            "127.0.0.1 or ::");
  EXPECT_NE(parse({"--log.prometheus_port", "70000"}, &c).find("must be between 0 and 65535"), std::string::npos);
  EXPECT_NE(parse({"--log.gpu_stats_s", "-1"}, &c).find("--log.gpu_stats_s"), std::string::npos);
}

}  // namespace
}  // namespace cnn

// vtrain-server's /metrics on loopback: every call is counted by method and
// code, health checks and calls refused before a handler ran included.
#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/server_testing.h"

namespace vtrain::server {
namespace {

// A port that was free a moment ago.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// GET http://127.0.0.1:port/metrics, the whole response.
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// The value of the counter line naming `method` and `code`, or -1.
double Calls(const std::string& metrics, const std::string& method, const std::string& code) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, "vtrain_grpc_calls_total{")) continue;
    if (!absl::StrContains(line, absl::StrCat("method=\"", method, "\"")) ||
        !absl::StrContains(line, absl::StrCat("code=\"", code, "\""))) {
      continue;
    }
    double value = -1;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) return value;
  }
  return -1;
}

// Regression (issue 12): health checks and oversized-request rejections were
// not counted anywhere.
TEST(MetricsTest, HealthChecksAndOversizedRequestsAreCounted) {
  TempDir dir;
  const int metrics_port = FreePort();
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("m.db");
  o.metrics_listen = absl::StrCat("127.0.0.1:", metrics_port);
  o.max_message_bytes = 4096;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = ChannelTo(**server);

  grpc::GenericStub generic(channel);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), response;
    grpc::CompletionQueue cq;
    grpc::Status s;
    auto call = generic.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
    call->StartCall();
    call->Finish(&response, &s, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  v1::PredictRequest big = Gpt13bRequest();
  big.set_profile_set_id(std::string(6'000, 'x'));  // over the 4 KiB limit
  v1::PredictResponse resp;
  grpc::Status s = v1::Simulator::NewStub(channel)->Predict(Ctx().get(), big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("--max-message-bytes"), std::string::npos) << s.error_message();
  // A prediction that runs is timed, and its time goes into the histogram.
  resp.Clear();
  s = v1::Simulator::NewStub(channel)->Predict(Ctx().get(), Gpt13bRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(resp.simulation().wall_ns(), 0);
  EXPECT_EQ(resp.simulation().predictions(), 1);

  const std::string metrics = Scrape(metrics_port);
  ASSERT_FALSE(metrics.empty()) << "nothing answered on the metrics port";
  EXPECT_EQ(Calls(metrics, "/grpc.health.v1.Health/Check", "OK"), 3) << metrics;
  EXPECT_EQ(Calls(metrics, "/vtrain.v1.Simulator/Predict", "RESOURCE_EXHAUSTED"), 1) << metrics;
  EXPECT_NE(metrics.find("vtrain_requests_total{code=\"RESOURCE_EXHAUSTED\",method=\"Predict\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("vtrain_simulation_duration_seconds_count{method=\"Predict\"} 1"),
            std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

// The value of family `name`'s child whose labels include all of `labels`.
double Value(Metrics& m, const std::string& name,
             const std::vector<std::pair<std::string, std::string>>& labels) {
  for (const prometheus::MetricFamily& family : m.registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      size_t matched = 0;
      for (const auto& [k, v] : labels) {
        for (const prometheus::ClientMetric::Label& l : metric.label) {
          if (l.name == k && l.value == v) ++matched;
        }
      }
      if (matched != labels.size()) continue;
      if (family.type == prometheus::MetricType::Histogram) {
        return static_cast<double>(metric.histogram.sample_count);
      }
      return metric.counter.value;
    }
  }
  return -1;
}

// Children are looked up in the metrics' own map after the first use: each
// label combination must still land on its own child.
TEST(MetricsTest, EachLabelCombinationKeepsItsOwnChild) {
  Metrics m;
  m.Request("Predict", "OK", 0.001);
  m.Request("Predict", "OK", 0.002);
  m.Request("Predict", "INVALID_ARGUMENT", 0.001);
  m.Request("Search", "OK", 0.5);
  m.SimulationTime("Predict", 10'000);
  m.Lookups("analytical", 14);
  m.Lookups("analytical", 14);
  m.Lookups("measured", 3);
  m.Call("/vtrain.v1.Simulator/Predict", "OK");
  EXPECT_EQ(Value(m, "vtrain_requests_total", {{"method", "Predict"}, {"code", "OK"}}), 2);
  EXPECT_EQ(
      Value(m, "vtrain_requests_total", {{"method", "Predict"}, {"code", "INVALID_ARGUMENT"}}), 1);
  EXPECT_EQ(Value(m, "vtrain_requests_total", {{"method", "Search"}, {"code", "OK"}}), 1);
  EXPECT_EQ(Value(m, "vtrain_request_duration_seconds", {{"method", "Predict"}}), 3);
  EXPECT_EQ(Value(m, "vtrain_simulation_duration_seconds", {{"method", "Predict"}}), 1);
  EXPECT_EQ(Value(m, "vtrain_profile_lookups_total", {{"fidelity", "analytical"}}), 28);
  EXPECT_EQ(Value(m, "vtrain_profile_lookups_total", {{"fidelity", "measured"}}), 3);
  EXPECT_EQ(Value(m, "vtrain_grpc_calls_total",
                  {{"method", "/vtrain.v1.Simulator/Predict"}, {"code", "OK"}}),
            1);
}

}  // namespace
}  // namespace vtrain::server

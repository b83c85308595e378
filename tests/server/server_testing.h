// Shared helpers of the vtrain-server tests: a temp dir, a server on
// 127.0.0.1:0 with a real SQLite file, channels and contexts, a measured-looking
// profile set, and the built vtrainctl.
#ifndef VTRAIN_TESTS_SERVER_SERVER_TESTING_H_
#define VTRAIN_TESTS_SERVER_SERVER_TESTING_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/server.h"
#include "tests/testing/profile_sets.h"
#include "tests/testing/subprocess.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  std::string File(const std::string& name) const;

 private:
  std::string path_;
};

inline constexpr char kToken[] = "s3cret-token";

// A server on 127.0.0.1:0 over `db` (push token kToken, at most 5M tasks);
// nullptr (and a test failure) when it does not start.
std::unique_ptr<Server> StartServer(const std::string& db, Role role = Role::kAll,
                                    const std::string& registry = "");
// StartServer's options, for a test to change before StartServerWith.
ServerOptions TestServerOptions(const std::string& db, Role role = Role::kAll,
                                const std::string& registry = "");
std::unique_ptr<Server> StartServerWith(const ServerOptions& options);
std::shared_ptr<grpc::Channel> ChannelTo(const Server& s);
// A context with a 30 s deadline and, when given, the bearer token.
std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "");

// gpt3-1.3b on 8 GPUs, t=2, global batch 64.
v1::PredictRequest Gpt13bRequest();
// A measured-looking set: one attention_fwd kernel table for the A100.
using ::vtrain::testing::MeasuredSet;
using ::vtrain::testing::PartialSet;

// The server's grpc.health.v1 status for `service` ("": the server itself):
// kServing, kNotServing, or -1 when the check fails.
inline constexpr int kServing = 1, kNotServing = 2;
int HealthOf(const Server& s, const std::string& service);

// Whether `s` holds the profile set `id` (asked with kToken).
bool HoldsSet(const Server& s, const std::string& id);

// Polls `condition` every 50 ms until it holds (true) or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout);

// Runs the built vtrainctl with `args`; the test fails when it cannot start.
testing::ProcessResult Vtrainctl(const std::vector<std::string>& args);
std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b);

}  // namespace vtrain::server

#endif  // VTRAIN_TESTS_SERVER_SERVER_TESTING_H_

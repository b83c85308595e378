#include "tests/server/server_testing.h"

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/profile_set_convert.h"
#include "tests/testing/profile_sets.h"

namespace vtrain::server {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "vtrain_server_test_XXXXXX").string();
  path_ = mkdtemp(tmpl.data());
}
TempDir::~TempDir() { fs::remove_all(path_); }
std::string TempDir::File(const std::string& name) const {
  return (fs::path(path_) / name).string();
}

ServerOptions TestServerOptions(const std::string& db, Role role, const std::string& registry) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = db;
  o.role = role;
  o.registry = registry;
  o.push_token = kToken;
  o.max_tasks = 5'000'000;
  return o;
}

std::unique_ptr<Server> StartServerWith(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::unique_ptr<Server> StartServer(const std::string& db, Role role, const std::string& registry) {
  return StartServerWith(TestServerOptions(db, role, registry));
}

bool HoldsSet(const Server& s, const std::string& id) {
  v1::GetProfileSetRequest get;
  get.set_id(id);
  v1::ProfileSet set;
  return v1::ProfileRegistry::NewStub(ChannelTo(s))
      ->GetProfileSet(Ctx(kToken).get(), get, &set)
      .ok();
}

std::shared_ptr<grpc::Channel> ChannelTo(const Server& s) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", s.port()),
                             grpc::InsecureChannelCredentials());
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  return ctx;
}

v1::PredictRequest Gpt13bRequest() {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_cluster()->set_num_gpus(8);
  r.mutable_plan()->set_tensor_parallel(2);
  r.mutable_plan()->set_global_batch(64);
  // testing::Gpt13bJob(): Megatron-LM's defaults, fp16, full recomputation.
  r.mutable_plan()->set_settings(v1::SETTINGS_MEGATRON_DEFAULTS);
  r.mutable_plan()->set_dtype(v1::DTYPE_FP16);
  r.mutable_plan()->set_recompute(v1::RECOMPUTE_FULL);
  return r;
}

// The messages are written by hand (the health proto's stubs are not
// installed): HealthCheckRequest is field 1 `service`, HealthCheckResponse
// field 1 `status` (a varint).
int HealthOf(const Server& s, const std::string& service) {
  std::string bytes;
  if (!service.empty()) bytes = std::string("\x0a") + static_cast<char>(service.size()) + service;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub generic(ChannelTo(s));
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  grpc::Status status;
  auto call = generic.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !status.ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string out;
  for (const grpc::Slice& piece : slices) {
    out.append(reinterpret_cast<const char*>(piece.begin()), piece.size());
  }
  return out.size() == 2 && out[0] == 0x08 ? out[1] : 0;
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return condition();
}

testing::ProcessResult Vtrainctl(const std::vector<std::string>& args) {
  const char* vtrainctl = std::getenv("VTRAIN_VTRAINCTL");
  if (vtrainctl == nullptr) vtrainctl = VTRAIN_TEST_VTRAINCTL;
  absl::StatusOr<testing::ProcessResult> r = testing::RunProcess(vtrainctl, args, 120);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : testing::ProcessResult{};
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace vtrain::server

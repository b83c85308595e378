// A registry and its predictors on loopback: deletions reach predictors live
// and after a restart, a set too large for a predictor is skipped without
// stopping later sets, a registry that guards reads is followed, and a
// registry that does not answer does not hold up predictions.
#include <atomic>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/registry_link.h"
#include "server/server.h"
#include "tests/server/server_testing.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Server> Start(const std::string& db, Role role, const std::string& registry,
                              int64_t max_message_bytes = 64 << 20,
                              bool require_auth_for_reads = false, int port = 0) {
  ServerOptions o = TestServerOptions(db, role, registry);
  o.listen = absl::StrCat("127.0.0.1:", port);
  o.max_message_bytes = max_message_bytes;
  o.require_auth_for_reads = require_auth_for_reads;
  return StartServerWith(o);
}

std::string Push(const Server& registry, const v1::ProfileSet& set) {
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = set;
  v1::PushProfileSetResponse pushed;
  grpc::Status s = v1::ProfileRegistry::NewStub(ChannelTo(registry))
                       ->PushProfileSet(Ctx(kToken).get(), push, &pushed);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return pushed.id();
}

void Delete(const Server& registry, const std::string& id) {
  v1::DeleteProfileSetRequest del;
  del.set_id(id);
  v1::DeleteProfileSetResponse resp;
  EXPECT_TRUE(v1::ProfileRegistry::NewStub(ChannelTo(registry))
                  ->DeleteProfileSet(Ctx(kToken).get(), del, &resp)
                  .ok());
}

// Regression (issue 12): `profiles rm` on the registry never reached
// predictors, even after they restarted.
TEST(FollowerTest, DeletionsReachPredictorsLiveAndAfterARestart) {
  TempDir dir;
  auto registry = Start(dir.File("registry.db"), Role::kRegistry, "");
  ASSERT_NE(registry, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", registry->port());
  auto p = Start(dir.File("p.db"), Role::kPredictor, address);
  ASSERT_NE(p, nullptr);

  const std::string live = Push(*registry, MeasuredSet(70'000));
  ASSERT_TRUE(WaitFor([&] { return HoldsSet(*p, live); }, absl::Seconds(10)));
  Delete(*registry, live);
  EXPECT_TRUE(WaitFor([&] { return !HoldsSet(*p, live); }, absl::Seconds(10)))
      << "a deletion did not reach the predictor through Watch";

  const std::string away = Push(*registry, MeasuredSet(71'000));
  ASSERT_TRUE(WaitFor([&] { return HoldsSet(*p, away); }, absl::Seconds(10)));
  p->Shutdown(absl::Milliseconds(100));
  p.reset();
  Delete(*registry, away);
  p = Start(dir.File("p.db"), Role::kPredictor, address);  // the same cache
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(WaitFor([&] { return !HoldsSet(*p, away); }, absl::Seconds(10)))
      << "a deletion made while the predictor was down survived its restart";
}

// A predictor whose registry is away starts, serves the sets it persisted,
// keeps retrying (backoff with jitter, at most about 5 s apart) and takes a
// set pushed once the registry is back.
TEST(FollowerTest, APredictorStartsWithoutItsRegistryAndConvergesWhenItReturns) {
  TempDir dir;
  auto registry = Start(dir.File("registry.db"), Role::kRegistry, "");
  ASSERT_NE(registry, nullptr);
  const int port = registry->port();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto p = Start(dir.File("p.db"), Role::kPredictor, address);
  ASSERT_NE(p, nullptr);
  const std::string kept = Push(*registry, MeasuredSet(72'000));
  ASSERT_TRUE(WaitFor([&] { return HoldsSet(*p, kept); }, absl::Seconds(10)));
  p->Shutdown(absl::Milliseconds(100));
  p.reset();
  registry->Shutdown(absl::Milliseconds(100));
  registry.reset();

  // The registry away: the predictor starts and serves what it persisted.
  p = Start(dir.File("p.db"), Role::kPredictor, address);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(HoldsSet(*p, kept));
  v1::PredictRequest predict = Gpt13bRequest();
  v1::PredictResponse answer;
  EXPECT_TRUE(v1::Simulator::NewStub(ChannelTo(*p))->Predict(Ctx().get(), predict, &answer).ok());
  absl::SleepFor(absl::Seconds(2));  // a few failed attempts

  // Back on the same port and file: a set pushed now reaches the predictor.
  registry = Start(dir.File("registry.db"), Role::kRegistry, "", 64 << 20, false, port);
  ASSERT_NE(registry, nullptr);
  const absl::Time back = absl::Now();
  const std::string later = Push(*registry, MeasuredSet(73'000));
  ASSERT_TRUE(WaitFor([&] { return HoldsSet(*p, later); }, absl::Seconds(20)))
      << "the predictor did not converge after its registry returned";
  std::cout << "converged " << absl::ToDoubleSeconds(absl::Now() - back)
            << " s after the registry returned\n";
  EXPECT_TRUE(HoldsSet(*p, kept));
  EXPECT_EQ(HealthOf(*p, kRegistryHealthService), kServing);
  ASSERT_TRUE(v1::Simulator::NewStub(ChannelTo(*p))->Predict(Ctx().get(), predict, &answer).ok());
  EXPECT_EQ(answer.warnings_size(), 0);
}

// A registry that takes its time: it accepts the predictor's calls and
// answers none until released.
class StalledRegistry final : public v1::ProfileRegistry::Service {
 public:
  grpc::Status ListProfileSets(grpc::ServerContext* ctx, const v1::ListProfileSetsRequest*,
                               v1::ListProfileSetsResponse*) override {
    if (!entered_.HasBeenNotified()) entered_.Notify();
    while (!release_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      if (ctx->IsCancelled()) break;
    }
    ++answered_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stalled registry");
  }
  absl::Notification entered_, release_;
  std::atomic<int> answered_{0};
};

TEST(FollowerTest, ARegistryThatDoesNotAnswerDoesNotHoldUpPredictions) {
  StalledRegistry stalled;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&stalled);
  std::unique_ptr<grpc::Server> registry = builder.BuildAndStart();
  ASSERT_NE(registry, nullptr);
  TempDir dir;
  auto p = Start(dir.File("p.db"), Role::kPredictor, absl::StrCat("127.0.0.1:", port));
  ASSERT_NE(p, nullptr);
  // The predictor's follower is inside a call the registry does not answer.
  ASSERT_TRUE(stalled.entered_.WaitForNotificationWithTimeout(absl::Seconds(30)));

  auto stub = v1::Simulator::NewStub(ChannelTo(*p));
  for (int i = 0; i < 3; ++i) {
    v1::PredictRequest predict = Gpt13bRequest();
    predict.mutable_plan()->set_global_batch(512 + 8 * i);  // never the cached answer
    v1::PredictResponse answer;
    const grpc::Status s = stub->Predict(Ctx().get(), predict, &answer);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_GT(answer.iteration_time_ns(), 0);
    // From its own sets, and it says so.
    ASSERT_EQ(answer.warnings_size(), 1);
    EXPECT_THAT(answer.warnings(0), HasSubstr(absl::StrCat("registry 127.0.0.1:", port)));
  }
  EXPECT_EQ(stalled.answered_.load(), 0) << "the predictions came after the registry's answer";
  // Never synced: not ready for a Service's traffic yet (it answers those
  // who ask it directly), and the registry by name is away.
  EXPECT_EQ(HealthOf(*p, ""), kNotServing);
  EXPECT_EQ(HealthOf(*p, kRegistryHealthService), kNotServing);

  stalled.release_.Notify();
  p->Shutdown(absl::Milliseconds(100));
  p.reset();
  registry->Shutdown();
}

// Regression (issue 12): a set over the follower's message limit stopped
// predictor sync for good.
TEST(FollowerTest, ASetTooLargeForAPredictorIsSkippedAndLaterSetsArrive) {
  TempDir dir;
  auto registry = Start(dir.File("registry.db"), Role::kRegistry, "");
  ASSERT_NE(registry, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", registry->port());
  auto p = Start(dir.File("p.db"), Role::kPredictor, address, /*max_message_bytes=*/64 << 10);
  ASSERT_NE(p, nullptr);
  v1::ProfileSet big = MeasuredSet(72'000);
  for (int i = 0; i < 4000; ++i) {  // ~100 KiB of kernels: over the predictor's 64 KiB
    v1::Kernel* k = big.mutable_operators(0)->add_kernels();
    k->set_name(absl::StrCat("kernel_number_", i));
    k->set_duration_ns(10);
  }
  const std::string big_id = Push(*registry, big);
  const std::string small_id = Push(*registry, MeasuredSet(73'000));
  EXPECT_TRUE(WaitFor([&] { return HoldsSet(*p, small_id); }, absl::Seconds(15)))
      << "a later set never arrived after an oversized one";
  EXPECT_FALSE(HoldsSet(*p, big_id));
  // And one pushed after the predictor is following.
  const std::string later = Push(*registry, MeasuredSet(74'000));
  EXPECT_TRUE(WaitFor([&] { return HoldsSet(*p, later); }, absl::Seconds(15)));
}

// Regression (issue 12): predictors could not follow a registry started with
// --require-auth-for-reads (the follower now sends the token).
TEST(FollowerTest, FollowsARegistryThatGuardsReads) {
  TempDir dir;
  auto registry = Start(dir.File("registry.db"), Role::kRegistry, "", 64 << 20,
                        /*require_auth_for_reads=*/true);
  ASSERT_NE(registry, nullptr);
  auto p = Start(dir.File("p.db"), Role::kPredictor, absl::StrCat("127.0.0.1:", registry->port()));
  ASSERT_NE(p, nullptr);
  const std::string id = Push(*registry, MeasuredSet(75'000));
  EXPECT_TRUE(WaitFor([&] { return HoldsSet(*p, id); }, absl::Seconds(10)));
}

}  // namespace
}  // namespace vtrain::server

// One client's searches do not take the server from another (issue 46):
// through the RPCs, a flooder's long searches leave the reserved slot to a
// second client's prediction, which is answered before any of the flood's
// searches finish; a client with too many calls queued is told to retry.
// Clients name themselves (x-vtrain-client), as two programs on one host.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/server_testing.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

using ::testing::HasSubstr;

// A search of about a second on one thread (MT-NLG 530B up to 4,096 H100).
v1::SearchRequest LongSearch() {
  v1::SearchRequest r;
  r.mutable_model()->set_preset("mtnlg-530b");
  r.mutable_cluster()->set_gpu("h100-sxm5-80gb");
  r.set_max_gpus(4096);
  r.set_global_batch(1920);
  return r;
}

// Searches from "flooder" on their own threads; each call's context stays
// here so the test can cancel what is left.
class Flood {
 public:
  Flood(const Server& server, int calls) {
    for (int i = 0; i < calls; ++i) {
      auto ctx = std::make_unique<grpc::ClientContext>();
      ctx->AddMetadata("x-vtrain-client", "flooder");
      grpc::ClientContext* raw = ctx.get();
      contexts_.push_back(std::move(ctx));
      threads_.emplace_back([this, raw, stub = v1::Simulator::NewStub(ChannelTo(server))] {
        auto reader = stub->Search(raw, LongSearch());
        v1::SearchResponse msg;
        while (reader->Read(&msg)) {
        }
        const grpc::Status s = reader->Finish();
        absl::MutexLock lock(&mu_);
        if (s.ok()) ++finished_;
        if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          refusals_.push_back(s);
          const auto& trailers = raw->GetServerTrailingMetadata();
          auto it = trailers.find("grpc-retry-pushback-ms");
          pushbacks_.push_back(it == trailers.end()
                                   ? std::string()
                                   : std::string(it->second.data(), it->second.size()));
        }
      });
    }
  }
  ~Flood() {
    for (auto& c : contexts_) c->TryCancel();
    for (std::thread& t : threads_) t.join();
  }
  int finished() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  std::vector<grpc::Status> refusals() {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }
  // Each refusal's grpc-retry-pushback-ms trailer ("" when absent).
  std::vector<std::string> pushbacks() {
    absl::MutexLock lock(&mu_);
    return pushbacks_;
  }

 private:
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<grpc::Status> refusals_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> pushbacks_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<Server> FairServer(const TempDir& dir, int max_queued) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("fair.db");
  o.max_concurrent_simulations = 2;  // one slot the flooder may take, one kept
  o.max_queued_per_client = max_queued;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(FairnessTest, AFloodOfSearchesLeavesASlotForAnotherClientsPrediction) {
  TempDir dir;
  std::unique_ptr<Server> server = FairServer(dir, 0);
  ASSERT_NE(server, nullptr);
  Flood flood(*server, 3);
  absl::SleepFor(absl::Milliseconds(150));  // the flood holds its slot and queues the rest
  auto stub = v1::Simulator::NewStub(ChannelTo(*server));
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-vtrain-client", "planner");
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::PredictResponse resp;
  const grpc::Status s = stub->Predict(&ctx, Gpt13bRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(resp.iteration_time_ms(), 0);
  // Answered from the kept slot, not after a search gave its slot up.
  EXPECT_EQ(flood.finished(), 0);
}

TEST(FairnessTest, AClientWithTooManyQueuedCallsIsToldToRetryOverTheRpc) {
  TempDir dir;
  std::unique_ptr<Server> server = FairServer(dir, 1);
  ASSERT_NE(server, nullptr);
  // One search runs, one waits, the third finds the queue full.
  Flood flood(*server, 3);
  std::vector<grpc::Status> refusals;
  ASSERT_TRUE(WaitFor(
      [&] {
        refusals = flood.refusals();
        return !refusals.empty();
      },
      absl::Seconds(30)));
  EXPECT_THAT(refusals[0].error_message(),
              ::testing::AllOf(HasSubstr("client 'name:flooder' already has 1 calls waiting"),
                               ::testing::ContainsRegex("retry in about [0-9]+ ms")));
  // The hint is in the trailers too, where a gRPC retry policy reads it,
  // and says what the message says.
  const std::vector<std::string> pushbacks = flood.pushbacks();
  ASSERT_FALSE(pushbacks.empty());
  int64_t ms = -1;
  ASSERT_TRUE(absl::SimpleAtoi(pushbacks[0], &ms)) << "'" << pushbacks[0] << "'";
  EXPECT_GE(ms, 0);
  EXPECT_THAT(refusals[0].error_message(), HasSubstr(absl::StrCat("retry in about ", ms, " ms")));
}

}  // namespace
}  // namespace vtrain::server

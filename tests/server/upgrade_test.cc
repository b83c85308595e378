// Upgrades (issue 46): a database kept from an earlier schema opens, is
// migrated and is read; a database from a newer server is refused and left
// as it was; a set whose operators an older agent sent as text is read; and
// rolling a registry and its predictors one process at a time keeps every
// set and keeps answering.
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "proto/profile_set_convert.h"
#include "server/profile_store.h"
#include "server/registry_link.h"
#include "server/server.h"
#include "tests/server/server_testing.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Databases written by earlier schemas, kept in tests/server/data (how:
// tests/server/write_store_fixture.cc): each must open with every later
// release.
class KeptDatabaseTest : public ::testing::TestWithParam<const char*> {};

TEST_P(KeptDatabaseTest, OpensMigratesAndReadsEverySet) {
  TempDir dir;
  const std::string copy = dir.File("kept.db");
  fs::copy_file(fs::path(VTRAIN_TEST_SOURCE_DIR) / "tests/server/data" / GetParam(), copy);
  {
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<ProfileStore> store, ProfileStore::Open(copy));
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<ProfileStore::StoredSet> sets, store->LoadAll());
    ASSERT_EQ(sets.size(), 2u);
    for (const ProfileStore::StoredSet& stored : sets) {
      // The content hashes to the id it was stored under: read whole.
      EXPECT_EQ(proto::ContentId(stored.set), stored.set.id()) << stored.set.name();
      EXPECT_FALSE(stored.builtin);
      EXPECT_GT(stored.set.operators_size(), 0);
    }
    VTRAIN_ASSERT_OK_AND_ASSIGN(auto work, store->NextWork("a100-sxm4-80gb", 10));
    ASSERT_EQ(work.size(), 1u);
    EXPECT_THAT(work[0].first, HasSubstr("mlp_fwd"));
    EXPECT_EQ(work[0].second, 3);
  }
  VTRAIN_ASSERT_OK_AND_ASSIGN(ProfileStore::Check check, ProfileStore::CheckDatabase(copy));
  EXPECT_EQ(check.schema_version, ProfileStore::kSchemaVersion);

  // A server over it serves its sets and predicts with them.
  auto server = StartServer(copy);
  ASSERT_NE(server, nullptr);
  v1::ListProfileSetsResponse list;
  ASSERT_TRUE(v1::ProfileRegistry::NewStub(ChannelTo(*server))
                  ->ListProfileSets(Ctx().get(), {}, &list)
                  .ok());
  int kept = 0;
  for (const v1::ProfileSetSummary& s : list.profile_sets()) kept += s.builtin() ? 0 : 1;
  EXPECT_EQ(kept, 2);
  v1::PredictRequest predict = Gpt13bRequest();
  v1::PredictResponse answer;
  ASSERT_TRUE(
      v1::Simulator::NewStub(ChannelTo(*server))->Predict(Ctx().get(), predict, &answer).ok());
  EXPECT_GT(answer.fidelity().measured(), 0) << "the kept set's measured kernel was not used";
}

INSTANTIATE_TEST_SUITE_P(Schemas, KeptDatabaseTest, ::testing::Values("store-schema-1.db"));

TEST(UpgradeTest, ADatabaseFromANewerServerIsRefusedAndLeftAsItWas) {
  TempDir dir;
  const std::string db = dir.File("newer.db");
  { VTRAIN_ASSERT_OK(ProfileStore::Open(db).status()); }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  const std::string bump =
      absl::StrCat("INSERT INTO schema_version VALUES (", ProfileStore::kSchemaVersion + 1, ")");
  EXPECT_EQ(sqlite3_exec(raw, bump.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  const std::string before = Bytes(db);

  const std::string newer =
      absl::StrCat("schema version ", ProfileStore::kSchemaVersion + 1, " is newer than");
  EXPECT_THAT(ProfileStore::Open(db).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(newer)));
  EXPECT_THAT(ProfileStore::CheckDatabase(db).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(newer)));
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = db;
  EXPECT_THAT(Server::Start(o).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Bytes(db), before) << "a refused database was changed";
}

// The first agents sent an operator's kind as text in field 3 (now reserved;
// the enum is field 12). Such a set is still read, as its own kind.
TEST(UpgradeTest, ASetWhoseOperatorAnOlderAgentSentAsTextIsRead) {
  TempDir dir;
  auto server = StartServer(dir.File("s.db"));
  ASSERT_NE(server, nullptr);
  auto push = [&](const std::string& op_text, v1::PushProfileSetResponse* pushed) {
    v1::ProfileSet set = MeasuredSet(64'000);
    v1::OperatorKey* key = set.mutable_operators(0)->mutable_key();
    key->clear_op();
    key->GetReflection()->MutableUnknownFields(key)->AddLengthDelimited(3, op_text);
    // Through the wire, as an older agent's bytes arrive.
    v1::PushProfileSetRequest request;
    ASSERT_TRUE(request.mutable_profile_set()->ParseFromString(set.SerializeAsString()));
    grpc::Status s = v1::ProfileRegistry::NewStub(ChannelTo(*server))
                         ->PushProfileSet(Ctx(kToken).get(), request, pushed);
    if (op_text == "attention_fwd") {
      ASSERT_TRUE(s.ok()) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(s.error_message(), HasSubstr("operators[0].key.op"));
      EXPECT_THAT(s.error_message(), HasSubstr(op_text));
    }
  };
  v1::PushProfileSetResponse pushed, refused;
  push("attention_fwd", &pushed);
  push("warp_drive", &refused);
  v1::PredictRequest predict = Gpt13bRequest();
  predict.set_profile_set_id(pushed.id());
  v1::PredictResponse answer;
  ASSERT_TRUE(
      v1::Simulator::NewStub(ChannelTo(*server))->Predict(Ctx().get(), predict, &answer).ok());
  EXPECT_GT(answer.fidelity().measured(), 0) << "the text-keyed attention table was not used";
}

std::unique_ptr<Server> StartOn(const std::string& db, Role role, const std::string& registry,
                                int port, int64_t ready_without_registry_seconds = 10) {
  ServerOptions o = TestServerOptions(db, role, registry);
  o.listen = absl::StrCat("127.0.0.1:", port);
  o.ready_without_registry_seconds = ready_without_registry_seconds;
  return StartServerWith(o);
}

// What a Kubernetes rollout does (deploy/base: the registry a StatefulSet of
// one, predictors with maxUnavailable 0 and maxSurge 1 behind a Service):
// the registry's process is replaced on its port and file, then each
// predictor in turn by a new one that joins the Service once its readiness
// (Health "") says SERVING, which a predictor says only once it has synced
// with its registry, after which the old one leaves it and stops. A client predicting
// through the Service the whole time sees no failure, and every set
// survives.
TEST(UpgradeTest, ARollingRestartKeepsEverySetAndKeepsAnswering) {
  TempDir dir;
  auto registry = StartOn(dir.File("registry.db"), Role::kRegistry, "", 0);
  ASSERT_NE(registry, nullptr);
  const int port = registry->port();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(70'000);
  v1::PushProfileSetResponse first;
  ASSERT_TRUE(v1::ProfileRegistry::NewStub(ChannelTo(*registry))
                  ->PushProfileSet(Ctx(kToken).get(), push, &first)
                  .ok());
  std::vector<std::unique_ptr<Server>> predictors;
  for (int i = 0; i < 2; ++i) {
    predictors.push_back(
        StartOn(dir.File(absl::StrCat("p", i, ".db")), Role::kPredictor, address, 0));
    ASSERT_NE(predictors.back(), nullptr);
    ASSERT_TRUE(
        WaitFor([&] { return HoldsSet(*predictors.back(), first.id()); }, absl::Seconds(20)));
  }

  // The Service: the ready predictors, round robin.
  std::mutex mu;
  std::vector<Server*> ready = {predictors[0].get(), predictors[1].get()};
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0}, failures{0};
  std::string first_failure;
  std::thread client([&] {
    for (int i = 0; !stop; ++i) {
      std::shared_ptr<grpc::Channel> channel;
      {
        std::lock_guard<std::mutex> lock(mu);
        channel = ChannelTo(*ready[static_cast<size_t>(i) % ready.size()]);
      }
      v1::PredictRequest predict = Gpt13bRequest();
      predict.mutable_plan()->set_global_batch(64 + 8 * (i % 64));
      v1::PredictResponse answer;
      const grpc::Status s =
          v1::Simulator::NewStub(channel)->Predict(Ctx().get(), predict, &answer);
      ++calls;
      if (!s.ok() && failures++ == 0) first_failure = s.error_message();
    }
  });

  // The registry's pod is replaced: same port, same file.
  registry->Shutdown(absl::Milliseconds(500));
  registry.reset();
  absl::SleepFor(absl::Milliseconds(300));  // predictors answer without it
  registry = StartOn(dir.File("registry.db"), Role::kRegistry, "", port);
  ASSERT_NE(registry, nullptr);
  *push.mutable_profile_set() = MeasuredSet(71'000);
  v1::PushProfileSetResponse second;
  ASSERT_TRUE(v1::ProfileRegistry::NewStub(ChannelTo(*registry))
                  ->PushProfileSet(Ctx(kToken).get(), push, &second)
                  .ok());

  // Each predictor in turn: the new one joins once it holds both sets.
  for (int i = 0; i < 2; ++i) {
    auto next = StartOn(dir.File(absl::StrCat("q", i, ".db")), Role::kPredictor, address, 0);
    ASSERT_NE(next, nullptr);
    ASSERT_TRUE(WaitFor([&] { return HealthOf(*next, "") == kServing; }, absl::Seconds(20)));
    EXPECT_TRUE(HoldsSet(*next, first.id()) && HoldsSet(*next, second.id()))
        << "ready before it held the registry's sets";
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.erase(std::find(ready.begin(), ready.end(), predictors[static_cast<size_t>(i)].get()));
      ready.push_back(next.get());
    }
    absl::SleepFor(absl::Milliseconds(200));  // calls in flight to the old one finish
    predictors[static_cast<size_t>(i)]->Shutdown(absl::Seconds(2));
    predictors[static_cast<size_t>(i)] = std::move(next);
  }
  absl::SleepFor(absl::Milliseconds(200));
  stop = true;
  client.join();
  EXPECT_GT(calls.load(), 10);
  EXPECT_EQ(failures.load(), 0) << first_failure;
  for (const auto& p : predictors) {
    EXPECT_TRUE(HoldsSet(*p, first.id()));
    EXPECT_TRUE(HoldsSet(*p, second.id()));
  }
  EXPECT_TRUE(HoldsSet(*registry, first.id()));
  EXPECT_TRUE(HoldsSet(*registry, second.id()));
}

// With no registry to sync with, a new predictor is not ready at first, then
// serves its own sets once the wait has passed.
TEST(UpgradeTest, APredictorWithoutItsRegistryIsReadyAfterTheWait) {
  TempDir dir;
  const absl::Time start = absl::Now();
  auto p = StartOn(dir.File("p.db"), Role::kPredictor, "127.0.0.1:1", 0,
                   /*ready_without_registry_seconds=*/2);
  ASSERT_NE(p, nullptr);
  const int at_start = HealthOf(*p, "");
  const bool checked_in_time = absl::Now() - start < absl::Seconds(2);
  ASSERT_TRUE(WaitFor([&] { return HealthOf(*p, "") == kServing; }, absl::Seconds(20)));
  if (checked_in_time) {
    EXPECT_EQ(at_start, kNotServing);
  }
  EXPECT_GE(absl::Now() - start, absl::Seconds(2)) << "ready before the wait had passed";
  EXPECT_EQ(HealthOf(*p, kRegistryHealthService), kNotServing);
  p->Shutdown(absl::Milliseconds(100));
  EXPECT_EQ(HealthOf(*p, ""), -1);  // not listening any more
}

}  // namespace
}  // namespace vtrain::server

// The registry without gRPC: a real SQLite file in a temp dir, accepted,
// seeded, listed, deleted and reloaded sets, the tables a prediction gets,
// the watch cursor and the profiling-work queue.
#include "server/registry.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "server/profile_catalog.h"
#include "tests/server/server_testing.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

constexpr char kGpu[] = "a100-sxm4-80gb";

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() {
    std::string tmpl = (fs::temp_directory_path() / "vtrain_registry_test_XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  ~RegistryTest() override { fs::remove_all(dir_); }
  std::string DbPath() const { return (fs::path(dir_) / "r.db").string(); }

  Metrics metrics_;

 private:
  std::string dir_;
};

constexpr AcceptOptions kPushed = {.origin = SetOrigin::kMeasured,
                                   .created_at = CreatedAt::kStampNow};

TEST_F(RegistryTest, SeedsOnlyAnEmptyStoreAndKeepsSetsAcrossReopening) {
  std::string id;
  {
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
    EXPECT_EQ(r->size(), 0);
    VTRAIN_ASSERT_OK(r->SeedBuiltinsIfEmpty());
    EXPECT_EQ(r->size(), static_cast<int64_t>(GpuNames().size()));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse pushed,
                                r->Accept(MeasuredSet(1000), kPushed));
    id = pushed.id();
    VTRAIN_ASSERT_OK(r->SeedBuiltinsIfEmpty());  // not empty: nothing added
    EXPECT_EQ(r->size(), static_cast<int64_t>(GpuNames().size()) + 1);
    r->Close();
  }
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  EXPECT_EQ(r->size(), static_cast<int64_t>(GpuNames().size()) + 1);
  EXPECT_TRUE(r->Contains(id));
  const v1::ListProfileSetsResponse listed = r->List({});
  int builtin = 0;
  for (const v1::ProfileSetSummary& s : listed.profile_sets()) builtin += s.builtin() ? 1 : 0;
  EXPECT_EQ(builtin, static_cast<int>(GpuNames().size()));
}

TEST_F(RegistryTest, AcceptNamesSetsByContentAndRefusesAWrongId) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse first,
                              r->Accept(MeasuredSet(1000), kPushed));
  EXPECT_FALSE(first.already_present());
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse again,
                              r->Accept(MeasuredSet(1000), kPushed));
  EXPECT_EQ(again.id(), first.id());
  EXPECT_TRUE(again.already_present());

  v1::ProfileSet wrong = MeasuredSet(2000);
  wrong.set_id("not-the-hash");
  EXPECT_THAT(r->Accept(wrong, kPushed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not the content hash")));
  v1::ProfileSet broken = MeasuredSet(2000);
  broken.mutable_operators(0)->mutable_key()->set_op(static_cast<v1::OperatorKind>(99));
  EXPECT_THAT(r->Accept(broken, kPushed), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(r->size(), 1);
}

TEST_F(RegistryTest, SyncedSetsKeepTheirCreationTime) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  v1::ProfileSet set = MeasuredSet(1000);
  set.mutable_created_at()->set_seconds(1'000'000);
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      const v1::PushProfileSetResponse synced,
      r->Accept(set, {.origin = SetOrigin::kMeasured, .created_at = CreatedAt::kKeepGiven}));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::ProfileSet got, r->Get(synced.id()));
  EXPECT_EQ(got.created_at().seconds(), 1'000'000);

  v1::ProfileSet pushed = MeasuredSet(3000);
  pushed.mutable_created_at()->set_seconds(1'000'000);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse stamped, r->Accept(pushed, kPushed));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::ProfileSet now, r->Get(stamped.id()));
  EXPECT_GT(now.created_at().seconds(), 1'000'000);
}

TEST_F(RegistryTest, DeleteAndGetOfAnAbsentSetAreNotFound) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse pushed,
                              r->Accept(MeasuredSet(1000), kPushed));
  VTRAIN_ASSERT_OK(r->Delete(pushed.id()));
  EXPECT_FALSE(r->Contains(pushed.id()));
  EXPECT_THAT(r->Delete(pushed.id()), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(r->Get(pushed.id()), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(RegistryTest, TablesForANamedSetTheNewestOrTheBuiltIns) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  const GpuSpec gpu = *GpuByName(kGpu);
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> builtin, r->TablesFor("", gpu));
  EXPECT_TRUE(builtin->operators.empty());
  EXPECT_THAT(r->TablesFor("absent", gpu),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("profile_set_id 'absent'")));

  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse pushed,
                              r->Accept(MeasuredSet(1000), kPushed));
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> named,
                              r->TablesFor(pushed.id(), gpu));
  EXPECT_EQ(named->id, pushed.id());
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> newest, r->TablesFor("", gpu));
  EXPECT_EQ(newest->id, pushed.id());
}

// A partial set (no error bands: an nccl-tests import, a few profiled
// operators) never replaces a complete one as the default: its tables are
// laid over the newest complete set, whose bands (the interval) stay; the
// push says so, and a later complete set supersedes it.
TEST_F(RegistryTest, PartialSetsAreLaidOverTheNewestCompleteSet) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  VTRAIN_ASSERT_OK(r->SeedBuiltinsIfEmpty());
  const GpuSpec gpu = *GpuByName(kGpu);
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> builtin, r->TablesFor("", gpu));
  ASSERT_FALSE(builtin->error_bands.empty());

  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse partial,
                              r->Accept(::vtrain::testing::PartialSet(1000), kPushed));
  EXPECT_FALSE(partial.complete());
  EXPECT_EQ(partial.default_profile_set_id(), absl::StrCat(builtin->id, "+", partial.id()));
  EXPECT_THAT(partial.note(), HasSubstr("partial set"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> merged, r->TablesFor("", gpu));
  EXPECT_EQ(merged->id, partial.default_profile_set_id());
  EXPECT_EQ(merged->error_bands.size(), builtin->error_bands.size());
  EXPECT_EQ(merged->operators.size(), builtin->operators.size() + 1);
  // The same merged set again (made once), and for the prediction cache.
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> again, r->TablesFor("", gpu));
  EXPECT_EQ(again.get(), merged.get());
  EXPECT_EQ(r->LoadedTablesFor("", kGpu).get(), merged.get());
  // Named by id, the partial set is itself.
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> named,
                              r->TablesFor(partial.id(), gpu));
  EXPECT_TRUE(named->error_bands.empty());

  // A complete set pushed later is the default alone; the older partial set
  // is no longer laid over it, and a re-push of it changes nothing.
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse complete,
                              r->Accept(::vtrain::testing::MeasuredSet(2000), kPushed));
  EXPECT_TRUE(complete.complete());
  EXPECT_EQ(complete.default_profile_set_id(), complete.id());
  EXPECT_THAT(complete.note(), HasSubstr("now the default"));
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ProfileSet> newest, r->TablesFor("", gpu));
  EXPECT_EQ(newest->id, complete.id());

  // The list says which sets are complete.
  bool listed = false;
  const v1::ListProfileSetsResponse list = r->List({});
  for (const v1::ProfileSetSummary& s : list.profile_sets()) {
    if (s.id() == partial.id()) {
      EXPECT_FALSE(s.complete());
      listed = true;
    } else {
      EXPECT_TRUE(s.complete()) << s.id();
    }
  }
  EXPECT_TRUE(listed);
}

TEST_F(RegistryTest, ASetWithNothingToUseIsRefusedAndNotStored) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  v1::ProfileSet empty = ::vtrain::testing::PartialSet(1000);
  empty.clear_operators();
  EXPECT_THAT(r->Accept(empty, kPushed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nothing a prediction")));
  EXPECT_EQ(r->size(), 0);
}

// Whether a set is built-in is stored, not guessed from its name: a pushed
// set named like a built-in stays a measured set across reopening.
TEST_F(RegistryTest, BuiltinIsStoredNotDerivedFromTheName) {
  std::string impostor_id;
  {
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
    VTRAIN_ASSERT_OK(r->SeedBuiltinsIfEmpty());
    v1::ProfileSet impostor;
    impostor.set_name("builtin-a100-sxm4-80gb");
    impostor.set_gpu(kGpu);
    impostor.mutable_params()->set_host_dispatch_ns(55'000);
    *impostor.mutable_error_bands() =
        proto::ProfileSetToProto(DefaultProfileSet(*GpuByName(kGpu))).error_bands();
    VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse pushed,
                                r->Accept(impostor, kPushed));
    impostor_id = pushed.id();
    r->Close();
  }
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  int builtins = 0;
  const v1::ListProfileSetsResponse list = r->List({});
  for (const v1::ProfileSetSummary& s : list.profile_sets()) {
    if (s.id() == impostor_id) {
      EXPECT_FALSE(s.builtin()) << "a pushed set became built-in because of its name";
    } else {
      EXPECT_TRUE(s.builtin()) << s.name();
      ++builtins;
    }
  }
  EXPECT_EQ(builtins, static_cast<int>(GpuNames().size()));
}

TEST_F(RegistryTest, WatchCursorSeesEachArrivalAndDeletionOnceAfterItsTime) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  WatchCursor cursor;
  EXPECT_TRUE(r->WaitForChanges(cursor, absl::Milliseconds(1))->empty());
  VTRAIN_ASSERT_OK_AND_ASSIGN(const v1::PushProfileSetResponse pushed,
                              r->Accept(MeasuredSet(1000), kPushed));
  std::vector<v1::ProfileSetEvent> seen = *r->WaitForChanges(cursor, absl::Seconds(5));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].added().id(), pushed.id());
  EXPECT_TRUE(r->WaitForChanges(cursor, absl::Milliseconds(1))->empty());

  // A deletion is an event too (predictors delete their copy).
  VTRAIN_ASSERT_OK(r->Delete(pushed.id()));
  seen = *r->WaitForChanges(cursor, absl::Seconds(5));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].deleted_id(), pushed.id());
  EXPECT_TRUE(r->WaitForChanges(cursor, absl::Milliseconds(1))->empty());

  WatchCursor later{.seen_sequence = 0, .created_after_ns = INT64_MAX};
  const std::vector<v1::ProfileSetEvent> after = *r->WaitForChanges(later, absl::Milliseconds(1));
  ASSERT_EQ(after.size(), 1u) << "deletions are not filtered by creation time";
  EXPECT_EQ(after[0].deleted_id(), pushed.id());
  EXPECT_GT(later.seen_sequence, 0);
}

// Found by the soak benchmark's reading: a watcher more than the remembered
// number of deletions behind silently lost the oldest ones. It is now told to
// resynchronise.
TEST(ProfileCatalogTest, AWatcherBeyondTheRememberedDeletionsIsToldToResync) {
  ProfileCatalog catalog;
  const int n = static_cast<int>(ProfileCatalog::kRemembered) + 10;
  for (int i = 0; i < n; ++i) {
    CatalogEntry e;
    e.proto.set_id(absl::StrCat("id", i));
    catalog.Add(std::move(e));
  }
  const int64_t before = catalog.WaitForNewer(0, absl::ZeroDuration()).sequence;
  ProfileCatalog::Changes recent = catalog.WaitForNewer(before, absl::ZeroDuration());
  EXPECT_FALSE(recent.gap);
  for (int i = 0; i < n; ++i) catalog.Remove(absl::StrCat("id", i));
  ProfileCatalog::Changes behind = catalog.WaitForNewer(before, absl::ZeroDuration());
  EXPECT_TRUE(behind.gap) << "removals were forgotten without a word";
  ProfileCatalog::Changes close = catalog.WaitForNewer(behind.sequence - 5, absl::ZeroDuration());
  EXPECT_FALSE(close.gap);
  EXPECT_EQ(close.removed.size(), 5u);
}

TEST_F(RegistryTest, MissingKeysQueueAsWorkUntilASetAnswersThem) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  const std::string answered =
      proto::ProfileSetFromProto(MeasuredSet(1000))->operators.begin()->first.ToString();
  r->RecordMissing(kGpu, {answered, "other-key", "other-key"});
  v1::NextProfilingWorkRequest request;
  request.set_gpu(kGpu);
  VTRAIN_ASSERT_OK_AND_ASSIGN(v1::NextProfilingWorkResponse work, r->NextWork(request));
  ASSERT_EQ(work.work_size(), 2);
  EXPECT_EQ(work.work(0).key(), "other-key");
  EXPECT_EQ(work.work(0).requests(), 2);

  VTRAIN_ASSERT_OK(r->Accept(MeasuredSet(1000), kPushed).status());
  VTRAIN_ASSERT_OK_AND_ASSIGN(work, r->NextWork(request));
  ASSERT_EQ(work.work_size(), 1);
  EXPECT_EQ(work.work(0).key(), "other-key");

  request.set_max_items(10'001);
  EXPECT_THAT(r->NextWork(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_items")));
}

// Regression (issue 12): anyone who could call Predict could fill the
// profiling-work queue. Each client adds at most kWorkKeysPerClient new keys a
// minute, and the queue is bounded; keys already queued are still counted.
TEST_F(RegistryTest, TheWorkQueueIsBoundedPerClientAndInAll) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Registry> r, Registry::Open(DbPath(), metrics_));
  std::vector<std::string> flood;
  for (int i = 0; i < Registry::kWorkKeysPerClient + 500; ++i) {
    flood.push_back(absl::StrCat("flood-key-", i));
  }
  r->RecordMissing(kGpu, flood, "ipv4:10.0.0.1:1234");
  r->RecordMissing(kGpu, {"honest-key"}, "ipv4:10.0.0.2:999");
  r->RecordMissing(kGpu, {"flood-key-0", "flood-key-0"}, "ipv4:10.0.0.1:1234");
  v1::NextProfilingWorkRequest request;
  request.set_gpu(kGpu);
  request.set_max_items(10'000);
  VTRAIN_ASSERT_OK_AND_ASSIGN(v1::NextProfilingWorkResponse work, r->NextWork(request));
  EXPECT_EQ(work.work_size(), Registry::kWorkKeysPerClient + 1);
  bool honest = false;
  for (const v1::ProfilingWork& w : work.work()) {
    honest |= w.key() == "honest-key";
    if (w.key() == "flood-key-0") {
      EXPECT_EQ(w.requests(), 3);
    }
  }
  EXPECT_TRUE(honest) << "another client's key was crowded out";
}

std::string SourceDir() {
  if (const char* dir = std::getenv("VTRAIN_SOURCE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return VTRAIN_TEST_SOURCE_DIR;  // set by tests/CMakeLists.txt
}

// The registry is the server's logic without gRPC: no header it reaches
// through the project's own includes is a gRPC one.
TEST(RegistryBoundaryTest, ReachesNoGrpcHeader) {
  std::vector<std::string> pending = {"server/registry.h", "server/registry.cc"};
  std::set<std::string> seen(pending.begin(), pending.end());
  while (!pending.empty()) {
    const std::string file = pending.back();
    pending.pop_back();
    std::ifstream in(fs::path(SourceDir()) / file);
    ASSERT_TRUE(in) << "cannot read " << file << " under " << SourceDir();
    std::stringstream text;
    text << in.rdbuf();
    for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
      line = absl::StripLeadingAsciiWhitespace(line);
      if (!absl::ConsumePrefix(&line, "#include ")) continue;
      const std::string header(absl::StripAsciiWhitespace(line).substr(1));
      const std::string name = header.substr(0, header.size() - 1);
      EXPECT_FALSE(absl::StartsWith(name, "grpc") || absl::StrContains(name, ".grpc.pb.h"))
          << file << " includes " << name;
      const bool ours = absl::StartsWith(name, "server/") || absl::StartsWith(name, "proto/") ||
                        absl::StartsWith(name, "core/");
      if (ours && seen.insert(name).second) pending.push_back(name);
    }
  }
  EXPECT_GT(seen.size(), 5u);
}

}  // namespace
}  // namespace vtrain::server

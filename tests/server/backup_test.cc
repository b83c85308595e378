// Backups of a running deployment's profile sets and their restore into a
// running server: vtrainctl profiles export / import against vtrain-servers
// on loopback, and the restored sets surviving a restart.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/server_testing.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::set<std::string> Ids(const Server& s) {
  v1::ListProfileSetsResponse listed;
  EXPECT_TRUE(
      v1::ProfileRegistry::NewStub(ChannelTo(s))->ListProfileSets(Ctx().get(), {}, &listed).ok());
  std::set<std::string> ids;
  for (const v1::ProfileSetSummary& p : listed.profile_sets()) ids.insert(p.id());
  return ids;
}

std::string Address(const Server& s) { return absl::StrCat("127.0.0.1:", s.port()); }

TEST(BackupTest, ASetExportedFromOneRunningServerIsRestoredIntoAnother) {
  TempDir dir;
  const std::string token = dir.File("token");
  std::ofstream(token) << kToken;
  auto a = StartServer(dir.File("a.db"));
  ASSERT_NE(a, nullptr);
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(7);
  v1::PushProfileSetResponse pushed;
  ASSERT_TRUE(v1::ProfileRegistry::NewStub(ChannelTo(*a))
                  ->PushProfileSet(Ctx(kToken).get(), push, &pushed)
                  .ok());
  const std::set<std::string> before = Ids(*a);
  ASSERT_TRUE(before.count(pushed.id()));

  // An online backup: every set, read while the server serves.
  const std::string backup = dir.File("backup");
  testing::ProcessResult out = Vtrainctl({"profiles", "export", backup, "--server", Address(*a)});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr(absl::StrCat("exported ", before.size(), " profile sets")));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(backup)) files += e.path().extension() == ".json";
  EXPECT_EQ(files, before.size());

  // Restored into another running server: the measured set arrives with its
  // id; the built-in ones are already there.
  auto b = StartServer(dir.File("b.db"));
  ASSERT_NE(b, nullptr);
  ASSERT_FALSE(Ids(*b).count(pushed.id()));
  const std::vector<std::string> import = {"profiles",  "import",       backup, "--server",
                                           Address(*b), "--token-file", token};
  out = Vtrainctl(import);
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("1 stored"));
  EXPECT_EQ(Ids(*b), before);
  // Again: nothing changes.
  out = Vtrainctl(import);
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("0 stored"));

  // The restore is durable: a restarted server serves it.
  b.reset();
  b = StartServer(dir.File("b.db"));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Ids(*b), before);

  // A damaged file in the backup is named and fails the import, after the
  // other files are pushed; without the token nothing is pushed.
  std::ofstream(absl::StrCat(backup, "/zz-broken.json")) << "{ not json";
  out = Vtrainctl(import);
  EXPECT_NE(out.exit_code, 0);
  EXPECT_THAT(out.err, HasSubstr("zz-broken.json"));
  EXPECT_THAT(out.out, HasSubstr("already present"));
  out = Vtrainctl({"profiles", "import", backup, "--server", Address(*b)});
  EXPECT_NE(out.exit_code, 0);
  out = Vtrainctl({"profiles", "import", dir.File("nowhere"), "--server", Address(*b)});
  EXPECT_NE(out.exit_code, 0);
  EXPECT_THAT(out.err, HasSubstr("nowhere"));
}

}  // namespace
}  // namespace vtrain::server

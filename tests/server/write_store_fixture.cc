// Writes a registry database as this release's ProfileStore writes it, for
// the upgrade tests (tests/server/upgrade_test.cc): two pushed sets (one
// with error bands and analytical parameters, one without) and a
// profiling-work key. Run once per schema version and keep the file:
//
//   build/tests/write_store_fixture tests/server/data/store-schema-1.db
//
// Every later release must open and read the kept files (their migrations
// run in CI through the tests).
#include <cstdio>
#include <filesystem>
#include <string>

#include "google/protobuf/util/time_util.h"
#include "proto/profile_set_convert.h"
#include "server/profile_store.h"
#include "tests/testing/profile_sets.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_store_fixture FILE.db\n");
    return 2;
  }
  const std::string path = argv[1];
  if (std::filesystem::exists(path)) {
    std::fprintf(stderr, "write_store_fixture: '%s' exists; a kept fixture is never rewritten\n",
                 path.c_str());
    return 1;
  }
  auto store = vtrain::server::ProfileStore::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "write_store_fixture: %s\n",
                 std::string(store.status().message()).c_str());
    return 1;
  }
  vtrain::v1::ProfileSet sets[] = {vtrain::testing::MeasuredSet(72'000),
                                   vtrain::testing::PartialSet(81'000)};
  int64_t seconds = 1'764'547'200;  // 2025-12-01, fixed so the file is reproducible
  for (vtrain::v1::ProfileSet& set : sets) {
    set.set_id(vtrain::proto::ContentId(set));
    *set.mutable_created_at() = google::protobuf::util::TimeUtil::SecondsToTimestamp(seconds++);
    if (auto put = (*store)->Put(set, /*builtin=*/false); !put.ok()) {
      std::fprintf(stderr, "write_store_fixture: %s\n",
                   std::string(put.status().message()).c_str());
      return 1;
    }
    std::printf("%s %s\n", set.id().c_str(), set.name().c_str());
  }
  if (absl::Status s = (*store)->RecordMissing(
          {{"a100-sxm4-80gb", "a100-sxm4-80gb/fp16/mlp_fwd h=2048 f=8192 s=2048 b=1 t=2", 3}});
      !s.ok()) {
    std::fprintf(stderr, "write_store_fixture: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

// The server's lookup memos: one per profile set, least recently used
// dropped past the bound, each keeping its set alive while a call holds it.
#include "server/memo_cache.h"

#include <memory>
#include <vector>

#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"

namespace vtrain::server {
namespace {

std::shared_ptr<const ProfileSet> NewSet() {
  return std::make_shared<const ProfileSet>(DefaultProfileSet(*GpuByName("a100-sxm4-80gb")));
}

TEST(MemoCacheTest, OneMemoPerSetAndTheLeastRecentlyUsedIsDropped) {
  MemoCache cache;
  std::vector<std::shared_ptr<const ProfileSet>> sets;
  for (size_t i = 0; i <= MemoCache::kMaxSets; ++i) sets.push_back(NewSet());

  const std::shared_ptr<LookupMemo> first = cache.For(sets[0]);
  EXPECT_EQ(&first->set(), sets[0].get());
  EXPECT_EQ(cache.For(sets[0]), first);  // the same memo again
  EXPECT_NE(cache.For(sets[1]), first);
  for (size_t i = 2; i < MemoCache::kMaxSets; ++i) cache.For(sets[i]);
  EXPECT_EQ(cache.size(), MemoCache::kMaxSets);
  cache.For(sets[0]);  // now set 1 is the least recently used
  const std::shared_ptr<LookupMemo> second = cache.For(sets[1]);
  cache.For(sets[MemoCache::kMaxSets]);  // drops set 2
  EXPECT_EQ(cache.size(), MemoCache::kMaxSets);
  EXPECT_EQ(cache.For(sets[0]), first);
  EXPECT_EQ(cache.For(sets[1]), second);
}

TEST(MemoCacheTest, AHeldMemoKeepsItsSetAfterTheCallerAndTheCacheLetGo) {
  MemoCache cache;
  std::shared_ptr<const ProfileSet> set = NewSet();
  const std::weak_ptr<const ProfileSet> weak = set;
  std::shared_ptr<LookupMemo> memo = cache.For(set);
  set.reset();
  for (size_t i = 0; i < MemoCache::kMaxSets; ++i) cache.For(NewSet());  // evicts it
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(memo->set().gpu, "a100-sxm4-80gb");
  memo.reset();
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace vtrain::server

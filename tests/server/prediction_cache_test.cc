// The server's cache of Predict answers: found by request bytes and profile
// set, bounded by entries and by bytes (starting over past either), off at 0.
#include "server/prediction_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace vtrain::server {
namespace {

v1::PredictRequest Request(int64_t global_batch) {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_plan()->set_global_batch(global_batch);
  return r;
}

std::shared_ptr<const PredictionCache::Answer> Answer(int64_t ns, int keys = 1) {
  auto a = std::make_shared<PredictionCache::Answer>();
  a->response.set_iteration_time_ns(ns);
  for (int i = 0; i < keys; ++i) a->missing_keys.push_back(std::string(100, 'k'));
  a->fits = true;
  a->gpu = "a100-sxm4-80gb";
  return a;
}

TEST(PredictionCacheTest, KeyedByRequestBytesAndProfileSet) {
  PredictionCache cache(16);
  const std::string k1 = PredictionCache::Key("sha256:a", Request(64));
  cache.Put(k1, Answer(1));
  ASSERT_NE(cache.Get(k1), nullptr);
  EXPECT_EQ(cache.Get(k1)->response.iteration_time_ns(), 1);
  EXPECT_EQ(cache.Get(PredictionCache::Key("sha256:b", Request(64))), nullptr);
  EXPECT_EQ(cache.Get(PredictionCache::Key("sha256:a", Request(128))), nullptr);
  // The set id's length is part of the key: an id cannot run into the bytes.
  EXPECT_NE(PredictionCache::Key("ab", Request(64)), PredictionCache::Key("a", Request(64)));
}

TEST(PredictionCacheTest, StartsOverPastItsEntriesOrBytes) {
  PredictionCache by_entries(2);
  by_entries.Put("a", Answer(1));
  by_entries.Put("b", Answer(2));
  EXPECT_EQ(by_entries.size(), 2u);
  by_entries.Put("c", Answer(3));
  EXPECT_EQ(by_entries.size(), 1u);
  EXPECT_EQ(by_entries.Get("a"), nullptr);
  EXPECT_NE(by_entries.Get("c"), nullptr);

  PredictionCache by_bytes(1000, /*max_bytes=*/4096);
  for (int i = 0; i < 100; ++i) by_bytes.Put(std::to_string(i), Answer(i, 4));
  EXPECT_LE(by_bytes.bytes(), 4096u);
  EXPECT_GT(by_bytes.size(), 0u);
  EXPECT_NE(by_bytes.Get("99"), nullptr);
  // An answer larger than the whole bound is not kept.
  PredictionCache tiny(1000, /*max_bytes=*/64);
  tiny.Put("x", Answer(1, 4));
  EXPECT_EQ(tiny.size(), 0u);

  PredictionCache off(0);
  off.Put("a", Answer(1));
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.Get("a"), nullptr);
}

}  // namespace
}  // namespace vtrain::server

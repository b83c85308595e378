#include "client/json_writer.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace vtrain::client {
namespace {

TEST(JsonWriterTest, NestedObjectsAndArrays) {
  JsonWriter w;
  w.BeginObject();
  w.Key("a").Int(1);
  w.Key("b").BeginArray().Int(1).Int(-2).BeginObject().Key("c").Bool(true).EndObject().EndArray();
  w.Key("d").BeginObject().EndObject();
  w.Key("e").BeginArray().EndArray();
  w.Key("f").Bool(false);
  w.EndObject();
  EXPECT_EQ(w.str(), R"({"a":1,"b":[1,-2,{"c":true}],"d":{},"e":[],"f":false})");
}

TEST(JsonWriterTest, TopLevelArray) {
  JsonWriter w;
  w.BeginArray().String("x").String("y").EndArray();
  EXPECT_EQ(w.str(), R"(["x","y"])");
}

TEST(JsonWriterTest, EscapesStrings) {
  JsonWriter w;
  w.BeginObject();
  w.Key("quote\"key")
      .String(
          "back\\slash\nnew\ttab\x01"
          "end");
  w.EndObject();
  EXPECT_EQ(w.str(), R"({"quote\"key":"back\\slash\nnew\ttab\u0001end"})");
}

TEST(JsonWriterTest, Int64Extremes) {
  JsonWriter w;
  w.BeginArray()
      .Int(std::numeric_limits<int64_t>::max())
      .Int(std::numeric_limits<int64_t>::min())
      .EndArray();
  EXPECT_EQ(w.str(), "[9223372036854775807,-9223372036854775808]");
}

TEST(JsonWriterTest, DoublesRoundTripAndNonFiniteIsNull) {
  JsonWriter w;
  w.BeginArray()
      .Double(0.1)
      .Double(1e300)
      .Double(-2.5)
      .Double(std::numeric_limits<double>::infinity())
      .Double(std::numeric_limits<double>::quiet_NaN())
      .EndArray();
  const std::string& s = w.str();
  EXPECT_TRUE(absl::EndsWith(s, ",null,null]")) << s;
  // %.17g: every double reads back exactly.
  const char* p = s.c_str() + 1;
  char* end = nullptr;
  EXPECT_EQ(std::strtod(p, &end), 0.1);
  ASSERT_EQ(*end, ',');
  EXPECT_EQ(std::strtod(end + 1, &end), 1e300);
  ASSERT_EQ(*end, ',');
  EXPECT_EQ(std::strtod(end + 1, &end), -2.5);
}

}  // namespace
}  // namespace vtrain::client

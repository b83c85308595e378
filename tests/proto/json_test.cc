#include "proto/json.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/enum_convert.h"

namespace vtrain::proto {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(JsonTest, ProtoNamesEnumNamesNumbersAndZeros) {
  v1::PredictResponse r;
  r.set_iteration_time_ns(int64_t{9'007'199'254'740'993});  // 2^53 + 1: not a double
  r.set_granularity(v1::GRANULARITY_KERNEL);
  r.add_stages()->set_stage(0);
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"iteration_time_ns\": 9007199254740993,"));
  EXPECT_THAT(json, HasSubstr("\"granularity\": \"GRANULARITY_KERNEL\""));
  EXPECT_THAT(json, HasSubstr("\"iteration_time_ms\": 0,"));  // zero printed
  EXPECT_THAT(json, HasSubstr("\"compute_ms\": 0,"));         // inside a repeated message
  EXPECT_THAT(json, HasSubstr("\"profile_set_id\": \"\""));
  EXPECT_THAT(json, Not(HasSubstr("\"training\"")));         // unset sub-message: absent
  EXPECT_THAT(json, Not(HasSubstr("\"ffn_hidden_size\"")));  // ...with its fields
  EXPECT_EQ(json.back(), '\n');
  v1::PredictResponse back;
  ASSERT_TRUE(FromJson(json, &back).ok());
  EXPECT_EQ(back.iteration_time_ns(), r.iteration_time_ns());
  EXPECT_EQ(ToJson(back), json);
}

TEST(JsonTest, DoublesRoundTripAndNonFiniteValuesStayParseable) {
  v1::Interval i;
  i.set_low_ms(0.1 + 0.2);  // 0.30000000000000004: the shortest exact text
  i.set_high_ms(std::numeric_limits<double>::infinity());
  i.set_coverage(std::nan(""));
  i.set_regime("a \"quoted\"\nline\x01");
  const std::string json = ToJson(i);
  EXPECT_THAT(json, HasSubstr("\"low_ms\": 0.30000000000000004,"));
  EXPECT_THAT(json, HasSubstr("\"high_ms\": \"Infinity\""));
  EXPECT_THAT(json, HasSubstr("\"coverage\": \"NaN\""));
  EXPECT_THAT(json, HasSubstr("\"a \\\"quoted\\\"\\nline\\u0001\""));
  v1::Interval back;
  ASSERT_TRUE(FromJson(json, &back).ok()) << json;
  EXPECT_EQ(back.low_ms(), i.low_ms());
  EXPECT_TRUE(std::isinf(back.high_ms()));
  EXPECT_TRUE(std::isnan(back.coverage()));
  EXPECT_EQ(back.regime(), i.regime());
}

TEST(JsonTest, OneofMembersAndTimestamps) {
  v1::SearchResponse progress;
  progress.mutable_progress()->set_total(7);
  EXPECT_THAT(ToJson(progress), HasSubstr("\"total\": 7"));
  EXPECT_THAT(ToJson(progress), Not(HasSubstr("\"result\"")));
  v1::ProfileSetSummary s;
  s.mutable_created_at()->set_seconds(1'700'000'000);
  EXPECT_THAT(ToJson(s), HasSubstr("\"created_at\": \"2023-11-14T22:13:20Z\""));
  v1::ProfileSetSummary back;
  ASSERT_TRUE(FromJson(ToJson(s), &back).ok());
  EXPECT_EQ(back.created_at().seconds(), 1'700'000'000);
}

TEST(JsonTest, ParseErrorsNameTheMessage) {
  v1::PredictRequest r;
  absl::Status s = FromJson("{\"model\": {\"bogus\": 1}}", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("vtrain.v1.PredictRequest"));
  EXPECT_FALSE(FromJson("not json", &r).ok());
}

// Every named value of each vtrain.v1 enum maps to core and back to itself:
// a row missing from a table in enum_convert.cc fails here.
template <typename ProtoEnum>
void ExpectTableComplete() {
  const google::protobuf::EnumDescriptor& d = *google::protobuf::GetEnumDescriptor<ProtoEnum>();
  for (int i = 0; i < d.value_count(); ++i) {
    const auto value = static_cast<ProtoEnum>(d.value(i)->number());
    const auto core = FromProto(value);
    if (d.value(i)->number() == 0) {
      EXPECT_FALSE(core.has_value()) << d.value(i)->name();
      continue;
    }
    ASSERT_TRUE(core.has_value()) << d.value(i)->name() << " has no core value";
    EXPECT_EQ(ToProto(*core), value) << d.value(i)->name();
  }
  EXPECT_FALSE(FromProto(static_cast<ProtoEnum>(1000)).has_value());
}

TEST(EnumConvertTest, EveryTableIsCompleteBothWays) {
  ExpectTableComplete<v1::DType>();
  ExpectTableComplete<v1::Architecture>();
  ExpectTableComplete<v1::PipelineSchedule>();
  ExpectTableComplete<v1::Recompute>();
  ExpectTableComplete<v1::DataParallelSharding>();
  ExpectTableComplete<v1::Granularity>();
  ExpectTableComplete<v1::Fidelity>();
  ExpectTableComplete<v1::Objective>();
  ExpectTableComplete<v1::LinkScope>();
  ExpectTableComplete<v1::Collective>();
  ExpectTableComplete<v1::OperatorKind>();
  ExpectTableComplete<v1::CurvePolicy>();
  ExpectTableComplete<v1::JobMix>();
}

TEST(EnumConvertTest, UnspecifiedTakesTheDefaultAndUnknownNumbersNameTheField) {
  absl::StatusOr<Recompute> r =
      FromProtoOr(v1::RECOMPUTE_UNSPECIFIED, Recompute::kFull, "plan.recompute");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, Recompute::kFull);
  r = FromProtoOr(static_cast<v1::Recompute>(9), Recompute::kFull, "plan.recompute");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("plan.recompute=9"));
  EXPECT_THAT(r.status().message(), HasSubstr("RECOMPUTE_NONE, RECOMPUTE_FULL"));
  absl::StatusOr<OperatorKind> op =
      RequiredFromProto(v1::OPERATOR_KIND_UNSPECIFIED, "profile_set.operators[2].key.op");
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(op.status().message(), HasSubstr("operators[2].key.op is missing"));
}

}  // namespace
}  // namespace vtrain::proto

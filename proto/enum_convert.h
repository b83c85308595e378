// Every closed set the API names (dtype, schedule, recompute, granularity,
// fidelity, objective, link scope, collective, operator, curve policy, job mix) mapped between its
// core enum and its vtrain.v1 enum, each by one table (enum_convert.cc).
#ifndef VTRAIN_PROTO_ENUM_CONVERT_H_
#define VTRAIN_PROTO_ENUM_CONVERT_H_

#include <optional>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/cluster/job_mix.h"
#include "core/graph/iteration.h"
#include "core/plan/curve.h"
#include "core/plan/search.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"
#include "core/spec/job.h"
#include "google/protobuf/generated_enum_reflection.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// Core to proto: total (every core value has a proto value).
v1::DType ToProto(DType value);
v1::Architecture ToProto(Architecture value);
v1::PipelineSchedule ToProto(PipelineSchedule value);
v1::Recompute ToProto(Recompute value);
v1::DataParallelSharding ToProto(DataParallelSharding value);
v1::ContextParallelComm ToProto(ContextParallelComm value);
v1::Fp8Recipe ToProto(Fp8Recipe value);
v1::Settings ToProto(SettingsBase value);
v1::Granularity ToProto(Granularity value);
v1::Fidelity ToProto(Fidelity value);
v1::Objective ToProto(Objective value);
v1::LinkScope ToProto(LinkScope value);
v1::Collective ToProto(Collective value);
v1::OperatorKind ToProto(OperatorKind value);
v1::CurvePolicy ToProto(CurvePolicy value);
v1::MoeDispatcher ToProto(MoeDispatcher value);
v1::AttentionKind ToProto(AttentionKind value);
v1::AttentionImpl ToProto(AttentionImpl value);
v1::RouterScore ToProto(RouterScore value);
v1::Placement ToProto(Placement value);
v1::JobMix ToProto(JobMix value);

// Proto to core: nullopt for *_UNSPECIFIED and for numbers the enum does not
// define (a newer client, or a corrupt message).
std::optional<DType> FromProto(v1::DType value);
std::optional<Architecture> FromProto(v1::Architecture value);
std::optional<PipelineSchedule> FromProto(v1::PipelineSchedule value);
std::optional<Recompute> FromProto(v1::Recompute value);
std::optional<DataParallelSharding> FromProto(v1::DataParallelSharding value);
std::optional<ContextParallelComm> FromProto(v1::ContextParallelComm value);
std::optional<Fp8Recipe> FromProto(v1::Fp8Recipe value);
std::optional<SettingsBase> FromProto(v1::Settings value);
std::optional<Granularity> FromProto(v1::Granularity value);
std::optional<Fidelity> FromProto(v1::Fidelity value);
std::optional<Objective> FromProto(v1::Objective value);
std::optional<LinkScope> FromProto(v1::LinkScope value);
std::optional<Collective> FromProto(v1::Collective value);
std::optional<OperatorKind> FromProto(v1::OperatorKind value);
std::optional<CurvePolicy> FromProto(v1::CurvePolicy value);
std::optional<MoeDispatcher> FromProto(v1::MoeDispatcher value);
std::optional<AttentionKind> FromProto(v1::AttentionKind value);
std::optional<AttentionImpl> FromProto(v1::AttentionImpl value);
std::optional<RouterScore> FromProto(v1::RouterScore value);
std::optional<Placement> FromProto(v1::Placement value);
std::optional<JobMix> FromProto(v1::JobMix value);

// The names a proto enum defines other than *_UNSPECIFIED, comma-separated,
// for error messages.
std::string ProtoEnumNames(const google::protobuf::EnumDescriptor& descriptor);

// A request enum: *_UNSPECIFIED means `unspecified` (the documented default);
// an undefined number is INVALID_ARGUMENT naming `field` and the values.
template <typename ProtoEnum, typename CoreEnum>
absl::StatusOr<CoreEnum> FromProtoOr(ProtoEnum value, CoreEnum unspecified,
                                     absl::string_view field) {
  if (static_cast<int>(value) == 0) return unspecified;
  if (std::optional<CoreEnum> v = FromProto(value)) return *v;
  const google::protobuf::EnumDescriptor& d = *google::protobuf::GetEnumDescriptor<ProtoEnum>();
  return absl::InvalidArgumentError(absl::StrCat(field, "=", static_cast<int>(value), " is not a ",
                                                 d.name(), "; use one of ", ProtoEnumNames(d)));
}

// A required enum (profile-set keys): *_UNSPECIFIED is INVALID_ARGUMENT too.
template <typename ProtoEnum, typename CoreEnum = decltype(*FromProto(ProtoEnum{}))>
absl::StatusOr<std::remove_cvref_t<CoreEnum>> RequiredFromProto(ProtoEnum value,
                                                                absl::string_view field) {
  if (auto v = FromProto(value)) return *v;
  const google::protobuf::EnumDescriptor& d = *google::protobuf::GetEnumDescriptor<ProtoEnum>();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is missing or not a ", d.name(), "; use one of ", ProtoEnumNames(d)));
}

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_ENUM_CONVERT_H_

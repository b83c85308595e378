// Renders a PredictResponse for people: the job, the iteration time with its
// interval, throughput, MFU, training time and cost, memory, the per-stage
// breakdown and the fidelity of the lookups. (--json prints the message with
// proto::ToJson instead.)
#ifndef VTRAIN_CLIENT_PREDICTION_FORMAT_H_
#define VTRAIN_CLIENT_PREDICTION_FORMAT_H_

#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/graph/iteration.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"
#include "core/spec/model.h"
#include "core/spec/settings.h"
#include "proto/enum_convert.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::client {

// The table, read from the response alone (the same bytes for a local and a
// remote answer); `show_lookups` lists every profile lookup. INTERNAL when
// the response does not echo its job.
absl::StatusOr<std::string> PredictionTable(const v1::PredictResponse& response, bool show_lookups);

// The name vtrainctl prints for a response's enum value ("1f1b", "fp8",
// "selective", ...): the core name, or the proto's number when this build
// does not know it.
template <typename E>
std::string EnumName(E value) {
  auto core = proto::FromProto(value);
  if (!core) return absl::StrCat(static_cast<int>(value));
  if constexpr (std::is_same_v<E, v1::PipelineSchedule>) return std::string(ScheduleName(*core));
  if constexpr (std::is_same_v<E, v1::Recompute>) return std::string(RecomputeName(*core));
  if constexpr (std::is_same_v<E, v1::DType>) return std::string(DTypeName(*core));
  if constexpr (std::is_same_v<E, v1::DataParallelSharding>) {
    return std::string(ShardingName(*core));
  }
  if constexpr (std::is_same_v<E, v1::Architecture>) return std::string(ArchitectureName(*core));
  if constexpr (std::is_same_v<E, v1::Granularity>) return std::string(GranularityName(*core));
  if constexpr (std::is_same_v<E, v1::Fidelity>) return std::string(FidelityName(*core));
  if constexpr (std::is_same_v<E, v1::MoeDispatcher>) return std::string(DispatcherName(*core));
  if constexpr (std::is_same_v<E, v1::Placement>) return std::string(PlacementName(*core));
  if constexpr (std::is_same_v<E, v1::ContextParallelComm>) return std::string(CpCommName(*core));
  if constexpr (std::is_same_v<E, v1::Fp8Recipe>) return std::string(Fp8RecipeName(*core));
  if constexpr (std::is_same_v<E, v1::AttentionImpl>) return std::string(AttentionImplName(*core));
  if constexpr (std::is_same_v<E, v1::RouterScore>) return std::string(RouterScoreName(*core));
  if constexpr (std::is_same_v<E, v1::Settings>) return std::string(SettingsName(*core));
}

// What an answer cost, as one line: "simulated 201,600 actions (200,242 by
// periodic jumps) in 85 µs" (with the prediction count when above one).
std::string SimulationLine(const v1::Simulation& simulation);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_PREDICTION_FORMAT_H_

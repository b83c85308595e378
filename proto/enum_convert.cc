#include "proto/enum_convert.h"

#include "absl/strings/str_cat.h"

namespace vtrain::proto {
namespace {

// One row per value: the whole mapping of an enum is one table, read in both
// directions.
template <typename Core, typename Proto>
struct Row {
  Core core;
  Proto proto;
};

template <typename Core, typename Proto, size_t N>
Proto Forward(const Row<Core, Proto> (&table)[N], Core value) {
  for (const Row<Core, Proto>& row : table) {
    if (row.core == value) return row.proto;
  }
  return static_cast<Proto>(0);  // unreachable: the tables are complete
}

template <typename Core, typename Proto, size_t N>
std::optional<Core> Backward(const Row<Core, Proto> (&table)[N], Proto value) {
  for (const Row<Core, Proto>& row : table) {
    if (row.proto == value) return row.core;
  }
  return std::nullopt;
}

constexpr Row<DType, v1::DType> kDTypes[] = {
    {DType::kFp16, v1::DTYPE_FP16},
    {DType::kBf16, v1::DTYPE_BF16},
    {DType::kFp8, v1::DTYPE_FP8},
};
constexpr Row<Architecture, v1::Architecture> kArchitectures[] = {
    {Architecture::kGpt, v1::ARCHITECTURE_GPT},
    {Architecture::kLlama, v1::ARCHITECTURE_LLAMA},
};
constexpr Row<PipelineSchedule, v1::PipelineSchedule> kSchedules[] = {
    {PipelineSchedule::kGpipe, v1::PIPELINE_SCHEDULE_GPIPE},
    {PipelineSchedule::k1F1B, v1::PIPELINE_SCHEDULE_1F1B},
    {PipelineSchedule::kZbH1, v1::PIPELINE_SCHEDULE_ZB_H1},
    {PipelineSchedule::kDualPipe, v1::PIPELINE_SCHEDULE_DUALPIPE},
    {PipelineSchedule::kDualPipeV, v1::PIPELINE_SCHEDULE_DUALPIPEV},
};
constexpr Row<Recompute, v1::Recompute> kRecomputes[] = {
    {Recompute::kNone, v1::RECOMPUTE_NONE},
    {Recompute::kFull, v1::RECOMPUTE_FULL},
    {Recompute::kSelective, v1::RECOMPUTE_SELECTIVE},
};
constexpr Row<DataParallelSharding, v1::DataParallelSharding> kShardings[] = {
    {DataParallelSharding::kNone, v1::DATA_PARALLEL_SHARDING_NONE},
    {DataParallelSharding::kOptimizer, v1::DATA_PARALLEL_SHARDING_OPTIMIZER},
    {DataParallelSharding::kFull, v1::DATA_PARALLEL_SHARDING_FULL},
};
constexpr Row<Granularity, v1::Granularity> kGranularities[] = {
    {Granularity::kOperator, v1::GRANULARITY_OPERATOR},
    {Granularity::kKernel, v1::GRANULARITY_KERNEL},
};
constexpr Row<Fidelity, v1::Fidelity> kFidelities[] = {
    {Fidelity::kMeasured, v1::FIDELITY_MEASURED},
    {Fidelity::kInterpolated, v1::FIDELITY_INTERPOLATED},
    {Fidelity::kAnalytical, v1::FIDELITY_ANALYTICAL},
};
constexpr Row<Objective, v1::Objective> kObjectives[] = {
    {Objective::kTime, v1::OBJECTIVE_TIME},
    {Objective::kCost, v1::OBJECTIVE_COST},
    {Objective::kCostUnderDeadline, v1::OBJECTIVE_DEADLINE_COST},
    {Objective::kFewestGpusUnderDeadline, v1::OBJECTIVE_DEADLINE_GPUS},
};
constexpr Row<LinkScope, v1::LinkScope> kScopes[] = {
    {LinkScope::kIntraNode, v1::LINK_SCOPE_INTRA_NODE},
    {LinkScope::kInterNode, v1::LINK_SCOPE_INTER_NODE},
};
constexpr Row<Collective, v1::Collective> kCollectives[] = {
    {Collective::kAllReduce, v1::COLLECTIVE_ALL_REDUCE},
    {Collective::kAllGather, v1::COLLECTIVE_ALL_GATHER},
    {Collective::kReduceScatter, v1::COLLECTIVE_REDUCE_SCATTER},
    {Collective::kSendRecv, v1::COLLECTIVE_SEND_RECV},
    {Collective::kAllToAll, v1::COLLECTIVE_ALL_TO_ALL},
};
constexpr Row<OperatorKind, v1::OperatorKind> kOperators[] = {
    {OperatorKind::kEmbeddingFwd, v1::OPERATOR_KIND_EMBEDDING_FWD},
    {OperatorKind::kEmbeddingBwd, v1::OPERATOR_KIND_EMBEDDING_BWD},
    {OperatorKind::kAttentionFwd, v1::OPERATOR_KIND_ATTENTION_FWD},
    {OperatorKind::kAttentionBwd, v1::OPERATOR_KIND_ATTENTION_BWD},
    {OperatorKind::kMlpFwd, v1::OPERATOR_KIND_MLP_FWD},
    {OperatorKind::kMlpBwd, v1::OPERATOR_KIND_MLP_BWD},
    {OperatorKind::kLogitFwd, v1::OPERATOR_KIND_LOGIT_FWD},
    {OperatorKind::kLogitBwd, v1::OPERATOR_KIND_LOGIT_BWD},
    {OperatorKind::kLossFwd, v1::OPERATOR_KIND_LOSS_FWD},
    {OperatorKind::kLossBwd, v1::OPERATOR_KIND_LOSS_BWD},
    {OperatorKind::kOptimizerStep, v1::OPERATOR_KIND_OPTIMIZER_STEP},
    {OperatorKind::kMoeFwd, v1::OPERATOR_KIND_MOE_FWD},
    {OperatorKind::kMoeBwd, v1::OPERATOR_KIND_MOE_BWD},
};
constexpr Row<MoeDispatcher, v1::MoeDispatcher> kDispatchers[] = {
    {MoeDispatcher::kAllToAll, v1::MOE_DISPATCHER_ALLTOALL},
    {MoeDispatcher::kAllGather, v1::MOE_DISPATCHER_ALLGATHER},
    {MoeDispatcher::kFlex, v1::MOE_DISPATCHER_FLEX},
    {MoeDispatcher::kHybridEp, v1::MOE_DISPATCHER_HYBRIDEP},
};
constexpr Row<AttentionKind, v1::AttentionKind> kAttentions[] = {
    {AttentionKind::kStandard, v1::ATTENTION_KIND_STANDARD},
    {AttentionKind::kMla, v1::ATTENTION_KIND_MLA},
};
constexpr Row<AttentionImpl, v1::AttentionImpl> kAttentionImpls[] = {
    {AttentionImpl::kFlash, v1::ATTENTION_IMPL_FLASH},
    {AttentionImpl::kUnfused, v1::ATTENTION_IMPL_UNFUSED},
};
constexpr Row<Placement, v1::Placement> kPlacements[] = {
    {Placement::kPacked, v1::PLACEMENT_PACKED},
    {Placement::kSpread, v1::PLACEMENT_SPREAD},
};
constexpr Row<RouterScore, v1::RouterScore> kRouterScores[] = {
    {RouterScore::kSoftmax, v1::ROUTER_SCORE_SOFTMAX},
    {RouterScore::kSigmoid, v1::ROUTER_SCORE_SIGMOID},
};
constexpr Row<SettingsBase, v1::Settings> kSettings[] = {
    {SettingsBase::kTuned, v1::SETTINGS_TUNED},
    {SettingsBase::kMegatronDefaults, v1::SETTINGS_MEGATRON_DEFAULTS},
    {SettingsBase::kPaper, v1::SETTINGS_PAPER},
};
constexpr Row<Fp8Recipe, v1::Fp8Recipe> kFp8Recipes[] = {
    {Fp8Recipe::kDelayed, v1::FP8_RECIPE_DELAYED},
    {Fp8Recipe::kCurrent, v1::FP8_RECIPE_CURRENT},
    {Fp8Recipe::kBlockwise, v1::FP8_RECIPE_BLOCKWISE},
    {Fp8Recipe::kMxfp8, v1::FP8_RECIPE_MXFP8},
};
constexpr Row<ContextParallelComm, v1::ContextParallelComm> kCpComms[] = {
    {ContextParallelComm::kP2P, v1::CONTEXT_PARALLEL_COMM_P2P},
    {ContextParallelComm::kA2A, v1::CONTEXT_PARALLEL_COMM_A2A},
    {ContextParallelComm::kA2AP2P, v1::CONTEXT_PARALLEL_COMM_A2A_P2P},
};
constexpr Row<JobMix, v1::JobMix> kJobMixes[] = {{JobMix::kItp, v1::JOB_MIX_ITP},
                                                 {JobMix::kPaper, v1::JOB_MIX_PAPER},
                                                 {JobMix::k2026, v1::JOB_MIX_2026}};
constexpr Row<CurvePolicy, v1::CurvePolicy> kCurvePolicies[] = {
    {CurvePolicy::kBest, v1::CURVE_POLICY_BEST},
    {CurvePolicy::kDataParallel, v1::CURVE_POLICY_DATA_PARALLEL},
};
static_assert(std::size(kOperators) == kNumOperatorKinds, "every OperatorKind has a row");
static_assert(std::size(kCollectives) == kNumCollectives, "every Collective has a row");
static_assert(std::size(kFidelities) == kNumFidelities, "every Fidelity has a row");

}  // namespace

#define VTRAIN_ENUM_PAIR(Core, Proto, table)                      \
  v1::Proto ToProto(Core value) { return Forward(table, value); } \
  std::optional<Core> FromProto(v1::Proto value) { return Backward(table, value); }
VTRAIN_ENUM_PAIR(DType, DType, kDTypes)
VTRAIN_ENUM_PAIR(Architecture, Architecture, kArchitectures)
VTRAIN_ENUM_PAIR(PipelineSchedule, PipelineSchedule, kSchedules)
VTRAIN_ENUM_PAIR(Recompute, Recompute, kRecomputes)
VTRAIN_ENUM_PAIR(DataParallelSharding, DataParallelSharding, kShardings)
VTRAIN_ENUM_PAIR(ContextParallelComm, ContextParallelComm, kCpComms)
VTRAIN_ENUM_PAIR(Fp8Recipe, Fp8Recipe, kFp8Recipes)
VTRAIN_ENUM_PAIR(SettingsBase, Settings, kSettings)
VTRAIN_ENUM_PAIR(Granularity, Granularity, kGranularities)
VTRAIN_ENUM_PAIR(MoeDispatcher, MoeDispatcher, kDispatchers)
VTRAIN_ENUM_PAIR(AttentionKind, AttentionKind, kAttentions)
VTRAIN_ENUM_PAIR(AttentionImpl, AttentionImpl, kAttentionImpls)
VTRAIN_ENUM_PAIR(RouterScore, RouterScore, kRouterScores)
VTRAIN_ENUM_PAIR(Placement, Placement, kPlacements)
VTRAIN_ENUM_PAIR(Fidelity, Fidelity, kFidelities)
VTRAIN_ENUM_PAIR(Objective, Objective, kObjectives)
VTRAIN_ENUM_PAIR(LinkScope, LinkScope, kScopes)
VTRAIN_ENUM_PAIR(Collective, Collective, kCollectives)
VTRAIN_ENUM_PAIR(OperatorKind, OperatorKind, kOperators)
VTRAIN_ENUM_PAIR(JobMix, JobMix, kJobMixes)
VTRAIN_ENUM_PAIR(CurvePolicy, CurvePolicy, kCurvePolicies)
#undef VTRAIN_ENUM_PAIR

std::string ProtoEnumNames(const google::protobuf::EnumDescriptor& d) {
  std::string out;
  for (int i = 0; i < d.value_count(); ++i) {
    if (d.value(i)->number() == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", d.value(i)->name());
  }
  return out;
}

}  // namespace vtrain::proto

// The names and parsers of the plan's enums, the context-parallel group
// sizes a plan implies, and bandwidths with units (declared in job.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/spec/job.h"
#include "core/util/enum_names.h"

namespace vtrain {
namespace {

// The names users type and read (core/util/enum_names.h), in the order errors
// list them.
constexpr EnumName<MoeDispatcher> kDispatchers[] = {{MoeDispatcher::kAllToAll, "alltoall"},
                                                    {MoeDispatcher::kAllGather, "allgather"},
                                                    {MoeDispatcher::kFlex, "flex"},
                                                    {MoeDispatcher::kHybridEp, "hybridep"}};
constexpr EnumName<PipelineSchedule> kSchedules[] = {{PipelineSchedule::kGpipe, "gpipe"},
                                                     {PipelineSchedule::k1F1B, "1f1b"},
                                                     {PipelineSchedule::kZbH1, "zb-h1"},
                                                     {PipelineSchedule::kDualPipe, "dualpipe"},
                                                     {PipelineSchedule::kDualPipeV, "dualpipev"}};
constexpr EnumName<Recompute> kRecomputes[] = {
    {Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}};
constexpr EnumName<DataParallelSharding> kShardings[] = {
    {DataParallelSharding::kNone, "none"},
    {DataParallelSharding::kOptimizer, "optimizer"},
    {DataParallelSharding::kFull, "full"}};
constexpr EnumName<ContextParallelComm> kCpComms[] = {{ContextParallelComm::kP2P, "p2p"},
                                                      {ContextParallelComm::kA2A, "a2a"},
                                                      {ContextParallelComm::kA2AP2P, "a2a+p2p"}};

}  // namespace

absl::string_view DispatcherName(MoeDispatcher d) { return NameIn(kDispatchers, d); }

absl::StatusOr<MoeDispatcher> ParseDispatcher(absl::string_view name) {
  return ParseIn(kDispatchers, name, "plan.moe_dispatcher");
}

absl::string_view ScheduleName(PipelineSchedule s) { return NameIn(kSchedules, s); }

absl::StatusOr<PipelineSchedule> ParseSchedule(absl::string_view name) {
  return ParseIn(kSchedules, name, "plan.schedule");
}

bool SplitsBackward(PipelineSchedule s) {
  return s == PipelineSchedule::kZbH1 || s == PipelineSchedule::kDualPipe ||
         s == PipelineSchedule::kDualPipeV;
}

bool IsDualPipe(PipelineSchedule s) {
  return s == PipelineSchedule::kDualPipe || s == PipelineSchedule::kDualPipeV;
}

absl::string_view RecomputeName(Recompute r) { return NameIn(kRecomputes, r); }

absl::StatusOr<Recompute> ParseRecompute(absl::string_view name) {
  return ParseIn(kRecomputes, name, "plan.recompute");
}

namespace {
constexpr struct {
  RecomputeModule module;
  const char* name;
} kRecomputeModules[] = {{kRecomputeCoreAttn, "core_attn"},
                         {kRecomputeLayernorm, "layernorm"},
                         {kRecomputeMlp, "mlp"},
                         {kRecomputeMoe, "moe"},
                         {kRecomputeMoeAct, "moe_act"},
                         {kRecomputeMlaUpProj, "mla_up_proj"},
                         {kRecomputeSharedExperts, "shared_experts"}};
}  // namespace

absl::StatusOr<RecomputeModule> ParseRecomputeModule(absl::string_view name) {
  for (const auto& m : kRecomputeModules) {
    if (name == m.name) return m.module;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("plan.recompute_modules: '", name,
                   "' is unknown; use core_attn, layernorm, mlp, moe, moe_act, mla_up_proj or "
                   "shared_experts"));
}

std::vector<absl::string_view> RecomputeModuleNames(uint32_t bits) {
  std::vector<absl::string_view> names;
  for (const auto& m : kRecomputeModules) {
    if ((bits & m.module) != 0) names.push_back(m.name);
  }
  return names;
}

std::string RecomputeModulesName(uint32_t bits) {
  return absl::StrJoin(RecomputeModuleNames(bits), ",");
}

absl::string_view ShardingName(DataParallelSharding s) { return NameIn(kShardings, s); }

absl::string_view CpCommName(ContextParallelComm comm) { return NameIn(kCpComms, comm); }

absl::StatusOr<ContextParallelComm> ParseCpComm(absl::string_view name) {
  return ParseIn(kCpComms, name, "plan.cp_comm");
}

int64_t ParallelPlan::cp_a2a_ranks(int64_t nvlink_domain) const {
  const int64_t c = std::max<int64_t>(1, context_parallel);
  switch (cp_comm) {
    case ContextParallelComm::kP2P:
      return 1;
    case ContextParallelComm::kA2A:
      return c;
    case ContextParallelComm::kA2AP2P:
      break;
  }
  if (cp_a2a_size > 0) return cp_a2a_size;
  // The largest divisor of c whose all-to-all groups stay in one domain.
  const int64_t fits = std::max<int64_t>(1, nvlink_domain / std::max<int64_t>(1, tensor_parallel));
  int64_t best = 1;
  for (int64_t d = 1; d <= c && d <= fits; ++d) {
    if (c % d == 0) best = d;
  }
  return best;
}

absl::StatusOr<DataParallelSharding> ParseSharding(absl::string_view name) {
  return ParseIn(kShardings, name, "plan.data_parallel_sharding");
}

absl::StatusOr<double> ParseBandwidth(absl::string_view text, absl::string_view field) {
  struct Unit {
    const char* suffix;
    double bytes_per_s;
  };
  // Longest suffixes first so "GiB/s" is not read as "B/s".
  static constexpr Unit kUnits[] = {
      {"KiB/s", 1024.0},
      {"MiB/s", 1048576.0},
      {"GiB/s", 1073741824.0},
      {"TiB/s", 1099511627776.0},
      {"kB/s", 1e3},
      {"KB/s", 1e3},
      {"MB/s", 1e6},
      {"GB/s", 1e9},
      {"TB/s", 1e12},
      {"kb/s", 1e3 / 8},
      {"Kb/s", 1e3 / 8},
      {"Mb/s", 1e6 / 8},
      {"Gb/s", 1e9 / 8},
      {"Tb/s", 1e12 / 8},
      {"B/s", 1.0},
      {"b/s", 1.0 / 8},
  };
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  for (const Unit& u : kUnits) {
    if (!absl::EndsWith(trimmed, u.suffix)) continue;
    absl::string_view number = trimmed.substr(0, trimmed.size() - std::strlen(u.suffix));
    number = absl::StripAsciiWhitespace(number);
    double value = 0;
    if (!absl::SimpleAtod(number, &value) || !(value > 0) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "='", text, "' is not a positive number with a unit; write e.g. 150GB/s"));
    }
    // A huge number overflows to infinity in bytes, a tiny one to zero.
    const double bytes_per_s = value * u.bytes_per_s;
    if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "='", text, "' is out of range in bytes/s; write e.g. 150GB/s"));
    }
    return bytes_per_s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, "='", text, "' has no bandwidth unit; write e.g. 150GB/s (bytes) or 800Gb/s (bits)"));
}

}  // namespace vtrain

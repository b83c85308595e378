#include "core/profile/lookup.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace vtrain {
namespace {

double LogDistance(int64_t a, int64_t b) {
  if (a == b) return 0;
  if (a <= 0 || b <= 0) return std::numeric_limits<double>::infinity();
  return std::abs(std::log(static_cast<double>(a) / static_cast<double>(b)));
}

// How far apart two shapes of the same operator are: the sum of the log
// ratios of their dimensions.
double ShapeDistance(const OperatorKey& a, const OperatorKey& b) {
  return LogDistance(a.hidden, b.hidden) + LogDistance(a.heads, b.heads) +
         LogDistance(a.ffn, b.ffn) + LogDistance(a.seq, b.seq) +
         LogDistance(a.micro_batch, b.micro_batch) +
         LogDistance(a.tensor_parallel, b.tensor_parallel) + LogDistance(a.vocab, b.vocab) +
         LogDistance(a.num_parameters, b.num_parameters) + LogDistance(a.kv_heads, b.kv_heads) +
         LogDistance(a.context_parallel, b.context_parallel) +
         (a.sequence_parallel != b.sequence_parallel ? 1.0 : 0.0) +
         (a.attention_core_only != b.attention_core_only ? 1.0 : 0.0);
}

int64_t SpanOf(const std::vector<KernelRecord>& kernels) {
  OperatorProfile p;
  p.kernels = kernels;
  return p.SpanNs();
}

}  // namespace

ProfileLookup::ProfileLookup(const ProfileSet& set, const GpuSpec& gpu, LinkBandwidths links)
    : set_(set), gpu_(gpu), links_(links) {}

const OperatorProfile& ProfileLookup::Operator(const OperatorKey& key) {
  auto it = operators_.find(key);
  if (it != operators_.end()) return it->second;
  OperatorProfile resolved = Resolve(key);
  records_.push_back({key.ToString(), resolved.fidelity, resolved.fidelity != Fidelity::kMeasured});
  return operators_.emplace(key, std::move(resolved)).first->second;
}

OperatorProfile ProfileLookup::Resolve(const OperatorKey& key) const {
  if (auto exact = set_.operators.find(key); exact != set_.operators.end()) {
    OperatorProfile p = exact->second;
    p.fidelity = Fidelity::kMeasured;
    return p;
  }
  // DESIGN.md §3: the nearest measured shape of the same operator on the same
  // GPU, scaled by the analytical model's ratio between the two shapes.
  const OperatorKey* nearest = nullptr;
  const OperatorProfile* nearest_profile = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [candidate, profile] : set_.operators) {
    if (candidate.gpu != key.gpu || candidate.dtype != key.dtype || candidate.op != key.op ||
        candidate.arch != key.arch || profile.kernels.empty()) {
      continue;
    }
    const double d = ShapeDistance(candidate, key);
    if (d < best) {
      best = d;
      nearest = &candidate;
      nearest_profile = &profile;
    }
  }
  std::vector<KernelRecord> analytical = GenerateOperatorKernels(gpu_, key, set_.params);
  if (nearest == nullptr) {
    OperatorProfile p;
    p.kernels = std::move(analytical);
    p.fidelity = Fidelity::kAnalytical;
    return p;
  }
  const double here = static_cast<double>(SpanOf(analytical));
  const double there =
      static_cast<double>(SpanOf(GenerateOperatorKernels(gpu_, *nearest, set_.params)));
  const double ratio = there > 0 ? here / there : 1.0;
  OperatorProfile p = *nearest_profile;
  for (KernelRecord& k : p.kernels) {
    k.duration_ns = std::llround(static_cast<double>(k.duration_ns) * ratio);
  }
  p.fidelity = Fidelity::kInterpolated;
  return p;
}

ProfileLookup::CollectiveTime ProfileLookup::CollectiveNs(Collective collective, double bytes,
                                                          const CommGroup& group) {
  const LinkScope scope = group.nodes() > 1 ? LinkScope::kInterNode : LinkScope::kIntraNode;
  CollectiveKey key{set_.gpu, scope, collective, group.ranks};
  // Analytical latency also depends on the group's placement and NIC share.
  const std::string memo =
      absl::StrCat(key.ToString(), " bytes=", bytes, " per_node=", group.ranks_per_node,
                   " nic=", group.nic_fraction);
  if (auto it = collectives_.find(memo); it != collectives_.end()) return it->second;

  CollectiveTime result;
  const double analytical = AnalyticalCollectiveNs(collective, bytes, group, links_, set_.params);
  auto table = set_.gpu == gpu_.name ? set_.collectives.find(key) : set_.collectives.end();
  if (table == set_.collectives.end()) {
    result.latency_ns = std::llround(analytical);
    result.fidelity = Fidelity::kAnalytical;
  } else if (table->second.Covers(bytes)) {
    // Log-log interpolation between measured sizes (exact at a measured one).
    result.latency_ns = std::llround(table->second.LatencyNs(bytes));
    result.fidelity = table->second.IsPoint(bytes) ? Fidelity::kMeasured : Fidelity::kInterpolated;
  } else {
    // Outside the measured range: the nearest measured end, scaled by the
    // analytical model's ratio between the two sizes.
    const CollectiveCurve& curve = table->second;
    const double edge = bytes < curve.points().front().bytes ? curve.points().front().bytes
                                                             : curve.points().back().bytes;
    const double edge_analytical =
        AnalyticalCollectiveNs(collective, edge, group, links_, set_.params);
    result.latency_ns = std::llround(curve.LatencyNs(edge) * analytical / edge_analytical);
    result.fidelity = Fidelity::kInterpolated;
  }
  collectives_.emplace(memo, result);
  // Sizes between measured points are covered by the curve; only a missing
  // table or a size outside it is worth profiling.
  const bool missing = table == set_.collectives.end() || !table->second.Covers(bytes);
  records_.push_back({absl::StrCat(key.ToString(), " bytes=", bytes), result.fidelity, missing});
  return result;
}

std::vector<std::string> ProfileLookup::MissingKeys() const {
  std::vector<std::string> keys;
  for (const LookupRecord& r : records_) {
    if (r.missing) keys.push_back(r.key);
  }
  return keys;
}

}  // namespace vtrain

#include "core/profile/lookup.h"

#include <algorithm>
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

KernelChain ChainOf(const std::vector<KernelRecord>& kernels) {
  KernelChain c;
  // host_lead = max_j host(0..j) + duration(j..n-1), as one forward sweep:
  // lead_j = host(0..j) + duration(j..n-1) = lead_{j-1} + host_j - duration_{j-1}.
  int64_t total_duration = 0;
  for (const KernelRecord& k : kernels) total_duration += k.duration_ns;
  int64_t host = 0, before = 0;  // before: durations of kernels 0..j-1
  for (const KernelRecord& k : kernels) {
    host += k.host_ns;
    const int64_t lead = host + total_duration - before;
    c.host_lead_ns = c.count == 0 ? lead : std::max(c.host_lead_ns, lead);
    before += k.duration_ns;
    c.plain_ns += k.duration_ns + k.gap_ns;
    if (k.host_ns <= 0) c.host_known = false;
    ++c.count;
  }
  c.host_ns = host;
  c.duration_ns = total_duration;
  return c;
}

size_t LookupMemo::operators() const {
  absl::ReaderMutexLock lock(&mu_);
  return operators_.size();
}

bool LookupMemo::SameGpuLocked(const GpuSpec& gpu) const {
  for (const GpuSpec& g : gpus_) {
    if (g.name == gpu.name) return g == gpu;
  }
  return true;  // not seen yet
}

const ResolvedOperator* LookupMemo::FindOperator(const OperatorKey& key, const GpuSpec& gpu) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!SameGpuLocked(gpu)) return nullptr;
  auto it = operators_.find(key);
  return it == operators_.end() ? nullptr : &it->second;
}

const ResolvedOperator* LookupMemo::AddOperator(const OperatorKey& key, const GpuSpec& gpu,
                                                ResolvedOperator resolved) {
  absl::MutexLock lock(&mu_);
  if (!SameGpuLocked(gpu) || operators_.size() >= max_entries_) return nullptr;
  if (std::none_of(gpus_.begin(), gpus_.end(),
                   [&](const GpuSpec& g) { return g.name == gpu.name; })) {
    gpus_.push_back(gpu);
  }
  // Another thread may have added it meanwhile: equal content either way.
  return &operators_.try_emplace(key, std::move(resolved)).first->second;
}

const ResolvedCollective* LookupMemo::FindCollective(const CollectiveQuery& q) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = collectives_.find(q);
  return it == collectives_.end() ? nullptr : &it->second;
}

const ResolvedCollective* LookupMemo::AddCollective(const CollectiveQuery& q,
                                                    ResolvedCollective resolved) {
  absl::MutexLock lock(&mu_);
  if (collectives_.size() >= max_entries_) return nullptr;
  return &collectives_.try_emplace(q, std::move(resolved)).first->second;
}

ProfileLookup::ProfileLookup(const ProfileSet& set, const GpuSpec& gpu, LinkBandwidths links,
                             LookupMemo* memo)
    : set_(set),
      gpu_(gpu),
      links_(links),
      memo_(memo != nullptr && &memo->set() == &set ? memo : nullptr) {
  // A prediction resolves a few dozen keys.
  operators_.reserve(32);
  collectives_.reserve(16);
  records_.reserve(48);
}

const ResolvedOperator& ProfileLookup::Resolved(const OperatorKey& key) {
  auto it = operators_.find(key);
  if (it != operators_.end()) return *it->second;
  // The memo's entries were generated for their key's GPU.
  LookupMemo* memo = key.gpu == gpu_.name ? memo_ : nullptr;
  const ResolvedOperator* r = memo != nullptr ? memo->FindOperator(key, gpu_) : nullptr;
  if (r == nullptr) {
    ResolvedOperator fresh;
    fresh.profile = Resolve(key);
    fresh.chain = ChainOf(fresh.profile.kernels);
    fresh.key = key.ToString();
    if (memo != nullptr) r = memo->AddOperator(key, gpu_, fresh);
    if (r == nullptr) r = &owned_operators_.try_emplace(key, std::move(fresh)).first->second;
  }
  operators_.emplace(key, r);
  records_.push_back({r->key, r->profile.fidelity, r->profile.fidelity != Fidelity::kMeasured});
  return *r;
}

OperatorProfile ProfileLookup::Resolve(const OperatorKey& key) const {
  if (auto exact = set_.operators.find(key); exact != set_.operators.end()) {
    OperatorProfile p = exact->second;
    p.fidelity = Fidelity::kMeasured;
    return p;
  }
  // INTERPOLATED (docs/architecture.md#profiles-and-fidelity): the nearest measured
  // shape of the same operator on the same GPU, scaled by the analytical model's
  // ratio between the two shapes.
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
  // Analytical latency also depends on the group's placement, NIC share and
  // use, and on the links.
  const CollectiveQuery q{gpu_.name,
                          collective,
                          bytes,
                          group.ranks,
                          group.ranks_per_node,
                          group.nic_fraction,
                          group.use,
                          group.spine_slowdown,
                          links_.intra_node_bytes_per_s,
                          links_.inter_node_bytes_per_s};
  if (auto it = collectives_.find(q); it != collectives_.end()) {
    return {it->second->latency_ns, it->second->fidelity};
  }
  const ResolvedCollective* r = memo_ != nullptr ? memo_->FindCollective(q) : nullptr;
  if (r == nullptr) {
    ResolvedCollective fresh = ResolveCollective(collective, bytes, group);
    if (memo_ != nullptr) r = memo_->AddCollective(q, fresh);
    if (r == nullptr) r = &owned_collectives_.try_emplace(q, std::move(fresh)).first->second;
  }
  collectives_.emplace(q, r);
  records_.push_back({r->key, r->fidelity, r->missing});
  return {r->latency_ns, r->fidelity};
}

ResolvedCollective ProfileLookup::ResolveCollective(Collective collective, double bytes,
                                                    const CommGroup& group) const {
  const LinkScope scope = group.nodes() > 1 ? LinkScope::kInterNode : LinkScope::kIntraNode;
  CollectiveKey key{set_.gpu, scope, collective, group.ranks};
  ResolvedCollective result;
  const double analytical = AnalyticalCollectiveNs(collective, bytes, group, links_, set_.params);
  // Measured curves come from a flat fabric: a measurement at `size` is
  // scaled by the analytical model's ratio from the flat group there to this
  // group at `bytes` (another size, an oversubscribed spine, or both).
  CommGroup flat = group;
  flat.spine_slowdown = 1;
  auto FromMeasured = [&](double measured_ns, double size) {
    if (size == bytes && group.spine_slowdown == 1) return measured_ns;
    return measured_ns * analytical /
           AnalyticalCollectiveNs(collective, size, flat, links_, set_.params);
  };
  auto table = set_.gpu == gpu_.name ? set_.collectives.find(key) : set_.collectives.end();
  if (table == set_.collectives.end()) {
    result.latency_ns = std::llround(analytical);
    result.fidelity = Fidelity::kAnalytical;
  } else if (table->second.Covers(bytes)) {
    // Log-log interpolation between measured sizes (exact at a measured one).
    result.latency_ns = std::llround(FromMeasured(table->second.LatencyNs(bytes), bytes));
    result.fidelity = table->second.IsPoint(bytes) && group.spine_slowdown == 1
                          ? Fidelity::kMeasured
                          : Fidelity::kInterpolated;
  } else {
    // Outside the measured range: the nearest measured end, scaled.
    const CollectiveCurve& curve = table->second;
    const double edge = bytes < curve.points().front().bytes ? curve.points().front().bytes
                                                             : curve.points().back().bytes;
    result.latency_ns = std::llround(FromMeasured(curve.LatencyNs(edge), edge));
    result.fidelity = Fidelity::kInterpolated;
  }
  // Sizes between measured points are covered by the curve; only a missing
  // table or a size outside it is worth profiling.
  result.missing = table == set_.collectives.end() || !table->second.Covers(bytes);
  result.key = absl::StrCat(key.ToString(), " bytes=", bytes);
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

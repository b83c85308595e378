#include "profiler_agent/importers.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/nccl_tests.h"
#include "core/profile/default_profiles.h"

namespace vtrain::agent {
namespace {

// Splits a CSV line, keeping quoted fields (which may contain commas) whole.
std::vector<std::string> SplitCsv(absl::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// CUPTI timestamps count ns from an epoch (about 2^61 now); a kernel's
// duration and the gap after it are bounded as in a pushed profile set.
constexpr int64_t kMaxTimestampNs = int64_t{1} << 62;
constexpr int64_t kMaxDurationNs = int64_t{1} << 40;

struct Kernel {
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  std::string name;
};

}  // namespace

std::optional<int64_t> InferNcclRanks(absl::string_view text, absl::string_view file_name) {
  int64_t rank_lines = 0, n_gpus = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "#")) continue;
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // "#  Rank  0 Group  0 Pid 1234 on host device  0 [0x07] NVIDIA A100-SXM4-80GB"
    if (words.size() >= 2 && words[0] == "Rank") {
      int64_t r = 0;
      if (absl::SimpleAtoi(words[1], &r)) ++rank_lines;
    }
    // "# nThread 1 nGpus 8 minBytes 8 maxBytes ..."
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      int64_t n = 0;
      if (words[i] == "nGpus" && absl::SimpleAtoi(words[i + 1], &n)) n_gpus = n;
    }
  }
  if (rank_lines >= 2) return rank_lines;
  if (n_gpus >= 2) return n_gpus;
  // allreduce_8gpu.txt
  const size_t gpu = file_name.rfind("gpu");
  if (gpu != absl::string_view::npos) {
    size_t begin = gpu;
    while (begin > 0 && absl::ascii_isdigit(static_cast<unsigned char>(file_name[begin - 1])))
      --begin;
    int64_t n = 0;
    if (begin < gpu && absl::SimpleAtoi(file_name.substr(begin, gpu - begin), &n) && n >= 2)
      return n;
  }
  return std::nullopt;
}

absl::StatusOr<ProfileSet> ImportNcclTests(absl::string_view text, absl::string_view source,
                                           const std::string& gpu, int64_t ranks, LinkScope scope,
                                           Collective collective) {
  if (!GpuByName(gpu).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu '", gpu, "' is unknown"));
  }
  if (ranks < 2) return absl::InvalidArgumentError("--ranks must be at least 2");
  absl::StatusOr<CollectiveCurve> curve = common::ParseNcclTests(text, source);
  if (!curve.ok()) return curve.status();
  ProfileSet set;
  set.name = absl::StrCat("nccl-tests ", source);
  set.gpu = gpu;
  set.params = DefaultAnalyticalParams();
  set.provenance =
      absl::StrCat("imported from nccl-tests output ", source, ": ", CollectiveName(collective),
                   " over ", ranks, " ranks (", LinkScopeName(scope), ")");
  set.collectives.insert_or_assign(CollectiveKey{gpu, scope, collective, ranks}, *std::move(curve));
  return set;
}

namespace {

// Pass 1 of a vTrain trace: marker sections on the host timeline, the time
// each correlation id was issued, and the kernels; then each kernel goes to
// the section its launch was issued in. Errors name the line.
absl::StatusOr<std::map<std::string, std::vector<Kernel>>> KernelsBySection(
    absl::string_view text, absl::string_view source) {
  struct Marker {
    int64_t time_ns;
    std::string section;  // "forward transformer"; empty for an end
  };
  std::vector<Marker> markers;
  absl::flat_hash_map<int64_t, int64_t> issued_at;  // correlation id -> host time
  std::vector<std::pair<int64_t, Kernel>> kernels;  // correlation id, kernel
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    const absl::string_view line = absl::StripTrailingAsciiWhitespace(lines[n]);
    if (line.empty()) continue;
    const std::vector<std::string> f = SplitCsv(line);
    int64_t start = 0, duration = 0, corr = 0;
    if (f.size() < 3 || !absl::SimpleAtoi(f[0], &start) || !absl::SimpleAtoi(f[1], &duration)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", n + 1, ": expected start_ns,duration_ns,TYPE,..."));
    }
    if (start < 0 || start > kMaxTimestampNs || duration < 0 || duration > kMaxDurationNs) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", n + 1, ": start_ns=", start,
                       " must be in [0, 2^62] and duration_ns=", duration, " in [0, 2^40]"));
    }
    const std::string& type = f[2];
    if (type == "TIMESTAMP") {
      const std::vector<std::string> words = absl::StrSplit(f.back(), ' ');
      if (words.size() != 3 || (words[1] != "start" && words[1] != "end")) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", n + 1, ": bad marker '", f.back(), "'"));
      }
      markers.push_back({start, words[1] == "start" ? absl::StrCat(words[0], " ", words[2]) : ""});
    } else if (type == "RUNTIME" || type == "DRIVER") {
      if (!absl::SimpleAtoi(f.back(), &corr)) {
        return absl::InvalidArgumentError(absl::StrCat(source, ":", n + 1, ": no correlation id"));
      }
      issued_at.emplace(corr, start);
    } else if (type == "KERNEL") {
      if (f.size() < 5 || !absl::SimpleAtoi(f.back(), &corr)) {
        return absl::InvalidArgumentError(absl::StrCat(source, ":", n + 1, ": bad KERNEL line"));
      }
      kernels.push_back({corr, Kernel{start, duration, f[3]}});
    }
  }
  std::sort(markers.begin(), markers.end(),
            [](const Marker& a, const Marker& b) { return a.time_ns < b.time_ns; });
  auto section_of = [&](int64_t host_ns) -> std::string {
    std::string current;
    for (const Marker& m : markers) {
      if (m.time_ns > host_ns) break;
      current = m.section;
    }
    return current;
  };
  std::map<std::string, std::vector<Kernel>> sections;
  for (const auto& [corr, k] : kernels) {
    auto it = issued_at.find(corr);
    if (it == issued_at.end()) continue;
    const std::string s = section_of(it->second);
    if (!s.empty()) sections[s].push_back(k);
  }
  return sections;
}

}  // namespace

absl::StatusOr<ProfileSet> ImportVtrainTrace(absl::string_view text, absl::string_view source,
                                             const std::string& gpu, const TraceShape& shape) {
  if (!GpuByName(gpu).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu '", gpu, "' is unknown"));
  }
  if (shape.hidden <= 0 || shape.heads <= 0 || shape.seq <= 0 || shape.micro_batch <= 0 ||
      shape.tensor_parallel <= 0) {
    return absl::InvalidArgumentError(
        "the trace's shape is needed: --hidden, --heads, --seq-len, --micro-batch, --tp");
  }
  absl::StatusOr<std::map<std::string, std::vector<Kernel>>> parsed =
      KernelsBySection(text, source);
  if (!parsed.ok()) return parsed.status();
  std::map<std::string, std::vector<Kernel>>& sections = *parsed;
  // The first gap too long for a profile set, if any (the bounds above keep
  // the arithmetic in range).
  absl::Status gap_error;
  auto records = [&](std::vector<Kernel> ks) {
    std::sort(ks.begin(), ks.end(),
              [](const Kernel& a, const Kernel& b) { return a.start_ns < b.start_ns; });
    std::vector<KernelRecord> out;
    for (size_t i = 0; i < ks.size(); ++i) {
      const int64_t gap =
          i + 1 < ks.size()
              ? std::max<int64_t>(0, ks[i + 1].start_ns - ks[i].start_ns - ks[i].duration_ns)
              : 0;
      if (gap > kMaxDurationNs && gap_error.ok()) {
        gap_error = absl::InvalidArgumentError(absl::StrCat(
            source, ": kernel '", ks[i + 1].name, "' starts ", gap, " ns after kernel '",
            ks[i].name, "' of its section ends, more than 2^40 ns; is the trace one iteration?"));
      }
      out.push_back({ks[i].name, ks[i].duration_ns, gap, 0});
    }
    return out;
  };
  ProfileSet set;
  set.name = absl::StrCat("vtrain-trace ", source);
  set.gpu = gpu;
  set.params = DefaultAnalyticalParams();
  set.provenance = absl::StrCat("imported from the vTrain CUPTI trace ", source);
  const int64_t ffn = shape.ffn > 0 ? shape.ffn : 4 * shape.hidden;
  auto add = [&](OperatorKind op, std::vector<KernelRecord> ks) {
    if (ks.empty()) return;
    OperatorProfile p;
    p.kernels = std::move(ks);
    p.fidelity = Fidelity::kMeasured;
    set.operators.emplace(
        MakeOperatorKey(gpu, shape.dtype, op, shape.hidden, shape.heads, ffn, shape.seq,
                        shape.micro_batch, shape.tensor_parallel, shape.vocab, 0),
        std::move(p));
  };
  auto concat = [&](const char* a, const char* b) {
    std::vector<Kernel> ks = sections[a];
    const std::vector<Kernel>& more = sections[b];
    ks.insert(ks.end(), more.begin(), more.end());
    return ks;
  };
  const std::vector<KernelRecord> placeholder = {{"merged_into_attention", 0, 0, 0}};
  add(OperatorKind::kEmbeddingFwd, records(sections["forward embeddings"]));
  add(OperatorKind::kEmbeddingBwd, records(sections["backward embeddings"]));
  if (!sections["forward transformer"].empty()) {
    add(OperatorKind::kAttentionFwd, records(sections["forward transformer"]));
    add(OperatorKind::kMlpFwd, placeholder);
  }
  if (!sections["backward transformer"].empty()) {
    add(OperatorKind::kAttentionBwd, records(sections["backward transformer"]));
    add(OperatorKind::kMlpBwd, placeholder);
  }
  add(OperatorKind::kLogitFwd, records(concat("forward layernorm", "forward logit")));
  add(OperatorKind::kLogitBwd, records(concat("backward logit", "backward layernorm")));
  add(OperatorKind::kLossFwd, records(sections["forward loss"]));
  if (!gap_error.ok()) return gap_error;
  if (set.operators.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": no kernel could be attributed to a marker section; is it a vTrain trace?"));
  }
  return set;
}

}  // namespace vtrain::agent

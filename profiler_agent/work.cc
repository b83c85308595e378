#include "profiler_agent/work.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/profile/profile.h"

namespace vtrain::agent {
namespace {

// Layer runs are shared by keys with equal (dtype, arch, hidden, seq, b, t).
using LayerGroup = std::tuple<DType, Architecture, int64_t, int64_t, int64_t, int64_t>;

struct LayerWork {
  std::vector<std::pair<int64_t, int64_t>> heads;  // distinct (heads, kv_heads) asked for
  std::vector<int64_t> ffn, vocab;                 // distinct values the keys ask for
  std::vector<std::string> keys;
};

template <class V>
void AddDistinct(std::vector<V>& v, const V& x) {
  for (const V& y : v) {
    if (y == x) return;
  }
  v.push_back(x);
}

// Heads for a key that does not fix them: a head size of 128 when that
// divides evenly and suits t, else t heads.
int64_t DefaultHeads(int64_t hidden, int64_t t) {
  if (hidden % 128 == 0 && (hidden / 128) % t == 0) return hidden / 128;
  return t;
}

struct NcclWork {
  std::set<std::string> collectives;
  std::vector<std::string> keys;
  double max_bytes = 0;
};

// Sorts the keys of a work list into layer, optimizer and NCCL groups, then
// turns each group into vtrain-agent-gpu runs.
class WorkSorter {
 public:
  WorkSorter(const std::string& gpu, int local_gpus) : gpu_(gpu), local_gpus_(local_gpus) {}

  void Add(const std::string& text) {
    const std::vector<absl::string_view> path = absl::StrSplit(text, absl::MaxSplits('/', 2));
    if (path.size() == 3 && (path[1] == "intra_node" || path[1] == "inter_node")) {
      AddCollective(text, path);
    } else {
      AddOperator(text);
    }
  }

  WorkPlan Finish() {
    for (const auto& [group, w] : layers_) AddLayerRuns(group, w);
    for (const auto& [dtype_params, keys] : optimizer_) {
      // A small layer (h 1024, 8 heads, s 128) carries the Adam step.
      plan_.runs.push_back(
          {{"profile", "--hidden", "1024", "--heads", "8", "--seq-len", "128", "--micro-batch", "1",
            "--tp", "1", "--dtype", std::string(DTypeName(dtype_params.first)), "--adam-params",
            absl::StrCat(dtype_params.second), "--gpu", gpu_},
           keys});
    }
    for (const auto& [ranks, w] : nccl_) AddNcclRun(ranks, w);
    return std::move(plan_);
  }

 private:
  void Skip(const std::string& text, absl::string_view why) {
    plan_.skipped.push_back(absl::StrCat(text, ": ", why));
  }

  // "GPU/intra_node/all_reduce ranks=8 [bytes=1.3e+09]": the size a prediction needed.
  void AddCollective(const std::string& text, const std::vector<absl::string_view>& path) {
    if (path[0] != gpu_) return Skip(text, absl::StrCat("measured on ", path[0], ", not ", gpu_));
    const std::vector<absl::string_view> words = absl::StrSplit(path[2], ' ');
    int64_t ranks = 0;
    double bytes = 0;
    absl::string_view ranks_text = words.size() >= 2 ? words[1] : "";
    absl::string_view bytes_text = words.size() == 3 ? words[2] : "bytes=0";
    if (words.size() < 2 || words.size() > 3 || !absl::ConsumePrefix(&ranks_text, "ranks=") ||
        !absl::SimpleAtoi(ranks_text, &ranks) || ranks < 2 ||
        !absl::ConsumePrefix(&bytes_text, "bytes=") || !absl::SimpleAtod(bytes_text, &bytes) ||
        !ParseCollective(words[0]).ok()) {
      return Skip(text, "not a collective key");
    }
    if (path[1] == "inter_node") {
      return Skip(text,
                  "spans nodes; run nccl-tests across nodes and `vtrain-agent import nccl-tests`");
    }
    if (ranks > local_gpus_) {
      return Skip(text, absl::StrCat("needs ", ranks, " GPUs; this node has ", local_gpus_));
    }
    NcclWork& w = nccl_[ranks];
    w.collectives.insert(std::string(words[0]));
    w.keys.push_back(text);
    w.max_bytes = std::max(w.max_bytes, bytes);
  }

  void AddOperator(const std::string& text) {
    absl::StatusOr<OperatorKey> key = ParseOperatorKey(text);
    if (!key.ok()) return Skip(text, key.status().message());
    if (key->gpu != gpu_) return Skip(text, absl::StrCat("measured on ", key->gpu, ", not ", gpu_));
    if (key->op == OperatorKind::kOptimizerStep) {
      optimizer_[{key->dtype, key->num_parameters}].push_back(text);
      return;
    }
    // The agent's layers run one attention core per architecture (GPT the
    // paper's unfused one, Llama FlashAttention): measuring the other would
    // store it under a key it does not answer.
    if (key->NonDefaultAttention()) {
      return Skip(text, absl::StrCat("the agent's ", ArchitectureName(key->arch), " layer runs ",
                                     AttentionImplName(DefaultAttentionImpl(key->arch)),
                                     " attention, not ", AttentionImplName(key->attention_impl),
                                     "; predictions keep the analytical model for it"));
    }
    // The agent's fp8 layers scale as its workload does (delayed scaling):
    // another recipe's kernels would be stored under a key they do not answer.
    if (key->fp8_recipe != Fp8Recipe::kDelayed) {
      return Skip(text, absl::StrCat("the agent's fp8 layers use delayed scaling, not ",
                                     Fp8RecipeName(key->fp8_recipe),
                                     "; predictions keep the analytical model for it"));
    }
    // Loss keys carry no architecture (core's MakeOperatorKey): they ride
    // with a GPT run of their shape, which runs the same kernels.
    const Architecture arch = key->arch;
    LayerWork& w =
        layers_[{key->dtype, arch, key->hidden, key->seq, key->micro_batch, key->tensor_parallel}];
    if (key->heads > 0) {
      AddDistinct(
          w.heads,
          std::pair<int64_t, int64_t>{
              key->heads, arch == Architecture::kLlama && key->kv_heads > 0 ? key->kv_heads : 0});
    }
    if (key->ffn > 0) AddDistinct(w.ffn, key->ffn);
    if (key->vocab > 0) AddDistinct(w.vocab, key->vocab);
    w.keys.push_back(text);
  }

  // One run per distinct heads/ffn/vocab value a group's keys ask for.
  void AddLayerRuns(const LayerGroup& group, const LayerWork& w) {
    const auto [dtype, arch, hidden, seq, b, t] = group;
    const size_t runs = std::max({w.heads.size(), w.ffn.size(), w.vocab.size(), size_t{1}});
    for (size_t i = 0; i < runs; ++i) {
      ProfilingRun run;
      const int64_t heads = i < w.heads.size() ? w.heads[i].first : DefaultHeads(hidden, t);
      const int64_t kv_heads =
          i < w.heads.size() && w.heads[i].second > 0 ? w.heads[i].second : heads;
      const int64_t ffn = i < w.ffn.size() ? w.ffn[i] : 4 * hidden;
      const int64_t vocab = i < w.vocab.size() ? w.vocab[i] : 50257;
      run.args = {"profile",
                  "--hidden",
                  absl::StrCat(hidden),
                  "--heads",
                  absl::StrCat(heads),
                  "--ffn",
                  absl::StrCat(ffn),
                  "--seq-len",
                  absl::StrCat(seq),
                  "--micro-batch",
                  absl::StrCat(b),
                  "--tp",
                  absl::StrCat(t),
                  "--vocab",
                  absl::StrCat(vocab),
                  "--dtype",
                  std::string(DTypeName(dtype)),
                  "--gpu",
                  gpu_};
      if (arch == Architecture::kLlama) {
        run.args.insert(run.args.end(), {"--arch", "llama", "--kv-heads", absl::StrCat(kv_heads)});
      }
      if (i == 0) run.keys = w.keys;
      // One pending optimizer key of the same dtype rides along.
      for (auto it = optimizer_.begin(); it != optimizer_.end(); ++it) {
        if (it->first.first == dtype) {
          run.args.push_back("--adam-params");
          run.args.push_back(absl::StrCat(it->first.second));
          run.keys.insert(run.keys.end(), it->second.begin(), it->second.end());
          optimizer_.erase(it);
          break;
        }
      }
      plan_.runs.push_back(std::move(run));
    }
  }

  void AddNcclRun(int64_t ranks, const NcclWork& w) {
    std::string list;
    for (const std::string& name : w.collectives) {
      absl::StrAppend(&list, list.empty() ? "" : ",", name);
    }
    // Sizes doubling from 1 KiB to at least 1 GiB and the largest size asked
    // for (at most 8 GiB, the sweep's limit).
    int64_t max_bytes = int64_t{1} << 30;
    while (max_bytes < w.max_bytes && max_bytes < (int64_t{8} << 30)) max_bytes *= 2;
    plan_.runs.push_back(
        {{"nccl", "--min-gpus", absl::StrCat(ranks), "--max-gpus", absl::StrCat(ranks),
          "--max-bytes", absl::StrCat(max_bytes), "--collectives", list, "--gpu", gpu_},
         w.keys});
  }

  const std::string gpu_;
  const int local_gpus_;
  WorkPlan plan_;
  std::map<LayerGroup, LayerWork> layers_;
  std::map<std::pair<DType, int64_t>, std::vector<std::string>> optimizer_;  // params -> keys
  std::map<int64_t, NcclWork> nccl_;                                         // by rank count
};

}  // namespace

WorkPlan PlanProfilingWork(const std::vector<std::string>& keys, const std::string& gpu,
                           int local_gpus) {
  WorkSorter sorter(gpu, local_gpus);
  for (const std::string& text : keys) sorter.Add(text);
  return sorter.Finish();
}

}  // namespace vtrain::agent

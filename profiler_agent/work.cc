#include "profiler_agent/work.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/profile/profile.h"

namespace vtrain::agent {
namespace {

// Layer runs are shared by keys with equal (dtype, hidden, seq, b, t).
using LayerGroup = std::tuple<DType, int64_t, int64_t, int64_t, int64_t>;

struct LayerWork {
  std::vector<int64_t> heads, ffn, vocab;  // distinct values the keys ask for
  std::vector<std::string> keys;
};

void AddDistinct(std::vector<int64_t>& v, int64_t x) {
  for (int64_t y : v) {
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

}  // namespace

WorkPlan PlanProfilingWork(const std::vector<std::string>& keys, const std::string& gpu,
                           int local_gpus) {
  WorkPlan plan;
  std::map<LayerGroup, LayerWork> layers;
  std::map<std::pair<DType, int64_t>, std::vector<std::string>> optimizer;  // params -> keys
  struct NcclWork {
    std::set<std::string> collectives;
    std::vector<std::string> keys;
    double max_bytes = 0;
  };
  std::map<int64_t, NcclWork> nccl;  // by rank count
  for (const std::string& text : keys) {
    const std::vector<absl::string_view> path = absl::StrSplit(text, absl::MaxSplits('/', 2));
    if (path.size() == 3 && (path[1] == "intra_node" || path[1] == "inter_node")) {
      if (path[0] != gpu) {
        plan.skipped.push_back(absl::StrCat(text, ": measured on ", path[0], ", not ", gpu));
        continue;
      }
      // "all_reduce ranks=8 [bytes=1.3e+09]": the size a prediction needed.
      const std::vector<absl::string_view> words = absl::StrSplit(path[2], ' ');
      int64_t ranks = 0;
      double bytes = 0;
      absl::string_view ranks_text = words.size() >= 2 ? words[1] : "";
      absl::string_view bytes_text = words.size() == 3 ? words[2] : "bytes=0";
      if (words.size() < 2 || words.size() > 3 || !absl::ConsumePrefix(&ranks_text, "ranks=") ||
          !absl::SimpleAtoi(ranks_text, &ranks) || ranks < 2 ||
          !absl::ConsumePrefix(&bytes_text, "bytes=") || !absl::SimpleAtod(bytes_text, &bytes) ||
          !ParseCollective(words[0]).ok()) {
        plan.skipped.push_back(absl::StrCat(text, ": not a collective key"));
      } else if (path[1] == "inter_node") {
        plan.skipped.push_back(absl::StrCat(
            text,
            ": spans nodes; run nccl-tests across nodes and `vtrain-agent import nccl-tests`"));
      } else if (ranks > local_gpus) {
        plan.skipped.push_back(
            absl::StrCat(text, ": needs ", ranks, " GPUs; this node has ", local_gpus));
      } else {
        NcclWork& w = nccl[ranks];
        w.collectives.insert(std::string(words[0]));
        w.keys.push_back(text);
        w.max_bytes = std::max(w.max_bytes, bytes);
      }
      continue;
    }
    absl::StatusOr<OperatorKey> key = ParseOperatorKey(text);
    if (!key.ok()) {
      plan.skipped.push_back(absl::StrCat(text, ": ", key.status().message()));
      continue;
    }
    if (key->gpu != gpu) {
      plan.skipped.push_back(absl::StrCat(text, ": measured on ", key->gpu, ", not ", gpu));
      continue;
    }
    if (key->op == OperatorKind::kOptimizerStep) {
      optimizer[{key->dtype, key->num_parameters}].push_back(text);
      continue;
    }
    LayerWork& w =
        layers[{key->dtype, key->hidden, key->seq, key->micro_batch, key->tensor_parallel}];
    if (key->heads > 0) AddDistinct(w.heads, key->heads);
    if (key->ffn > 0) AddDistinct(w.ffn, key->ffn);
    if (key->vocab > 0) AddDistinct(w.vocab, key->vocab);
    w.keys.push_back(text);
  }

  for (auto& [group, w] : layers) {
    const auto [dtype, hidden, seq, b, t] = group;
    const size_t runs = std::max({w.heads.size(), w.ffn.size(), w.vocab.size(), size_t{1}});
    for (size_t i = 0; i < runs; ++i) {
      ProfilingRun run;
      const int64_t heads = i < w.heads.size() ? w.heads[i] : DefaultHeads(hidden, t);
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
                  gpu};
      if (i == 0) run.keys = w.keys;
      // One pending optimizer key of the same dtype rides along.
      for (auto it = optimizer.begin(); it != optimizer.end(); ++it) {
        if (it->first.first == dtype) {
          run.args.push_back("--adam-params");
          run.args.push_back(absl::StrCat(it->first.second));
          run.keys.insert(run.keys.end(), it->second.begin(), it->second.end());
          optimizer.erase(it);
          break;
        }
      }
      plan.runs.push_back(std::move(run));
    }
  }
  for (const auto& [dtype_params, ks] : optimizer) {
    // A small layer (h 1024, 8 heads, s 128) carries the Adam step.
    plan.runs.push_back(
        {{"profile", "--hidden", "1024", "--heads", "8", "--seq-len", "128", "--micro-batch", "1",
          "--tp", "1", "--dtype", std::string(DTypeName(dtype_params.first)), "--adam-params",
          absl::StrCat(dtype_params.second), "--gpu", gpu},
         ks});
  }
  for (const auto& [ranks, w] : nccl) {
    std::string list;
    for (const std::string& name : w.collectives)
      absl::StrAppend(&list, list.empty() ? "" : ",", name);
    // Sizes doubling from 1 KiB to at least 1 GiB and the largest size asked
    // for (at most 8 GiB, the sweep's limit).
    int64_t max_bytes = int64_t{1} << 30;
    while (max_bytes < w.max_bytes && max_bytes < (int64_t{8} << 30)) max_bytes *= 2;
    plan.runs.push_back(
        {{"nccl", "--min-gpus", absl::StrCat(ranks), "--max-gpus", absl::StrCat(ranks),
          "--max-bytes", absl::StrCat(max_bytes), "--collectives", list, "--gpu", gpu},
         w.keys});
  }
  return plan;
}

}  // namespace vtrain::agent

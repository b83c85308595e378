#include "proto/megatron_args.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/job_convert.h"
#include "proto/megatron_mapper.h"
#include "proto/shell_words.h"

namespace vtrain::proto {
namespace {

using internal::MegatronArg;

// The arguments after the script: "--name v v2" and "--name=v".
std::vector<MegatronArg> SplitArgs(const std::vector<std::string>& words, int line) {
  std::vector<MegatronArg> args;
  for (const std::string& w : words) {
    const bool option = absl::StartsWith(w, "--") && w.size() > 2;
    if (option) {
      MegatronArg a;
      a.line = line;
      const size_t eq = w.find('=');
      a.name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) a.values.push_back(w.substr(eq + 1));
      args.push_back(std::move(a));
    } else if (!args.empty()) {
      // Quote removal does not happen twice: "'99,1,0'" keeps its quotes.
      args.back().values.push_back(w);
    }
  }
  return args;
}

// The launcher's options before the script: the world size.
void WorldSize(const std::vector<std::string>& before, const ShellScript& script,
               MegatronJob& job) {
  std::optional<int64_t> per_node, nodes;
  for (size_t i = 0; i < before.size(); ++i) {
    std::string w = before[i];
    std::string value;
    const size_t eq = w.find('=');
    if (eq != std::string::npos) {
      value = w.substr(eq + 1);
      w = w.substr(0, eq);
    } else if (i + 1 < before.size()) {
      value = before[i + 1];
    }
    int64_t v = 0;
    if ((w == "--nproc_per_node" || w == "--nproc-per-node") && absl::SimpleAtoi(value, &v)) {
      per_node = v;
    }
    if (w == "--nnodes" && absl::SimpleAtoi(value, &v)) nodes = v;
  }
  auto var = [&](const char* name) -> std::optional<int64_t> {
    auto it = script.variables.find(name);
    int64_t v = 0;
    if (it != script.variables.end() && absl::SimpleAtoi(it->second, &v)) return v;
    return std::nullopt;
  };
  if (!per_node) per_node = var("GPUS_PER_NODE");
  if (!nodes) nodes = var("NUM_NODES");
  if (!nodes) nodes = var("NNODES");
  v1::ClusterSpec& c = *job.request.mutable_cluster();
  if (per_node && nodes && *per_node > 0 && *nodes > 0) {
    c.set_num_gpus(*per_node * *nodes);
    c.set_gpus_per_node(*per_node);
  } else if (std::optional<int64_t> world = var("WORLD_SIZE"); world && *world > 0) {
    c.set_num_gpus(*world);
  } else {
    job.notes.push_back("the world size is not in the launch: give --gpus (or --dp)");
  }
}

}  // namespace

absl::StatusOr<v1::PredictRequest> LayOver(MegatronJob job, const v1::PredictRequest& over) {
  for (const MegatronJob::Missing& m : job.missing) {
    const bool given = (m.flag == "vocab" && over.model().has_vocab_size()) ||
                       (m.flag == "seq-len" && over.model().has_seq_len()) ||
                       (m.flag == "global-batch" && over.plan().has_global_batch());
    if (!given) return absl::InvalidArgumentError(m.message);
  }
  v1::PredictRequest r = std::move(job.request);
  LayRequestOver(over, r);
  r.clear_megatron_args();
  r.clear_megatron_bridge_config();
  return r;
}

absl::StatusOr<MegatronJob> RequestFromMegatronArgs(absl::string_view text,
                                                    absl::string_view name) {
  absl::StatusOr<ShellScript> script = ReadShell(text, name);
  if (!script.ok()) return script.status();
  MegatronJob job;
  job.notes = script->notes;
  // The launch: the first command that runs a Python script with Megatron's
  // arguments after it; else every line that is an argument list.
  std::vector<std::string> words;
  int line = 0;
  bool launched = false;
  for (const ShellCommand& c : script->commands) {
    for (size_t i = 0; i < c.words.size(); ++i) {
      if (!absl::EndsWith(c.words[i], ".py")) continue;
      const bool args_follow =
          std::any_of(c.words.begin() + static_cast<long>(i) + 1, c.words.end(),
                      [](const std::string& w) { return absl::StartsWith(w, "--"); });
      if (!args_follow) continue;
      std::vector<std::string> before(c.words.begin(), c.words.begin() + static_cast<long>(i));
      WorldSize(before, *script, job);
      words.assign(c.words.begin() + static_cast<long>(i) + 1, c.words.end());
      line = c.line;
      launched = true;
      break;
    }
    if (launched) break;
  }
  if (!launched) {
    for (const ShellCommand& c : script->commands) {
      if (c.words.empty() || !absl::StartsWith(c.words.front(), "--")) continue;
      if (line == 0) line = c.line;
      words.insert(words.end(), c.words.begin(), c.words.end());
    }
    if (words.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name,
          ": no launch found: neither a command running a Python script with Megatron "
          "arguments (torchrun ... pretrain_gpt.py --num-layers ...) nor an argument list"));
    }
    // A bare list may still say its world size in variables.
    WorldSize({}, *script, job);
  }
  internal::MegatronMapper mapper(name, job);
  absl::Status s = mapper.Map(SplitArgs(words, line));
  if (!s.ok()) return s;
  std::sort(job.ignored.begin(), job.ignored.end());
  return job;
}

}  // namespace vtrain::proto

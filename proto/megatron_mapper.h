// Internal to proto/megatron_args.cc and its two siblings: the mapping of
// Megatron-LM arguments onto a request, split by concern
// (megatron_arguments.cc: each argument; megatron_finish.cc: what follows
// from all of them, and the tables of ignored arguments).
#ifndef VTRAIN_PROTO_MEGATRON_MAPPER_H_
#define VTRAIN_PROTO_MEGATRON_MAPPER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "proto/megatron_args.h"

namespace vtrain::proto::internal {

// One argument as Megatron's argparse would see it (the last occurrence
// wins): its values (the words up to the next option) and its line.
struct MegatronArg {
  std::string name;  // without the leading "--"
  std::vector<std::string> values;
  int line = 0;
  std::string path;  // the config field it came from ("model.num_layers"), if any
};

// Why an argument does not change the step time ("" when it may), and why
// one that does is only noted (what is predicted instead; "" otherwise).
absl::string_view IgnoredWhy(absl::string_view name);
absl::string_view ApproximatedWhy(absl::string_view name);

// Megatron's --moe-layer-freq list expression ("[0]*3+[1]*58") as 0/1 from
// e[i]; `i` ends past what was read.
absl::StatusOr<std::vector<int>> LayerPattern(absl::string_view e, size_t& i, int depth);

class MegatronMapper {
 public:
  MegatronMapper(absl::string_view name, MegatronJob& job) : name_(name), job_(job) {}
  // Maps every argument onto job.request; INVALID_ARGUMENT listing each one
  // refused.
  absl::Status Map(const std::vector<MegatronArg>& args);

 private:
  std::string Where(const MegatronArg& a) const {
    return absl::StrCat(name_, a.line > 0 ? absl::StrCat(":", a.line) : "", ": ",
                        a.path.empty() ? "" : absl::StrCat(a.path, " (as "), "--", a.name,
                        a.path.empty() ? "" : ")");
  }
  absl::Status Bad(const MegatronArg& a, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(a), " ", what));
  }
  absl::StatusOr<int64_t> Int(const MegatronArg& a, int64_t lo = 0) const {
    int64_t v = 0;
    if (a.values.size() != 1 || !absl::SimpleAtoi(a.values[0], &v) || v < lo) {
      return Bad(a, absl::StrCat("takes one integer of at least ", lo, ", got '",
                                 absl::StrJoin(a.values, " "), "'"));
    }
    return v;
  }
  absl::StatusOr<std::string> Text(const MegatronArg& a) const {
    if (a.values.size() != 1) return Bad(a, "takes one value");
    return a.values[0];
  }
  absl::Status Flag(const MegatronArg& a) const {
    if (!a.values.empty()) {
      return Bad(a, absl::StrCat("is a switch; '", absl::StrJoin(a.values, " "),
                                 "' after it is not an argument"));
    }
    return absl::OkStatus();
  }

  // Sets `set` from the integer value of `a`.
  template <typename F>
  absl::Status SetInt(const MegatronArg& a, F set, int64_t lo = 1) {
    absl::StatusOr<int64_t> v = Int(a, lo);
    if (!v.ok()) return v.status();
    set(*v);
    return absl::OkStatus();
  }

  // Each group of arguments; nullopt for an argument not of the group.
  std::optional<absl::Status> ModelArg(const MegatronArg& a);
  std::optional<absl::Status> PlanArg(const MegatronArg& a);
  std::optional<absl::Status> MemoryArg(const MegatronArg& a);
  std::optional<absl::Status> MoeArg(const MegatronArg& a);
  std::optional<absl::Status> PrecisionArg(const MegatronArg& a);
  absl::Status One(const MegatronArg& a);
  // What follows from all the arguments: the model's, then the plan's.
  void FinishModel(std::vector<std::string>& problems);
  void FinishOptimizer();
  absl::Status Finish();
  absl::Status LayerFreq(int64_t layers, v1::MoeSpec& moe);

  absl::string_view name_;
  MegatronJob& job_;
  bool merge_file_ = false, precision_aware_ = false;
  std::string exp_avg_ = "fp32", exp_avg_sq_ = "fp32", main_grads_ = "fp32";
  bool grads_fp32_ = false, grads_bf16_ = false, hybridep_ = false;
  bool gqa_ = false, swiglu_ = false, fsdp_ = false, bf16_ = false, fp16_ = false, fp8_ = false,
       forced_balance_ = false;
  std::optional<int64_t> query_groups_, kv_channels_, qk_head_dim_, layers_per_virtual_stage_,
      recompute_layers_;
  int64_t experts_ = 0;
  std::string tokenizer_, layer_freq_, granularity_, method_, fsdp_strategy_;
  std::vector<std::string> modules_;
  std::optional<MegatronArg> layer_freq_arg_, method_arg_, fsdp_strategy_arg_;
};

}  // namespace vtrain::proto::internal

#endif  // VTRAIN_PROTO_MEGATRON_MAPPER_H_

// A plan search as vtrain.v1 messages: the request as a core search space and
// options (defaults filled in, every violation reported), and the result as a
// SearchResult whose plans say themselves whether they are the best or on the
// frontier (clients never match plans back by value).
#ifndef VTRAIN_PROTO_SEARCH_CONVERT_H_
#define VTRAIN_PROTO_SEARCH_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/search.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::convert {

// Longest list a request may give for tensor_parallel, schedules or
// recomputes (after removing repeats).
inline constexpr int kMaxSearchListSize = 64;

// The plan-space lists of a request (tensor-parallel degrees, schedules,
// recomputation), shared by searches, curves and model planning: repeats
// removed, at most kMaxSearchListSize tensor-parallel degrees, every bad value
// reported in `problems` naming the field. An empty list keeps `lists`' value
// (the caller's default).
struct PlanLists {
  std::vector<int64_t> tensor_parallel;
  std::vector<PipelineSchedule> schedules = {PipelineSchedule::k1F1B};
  std::vector<Recompute> recomputes = {Recompute::kFull};
};
void PlanListsFromProto(const google::protobuf::RepeatedField<int64_t>& tensor_parallel,
                        const google::protobuf::RepeatedField<int>& schedules,
                        const google::protobuf::RepeatedField<int>& recomputes, PlanLists& lists,
                        std::vector<std::string>& problems);

// The training-option lists of a request (context_parallel_values,
// virtual_stages_values, sequence_parallel_values, shardings): repeats
// removed, an empty list keeps the default; each bad value is a problem
// naming the field.
void TrainingSpaceFromProto(const google::protobuf::RepeatedField<int64_t>& context_parallel,
                            const google::protobuf::RepeatedField<int64_t>& virtual_stages,
                            const google::protobuf::RepeatedField<bool>& sequence_parallel,
                            const google::protobuf::RepeatedField<int>& shardings,
                            TrainingOptionSpace& space, std::vector<std::string>& problems);

struct SearchCall {
  SearchSpace space;
  SearchOptions
      options;   // objective and deadline; threads, progress and cancellation are the caller's
  int top = 10;  // fastest plans to return
  bool include_all_plans = false;
};

// INVALID_ARGUMENT listing every violation, each naming the field and the fix.
absl::StatusOr<SearchCall> SearchFromProto(const v1::SearchRequest& request);

// The result as a message: best, frontier, the `call.top` fastest and, with
// call.include_all_plans, every plan that fits.
void SearchResultToProto(const SearchResult& result, const SearchCall& call, v1::SearchResult* out);

}  // namespace vtrain::convert

#endif  // VTRAIN_PROTO_SEARCH_CONVERT_H_

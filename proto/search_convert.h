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
#include "proto/job_convert.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// Longest list a request may give for tensor_parallel, schedules or
// recomputes (after removing repeats).
inline constexpr int kMaxSearchListSize = 64;

// A request's PlanSpace into `space`: repeats removed, at most
// kMaxSearchListSize values per list, every bad value reported in `problems`
// naming the field ("space.tensor_parallel value 3000 (--tp-values) must
// be in [1, 1024]"). An empty list keeps `space`'s value (the caller's
// default). Shared by searches, curves and model planning.
void PlanSpaceFromProto(const v1::PlanSpace& in, PlanSpace& space,
                        std::vector<std::string>& problems);
// Which settings of `in` were given (the others come from in.settings);
// `dtype`: the request's dtype field, `model`: its model's attention kernel.
GivenSpace GivenSpaceOf(const v1::PlanSpace& in, v1::DType dtype, const v1::ModelSpec& model);

struct SearchCall {
  SearchSpace space;
  SearchOptions
      options;   // objective and deadline; threads, progress and cancellation are the caller's
  int top = 10;  // fastest plans to return
  bool include_all_plans = false;
};

// INVALID_ARGUMENT listing every violation, each naming the field and the fix.
absl::StatusOr<SearchCall> SearchFromProto(const v1::SearchRequest& request,
                                           GpuLookup gpus = GpuByName);

// The result as a message: best, frontier, the `call.top` fastest and, with
// call.include_all_plans, every plan that fits.
void SearchResultToProto(const SearchResult& result, const SearchCall& call, v1::SearchResult* out);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_SEARCH_CONVERT_H_

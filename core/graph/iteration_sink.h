// The IterationSink concept: where the iteration walker (walker.h) puts the
// tasks it generates (the graph builder stores them, the streaming simulator
// runs them).
#ifndef VTRAIN_CORE_GRAPH_ITERATION_SINK_H_
#define VTRAIN_CORE_GRAPH_ITERATION_SINK_H_

#include <concepts>
#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "core/graph/task_graph.h"

namespace vtrain {

// Where the walker puts tasks. Add returns a Handle that the task's children
// receive as parents; None() is the handle of no task (IsSet is false). The
// sink decides what Stopped() means (the caller's cancellation).
// A sink with kMergesSends also takes, through AddOne, a pass that was
// merged into one task together with the pipeline send after it (no gap, at
// most one parent; `tail_ns`: the send's part of the duration).
// (clang-format 14 mangles requires-expressions.)
// clang-format off
template <typename S>
concept IterationSink =
    requires(S& sink, const S& const_sink, const std::string& name, StreamId stream, int64_t ns,
             TaskKind kind, int32_t label, absl::Span<const typename S::Handle> parents) {
      { S::None() } -> std::same_as<typename S::Handle>;
      { S::IsSet(S::None()) } -> std::same_as<bool>;
      { S::kMergesSends } -> std::convertible_to<bool>;
      { sink.AddStream(name) } -> std::same_as<StreamId>;
      { sink.Label(name) } -> std::same_as<int32_t>;
      sink.Reserve(ns, ns);
      { sink.Add(stream, ns, ns, kind, label, parents) } -> std::same_as<typename S::Handle>;
      { const_sink.Stopped() } -> std::same_as<bool>;
      { const_sink.num_tasks() } -> std::same_as<int64_t>;
    } &&
    (!S::kMergesSends ||
     requires(S& sink, StreamId stream, int64_t ns, TaskKind kind,
              const typename S::Handle* parent) {
       { sink.AddOne(stream, ns, kind, parent, ns) } -> std::same_as<typename S::Handle>;
     });
// clang-format on

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_ITERATION_SINK_H_

// A job's iteration graph at kernel granularity on the built-in profiles of
// its GPU, for tests and benchmarks of the graph and the engine.
#ifndef VTRAIN_TESTS_TESTING_KERNEL_GRAPH_H_
#define VTRAIN_TESTS_TESTING_KERNEL_GRAPH_H_

#include "core/graph/builder.h"
#include "core/spec/job.h"

namespace vtrain::testing {

// Builds the graph with the cluster's bandwidths; aborts if the build fails.
IterationGraph BuildKernelGraph(const Job& job);

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_KERNEL_GRAPH_H_

// Jobs sharing a leaf/spine fabric's uplinks in the cluster study: each job
// placed on more than one leaf sends part of its traffic up through its
// leaves' uplinks, and on an oversubscribed fabric every other job crossing
// the same uplinks slows it. SharedSpineTimes turns the placements and each
// job's two throughput figures (alone, and with a leaf's uplinks already
// full) into the iteration times they run at together.
#ifndef VTRAIN_CORE_CLUSTER_SPINE_SHARE_H_
#define VTRAIN_CORE_CLUSTER_SPINE_SHARE_H_

#include <vector>

#include "core/cluster/leaf_map.h"

namespace vtrain {

struct SpineJob {
  std::vector<LeafMap::Slice> slices;  // its nodes' leaves
  double alone_s = 0;                  // iteration time, nobody else on its uplinks
  // The same with `background` nodes' worth of other jobs' traffic on the
  // uplinks of every leaf it crosses (>= alone_s).
  double contended_s = 0;
};

// The iteration time of each job with the others' traffic. The model is the
// collective model's (SpineLoad, core/spec/fabric.h): a leaf's uplinks carry
// K / R nodes' worth of NIC bandwidth, shared fairly, so past saturation a
// job's iteration grows linearly with the other traffic b on its busiest
// leaf: T(b) = alone + (contended - alone) * b / background. With background
// = K / R, contended - alone is X, the time its cross-leaf bytes take at its
// NICs' rate, so on average each of its nodes puts X / T(b) nodes' worth on
// its leaf's uplinks. A job's b is the largest such sum of the other jobs
// over the leaves it spans. The times and the demands depend on each other:
// rounds from the jobs alone settle them. Jobs on one leaf neither send nor
// feel anything; background <= 0 leaves every job alone.
std::vector<double> SharedSpineTimes(const std::vector<SpineJob>& jobs, double background);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_SPINE_SHARE_H_

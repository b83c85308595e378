// The operator names of the GPU half: core/profile/profile.h's OperatorKind
// names, repeated because this part builds without abseil or core (a GPU node
// may have nothing but the CUDA Toolkit). A test keeps the two lists equal.
#ifndef VTRAIN_PROFILER_AGENT_GPU_OPERATOR_NAMES_H_
#define VTRAIN_PROFILER_AGENT_GPU_OPERATOR_NAMES_H_

namespace vtrain::gpu {

inline constexpr int kNumOperators = 11;

// In core's OperatorKind order (OperatorKindName(OperatorKind(i))).
inline constexpr const char* kOperatorNames[kNumOperators] = {
    "embedding_fwd", "embedding_bwd", "attention_fwd", "attention_bwd", "mlp_fwd",       "mlp_bwd",
    "logit_fwd",     "logit_bwd",     "loss_fwd",      "loss_bwd",      "optimizer_step"};

// The same names in the order one training step runs them, which is the
// order a workload runs its operators in: forward through the layer, loss,
// backward, then the optimizer step.
inline constexpr const char* kOperatorsInStepOrder[kNumOperators] = {
    "embedding_fwd", "attention_fwd", "mlp_fwd",       "logit_fwd",     "loss_fwd",      "loss_bwd",
    "logit_bwd",     "mlp_bwd",       "attention_bwd", "embedding_bwd", "optimizer_step"};

// The operators of an MoE shape's workload (moe_plan.h), core's kMoeFwd and
// kMoeBwd: the dense lists above plus these are core's whole list.
inline constexpr int kNumMoeOperators = 2;
inline constexpr const char* kMoeOperatorNames[kNumMoeOperators] = {"moe_fwd", "moe_bwd"};

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_OPERATOR_NAMES_H_

// The split of the backward pass into input and weight gradients for the
// schedules that run them apart (pass_templates.h).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/graph/pass_templates.h"
#include "core/spec/model.h"

namespace vtrain::internal {

double AttentionWeightShare(const ModelSpec& model) {
  // By FLOPs per token: a linear layer's backward is a data-gradient and a
  // weight-gradient GEMM of equal FLOPs; the attention core has no weights,
  // and its backward takes about 2.5 times its forward's FLOPs
  // (FlashAttention-2's five matmuls to two; causal halves both).
  const double linear = 2 * AttentionParameterCount(model);
  const double core = 2 * static_cast<double>(model.seq_len) *
                      static_cast<double>(model.num_heads * model.head_width());
  return linear / (2 * linear + 2.5 * core);
}

void SplitWeightGradient(StageTemplates& s, double weight_ns, int32_t input_label,
                         int32_t weight_label) {
  double compute = 0;
  for (const Segment& seg : s.backward.segments) {
    for (const Item& i : seg.items) {
      if (i.kind == TaskKind::kCompute) compute += static_cast<double>(i.duration_ns);
    }
  }
  // W is at most the pass's compute (a profile may price operators apart).
  const double keep = compute > 0 ? 1 - std::clamp(weight_ns, 0.0, compute) / compute : 1;
  s.input_grad = s.backward;
  int64_t moved = 0;
  for (Segment& seg : s.input_grad.segments) {
    for (Item& i : seg.items) {
      if (i.kind != TaskKind::kCompute) continue;
      const int64_t before = i.duration_ns;
      i.duration_ns = std::llround(static_cast<double>(i.duration_ns) * keep);
      if (s.backward.NumItems() == 1) i.label = input_label;  // a merged pass
      moved += before - i.duration_ns;
    }
  }
  // W: one task holding exactly what B gave up, so B + W is the backward.
  s.weight_grad = ActionTemplate{};
  s.weight_grad.segments.push_back(
      Segment{{Item{moved, 0, weight_label, TaskKind::kCompute, 0}}, 0});
}

}  // namespace vtrain::internal

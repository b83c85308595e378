#include "proto/presets_convert.h"

#include <string>

#include "core/spec/gpu.h"
#include "core/spec/model.h"
#include "proto/profile_set_convert.h"

namespace vtrain::proto {

v1::PresetsResponse PresetsToProto() {
  v1::PresetsResponse out;
  for (const std::string& name : ModelPresetNames()) {
    const ModelSpec m = *ModelPreset(name);
    v1::ModelPreset* p = out.add_models();
    p->set_name(name);
    p->set_arch(std::string(ArchitectureName(m.arch)));
    p->set_parameters(ModelParameterCount(m));
    p->set_active_parameters(ActiveParameterCount(m));
    p->set_num_layers(m.num_layers);
    p->set_hidden_size(m.hidden_size);
    p->set_num_heads(m.num_heads);
    p->set_num_kv_heads(m.kv_heads());
    p->set_ffn_hidden_size(m.ffn());
    p->set_seq_len(m.seq_len);
    p->set_vocab_size(m.vocab_size);
    p->set_attention(std::string(AttentionName(m.attention)));
    p->set_num_experts(m.moe.num_experts);
    p->set_top_k(m.moe.top_k);
    p->set_shared_experts(m.moe.shared_experts);
  }
  for (const std::string& name : GpuNames()) {
    const GpuSpec g = *GpuByName(name);
    v1::GpuModel* p = out.add_gpus();
    p->set_name(name);
    DatasheetToProto(g, p->mutable_datasheet());
    p->set_mx_block_scaling(g.mx_block_scaling);
    p->set_calibration(g.calibration);
  }
  return out;
}

}  // namespace vtrain::proto

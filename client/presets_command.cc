// vtrainctl presets: the model presets and GPU models, of this build
// (--local, the default) or of a server's (--server, Simulator.Presets).
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "common/connection.h"
#include "common/flag_parser.h"
#include "proto/json.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

constexpr char kPresetsHelp[] =
    "usage: vtrainctl presets [--json] [--server HOST:PORT]\n\n"
    "Lists the model presets (with parameter counts; MoE models with their active parameters)\n"
    "and the GPU models (with their datasheet figures, data/gpus/*.json) of this build, or with\n"
    "--server those of a server's build (Simulator.Presets).\n\n"
    "examples:\n  vtrainctl presets\n  vtrainctl presets --json\n"
    "  vtrainctl presets --server 127.0.0.1:50051\n\nflags:\n";

absl::StatusOr<v1::PresetsResponse> PresetsRemotely(const common::FlagParser& flags) {
  VTRAIN_ASSIGN_OR_RETURN(common::Connection c, common::Connect(flags));
  v1::PresetsResponse resp;
  grpc::Status s =
      v1::Simulator::NewStub(c.channel)->Presets(c.Context().get(), v1::PresetsRequest(), &resp);
  if (!s.ok()) return common::FromGrpc(s);
  return resp;
}

std::string PresetsTable(const v1::PresetsResponse& presets) {
  std::string out = "models:\n";
  for (const v1::ModelPreset& m : presets.models()) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-15s %-5s %3d layers, hidden %5d, %3d heads (%3d kv), ffn "
                              "%5d, vocab %6d, seq %d, %.2fB parameters",
                              m.name(), m.arch(), m.num_layers(), m.hidden_size(), m.num_heads(),
                              m.num_kv_heads(), m.ffn_hidden_size(), m.vocab_size(), m.seq_len(),
                              m.parameters() / 1e9));
    if (m.num_experts() > 0) {
      absl::StrAppend(&out, absl::StrFormat(" (%.2fB active: %d experts, top-%d%s%s)",
                                            m.active_parameters() / 1e9, m.num_experts(), m.top_k(),
                                            m.shared_experts() > 0 ? ", shared" : "",
                                            m.attention() == "mla" ? ", MLA" : ""));
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "gpus:\n");
  for (const v1::GpuModel& g : presets.gpus()) {
    const v1::GpuDatasheet& d = g.datasheet();
    absl::StrAppend(
        &out, absl::StrFormat("  %-15s %6.1f TFLOP/s fp16, %6.1f bf16, %6.1f fp8, %5.0f GB/s HBM, "
                              "%5.1f GiB\n",
                              g.name(), d.peak_fp16_flops_per_s() / 1e12,
                              d.peak_bf16_flops_per_s() / 1e12, d.peak_fp8_flops_per_s() / 1e12,
                              d.hbm_bandwidth_bytes_per_s() / 1e9,
                              static_cast<double>(d.memory_bytes()) / (1 << 30)));
  }
  return out;
}

}  // namespace

int RunPresets(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl presets");
  flags.AddSwitch("json", "print the vtrain.v1.PresetsResponse as JSON");
  common::AddLocalOrServerFlags(flags, "list this build's presets (the default without --server)");
  flags.AddSwitch("help", "show this help");
  if (std::optional<int> done = ParseCommandLine(flags, args, "presets", kPresetsHelp, out, err)) {
    return *done;
  }
  if (absl::Status s = common::CheckLocalOrServer(flags); !s.ok()) return Fail(err, "presets", s);
  absl::StatusOr<v1::PresetsResponse> presets =
      flags.Has("server") ? PresetsRemotely(flags) : service::Presets(v1::PresetsRequest());
  if (!presets.ok()) return Fail(err, "presets", presets.status());
  out << (flags.Switch("json") ? proto::ToJson(*presets) : PresetsTable(*presets));
  return common::kExitOk;
}

}  // namespace vtrain::client

// vtrain-agent-gpu: the GPU half of the profiler agent. Profiles one layer
// shape's operators with CUPTI and sweeps NCCL collectives on this node,
// writing profile-set JSON files; needs only the CUDA Toolkit.
#include <cuda_runtime.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "profiler_agent/gpu/checks.h"
#include "profiler_agent/gpu/cupti_recorder.h"
#include "profiler_agent/gpu/device_info.h"
#include "profiler_agent/gpu/layer_profiler.h"
#include "profiler_agent/gpu/nccl_sweep.h"
#include "profiler_agent/gpu/profile_json.h"
#include "profiler_agent/gpu/selftest.h"

namespace vtrain::gpu {
namespace {

constexpr int kExitOk = 0, kExitFailure = 1, kExitBadInput = 2;

constexpr char kUsage[] =
    "vtrain-agent-gpu: measure profile tables on this GPU node (CUPTI, cuBLASLt, NCCL)\n\n"
    "usage:\n"
    "  vtrain-agent-gpu info\n"
    "  vtrain-agent-gpu profile --hidden H --heads A --seq-len S --micro-batch B [--tp T]\n"
    "        [--ffn F] [--vocab V] [--dtype fp16|bf16|fp8] [--arch gpt|llama] [--kv-heads K]\n"
    "        [--adam-params N] [--experts E --moe-top-k K [--ep N]] [--warmup N]\n"
    "        [--repetitions N] [--device I] [--gpu NAME] [--check] [--trace-out RAW.txt]\n"
    "        -o OUT.json       (--experts: one MoE block, moe_fwd/moe_bwd; --ffn is an expert's)\n"
    "  vtrain-agent-gpu reduce RAW.txt --gpu NAME --hidden H --heads A --seq-len S\n"
    "        --micro-batch B [--tp T] [--ffn F] [--vocab V] [--dtype D] [--arch A]\n"
    "        [--kv-heads K] [--adam-params N] [--experts E --moe-top-k K [--ep N]]\n"
    "        [--check] -o OUT.json      (no GPU needed: a kept recording, reduced again)\n"
    "  vtrain-agent-gpu nccl [--min-gpus N] [--max-gpus N] [--min-bytes B] [--max-bytes B]\n"
    "        [--collectives all_reduce,all_gather,reduce_scatter,send_recv,all_to_all]\n"
    "        [--iterations N]\n"
    "        [--gpu NAME] -o OUT.json\n"
    "  vtrain-agent-gpu nccl --check [--gpus N]\n"
    "  vtrain-agent-gpu selftest [--device I]   (our Llama/fp8/MoE kernels against CPU "
    "references)\n\n"
    "exit codes: 0 ok, 1 no usable GPU or a failed measurement or check, 2 bad input\n";

// --name value / --name=value flags; every flag must be known. (The rest of
// vtrain uses client/flag_parser.h, which needs abseil; this binary builds
// with the CUDA Toolkit alone.)
class Flags {
 public:
  Flags(const std::vector<std::string>& args, const std::vector<std::string>& valued,
        const std::vector<std::string>& switches) {
    for (size_t i = 0; i < args.size(); ++i) {
      std::string a = args[i];
      if (a == "-o") a = "--o";
      if (a.rfind("--", 0) != 0) {
        error_ = "unexpected argument '" + a + "'";
        return;
      }
      std::string name = a.substr(2), value;
      const size_t eq = name.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (Contains(switches, name) && !inline_value) {
        values_[name] = "true";
      } else if (Contains(valued, name)) {
        if (!inline_value) {
          if (i + 1 >= args.size()) {
            error_ = "--" + name + " needs a value";
            return;
          }
          value = args[++i];
        }
        values_[name] = value;
      } else {
        error_ = "unknown flag --" + name;
        return;
      }
    }
  }
  const std::string& error() const { return error_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  // A non-negative integer with an optional KiB/MiB/GiB suffix; "" on
  // success, else the message naming the flag.
  std::string Int(const std::string& name, int64_t* out) const {
    auto it = values_.find(name);
    if (it == values_.end()) return "";
    std::string v = it->second;
    int64_t scale = 1;
    for (auto [suffix, s] : {std::pair<const char*, int64_t>{"KiB", 1 << 10},
                             {"MiB", 1 << 20},
                             {"GiB", int64_t{1} << 30}}) {
      const std::string suf = suffix;
      if (v.size() > suf.size() && v.compare(v.size() - suf.size(), suf.size(), suf) == 0) {
        v.resize(v.size() - suf.size());
        scale = s;
      }
    }
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 0 || n > (int64_t{1} << 40) / scale) {
      return "--" + name + "='" + it->second +
             "' must be a non-negative integer (KiB/MiB/GiB allowed)";
    }
    *out = n * scale;
    return "";
  }

 private:
  static bool Contains(const std::vector<std::string>& v, const std::string& s) {
    for (const std::string& x : v) {
      if (x == s) return true;
    }
    return false;
  }
  std::map<std::string, std::string> values_;
  std::string error_;
};

int BadInput(const char* command, const std::string& message) {
  std::cerr << "vtrain-agent-gpu " << command << ": " << message << "\n";
  return kExitBadInput;
}
int Failure(const char* command, const std::string& message) {
  std::cerr << "vtrain-agent-gpu " << command << ": " << message << "\n";
  return kExitFailure;
}

bool WriteText(const std::string& path, const std::string& text, std::string* error) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

// The GPU's vtrain name: --gpu, else derived from the device name.
std::string GpuName(const Flags& flags, const DeviceInfo& info, std::string* error) {
  if (flags.Has("gpu")) return flags.Get("gpu");
  std::string name = VtrainGpuName(info.name, info.memory_bytes);
  if (name.empty()) {
    *error = "'" + info.name +
             "' is not a GPU vtrain models; pass --gpu NAME (a100-sxm4-40gb, a100-sxm4-80gb, "
             "h100-sxm5-80gb, h200-sxm-141gb, v100-sxm2-32gb) to label the tables";
  }
  return name;
}

int RunInfo() {
  DeviceInfo info;
  const std::string e = QueryDevice(0, &info);
  std::cout << "host " << info.host << "\ncuda runtime " << info.cuda << "\ndriver " << info.driver
            << "\nnccl " << NcclVersion() << "\n";
  if (!e.empty()) return Failure("info", e);
  std::cout << "gpus " << info.device_count << "\ngpu 0 " << info.name << " ("
            << info.memory_bytes / (1 << 20) << " MiB, sm_" << info.cc_major << info.cc_minor
            << ", " << info.sm_count << " SMs, " << info.clock_khz / 1000 << " MHz)\n"
            << "vtrain name " << VtrainGpuName(info.name, info.memory_bytes) << "\n"
            << "tensor peak "
            << PeakTensorFlops(info.cc_major, info.cc_minor, info.sm_count, info.clock_khz) / 1e12
            << " TFLOP/s\n";
  return kExitOk;
}

const std::vector<std::string> kShapeFlags = {
    "hidden", "heads", "seq-len",  "micro-batch", "tp",      "ffn",       "vocab",
    "dtype",  "arch",  "kv-heads", "adam-params", "experts", "moe-top-k", "ep"};

// The layer shape from the flags; "" or the message naming the bad flag.
std::string ParseShape(const Flags& flags, LayerShape* s) {
  for (const char* required : {"hidden", "heads", "seq-len", "micro-batch"}) {
    if (!flags.Has(required)) return std::string("--") + required + " is required";
  }
  struct {
    const char* flag;
    int64_t* field;
  } ints[] = {{"hidden", &s->hidden},       {"heads", &s->heads},
              {"seq-len", &s->seq},         {"micro-batch", &s->micro_batch},
              {"tp", &s->tensor_parallel},  {"ffn", &s->ffn},
              {"vocab", &s->vocab},         {"adam-params", &s->adam_params},
              {"kv-heads", &s->kv_heads},   {"experts", &s->experts},
              {"moe-top-k", &s->moe_top_k}, {"ep", &s->expert_parallel}};
  for (auto& f : ints) {
    if (std::string e = flags.Int(f.flag, f.field); !e.empty()) return e;
  }
  if (s->ffn == 0) s->ffn = 4 * s->hidden;
  const std::string dtype = flags.Get("dtype", "fp16");
  if (dtype != "fp16" && dtype != "bf16" && dtype != "fp8") {
    return "--dtype='" + dtype + "' must be fp16, bf16 or fp8";
  }
  s->fp8 = dtype == "fp8";
  s->bf16 = dtype != "fp16";  // fp8 runs all but its GEMMs in bf16
  const std::string arch = flags.Get("arch", "gpt");
  if (arch != "gpt" && arch != "llama") return "--arch='" + arch + "' must be gpt or llama";
  s->llama = arch == "llama";
  if (flags.Has("kv-heads") && !s->llama) return "--kv-heads needs --arch llama";
  if ((flags.Has("moe-top-k") || flags.Has("ep")) && !flags.Has("experts")) {
    return "--moe-top-k and --ep need --experts";
  }
  return ValidateShape(*s);
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Prints one line per operator and returns the spread summary for the note.
std::string PrintTables(const std::vector<OperatorTable>& tables) {
  std::string note;
  std::printf("%-16s %8s %12s %8s %12s\n", "operator", "kernels", "median_us", "spread",
              "consistent");
  for (const OperatorTable& t : tables) {
    int64_t total = 0;
    for (const KernelStats& k : t.kernels) total += k.duration_ns;
    std::printf("%-16s %8zu %12.1f %7.2f%% %7d/%d\n", t.op.c_str(), t.kernels.size(), total / 1e3,
                100 * t.spread, t.consistent, t.repetitions);
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %s %.2f%%", t.op.c_str(), 100 * t.spread);
    note += buf;
  }
  return note;
}

// The --check verdict: prints each problem; true when there is none.
bool CheckTables(const std::vector<OperatorTable>& tables, const std::vector<std::string>& ops,
                 const LayerShape& s, double peak) {
  // The MLP's h -> f/t GEMM (2 n h f / t FLOPs; Llama's gate-and-up GEMM
  // twice that) is its longest kernel.
  GemmProbe probe{"mlp_fwd", (s.llama ? 2.0 : 1.0) * 2.0 * s.seq * s.micro_batch * s.hidden *
                                 static_cast<double>(s.ffn / s.tensor_parallel)};
  if (s.experts > 0) {
    // An MoE block: one local expert's gate-and-up GEMM, over its share of
    // the token copies (2 * copies/local * 2f * h FLOPs).
    const double per_expert = static_cast<double>(s.seq * s.micro_batch * s.moe_top_k) /
                              static_cast<double>(s.experts / s.expert_parallel);
    probe = {"moe_fwd", 2.0 * per_expert * 2.0 * static_cast<double>(s.ffn * s.hidden)};
  }
  if (peak > 0) {
    std::printf("check: %s GEMM %.1f TFLOP/s of a %.1f TFLOP/s peak\n", probe.op.c_str(),
                ProbeFlops(tables, probe) / 1e12, peak / 1e12);
  }
  const std::vector<std::string> problems =
      SanityProblems(tables, ops, probe, peak, /*max_spread=*/0.25);
  for (const std::string& p : problems) std::printf("check FAILED: %s\n", p.c_str());
  if (problems.empty()) std::printf("check: all %zu operators passed\n", tables.size());
  return problems.empty();
}

std::string ShapeText(const LayerShape& s) {
  const std::string dtype = s.fp8 ? "fp8" : s.bf16 ? "bf16" : "fp16";
  const std::string arch =
      s.llama ? " --arch llama --kv-heads " + std::to_string(s.kv_heads > 0 ? s.kv_heads : s.heads)
              : "";
  return "--hidden " + std::to_string(s.hidden) + " --heads " + std::to_string(s.heads) +
         " --ffn " + std::to_string(s.ffn) + " --seq-len " + std::to_string(s.seq) +
         " --micro-batch " + std::to_string(s.micro_batch) + " --tp " +
         std::to_string(s.tensor_parallel) + " --vocab " + std::to_string(s.vocab) + " --dtype " +
         dtype + arch + " --adam-params " + std::to_string(s.adam_params) +
         (s.experts > 0
              ? " --experts " + std::to_string(s.experts) + " --moe-top-k " +
                    std::to_string(s.moe_top_k) + " --ep " + std::to_string(s.expert_parallel)
              : "");
}

int RunReduce(const std::vector<std::string>& args) {
  if (args.empty() || args[0].rfind("--", 0) == 0)
    return BadInput("reduce", "give the RAW.txt file");
  Flags flags({args.begin() + 1, args.end()}, Concat(kShapeFlags, {"gpu", "o"}), {"check"});
  if (!flags.error().empty()) return BadInput("reduce", flags.error() + "\n\n" + kUsage);
  LayerShape s;
  if (std::string e = ParseShape(flags, &s); !e.empty()) return BadInput("reduce", e);
  if (!flags.Has("gpu") || !flags.Has("o")) {
    return BadInput("reduce", "--gpu NAME and -o OUT.json are required");
  }
  std::ifstream in(args[0]);
  if (!in) return BadInput("reduce", "cannot read " + args[0]);
  std::stringstream text;
  text << in.rdbuf();
  Trace trace;
  if (std::string e = TraceFromText(text.str(), &trace); !e.empty()) {
    return BadInput("reduce", args[0] + ": " + e);
  }
  ReduceResult reduced = Reduce(trace);
  if (!reduced.error.empty()) return Failure("reduce", args[0] + ": " + reduced.error);
  const std::string spreads = PrintTables(reduced.tables);
  std::vector<std::string> ops;
  for (const OperatorTable& t : reduced.tables) ops.push_back(t.op);
  const bool passed = !flags.Has("check") || CheckTables(reduced.tables, ops, s, 0);
  ProfileSetFile file;
  file.gpu = flags.Get("gpu");
  file.name = "reduced " + args[0];
  file.created_at = Rfc3339Utc(std::time(nullptr));
  file.provenance.workload = "vtrain-agent-gpu reduce " + args[0] + " " + ShapeText(s);
  file.provenance.note = "medians over the recorded ranges; spread:" + spreads;
  file.operators = OperatorEntries(reduced.tables, s);
  std::string error;
  if (!WriteText(flags.Get("o"), ToProfileSetJson(file), &error)) return Failure("reduce", error);
  std::cerr << "wrote " << file.operators.size() << " operators to " << flags.Get("o") << "\n";
  return passed ? kExitOk : kExitFailure;
}

int RunProfile(const std::vector<std::string>& args) {
  Flags flags(args,
              Concat(kShapeFlags, {"warmup", "repetitions", "device", "gpu", "o", "trace-out"}),
              {"check"});
  if (!flags.error().empty()) return BadInput("profile", flags.error() + "\n\n" + kUsage);
  LayerProfileOptions options;
  LayerShape& s = options.shape;
  if (std::string e = ParseShape(flags, &s); !e.empty()) return BadInput("profile", e);
  int64_t warmup = 3, reps = 10, device = 0;
  for (auto [flag, field] : {std::pair<const char*, int64_t*>{"warmup", &warmup},
                             {"repetitions", &reps},
                             {"device", &device}}) {
    if (std::string e = flags.Int(flag, field); !e.empty()) return BadInput("profile", e);
  }
  if (reps < 3 || reps > 1000) {
    return BadInput("profile", "--repetitions must be between 3 and 1000 (medians need 3)");
  }
  if (warmup > 1000) return BadInput("profile", "--warmup must be at most 1000");
  if (!flags.Has("o")) return BadInput("profile", "-o OUT.json is required");
  options.warmup = static_cast<int>(warmup);
  options.repetitions = static_cast<int>(reps);
  const std::string dtype = std::string(s.fp8    ? "fp8"
                                        : s.bf16 ? "bf16"
                                                 : "fp16") +
                            (s.llama ? " llama" : "");

  DeviceInfo info;
  if (std::string e = QueryDevice(static_cast<int>(device), &info); !e.empty()) {
    return Failure("profile", e);
  }
  std::string error;
  const std::string gpu = GpuName(flags, info, &error);
  if (gpu.empty()) return BadInput("profile", error);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes); e != cudaSuccess) {
    return Failure("profile", std::string("cudaMemGetInfo: ") + cudaGetErrorString(e));
  }
  const int64_t need = WorkloadBytes(s);
  if (need > static_cast<int64_t>(free_bytes)) {
    return Failure("profile", "the shape needs " + std::to_string(need >> 20) + " MiB and " +
                                  std::to_string(free_bytes >> 20) +
                                  " MiB are free on the GPU; profile a smaller micro-batch or a "
                                  "larger --tp");
  }
  if (std::string e = CuptiRecorder::Start(false); !e.empty()) return Failure("profile", e);
  std::cerr << "profiling h=" << s.hidden << " a=" << s.heads << " f=" << s.ffn << " s=" << s.seq
            << " b=" << s.micro_batch << " t=" << s.tensor_parallel << " v=" << s.vocab << " "
            << dtype << " on " << info.name << " (" << gpu << ")\n";
  LayerProfile profile = ProfileLayer(options, std::cerr);
  CuptiRecorder::Stop();
  if (!profile.error.empty()) return Failure("profile", profile.error);

  std::ostringstream note;
  note << "median of " << reps << " recorded repetitions after " << warmup
       << " warm-up runs; spread (max-min)/median of each operator's kernel time:"
       << PrintTables(profile.tables);
  if (CuptiRecorder::Dropped() > 0) {
    note << "; CUPTI dropped " << CuptiRecorder::Dropped() << " records";
  }
  ProfileSetFile file;
  file.gpu = gpu;
  file.name = "measured " + gpu + " h" + std::to_string(s.hidden) + " t" +
              std::to_string(s.tensor_parallel) + " b" + std::to_string(s.micro_batch);
  file.created_at = Rfc3339Utc(std::time(nullptr));
  file.provenance = {info.name,
                     info.driver,
                     info.cuda,
                     NcclVersion(),
                     info.host,
                     "vtrain-agent-gpu profile " + ShapeText(s) + " --warmup " +
                         std::to_string(warmup) + " --repetitions " + std::to_string(reps),
                     note.str()};
  file.operators = profile.entries;

  int rc = kExitOk;
  // fp8 tensor cores run twice the 16-bit dense rate (Ada, Hopper, Blackwell
  // datasheets), so an fp8 GEMM may legitimately pass the 16-bit peak.
  const double peak = PeakTensorFlops(info.cc_major, info.cc_minor, info.sm_count, info.clock_khz) *
                      (s.fp8 ? 2 : 1);
  if (flags.Has("check") && !CheckTables(profile.tables, profile.operators, s, peak)) {
    rc = kExitFailure;
  }
  if (flags.Has("trace-out") &&
      !WriteText(flags.Get("trace-out"), TraceToText(profile.trace), &error)) {
    return Failure("profile", error);
  }
  if (!WriteText(flags.Get("o"), ToProfileSetJson(file), &error)) return Failure("profile", error);
  std::cerr << "wrote " << file.operators.size() << " operators to " << flags.Get("o") << "\n";
  return rc;
}

int RunNccl(const std::vector<std::string>& args) {
  Flags flags(args,
              {"min-gpus", "max-gpus", "min-bytes", "max-bytes", "collectives", "iterations",
               "gpus", "gpu", "o"},
              {"check"});
  if (!flags.error().empty()) return BadInput("nccl", flags.error() + "\n\n" + kUsage);
  NcclSweepOptions options;
  int64_t min_gpus = 2, max_gpus = 0, min_bytes = options.min_bytes, max_bytes = options.max_bytes,
          iterations = options.iterations, gpus = 1;
  for (auto [flag, field] : {std::pair<const char*, int64_t*>{"min-gpus", &min_gpus},
                             {"max-gpus", &max_gpus},
                             {"min-bytes", &min_bytes},
                             {"max-bytes", &max_bytes},
                             {"iterations", &iterations},
                             {"gpus", &gpus}}) {
    if (std::string e = flags.Int(flag, field); !e.empty()) return BadInput("nccl", e);
  }
  if (min_bytes < 4 || min_bytes > max_bytes || max_bytes > (int64_t{8} << 30)) {
    return BadInput("nccl", "need 4 <= --min-bytes <= --max-bytes <= 8GiB");
  }
  if (min_gpus < 2 || iterations < 1 || iterations > 10000 || gpus < 1) {
    return BadInput("nccl",
                    "--min-gpus must be at least 2, --gpus at least 1, --iterations 1..10000");
  }
  if (flags.Has("collectives")) {
    options.collectives.clear();
    std::stringstream list(flags.Get("collectives"));
    for (std::string c; std::getline(list, c, ',');) {
      if (c != "all_reduce" && c != "all_gather" && c != "reduce_scatter" && c != "send_recv" &&
          c != "all_to_all") {
        return BadInput("nccl", "--collectives: '" + c +
                                    "' is unknown; use all_reduce, all_gather, reduce_scatter, "
                                    "send_recv, all_to_all");
      }
      options.collectives.push_back(c);
    }
  }
  if (!flags.Has("check") && !flags.Has("o")) return BadInput("nccl", "-o OUT.json is required");
  DeviceInfo info;
  if (std::string e = QueryDevice(0, &info); !e.empty()) return Failure("nccl", e);
  if (flags.Has("check")) {
    double ns = 0;
    if (std::string e = NcclCheck(static_cast<int>(gpus), &ns); !e.empty()) {
      return Failure("nccl", "check FAILED: " + e);
    }
    std::printf("nccl check: all_reduce over %lld GPU(s) correct; 64 MiB in %.1f us (NCCL %s)\n",
                static_cast<long long>(gpus), ns / 1e3, NcclVersion().c_str());
    return ns > 0 ? kExitOk : Failure("nccl", "check FAILED: non-positive latency");
  }
  std::string error;
  const std::string gpu = GpuName(flags, info, &error);
  if (gpu.empty()) return BadInput("nccl", error);
  options.min_gpus = static_cast<int>(min_gpus);
  options.max_gpus = static_cast<int>(max_gpus);
  options.min_bytes = min_bytes;
  options.max_bytes = max_bytes;
  options.iterations = static_cast<int>(iterations);
  NcclSweepResult sweep = RunNcclSweep(options, std::cerr);
  if (!sweep.error.empty()) return Failure("nccl", sweep.error);
  ProfileSetFile file;
  file.gpu = gpu;
  file.name = "nccl sweep " + gpu + " on " + info.host;
  file.created_at = Rfc3339Utc(std::time(nullptr));
  file.provenance = {info.name,
                     info.driver,
                     info.cuda,
                     NcclVersion(),
                     info.host,
                     "vtrain-agent-gpu nccl --min-gpus " + std::to_string(min_gpus) +
                         " --max-gpus " + std::to_string(max_gpus) + " --min-bytes " +
                         std::to_string(min_bytes) + " --max-bytes " + std::to_string(max_bytes) +
                         " --iterations " + std::to_string(iterations) +
                         " (mean per size after 5 warm-up runs, slowest GPU)",
                     ""};
  file.collectives = sweep.curves;
  if (!WriteText(flags.Get("o"), ToProfileSetJson(file), &error)) return Failure("nccl", error);
  std::cerr << "wrote " << file.collectives.size() << " curves to " << flags.Get("o") << "\n";
  return kExitOk;
}

// Our Llama and fp8 kernels against CPU references, then a small Llama
// workload run whole (selftest.h).
int RunSelfTest(const std::vector<std::string>& args) {
  Flags flags(args, {"device"}, {});
  if (!flags.error().empty()) return BadInput("selftest", flags.error() + "\n\n" + kUsage);
  int64_t device = 0;
  if (std::string e = flags.Int("device", &device); !e.empty()) return BadInput("selftest", e);
  DeviceInfo info;
  if (std::string e = QueryDevice(static_cast<int>(device), &info); !e.empty()) {
    return Failure("selftest", e);
  }
  if (cudaError_t e = cudaSetDevice(static_cast<int>(device)); e != cudaSuccess) {
    return Failure("selftest", std::string("cudaSetDevice: ") + cudaGetErrorString(e));
  }
  std::cout << "selftest on " << info.name << " (sm_" << info.cc_major << info.cc_minor << ")\n";
  if (std::string e = RunKernelSelfTest(std::cout); !e.empty()) return Failure("selftest", e);
  std::cout << "selftest: all checks passed\n";
  return kExitOk;
}

}  // namespace
}  // namespace vtrain::gpu

int main(int argc, char** argv) {
  using namespace vtrain::gpu;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitBadInput;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "info") return RunInfo();
  if (args[0] == "profile") return RunProfile(rest);
  if (args[0] == "nccl") return RunNccl(rest);
  if (args[0] == "reduce") return RunReduce(rest);
  if (args[0] == "selftest") return RunSelfTest(rest);
  if (args[0] == "help" || args[0] == "--help") {
    std::cout << kUsage;
    return kExitOk;
  }
  std::cerr << "vtrain-agent-gpu: unknown command '" << args[0] << "'\n\n" << kUsage;
  return kExitBadInput;
}

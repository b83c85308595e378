// vtrainctl compare: two or more plans of one job side by side, each
// predicted as `predict` would (in process or by a server), the rows where
// the plans differ marked.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/prediction_format.h"
#include "common/connection.h"
#include "core/util/status_macros.h"
#include "proto/json.h"
#include "service/service.h"

namespace vtrain::client {
namespace {

constexpr char kCompareHelp[] =
    "usage: vtrainctl compare [shared flags] -- PLAN FLAGS -- PLAN FLAGS [-- ...]\n"
    "\n"
    "Predicts two or more plans and prints them side by side; rows where the plans\n"
    "differ are marked with '*'. Each plan is the shared flags with its own flags\n"
    "after them (a flag given in both takes the plan's value), or its own job file.\n"
    "\n"
    "examples:\n"
    "  vtrainctl compare --model gpt3-175b --gpus 512 --global-batch 1536 --micro-batch 1 \\\n"
    "      -- --tp 8 --pp 16 -- --tp 4 --pp 32 -- --tp 8 --pp 8 --recompute selective\n"
    "  vtrainctl compare -- -f plan_a.json -- -f plan_b.json --json\n"
    "\n"
    "flags (shared or per plan):\n";

void AddCompareFlags(common::FlagParser& flags) {
  common::AddLocalOrServerFlags(flags, "predict in this process (the default without --server)");
  AddJobFlags(flags);
  flags.AddValue("tokens", "N", "tokens to train on, e.g. 270e9: adds training time and cost");
  flags.AddSwitch("json", "print {\"plans\": [PredictResponse, ...]}");
  flags.AddSwitch("help", "show this help");
}

// The argument groups between "--" separators: [shared, plan 1, plan 2, ...].
std::vector<std::vector<std::string>> Groups(const std::vector<std::string>& args) {
  std::vector<std::vector<std::string>> groups(1);
  for (const std::string& a : args) {
    if (a == "--") {
      groups.emplace_back();
    } else {
      groups.back().push_back(a);
    }
  }
  return groups;
}

// A plan's request: the shared flags, then its own (its own win).
absl::StatusOr<v1::PredictRequest> PlanRequest(const common::FlagParser& flags) {
  VTRAIN_ASSIGN_OR_RETURN(v1::PredictRequest request, RequestFromFlags(flags));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> tokens, flags.GetDouble("tokens"));
  if (tokens) {
    if (!(*tokens > 0)) {
      return absl::InvalidArgumentError("--tokens must be a positive number, e.g. 270e9");
    }
    request.set_train_tokens(*tokens);
  }
  return request;
}

struct Row {
  std::string label;
  std::vector<std::string> cells;
  bool compare;  // a plan row: marked when the plans differ
};

std::vector<Row> Rows(const std::vector<v1::PredictResponse>& r) {
  auto row = [&](std::string label, bool compare, auto cell) {
    Row out{std::move(label), {}, compare};
    for (const v1::PredictResponse& p : r) out.cells.push_back(cell(p));
    return out;
  };
  const double first_ms = r.front().iteration_time_ms();
  constexpr double kGiB = 1 << 30;
  using P = const v1::PredictResponse&;
  std::vector<Row> rows = {
      row("model", true,
          [](P p) {
            return absl::StrCat(p.model().preset().empty() ? "custom" : p.model().preset(), " ",
                                p.model().num_layers(), "x", p.model().hidden_size());
          }),
      row("gpu", true, [](P p) { return p.cluster().gpu(); }),
      row("gpus", true, [](P p) { return absl::StrCat(p.cluster().num_gpus()); }),
      row("t", true, [](P p) { return absl::StrCat(p.plan().tensor_parallel()); }),
      row("c", true, [](P p) { return absl::StrCat(p.plan().context_parallel()); }),
      row("d", true, [](P p) { return absl::StrCat(p.plan().data_parallel()); }),
      row("p", true, [](P p) { return absl::StrCat(p.plan().pipeline_parallel()); }),
      row("virtual stages", true, [](P p) { return absl::StrCat(p.plan().virtual_stages()); }),
      row("micro-batch", true, [](P p) { return absl::StrCat(p.plan().micro_batch()); }),
      row("global batch", true, [](P p) { return absl::StrCat(p.plan().global_batch()); }),
      row("schedule", true, [](P p) { return EnumName(p.plan().schedule()); }),
      row("recompute", true, [](P p) { return EnumName(p.plan().recompute()); }),
      row("dtype", true, [](P p) { return EnumName(p.plan().dtype()); }),
      row("sequence parallel", true,
          [](P p) { return std::string(p.plan().sequence_parallel() ? "on" : "off"); }),
      row("sharding", true, [](P p) { return EnumName(p.plan().data_parallel_sharding()); }),
      row("bucketing", true,
          [](P p) { return std::string(p.plan().gradient_bucketing() ? "on" : "off"); }),
      row("iteration ms", false,
          [](P p) { return absl::StrFormat("%.1f", p.iteration_time_ms()); }),
      row("vs first", false,
          [&](P p) {
            return absl::StrFormat("%+.1f%%", 100 * (p.iteration_time_ms() / first_ms - 1));
          }),
      row("vs first, 90%", false,
          [&](P p) {
            const v1::Interval& i = p.interval();
            if (&p == &r.front() || i.paired_regime().empty()) return std::string("-");
            const double ratio = p.iteration_time_ms() / first_ms;
            return absl::StrFormat("%+.0f..%+.0f%%", 100 * (ratio * (1 + i.paired_error_low()) - 1),
                                   100 * (ratio * (1 + i.paired_error_high()) - 1));
          }),
      row("90% interval ms", false,
          [](P p) {
            return p.interval().coverage() > 0
                       ? absl::StrFormat("%.0f..%.0f", p.interval().low_ms(),
                                         p.interval().high_ms())
                       : std::string("-");
          }),
      row("MFU", false, [](P p) { return absl::StrFormat("%.1f%%", 100 * p.mfu()); }),
      row("tokens/s", false, [](P p) { return absl::StrFormat("%.0f", p.tokens_per_s()); }),
      row("peak GiB", false,
          [](P p) {
            return absl::StrFormat("%.1f%s", p.memory().peak_bytes() / kGiB,
                                   p.memory().fits() ? "" : " OOM");
          }),
  };
  if (r.front().has_training()) {
    rows.push_back(row("training days", false,
                       [](P p) { return absl::StrFormat("%.2f", p.training().time_s() / 86400); }));
    rows.push_back(
        row("cost $", false, [](P p) { return absl::StrFormat("%.0f", p.training().cost_usd()); }));
  }
  return rows;
}

// Each plan against the first, by the interval of their ratio (the paired
// held-out errors of the runs the set was calibrated on): faster, slower,
// or within that error, where the prediction cannot say which is faster.
std::string Verdicts(const std::vector<v1::PredictResponse>& r) {
  const v1::Interval& first = r.front().interval();
  if (first.paired_regime().empty()) {
    return "(the profile set has no paired band: the difference has no interval)\n";
  }
  std::string out;
  for (size_t i = 1; i < r.size(); ++i) {
    const v1::Interval& b = r[i].interval();
    if (b.paired_regime().empty()) continue;
    const double ratio = r[i].iteration_time_ms() / r.front().iteration_time_ms();
    const double low = ratio * (1 + b.paired_error_low()),
                 high = ratio * (1 + b.paired_error_high());
    absl::StrAppend(
        &out,
        absl::StrFormat("plan %d vs plan 1: %+.1f%%, 90%% interval %+.1f%%..%+.1f%%: ", i + 1,
                        100 * (ratio - 1), 100 * (low - 1), 100 * (high - 1)),
        high < 1  ? "faster\n"
        : low > 1 ? "slower\n"
                  : "within the paired error; the prediction cannot say which is faster\n");
  }
  absl::StrAppend(&out,
                  absl::StrFormat("(the difference's 90%% interval: %d pairs of plans of one job "
                                  "in the set's calibration runs, held out; band %s)\n",
                                  first.paired_pairs(), first.paired_regime()));
  return out;
}

std::string Table(const std::vector<v1::PredictResponse>& responses) {
  const std::vector<Row> rows = Rows(responses);
  std::vector<size_t> width(responses.size(), 8);
  for (const Row& row : rows) {
    for (size_t i = 0; i < row.cells.size(); ++i)
      width[i] = std::max(width[i], row.cells[i].size());
  }
  std::string out = absl::StrFormat("  %-18s", "");
  for (size_t i = 0; i < responses.size(); ++i) {
    absl::StrAppend(&out, "  ", absl::StrFormat("%*s", width[i], absl::StrCat("plan ", i + 1)));
  }
  out += "\n";
  for (const Row& row : rows) {
    const bool differ =
        row.compare && std::any_of(row.cells.begin(), row.cells.end(),
                                   [&](const std::string& c) { return c != row.cells.front(); });
    absl::StrAppend(&out, differ ? "* " : "  ", absl::StrFormat("%-18s", row.label));
    for (size_t i = 0; i < row.cells.size(); ++i) {
      absl::StrAppend(&out, "  ", absl::StrFormat("%*s", width[i], row.cells[i]));
    }
    out += "\n";
  }
  absl::StrAppend(&out, "\n* the plans differ in this row\n", Verdicts(responses));
  return out;
}

}  // namespace

int RunCompare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::vector<std::vector<std::string>> groups = Groups(args);
  common::FlagParser shared("vtrainctl compare");
  AddCompareFlags(shared);
  if (absl::Status s = shared.Parse(groups[0]); !s.ok()) return Fail(err, "compare", s);
  if (shared.Switch("help")) {
    out << kCompareHelp << shared.Usage();
    return common::kExitOk;
  }
  if (groups.size() < 3) {
    return Fail(err, "compare",
                absl::InvalidArgumentError(
                    "give two or more plans, each after '--': vtrainctl compare [shared flags] "
                    "-- --tp 8 --pp 16 -- --tp 4 --pp 32"));
  }
  const service::BuiltinProfiles builtin;
  std::vector<v1::PredictResponse> responses;
  for (size_t i = 1; i < groups.size(); ++i) {
    std::vector<std::string> plan_args = groups[0];
    plan_args.insert(plan_args.end(), groups[i].begin(), groups[i].end());
    common::FlagParser flags("vtrainctl compare");
    AddCompareFlags(flags);
    const std::string which = absl::StrCat("plan ", i, ": ");
    absl::Status status = flags.Parse(plan_args);
    if (status.ok()) status = common::CheckLocalOrServer(flags);
    absl::StatusOr<v1::PredictRequest> request =
        status.ok() ? PlanRequest(flags) : absl::StatusOr<v1::PredictRequest>(status);
    absl::StatusOr<v1::PredictResponse> response =
        !request.ok()         ? absl::StatusOr<v1::PredictResponse>(request.status())
        : flags.Has("server") ? PredictRemotely(flags, *request)
                              : service::Predict(*request, builtin);
    if (!response.ok()) {
      return Fail(
          err, "compare",
          absl::Status(response.status().code(), absl::StrCat(which, response.status().message())));
    }
    responses.push_back(*std::move(response));
  }
  if (shared.Switch("json")) {
    std::vector<std::string> parts;
    for (const v1::PredictResponse& r : responses) parts.push_back(proto::ToJson(r));
    out << "{\"plans\": [\n" << absl::StrJoin(parts, ",\n") << "]}\n";
    return common::kExitOk;
  }
  out << Table(responses);
  return common::kExitOk;
}

}  // namespace vtrain::client

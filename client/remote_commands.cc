// vtrainctl against a vtrain-server: predict --server, profiles, bench.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/measurements.h"
#include "client/prediction_format.h"
#include "common/connection.h"
#include "common/files.h"
#include "common/flag_parser.h"
#include "core/util/status_macros.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/json.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::client {
namespace {

std::string Time(const google::protobuf::Timestamp& t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(t.seconds()),
                          absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<v1::PredictResponse> PredictRemotely(const common::FlagParser& flags,
                                                    const v1::PredictRequest& request) {
  absl::StatusOr<common::Connection> c = common::Connect(flags);
  if (!c.ok()) return c.status();
  v1::PredictResponse response;
  auto stub = v1::Simulator::NewStub(c->channel);
  grpc::Status s = stub->Predict(c->Context().get(), request, &response);
  if (!s.ok()) return common::FromGrpc(s);
  return response;
}

namespace {

constexpr char kProfilesHelp[] =
    "usage: vtrainctl profiles ls|show|push|pull|rm|export|import [ID|FILE|DIR] --server "
    "HOST:PORT [flags]\n\n"
    "  ls              list the server's profile sets (--gpu to filter)\n"
    "  show ID         print one set as JSON (the profile-set file format)\n"
    "  push FILE       push a profile-set JSON file (needs --token-file); idempotent\n"
    "  pull ID -o FILE save one set as a JSON file\n"
    "  rm ID           delete a set (needs --token-file)\n"
    "  export DIR      save every set as DIR/<id>.json: an online backup of a running server\n"
    "  import DIR      push every DIR/*.json (needs --token-file): a restore into a running\n"
    "                  server; sets already there are left as they are\n\n"
    "examples:\n"
    "  vtrainctl profiles ls --server 127.0.0.1:50051\n"
    "  vtrainctl profiles push a100.json --server 127.0.0.1:50051 --token-file token\n"
    "  vtrainctl profiles export backup/ --server 127.0.0.1:50051\n\n"
    "flags:\n";

// The flags of profiles (every verb).
void AddProfilesFlags(common::FlagParser& flags) {
  common::AddConnectionFlags(flags);
  flags.AddValue("gpu", "NAME", "ls: only sets of this GPU");
  flags.AddValue("o", "FILE", "pull: where to write the set");
  flags.AddSwitch("json", "ls: print JSON");
  flags.AddSwitch("help", "show this help");
}

// profiles export DIR: every set of the server as DIR/<id>.json (the id's
// ':' as '_'), written to a temporary name and renamed, so a file present
// is whole. The sets are read one by one while the server keeps serving.
absl::Status ExportSets(v1::ProfileRegistry::Stub& stub, const common::Connection& c,
                        const std::string& dir, std::ostream& out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the directory ", dir, ": ", ec.message()));
  }
  v1::ListProfileSetsResponse list;
  grpc::Status s = stub.ListProfileSets(c.Context().get(), {}, &list);
  if (!s.ok()) return common::FromGrpc(s);
  for (const v1::ProfileSetSummary& p : list.profile_sets()) {
    v1::GetProfileSetRequest req;
    req.set_id(p.id());
    v1::ProfileSet set;
    s = stub.GetProfileSet(c.Context().get(), req, &set);
    if (!s.ok()) return common::FromGrpc(s);
    std::string name = p.id();
    std::replace(name.begin(), name.end(), ':', '_');
    const std::string path = (std::filesystem::path(dir) / (name + ".json")).string();
    VTRAIN_RETURN_IF_ERROR(common::WriteFile(path + ".part", proto::ToJson(set)));
    std::filesystem::rename(path + ".part", path, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot rename to ", path, ": ", ec.message()));
  }
  out << "exported " << list.profile_sets_size() << " profile sets to " << dir << "\n";
  return absl::OkStatus();
}

// profiles import DIR: pushes every DIR/*.json in name order; a set already
// stored is left alone (its id is its content). Every file is tried; the
// first failure is returned after the rest are pushed.
absl::Status ImportSets(v1::ProfileRegistry::Stub& stub, const common::Connection& c,
                        const std::string& dir, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot read ", dir, ": ", ec.message()));
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat(dir, " has no *.json file"));
  std::sort(files.begin(), files.end());
  int stored = 0, present = 0;
  absl::Status first = absl::OkStatus();
  for (const std::string& f : files) {
    absl::StatusOr<v1::PushProfileSetRequest> req = common::ReadProfileSetFile(f);
    v1::PushProfileSetResponse resp;
    absl::Status st = req.status();
    if (st.ok()) st = common::FromGrpc(stub.PushProfileSet(c.Context().get(), *req, &resp));
    if (!st.ok()) {
      err << "vtrainctl profiles: " << f << ": " << st.message() << "\n";
      if (first.ok()) first = st;
      continue;
    }
    (resp.already_present() ? present : stored) += 1;
  }
  out << "imported " << files.size() << " files from " << dir << ": " << stored << " stored, "
      << present << " already present\n";
  return first;
}

}  // namespace

int RunProfiles(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl profiles");
  AddProfilesFlags(flags);
  std::string verb = args.empty() ? "" : args[0];
  std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::string operand;
  if (!rest.empty() && rest[0].rfind("--", 0) != 0 && rest[0] != "-o") {
    operand = rest[0];
    rest.erase(rest.begin());
  }
  if (absl::Status s = flags.Parse(rest); !s.ok()) return Fail(err, "profiles", s);
  if (verb.empty() || verb == "--help" || verb == "help" || flags.Switch("help")) {
    out << kProfilesHelp << flags.Usage();
    return verb.empty() ? common::kExitBadInput : common::kExitOk;
  }
  absl::StatusOr<common::Connection> c = common::Connect(flags);
  if (!c.ok()) return Fail(err, "profiles", c.status());
  auto stub = v1::ProfileRegistry::NewStub(c->channel);
  auto need_operand = [&](const char* what) -> absl::Status {
    if (operand.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("profiles ", verb, " needs ", what));
    }
    return absl::OkStatus();
  };
  if (verb == "ls") {
    v1::ListProfileSetsRequest req;
    if (auto gpu = flags.Get("gpu")) req.set_gpu(*gpu);
    v1::ListProfileSetsResponse resp;
    grpc::Status s = stub->ListProfileSets(c->Context().get(), req, &resp);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    if (flags.Switch("json")) {
      out << proto::ToJson(resp);
      return common::kExitOk;
    }
    out << absl::StrFormat("%-73s %-16s %-20s %5s %5s %s\n", "id", "gpu", "created (UTC)", "ops",
                           "colls", "kind");
    for (const v1::ProfileSetSummary& p : resp.profile_sets()) {
      out << absl::StrFormat(
          "%-73s %-16s %-20s %5d %5d %s\n", p.id(), p.gpu(), Time(p.created_at()),
          p.num_operators(), p.num_collectives(),
          absl::StrCat(p.builtin() ? "built-in" : "measured", p.complete() ? "" : ", partial"));
    }
    return common::kExitOk;
  }
  if (verb == "show" || verb == "pull") {
    if (absl::Status st = need_operand("a profile-set id"); !st.ok())
      return Fail(err, "profiles", st);
    v1::GetProfileSetRequest req;
    req.set_id(operand);
    v1::ProfileSet set;
    grpc::Status s = stub->GetProfileSet(c->Context().get(), req, &set);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    const std::string json = proto::ToJson(set);
    if (verb == "show") {
      out << json;
      return common::kExitOk;
    }
    std::optional<std::string> path = flags.Get("o");
    if (!path)
      return Fail(err, "profiles", absl::InvalidArgumentError("profiles pull needs -o FILE"));
    if (absl::Status w = common::WriteFile(*path, json); !w.ok()) return Fail(err, "profiles", w);
    out << "wrote " << operand << " to " << *path << "\n";
    return common::kExitOk;
  }
  if (verb == "push") {
    if (absl::Status st = need_operand("a profile-set JSON file"); !st.ok()) {
      return Fail(err, "profiles", st);
    }
    absl::StatusOr<v1::PushProfileSetRequest> req = common::ReadProfileSetFile(operand);
    if (!req.ok()) return Fail(err, "profiles", req.status());
    v1::PushProfileSetResponse resp;
    grpc::Status s = stub->PushProfileSet(c->Context().get(), *req, &resp);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    out << common::PushSummary(resp);
    return common::kExitOk;
  }
  if (verb == "rm") {
    if (absl::Status st = need_operand("a profile-set id"); !st.ok())
      return Fail(err, "profiles", st);
    v1::DeleteProfileSetRequest req;
    req.set_id(operand);
    v1::DeleteProfileSetResponse resp;
    grpc::Status s = stub->DeleteProfileSet(c->Context().get(), req, &resp);
    if (!s.ok()) return Fail(err, "profiles", common::FromGrpc(s));
    out << "deleted " << operand << "\n";
    return common::kExitOk;
  }
  if (verb == "export" || verb == "import") {
    if (absl::Status st = need_operand("a directory"); !st.ok()) return Fail(err, "profiles", st);
    const absl::Status s = verb == "export" ? ExportSets(*stub, *c, operand, out)
                                            : ImportSets(*stub, *c, operand, out, err);
    return s.ok() ? common::kExitOk : Fail(err, "profiles", s);
  }
  return Fail(err, "profiles",
              absl::InvalidArgumentError(absl::StrCat("unknown profiles command '", verb,
                                                      "'; use ls, show, push, pull, rm, export or "
                                                      "import")));
}

}  // namespace vtrain::client

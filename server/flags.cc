#include "server/flags.h"

#include <cstdint>
#include <string>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace vtrain::server {
namespace {

// Where a flag's value goes; a bool is a switch.
using Target = std::variant<std::string*, int64_t*, int*, bool*, Role*>;

struct Flag {
  absl::string_view name;        // dashed, without "--"
  absl::string_view value_name;  // for --help; empty for a switch
  absl::string_view help;
  Target target;
};

// The flags, bound to the fields of `c` they set.
std::vector<Flag> Flags(CommandLine& c) {
  ServerOptions& o = c.options;
  return {
      {"listen", "HOST:PORT", "gRPC address (port 0: any free)", &o.listen},
      {"metrics-listen", "HOST:PORT",
       "Prometheus /metrics address (empty: off)", &o.metrics_listen},
      {"db", "FILE", "SQLite database file (created if absent)", &o.db_path},
      {"role", "ROLE", "all | registry | predictor", &o.role},
      {"registry", "HOST:PORT", "predictor: the registry's address",
       &o.registry},
      {"push-token-file", "FILE",
       "file holding the bearer token for push and delete", &c.push_token_file},
      {"require-auth-for-reads", "", "reads need the token too",
       &o.require_auth_for_reads},
      {"tls-cert-file", "FILE", "PEM certificate chain: serve TLS",
       &o.tls_cert_file},
      {"tls-key-file", "FILE", "PEM private key for --tls-cert-file",
       &o.tls_key_file},
      {"tls-client-ca-file", "FILE",
       "PEM CA: require client certificates (mTLS)", &o.tls_client_ca_file},
      {"registry-ca-file", "FILE", "predictor: PEM CA for TLS to the registry",
       &o.registry_ca_file},
      {"max-message-bytes", "N", "largest gRPC message accepted",
       &o.max_message_bytes},
      {"max-tasks", "N", "largest simulation per request (tasks)",
       &o.max_tasks},
      {"max-concurrent-simulations", "N",
       "simulations at once (0: hardware threads)",
       &o.max_concurrent_simulations},
      {"grace-seconds", "N", "on SIGTERM, how long in-flight calls may finish",
       &c.grace_seconds},
  };
}

// Value parsers: OK, or INVALID_ARGUMENT naming the flag and what it takes.
absl::Status Parse(const Flag& /*flag*/, absl::string_view value,
                   std::string* out) {
  *out = std::string(value);
  return absl::OkStatus();
}
template <typename Int>
absl::Status Parse(const Flag& flag, absl::string_view value, Int* out) {
  if (absl::SimpleAtoi(value, out)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag.name, "='", value, "' is not an integer"));
}
absl::Status Parse(const Flag& flag, absl::string_view value, bool* out) {
  if (absl::SimpleAtob(value, out)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag.name, "='", value, "' is not a boolean; use true or false"));
}
absl::Status Parse(const Flag&, absl::string_view value, Role* out) {
  absl::StatusOr<Role> role =
      ParseRole(std::string(value));  // names --role itself
  if (!role.ok()) return role.status();
  *out = *role;
  return absl::OkStatus();
}

std::string Show(const std::string* value) {
  return absl::StrCat("\"", *value, "\"");
}
std::string Show(const int64_t* value) { return absl::StrCat(*value); }
std::string Show(const int* value) { return absl::StrCat(*value); }
std::string Show(const bool* value) { return *value ? "true" : "false"; }
std::string Show(const Role* value) {
  switch (*value) {
    case Role::kAll:
      return "all";
    case Role::kRegistry:
      return "registry";
    case Role::kPredictor:
      return "predictor";
  }
  return "all";
}

bool IsSwitch(const Flag& flag) {
  return std::holds_alternative<bool*>(flag.target);
}

// The flag `name` names, in either spelling (dashes, or the underscores
// earlier releases took through abseil flags); nullptr when none does.
const Flag* Find(const std::vector<Flag>& flags, absl::string_view name) {
  const std::string dashed = absl::StrReplaceAll(name, {{"_", "-"}});
  for (const Flag& flag : flags) {
    if (flag.name == dashed) return &flag;
  }
  return nullptr;
}

absl::Status CheckRanges(const ServerOptions& options) {
  if (options.max_message_bytes <= 0 ||
      options.max_message_bytes > (int64_t{1} << 30) ||
      options.max_tasks <= 0 || options.max_concurrent_simulations < 0) {
    return absl::InvalidArgumentError(
        "--max-message-bytes, --max-tasks must be positive and "
        "--max-concurrent-simulations non-negative");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(
    const std::vector<std::string>& args) {
  CommandLine out;
  const std::vector<Flag> flags = Flags(out);
  for (size_t i = 0; i < args.size(); ++i) {
    const absl::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      continue;
    }
    if (arg.size() <= 2 || !absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg,
                       "'; vtrain-server takes only --name=value flags"));
    }
    const size_t eq = arg.find('=');
    const absl::string_view name =
        arg.substr(2, eq == arg.npos ? arg.npos : eq - 2);
    const Flag* flag = Find(flags, name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, "; --help lists the flags"));
    }
    std::string value;
    if (eq != arg.npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (IsSwitch(*flag)) {
      value = "true";
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag->name, " needs a value: --", flag->name, "=",
                       flag->value_name));
    }
    absl::Status parsed =
        std::visit([&](auto* target) { return Parse(*flag, value, target); },
                   flag->target);
    if (!parsed.ok()) return parsed;
  }
  if (absl::Status s = CheckRanges(out.options); !s.ok()) return s;
  return out;
}

std::string Usage() {
  CommandLine defaults;
  std::string usage =
      "vtrain-server: the vtrain gRPC service (Simulator, ProfileRegistry, "
      "health, reflection).\n"
      "example: vtrain-server --listen 0.0.0.0:50051 --db "
      "/var/lib/vtrain/vtrain.db "
      "--push-token-file /etc/vtrain/token --metrics-listen 0.0.0.0:9090\n\n"
      "flags (--name=value or --name value; a switch alone means true):\n";
  for (const Flag& flag : Flags(defaults)) {
    const std::string spelled = absl::StrCat(
        "--", flag.name, IsSwitch(flag) ? "" : " ", flag.value_name);
    const std::string value =
        std::visit([](const auto* v) { return Show(v); }, flag.target);
    absl::StrAppendFormat(&usage, "  %-34s %s (default: %s)\n", spelled,
                          flag.help, value);
  }
  absl::StrAppendFormat(&usage, "  %-34s %s\n", "--help", "this list");
  return usage;
}

}  // namespace vtrain::server

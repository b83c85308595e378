// A small command-line flag parser shared by vtrainctl, vtrain-agent and
// vtrain-server: "--name value", "--name=value" and bare boolean "--name"
// (or "--name=true|false"), with every unknown flag reported. Names are
// declared with dashes; underscores are accepted for them ("--push_token_file").
#ifndef VTRAIN_COMMON_FLAG_PARSER_H_
#define VTRAIN_COMMON_FLAG_PARSER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace vtrain::common {

class FlagParser {
 public:
  explicit FlagParser(std::string command) : command_(std::move(command)) {}

  // Declares a flag taking a value, or a boolean switch.
  void AddValue(std::string name, std::string value_name, std::string help);
  void AddSwitch(std::string name, std::string help);

  // Parses args (without the program and subcommand names). INVALID_ARGUMENT
  // names the first unknown flag, missing value or stray argument.
  absl::Status Parse(const std::vector<std::string>& args);

  bool Has(absl::string_view name) const { return values_.count(std::string(name)) > 0; }
  std::optional<std::string> Get(absl::string_view name) const;
  bool Switch(absl::string_view name) const;
  // Typed getters: nullopt when absent; INVALID_ARGUMENT naming the flag when
  // the value does not parse.
  absl::StatusOr<std::optional<int64_t>> GetInt(absl::string_view name) const;
  absl::StatusOr<std::optional<double>> GetDouble(absl::string_view name) const;
  // An on|off flag: nullopt when absent; otherwise INVALID_ARGUMENT
  // "<field>='v' (--name) must be on or off" (with no field:
  // "--name='v' must be on or off") for any other value.
  absl::StatusOr<std::optional<bool>> GetOnOff(absl::string_view name,
                                               absl::string_view field = "") const;
  // GetInt, and INVALID_ARGUMENT naming the flag and the range when the
  // value is outside [lo, hi].
  absl::StatusOr<std::optional<int64_t>> GetIntIn(absl::string_view name, int64_t lo,
                                                  int64_t hi) const;
  // --threads: at most kMaxThreads; all cores when absent.
  static constexpr int64_t kMaxThreads = 1024;
  absl::StatusOr<int> GetThreads(absl::string_view name = "threads") const;
  // A flag of named values: `parse` (a core Parse* function, text to
  // absl::StatusOr<T>) applied to its value; nullopt when absent, and the
  // parser's INVALID_ARGUMENT with " (--name)" appended when it is refused.
  template <typename Parse>
  auto GetParsed(absl::string_view name, Parse parse) const -> absl::StatusOr<
      std::optional<typename std::invoke_result_t<Parse, absl::string_view>::value_type>> {
    const std::optional<std::string> text = Get(name);
    if (!text) return std::nullopt;
    auto parsed = parse(absl::string_view(*text));
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(parsed.status().message(), " (--", name, ")"));
    }
    return *std::move(parsed);
  }
  // "8,16,32": the integers of a comma-separated flag (empty when absent);
  // INVALID_ARGUMENT naming the flag and the item that does not parse.
  absl::StatusOr<std::vector<int64_t>> GetIntList(absl::string_view name) const;

  // "  --name VALUE   help" lines for --help.
  std::string Usage() const;

  // Every flag's name, in the order they were added.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const Spec& s : specs_) names.push_back(s.name);
    return names;
  }

 private:
  struct Spec {
    std::string name, value_name, help;
    bool is_switch = false;
  };
  const Spec* Find(absl::string_view name) const;

  std::string command_;
  std::vector<Spec> specs_;
  std::map<std::string, std::string> values_;
};

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_FLAG_PARSER_H_

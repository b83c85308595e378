#include "common/flag_parser.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace vtrain::common {

void FlagParser::AddValue(std::string name, std::string value_name, std::string help) {
  specs_.push_back({std::move(name), std::move(value_name), std::move(help), false});
}

void FlagParser::AddSwitch(std::string name, std::string help) {
  specs_.push_back({std::move(name), "", std::move(help), true});
}

const FlagParser::Spec* FlagParser::Find(absl::string_view name) const {
  for (const Spec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

absl::Status FlagParser::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    // Short aliases: -f FILE (a job file) and -o FILE (an output file).
    if (arg == "-f" && Find("job-file") != nullptr) arg = "--job-file";
    if (arg == "-o" && Find("o") != nullptr) arg = "--o";
    if (arg == "-h" && Find("help") != nullptr) arg = "--help";
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "' for '",
                                                     command_, "'; flags start with --"));
    }
    arg.remove_prefix(2);
    std::string name(arg.substr(0, arg.find('=')));
    // --push_token_file names --push-token-file (the spelling abseil flags took).
    std::replace(name.begin(), name.end(), '_', '-');
    std::optional<std::string> value;
    if (arg.find('=') != absl::string_view::npos)
      value = std::string(arg.substr(arg.find('=') + 1));
    const Spec* spec = Find(name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " for '", command_,
                                                     "'; see '", command_, " --help'"));
    }
    if (spec->is_switch) {
      if (value && *value != "true" && *value != "false") {
        return absl::InvalidArgumentError(absl::StrCat("--", name, "='", *value,
                                                       "' is not a boolean; write --", name, ", --",
                                                       name, "=true or --", name, "=false"));
      }
      values_[name] = value.value_or("true");
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value: --", name, " ", spec->value_name));
      }
      value = args[++i];
    }
    values_[name] = *value;
  }
  return absl::OkStatus();
}

std::optional<std::string> FlagParser::Get(absl::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

bool FlagParser::Switch(absl::string_view name) const {
  return Get(name).value_or("false") == "true";
}

namespace {

// "15T", "2k", "4Ki": a number with a size suffix (k, M, B or G, T:
// thousands, millions, billions, trillions; Ki, Mi: 1024, 1024^2), as the
// number and its multiplier; nullopt without a suffix.
std::optional<std::pair<double, double>> WithSuffix(absl::string_view text) {
  static constexpr struct {
    absl::string_view suffix;
    double multiplier;
  } kSuffixes[] = {{"Ki", 1024.0}, {"Mi", 1024.0 * 1024.0},
                   {"k", 1e3},     {"K", 1e3},
                   {"M", 1e6},     {"B", 1e9},
                   {"G", 1e9},     {"T", 1e12}};
  for (const auto& s : kSuffixes) {
    if (text.size() > s.suffix.size() && absl::EndsWith(text, s.suffix)) {
      double v = 0;
      if (!absl::SimpleAtod(text.substr(0, text.size() - s.suffix.size()), &v)) return std::nullopt;
      return std::make_pair(v, s.multiplier);
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::optional<int64_t>> FlagParser::GetInt(absl::string_view name) const {
  std::optional<std::string> text = Get(name);
  if (!text) return std::optional<int64_t>();
  int64_t value = 0;
  if (absl::SimpleAtoi(*text, &value)) return std::optional<int64_t>(value);
  if (std::optional<std::pair<double, double>> s = WithSuffix(*text)) {
    const double v = s->first * s->second;
    if (std::isfinite(v) && std::abs(v) < 9e18 && v == std::trunc(v)) {
      return std::optional<int64_t>(static_cast<int64_t>(v));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", name, "='", *text, "' is not an integer (suffixes: k, M, B, T; Ki, Mi: 2Ki = 2048)"));
}

absl::StatusOr<std::optional<int64_t>> FlagParser::GetIntIn(absl::string_view name, int64_t lo,
                                                            int64_t hi) const {
  absl::StatusOr<std::optional<int64_t>> value = GetInt(name);
  if (value.ok() && value->has_value() && (**value < lo || **value > hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", **value, " must be in [", lo, ", ", hi, "]"));
  }
  return value;
}

absl::StatusOr<int> FlagParser::GetThreads(absl::string_view name) const {
  absl::StatusOr<std::optional<int64_t>> threads = GetIntIn(name, 1, kMaxThreads);
  if (!threads.ok()) return threads.status();
  if (threads->has_value()) return static_cast<int>(**threads);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

absl::StatusOr<std::optional<double>> FlagParser::GetDouble(absl::string_view name) const {
  std::optional<std::string> text = Get(name);
  if (!text) return std::optional<double>();
  double value = 0;
  if (!absl::SimpleAtod(*text, &value)) {
    if (std::optional<std::pair<double, double>> w = WithSuffix(*text)) {
      value = w->first * w->second;
    } else {
      value = std::nan("");
    }
  }
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, "='", *text, "' is not a number (suffixes: k, M, B, T, e.g. 15T)"));
  }
  return std::optional<double>(value);
}

absl::StatusOr<std::optional<bool>> FlagParser::GetOnOff(absl::string_view name,
                                                         absl::string_view field) const {
  std::optional<std::string> text = Get(name);
  if (!text) return std::optional<bool>();
  if (*text == "on" || *text == "off") return std::optional<bool>(*text == "on");
  return absl::InvalidArgumentError(
      field.empty() ? absl::StrCat("--", name, "='", *text, "' must be on or off")
                    : absl::StrCat(field, "='", *text, "' (--", name, ") must be on or off"));
}

absl::StatusOr<std::vector<int64_t>> FlagParser::GetIntList(absl::string_view name) const {
  std::vector<int64_t> values;
  std::optional<std::string> text = Get(name);
  if (!text) return values;
  for (absl::string_view item : absl::StrSplit(*text, ',', absl::SkipEmpty())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(item, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", item, "' is not an integer"));
    }
    values.push_back(value);
  }
  return values;
}

std::string FlagParser::Usage() const {
  std::string out;
  for (const Spec& s : specs_) {
    std::string left = absl::StrCat("--", s.name, s.is_switch ? "" : " ", s.value_name);
    absl::StrAppend(&out, absl::StrFormat("  %-34s %s\n", left, s.help));
  }
  return out;
}

}  // namespace vtrain::common

#include "proto/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "proto/json_keys.h"

namespace vtrain::proto {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void AppendString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// Shortest text that reads back to the same double (std::to_chars).
void AppendDouble(std::string* out, double v) {
  if (std::isnan(v)) {
    *out += "\"NaN\"";
    return;
  }
  if (std::isinf(v)) {
    *out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

class Printer {
 public:
  explicit Printer(std::string* out) : out_(out) {}

  void PrintMessage(const Message& m, int depth) {
    const Descriptor* d = m.GetDescriptor();
    if (d->file()->name().rfind("google/protobuf/", 0) == 0) {
      // Well-known types (Timestamp...) have their own JSON forms.
      std::string wkt;
      if (google::protobuf::util::MessageToJsonString(m, &wkt).ok()) {
        *out_ += wkt;
      } else {
        *out_ += "null";  // e.g. a Timestamp out of the RFC 3339 range
      }
      return;
    }
    const Reflection* r = m.GetReflection();
    *out_ += "{";
    bool first = true;
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      const bool is_message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
      if (!f->is_repeated() && (is_message || f->containing_oneof() != nullptr) &&
          !r->HasField(m, f)) {
        continue;  // presence matters for sub-messages and oneof members
      }
      *out_ += first ? "\n" : ",\n";
      first = false;
      Indent(depth + 1);
      AppendString(out_, f->name());
      *out_ += ": ";
      if (f->is_repeated()) {
        PrintRepeated(m, f, depth + 1);
      } else {
        PrintValue(m, f, -1, depth + 1);
      }
    }
    if (!first) {
      *out_ += "\n";
      Indent(depth);
    }
    *out_ += "}";
  }

 private:
  void Indent(int depth) { out_->append(static_cast<size_t>(depth) * 2, ' '); }

  void PrintRepeated(const Message& m, const FieldDescriptor* f, int depth) {
    const int n = m.GetReflection()->FieldSize(m, f);
    if (n == 0) {
      *out_ += "[]";
      return;
    }
    *out_ += "[";
    for (int j = 0; j < n; ++j) {
      *out_ += j == 0 ? "\n" : ",\n";
      Indent(depth + 1);
      PrintValue(m, f, j, depth + 1);
    }
    *out_ += "\n";
    Indent(depth);
    *out_ += "]";
  }

  // One value of `f`; `index` >= 0 for an element of a repeated field.
  void PrintValue(const Message& m, const FieldDescriptor* f, int index, int depth) {
    const Reflection* r = m.GetReflection();
    const bool rep = index >= 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        absl::StrAppend(out_, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        absl::StrAppend(out_, rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        absl::StrAppend(out_, rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        absl::StrAppend(out_, rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        AppendDouble(out_, rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        AppendDouble(out_, rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        *out_ += (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int number = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
        const auto* value = f->enum_type()->FindValueByNumber(number);
        if (value != nullptr) {
          AppendString(out_, value->name());
        } else {
          absl::StrAppend(out_, number);  // a number this build does not name
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        std::string scratch;
        const std::string& s = rep ? r->GetRepeatedStringReference(m, f, index, &scratch)
                                   : r->GetStringReference(m, f, &scratch);
        AppendString(out_, s);  // vtrain.v1 has no bytes fields
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        PrintMessage(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f), depth);
        break;
    }
  }

  std::string* out_;
};

}  // namespace

std::string ToJson(const Message& message) {
  std::string out;
  Printer(&out).PrintMessage(message, 0);
  out += "\n";
  return out;
}

absl::Status FromJson(const std::string& json, Message* message) {
  if (absl::Status keys = CheckNoDuplicateKeys(json); !keys.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a valid ", message->GetDescriptor()->full_name(), " in JSON form: ", keys.message()));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a valid ", message->GetDescriptor()->full_name(),
                     " in JSON form: ", std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace vtrain::proto

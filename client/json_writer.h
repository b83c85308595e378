// A minimal streaming JSON writer for vtrainctl's --json output.
#ifndef VTRAIN_CLIENT_JSON_WRITER_H_
#define VTRAIN_CLIENT_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace vtrain::client {

// Builds one JSON document. Keys are written with Key() inside objects;
// values anywhere a value may stand. Non-finite doubles are written as null.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);

  const std::string& str() const { return out_; }

 private:
  void BeforeValue();
  void WriteEscaped(absl::string_view value);
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_JSON_WRITER_H_

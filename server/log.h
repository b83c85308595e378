// vtrain-server's log: one timestamped line per event on stderr.
#ifndef VTRAIN_SERVER_LOG_H_
#define VTRAIN_SERVER_LOG_H_

#include "absl/strings/string_view.h"

namespace vtrain::server {

// Writes "<UTC time> vtrain-server: <line>" to stderr. Thread-safe (one
// fprintf per line).
void Log(absl::string_view line);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_LOG_H_

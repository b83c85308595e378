#include "server/log.h"

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace vtrain::server {

void Log(absl::string_view line) {
  std::fprintf(stderr, "%s vtrain-server: %s\n",
               absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
               std::string(line).c_str());
}

}  // namespace vtrain::server

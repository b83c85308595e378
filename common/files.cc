#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace vtrain::common {
namespace {

// "No such file or directory", from errno.
std::string OsError(int error) { return std::strerror(error); }

absl::Status OpenError(const std::string& path, int error, const char* what) {
  const std::string message = absl::StrCat("cannot ", what, " '", path, "': ", OsError(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(absl::StrCat(message, "; check the path"));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InvalidArgumentError(message);
  }
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

absl::StatusOr<std::string> ReadStdin(int64_t max_bytes) {
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(0, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OpenError("stdin", errno, "read");
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(contents.size()) > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("stdin holds more than the limit of ", max_bytes, " bytes"));
    }
  }
  return contents;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not hang; a regular file
  // ignores the flag.
  Fd file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) return OpenError(path, errno, "open");
  struct stat st;
  if (fstat(file.fd, &st) != 0) return OpenError(path, errno, "read");
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is a directory; give the path of a file in it"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a regular file (a device, pipe or socket); give a file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", st.st_size,
                                                   " bytes, above the limit of ", max_bytes,
                                                   " bytes for this file"));
  }
  std::string contents;
  contents.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = read(file.fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OpenError(path, errno, "read");
    if (n == 0) break;  // shrank while being read
    done += static_cast<size_t>(n);
  }
  contents.resize(done);
  return contents;
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", path, "': ", errno != 0 ? OsError(errno) : "cannot open"));
  }
  out << contents;
  out.close();
  if (!out) {
    return absl::DataLossError(
        absl::StrCat("writing '", path, "' failed: ", errno != 0 ? OsError(errno) : "write error"));
  }
  return absl::OkStatus();
}

}  // namespace vtrain::common

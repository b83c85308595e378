// Keeps core/ honest (docs/architecture.md#what-core-may-include): no gRPC,
// protobuf, SQLite, CUDA or NCCL, and no file I/O. CMake dependencies alone
// cannot enforce this, because system include paths make every installed
// header reachable. Also keeps core's folders layered: no #include runs up the
// layering.
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::string SourceDir() {
  if (const char* dir = std::getenv("VTRAIN_SOURCE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return VTRAIN_TEST_SOURCE_DIR;  // set by tests/CMakeLists.txt
}

// Source with // and /* */ comments removed (string literals are not parsed;
// core has no "//" or "/*" inside strings that would matter here).
std::string StripComments(absl::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source.substr(i, 2) == "//") {
      while (i < source.size() && source[i] != '\n') ++i;
      if (i < source.size()) out += '\n';
    } else if (source.substr(i, 2) == "/*") {
      const size_t end = source.find("*/", i + 2);
      i = end == absl::string_view::npos ? source.size() : end + 1;
    } else {
      out += source[i];
    }
  }
  return out;
}

bool ForbiddenHeader(absl::string_view header) {
  for (absl::string_view prefix : {"grpc", "google/protobuf", "sqlite", "cuda", "cupti", "nccl",
                                   "cublas", "cudnn", "nvml", "nvToolsExt"}) {
    if (absl::StartsWith(header, prefix)) return true;
  }
  // File I/O: streams on files, the filesystem, POSIX file descriptors.
  // <cstdio> stays allowed: VTRAIN_CHECK prints to stderr with it.
  for (absl::string_view io :
       {"fstream", "filesystem", "fcntl.h", "unistd.h", "sys/stat.h", "sys/mman.h", "dirent.h"}) {
    if (header == io) return true;
  }
  return absl::EndsWith(header, ".pb.h") || absl::StrContains(header, "sqlite3");
}

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The header of an #include line ("#  include <x>" or "#include \"x\""), or
// empty.
std::string IncludedHeader(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "#")) return "";
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "include")) return "";
  line = absl::StripLeadingAsciiWhitespace(line);
  if (line.empty() || (line[0] != '<' && line[0] != '"')) return "";
  const char close = line[0] == '<' ? '>' : '"';
  const size_t end = line.find(close, 1);
  return end == absl::string_view::npos ? "" : std::string(line.substr(1, end - 1));
}

// Whether `line` uses `name` as a whole identifier: anywhere when
// `any_use` (a type: "std::ifstream in", "= std::filesystem;"), else only
// when called ("fopen (").
bool UsesName(absl::string_view line, absl::string_view name, bool any_use) {
  for (size_t at = line.find(name); at != absl::string_view::npos; at = line.find(name, at + 1)) {
    if (at > 0 && IsIdentifierChar(line[at - 1])) continue;
    size_t next = at + name.size();
    if (next < line.size() && IsIdentifierChar(line[next])) continue;
    if (any_use) return true;
    while (next < line.size() && line[next] == ' ') ++next;
    if (next < line.size() && line[next] == '(') return true;
  }
  return false;
}

// Every forbidden include or call in one C++ file, as "path:line: what".
std::vector<std::string> CppViolations(absl::string_view path, absl::string_view source) {
  // Opening files or ending the process from library code: functions when
  // called, stream and filesystem types wherever they are used.
  static constexpr absl::string_view kFunctions[] = {
      "fopen", "freopen", "fdopen", "tmpfile", "open", "creat", "exit", "_Exit", "quick_exit"};
  static constexpr absl::string_view kTypes[] = {"ifstream", "ofstream", "fstream", "filesystem"};
  std::vector<std::string> out;
  const std::string code = StripComments(source);
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(code, '\n')) {
    ++line_number;
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "#")) {
      const std::string header = IncludedHeader(line);
      if (!header.empty() && ForbiddenHeader(header)) {
        out.push_back(absl::StrCat(path, ":", line_number, ": #include ", header));
      }
      continue;
    }
    for (absl::string_view name : kFunctions) {
      if (UsesName(line, name, /*any_use=*/false)) {
        out.push_back(absl::StrCat(path, ":", line_number, ": ", name));
      }
    }
    for (absl::string_view name : kTypes) {
      if (UsesName(line, name, /*any_use=*/true)) {
        out.push_back(absl::StrCat(path, ":", line_number, ": ", name));
      }
    }
  }
  return out;
}

// CMake files must not link the outside world either.
std::vector<std::string> CmakeViolations(absl::string_view path, absl::string_view source) {
  std::vector<std::string> out;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(source, '\n')) {
    ++line_number;
    const std::string code(line.substr(0, line.find('#')));  // drop comments
    for (absl::string_view word : {"grpc", "protobuf", "sqlite", "cuda", "nccl", "cupti"}) {
      std::string lower = code;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (absl::StrContains(lower, word)) {
        out.push_back(absl::StrCat(path, ":", line_number, ": ", word));
      }
    }
  }
  return out;
}

// The layering of core/, bottom first (core/CMakeLists.txt links the targets
// the same way): a file in core/<folder>/ may include headers of its own
// folder and of folders of a lower rank only. plan and calibrate share the
// top rank, so neither includes the other; cluster sees util only.
struct Layer {
  absl::string_view folder;
  int rank;
};
constexpr Layer kLayers[] = {
    {"util", 0},       // status macros
    {"spec", 1},       // models, GPUs, clusters, plans
    {"profile", 2},    // profile tables, analytical model, lookup
    {"graph", 3},      // the iteration walker and the task graph
    {"engine", 4},     // simulation over a graph, and streaming
    {"predict", 5},    // one prediction, the memory model
    {"plan", 6},       // plan search
    {"calibrate", 6},  // fitting the analytical model
    {"cluster", 1},    // the cluster study: throughput tables, not models
};

// The rank of core/<folder>, or -1 for a folder the table does not know.
int RankOf(absl::string_view folder) {
  for (const Layer& layer : kLayers) {
    if (layer.folder == folder) return layer.rank;
  }
  return -1;
}

// The folder below core/ of a path rooted at the repository
// ("core/graph/builder.h" -> "graph"), or empty.
std::string CoreFolder(absl::string_view path) {
  if (!absl::ConsumePrefix(&path, "core/")) return "";
  const size_t slash = path.find('/');
  return slash == absl::string_view::npos ? "" : std::string(path.substr(0, slash));
}

// Every #include of core/ in `source`, the file at `path` (rooted at the
// repository, e.g. "core/graph/builder.h"), that runs up the layering or
// involves a folder missing from kLayers, as "path:line: ...".
std::vector<std::string> LayeringViolations(absl::string_view path, absl::string_view source) {
  std::vector<std::string> out;
  const std::string folder = CoreFolder(path);
  const int rank = RankOf(folder);
  if (rank < 0) {
    out.push_back(absl::StrCat(path, ": core/", folder, " is not in kLayers"));
    return out;
  }
  const std::string code = StripComments(source);
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(code, '\n')) {
    ++line_number;
    const std::string header = IncludedHeader(line);
    const std::string other = CoreFolder(header);
    if (other.empty() || other == folder) continue;
    const int other_rank = RankOf(other);
    if (other_rank < 0) {
      out.push_back(absl::StrCat(path, ":", line_number, ": #include ", header, ": core/", other,
                                 " is not in kLayers"));
    } else if (other_rank >= rank) {
      out.push_back(absl::StrCat(path, ":", line_number, ": #include ", header, ": core/", folder,
                                 " may not depend on core/", other));
    }
  }
  return out;
}

TEST(BoundaryCheckerTest, FindsWhatItLooksFor) {
  // The checker itself must be able to fail.
  const char kBad[] =
      "#include <grpcpp/grpcpp.h>\n"
      "#include \"google/protobuf/message.h\"\n"
      "#include <sqlite3.h>\n"
      "#include <cuda_runtime.h>\n"
      "#include <cupti.h>\n"
      "#include <nccl.h>\n"
      "#include <fstream>\n"
      "#include \"vtrain/v1/predict.pb.h\"\n"
      "  #  include <filesystem>\n"
      "FILE* f = fopen(\"x\", \"r\");\n"
      "std::ifstream in(path);\n"
      "std::exit(1);\n"
      "int fd = open(path, 0);\n"
      "namespace fs = std::filesystem;\n";
  EXPECT_THAT(CppViolations("bad.cc", kBad), SizeIs(14));
  const char kGood[] =
      "#include <cstdio>\n"
      "#include <string>\n"
      "#include \"core/profile/profile.h\"\n"
      "// Profile tables: the CUDA kernels, from nccl-tests; fopen( is fine here.\n"
      "/* std::exit(1); */\n"
      "std::fprintf(stderr, \"failed\\n\");\n"
      "int reopen_count = 0; bool is_open = true; int kExitOk = 0;\n"
      "double Layernorm(double x);\n"
      "const char* kHelp = \"could not open the file; exit code 2\";\n";
  EXPECT_THAT(CppViolations("good.cc", kGood), IsEmpty());
  EXPECT_THAT(CmakeViolations("CMakeLists.txt", "target_link_libraries(x gRPC::grpc++)\n"),
              SizeIs(1));
  EXPECT_THAT(CmakeViolations("CMakeLists.txt", "# no gRPC, protobuf, SQLite, CUDA\n"), IsEmpty());
}

TEST(BoundaryCheckerTest, FindsIncludesThatRunUpTheLayering) {
  // The layering rule itself must be able to fail.
  const char kBad[] =
      "#include \"core/engine/timeline.h\"\n"     // graph -> engine: up
      "  #  include \"core/predict/memory.h\"\n"  // up, spaced out
      "#include \"core/plan/search.h\"\n"         // up two layers
      "#include \"core/magic/wand.h\"\n";         // a folder not in the table
  EXPECT_THAT(LayeringViolations("core/graph/builder.cc", kBad), SizeIs(4));
  EXPECT_THAT(LayeringViolations("core/graph/builder.cc", kBad)[0],
              HasSubstr("core/graph may not depend on core/engine"));
  // Siblings at the top do not include each other.
  EXPECT_THAT(
      LayeringViolations("core/calibrate/calibration.cc", "#include \"core/plan/search.h\"\n"),
      SizeIs(1));
  EXPECT_THAT(LayeringViolations("core/plan/search.cc", "#include \"core/calibrate/minimize.h\"\n"),
              SizeIs(1));
  EXPECT_THAT(LayeringViolations("core/magic/wand.h", ""), SizeIs(1));
  const char kGood[] =
      "#include \"core/graph/task_graph.h\"\n"  // own folder
      "#include \"core/profile/lookup.h\"\n"    // below
      "#include \"core/spec/job.h\"\n"
      "#include \"core/util/status_macros.h\"\n"
      "#include \"absl/status/status.h\"\n"
      "#include <vector>\n"
      "// #include \"core/predict/predictor.h\" in a comment\n"
      "/* #include \"core/plan/search.h\" */\n";
  EXPECT_THAT(LayeringViolations("core/engine/streaming.cc", kGood), IsEmpty());
}

struct SourceFile {
  std::string path;  // rooted at the repository: "core/engine/engine.cc"
  std::string text;
  bool cmake = false;
};

// Every C++ and CMake file under core/.
void ReadCore(std::vector<SourceFile>* files) {
  const fs::path core = fs::path(SourceDir()) / "core";
  ASSERT_TRUE(fs::is_directory(core)) << core << " is not a directory; set VTRAIN_SOURCE_DIR";
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(core)) {
    if (!entry.is_regular_file()) continue;
    const fs::path& path = entry.path();
    const std::string ext = path.extension().string();
    const bool cmake = path.filename() == "CMakeLists.txt" || ext == ".cmake";
    const bool cpp = ext == ".h" || ext == ".cc" || ext == ".cpp" || ext == ".hpp" ||
                     ext == ".inc" || ext == ".cu" || ext == ".cuh";
    if (!cmake && !cpp) continue;
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << path;
    std::stringstream buffer;
    buffer << in.rdbuf();
    files->push_back(
        {fs::relative(path, core.parent_path()).generic_string(), buffer.str(), cmake});
  }
  // Guard against scanning nothing (a wrong directory would pass vacuously).
  std::vector<std::string> scanned;
  for (const SourceFile& f : *files) scanned.push_back(f.path);
  EXPECT_GE(scanned.size(), 20u);
  EXPECT_THAT(absl::StrJoin(scanned, " "), HasSubstr("core/engine/engine.cc"));
  EXPECT_THAT(absl::StrJoin(scanned, " "), HasSubstr("core/util/status_macros.h"));
}

TEST(BoundaryTest, CoreUsesNoOutsideWorld) {
  std::vector<SourceFile> files;
  ASSERT_NO_FATAL_FAILURE(ReadCore(&files));
  std::vector<std::string> violations;
  for (const SourceFile& f : files) {
    for (std::string& v :
         f.cmake ? CmakeViolations(f.path, f.text) : CppViolations(f.path, f.text)) {
      violations.push_back(std::move(v));
    }
  }
  EXPECT_THAT(violations, IsEmpty()) << absl::StrJoin(violations, "\n");
}

TEST(BoundaryTest, CoreIncludesFollowTheLayering) {
  std::vector<SourceFile> files;
  ASSERT_NO_FATAL_FAILURE(ReadCore(&files));
  std::vector<std::string> violations;
  int checked = 0;
  for (const SourceFile& f : files) {
    if (f.cmake) continue;
    ++checked;
    for (std::string& v : LayeringViolations(f.path, f.text)) violations.push_back(std::move(v));
  }
  EXPECT_GE(checked, 20);
  EXPECT_THAT(violations, IsEmpty()) << absl::StrJoin(violations, "\n");
}

}  // namespace
}  // namespace vtrain

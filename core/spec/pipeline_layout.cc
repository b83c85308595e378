#include "core/spec/pipeline_layout.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Tokens a layout string may expand to: p * v chunks of at most a few
// thousand layers each is far below this; "(t*9999|)*9999" is refused.
constexpr int64_t kMaxLayoutTokens = int64_t{1} << 20;

// A recursive-descent reader of the layout notation into a flat token list
// ('E', 't', 'm', 'L', '|').
class LayoutReader {
 public:
  LayoutReader(absl::string_view text, absl::string_view field) : text_(text), field_(field) {}

  absl::StatusOr<std::string> Read() {
    std::string out;
    VTRAIN_RETURN_IF_ERROR(Sequence(out, /*depth=*/0));
    if (pos_ < text_.size()) return Error("an unmatched ')'");
    return out;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        field_, "=\"", text_, "\": ", what, " at position ", pos_,
        "; write chunks separated by '|' of E (embedding), t (a decoder layer), m (an MTP "
        "module) and L (the loss), with X*N or (...)*N to repeat, e.g. \"Et*3|(tt|)*29m|L\""));
  }
  void SkipSeparators() {
    while (pos_ < text_.size() && (text_[pos_] == ',' || text_[pos_] == ' ')) ++pos_;
  }
  // "*N" after an item, or 1.
  absl::StatusOr<int64_t> Count() {
    SkipSeparators();
    if (pos_ >= text_.size() || text_[pos_] != '*') return 1;
    ++pos_;
    int64_t n = 0;
    size_t digits = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (++digits > 7) return Error("a repeat count over 9999999");
      n = n * 10 + (text_[pos_] - '0');
      ++pos_;
    }
    if (digits == 0) return Error("'*' without a count");
    if (n < 1) return Error("a repeat count of 0");
    return n;
  }
  absl::Status Append(std::string& out, absl::string_view item, int64_t times) {
    if (static_cast<int64_t>(out.size()) + static_cast<int64_t>(item.size()) * times >
        kMaxLayoutTokens) {
      return Error(absl::StrCat("a layout of more than ", kMaxLayoutTokens, " tokens"));
    }
    for (int64_t i = 0; i < times; ++i) out.append(item.data(), item.size());
    return absl::OkStatus();
  }
  absl::Status Sequence(std::string& out, int depth) {
    if (depth > 16) return Error("groups nested deeper than 16");
    while (true) {
      SkipSeparators();
      if (pos_ >= text_.size() || text_[pos_] == ')') return absl::OkStatus();
      const char c = text_[pos_];
      std::string item;
      if (c == '(') {
        ++pos_;
        VTRAIN_RETURN_IF_ERROR(Sequence(item, depth + 1));
        if (pos_ >= text_.size()) return Error("a '(' without its ')'");
        ++pos_;
      } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
        item.push_back(c);
        ++pos_;
      } else {
        return Error(absl::StrCat("an unknown token '", std::string(1, c), "'"));
      }
      absl::StatusOr<int64_t> times = Count();
      if (!times.ok()) return times.status();
      VTRAIN_RETURN_IF_ERROR(Append(out, item, *times));
    }
  }

  absl::string_view text_;
  absl::string_view field_;
  size_t pos_ = 0;
};

std::string ChunkText(const ChunkLayers& c) {
  std::string out;
  if (c.embedding) out += "E";
  if (c.num_layers == 1) out += "t";
  if (c.num_layers > 1) absl::StrAppend(&out, "t*", c.num_layers);
  if (c.mtp_layers == 1) out += "m";
  if (c.mtp_layers > 1) absl::StrAppend(&out, "m*", c.mtp_layers);
  if (c.loss) out += "L";
  return out;
}

// Per-chunk layer counts from the first/last-stage options (Megatron-Core:
// the middle stages share the rest evenly, each stage's layers split evenly
// over its v chunks), or an error naming the field.
absl::StatusOr<std::vector<int64_t>> FromStageOptions(const Job& job) {
  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  const PipelineLayout& lay = plan.layout;
  const int64_t p = plan.pipeline_parallel, v = plan.virtual_stages, layers = m.num_layers;
  const bool first = lay.first_stage_layers > 0, last = lay.last_stage_layers > 0;
  if (p < 2) {
    return absl::InvalidArgumentError(
        "plan.first_stage_layers and plan.last_stage_layers need plan.pipeline_parallel of at "
        "least 2; leave them unset for one stage");
  }
  if (first + last == 2 && p == 2 && lay.first_stage_layers + lay.last_stage_layers != layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.first_stage_layers=", lay.first_stage_layers,
        " + plan.last_stage_layers=", lay.last_stage_layers, " must be model.num_layers=", layers,
        " on 2 stages; give one of them and the other stage takes the rest"));
  }
  const int64_t rest = layers - lay.first_stage_layers - lay.last_stage_layers;
  const int64_t middle = p - first - last;
  if (rest < middle) {  // (with no middle stage the check above holds)
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.first_stage_layers=", lay.first_stage_layers, " and plan.last_stage_layers=",
        lay.last_stage_layers, " leave ", rest, " of model.num_layers=", layers, " for ", middle,
        " other stages; each stage needs at least one layer"));
  }
  if (middle > 0 && rest % middle != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", rest, " layers plan.first_stage_layers=", lay.first_stage_layers,
        " and plan.last_stage_layers=", lay.last_stage_layers, " leave do not divide over the ",
        middle, " middle stages; choose first/last stage layers that leave a multiple of ",
        middle));
  }
  std::vector<int64_t> stage(p, middle > 0 ? rest / middle : 0);
  if (first) stage.front() = lay.first_stage_layers;
  if (last) stage.back() = lay.last_stage_layers;
  for (int64_t s = 0; s < p; ++s) {
    if (stage[s] % v != 0) {
      const bool is_first = s == 0 && first, is_last = s == p - 1 && last;
      return absl::InvalidArgumentError(
          absl::StrCat(is_first  ? absl::StrCat("plan.first_stage_layers=", stage[s])
                       : is_last ? absl::StrCat("plan.last_stage_layers=", stage[s])
                                 : absl::StrCat("the middle stages' ", stage[s], " layers"),
                       " do not divide over plan.virtual_stages=", v,
                       " chunks; give each stage a multiple of the virtual stages"));
    }
  }
  std::vector<int64_t> counts(p * v);
  for (int64_t c = 0; c < v; ++c) {
    for (int64_t s = 0; s < p; ++s) counts[c * p + s] = stage[s] / v;
  }
  return counts;
}

// Per-chunk layer counts of the unset layout; see ResolvePipelineLayout.
absl::StatusOr<std::vector<int64_t>> AutoCounts(const Job& job) {
  const int64_t chunks = job.plan.pipeline_parallel * job.plan.virtual_stages;
  const int64_t layers = job.model.num_layers;
  std::vector<int64_t> counts(chunks, layers / chunks);
  if (layers % chunks == 0) return counts;
  // Megatron-Core's --account-for-embedding/loss-in-pipeline-split: the
  // embedding and the loss each take a layer's place (the published Llama 3.1
  // 405B recipe lays its 126 layers on 8 x 8 chunks this way; Qwen3-235B's
  // 94 on 32 x 3 leaves the embedding and the loss a chunk each).
  if ((layers + 2) % chunks == 0) {
    counts.assign(chunks, (layers + 2) / chunks);
    --counts.front();
    --counts.back();
    return counts;
  }
  if ((layers + 1) % chunks == 0) {
    counts.assign(chunks, (layers + 1) / chunks);
    --counts.back();
    return counts;
  }
  // Else the middle chunks even, the first and last lighter (the loss chunk
  // the lightest: the output layer costs more than the embedding), down to
  // none but the embedding or the loss.
  const int64_t per = (layers + chunks - 1) / chunks;
  const int64_t rest = layers - (chunks - 2) * per;
  if (chunks < 3 || rest < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.num_layers=", layers,
                     " cannot be laid over plan.pipeline_parallel * "
                     "plan.virtual_stages = ",
                     chunks,
                     " chunks with each middle chunk one or more "
                     "layers; use fewer stages or chunks, or give plan.pipeline_layout"));
  }
  counts.assign(chunks, per);
  counts.front() = (rest + 1) / 2;
  counts.back() = rest / 2;
  return counts;
}

// Checks an explicit layout against the model and the chunk count.
absl::Status CheckExplicit(const Job& job) {
  const PipelineLayout& lay = job.plan.layout;
  const int64_t chunks = job.plan.pipeline_parallel * job.plan.virtual_stages;
  const int64_t n = static_cast<int64_t>(lay.chunks.size());
  if (lay.first_stage_layers > 0 || lay.last_stage_layers > 0) {
    return absl::InvalidArgumentError(
        "plan.pipeline_layout is given with plan.first_stage_layers or plan.last_stage_layers; "
        "give one or the other");
  }
  if (n != chunks) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.pipeline_layout has ", n,
                     " chunks but plan.pipeline_parallel * "
                     "plan.virtual_stages = ",
                     chunks, "; write one '|'-separated chunk per virtual stage"));
  }
  int64_t layers = 0, mtp = 0;
  for (int64_t k = 0; k < n; ++k) {
    const ChunkContent& c = lay.chunks[k];
    if (c.embedding != (k == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.pipeline_layout ",
                       k == 0 ? "does not open with the embedding (E)"
                              : absl::StrCat("has the embedding (E) in chunk ", k),
                       "; put it once, at the start of the first chunk"));
    }
    if (c.loss != (k == n - 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.pipeline_layout ",
                       k == n - 1 ? "does not end with the loss (L)"
                                  : absl::StrCat("has the loss (L) in chunk ", k),
                       "; put it once, at the end of the last chunk"));
    }
    if (c.layers == 0 && c.mtp_layers == 0 && !c.embedding && !c.loss) {
      return absl::InvalidArgumentError(absl::StrCat("plan.pipeline_layout's chunk ", k,
                                                     " holds nothing; give every chunk a layer"));
    }
    layers += c.layers;
    mtp += c.mtp_layers;
  }
  if (layers != job.model.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.pipeline_layout holds ", layers, " decoder layers (t) but model.num_layers=",
        job.model.num_layers, "; place every layer once"));
  }
  if (mtp != job.model.mtp_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.pipeline_layout holds ", mtp, " MTP modules (m) but model.mtp_layers=",
                     job.model.mtp_layers, "; place every module once"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ChunkContent>> ParsePipelineLayout(absl::string_view text,
                                                              absl::string_view field) {
  LayoutReader reader(text, field);
  absl::StatusOr<std::string> tokens = reader.Read();
  if (!tokens.ok()) return tokens.status();
  std::vector<ChunkContent> chunks(1);
  for (char c : *tokens) {
    ChunkContent& chunk = chunks.back();
    switch (c) {
      case '|':
        if (static_cast<int64_t>(chunks.size()) >= kMaxLayoutChunks) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, " has more than ", kMaxLayoutChunks, " chunks"));
        }
        chunks.emplace_back();
        break;
      case 't':
        ++chunk.layers;
        break;
      case 'm':
        ++chunk.mtp_layers;
        break;
      case 'E':
        if (chunk.embedding || chunk.layers > 0 || chunk.mtp_layers > 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, "=\"", text, "\": E (the embedding) must open its chunk, once"));
        }
        chunk.embedding = true;
        break;
      default:  // 'L'
        if (chunk.loss) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, "=\"", text, "\": L (the loss) appears twice in a chunk"));
        }
        chunk.loss = true;
        break;
    }
  }
  return chunks;
}

std::string FormatPipelineLayout(const std::vector<ChunkLayers>& chunks) {
  std::vector<std::string> texts;
  texts.reserve(chunks.size());
  for (const ChunkLayers& c : chunks) texts.push_back(ChunkText(c));
  std::string out;
  const size_t n = texts.size();
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && texts[j] == texts[i]) ++j;
    const size_t run = j - i;
    const bool at_end = j == n;
    if (run >= 3) {
      absl::StrAppend(&out, "(", texts[i], "|)*", at_end ? run - 1 : run);
      if (at_end) out += texts[i];
    } else {
      for (size_t k = i; k < j; ++k) absl::StrAppend(&out, texts[k], k + 1 < n ? "|" : "");
    }
    i = j;
  }
  return out;
}

void CheckPipelineLayout(const Job& job, std::vector<std::string>& problems) {
  const PipelineLayout& lay = job.plan.layout;
  if (lay.first_stage_layers < 0 || lay.first_stage_layers > job.model.num_layers) {
    problems.push_back(absl::StrCat("plan.first_stage_layers=", lay.first_stage_layers,
                                    " is out of range; give 1 to model.num_layers, or 0 (unset)"));
    return;
  }
  if (lay.last_stage_layers < 0 || lay.last_stage_layers > job.model.num_layers) {
    problems.push_back(absl::StrCat("plan.last_stage_layers=", lay.last_stage_layers,
                                    " is out of range; give 1 to model.num_layers, or 0 (unset)"));
    return;
  }
  absl::StatusOr<std::vector<ChunkLayers>> chunks = ResolvePipelineLayout(job);
  if (!chunks.ok()) problems.emplace_back(chunks.status().message());
}

absl::StatusOr<std::vector<ChunkLayers>> ResolvePipelineLayout(const Job& job) {
  const PipelineLayout& lay = job.plan.layout;
  const int64_t chunks = job.plan.pipeline_parallel * job.plan.virtual_stages;
  if (chunks < 1 || chunks > kMaxLayoutChunks || job.model.num_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.pipeline_parallel * plan.virtual_stages = ", chunks,
                     " chunks cannot be laid out; give 1 to ", kMaxLayoutChunks));
  }
  std::vector<ChunkLayers> out(chunks);
  if (!lay.chunks.empty()) {
    if (absl::Status s = CheckExplicit(job); !s.ok()) return s;
    for (int64_t k = 0; k < chunks; ++k) {
      out[k].num_layers = lay.chunks[k].layers;
      out[k].mtp_layers = lay.chunks[k].mtp_layers;
    }
  } else {
    absl::StatusOr<std::vector<int64_t>> counts =
        lay.first_stage_layers > 0 || lay.last_stage_layers > 0 ? FromStageOptions(job)
                                                                : AutoCounts(job);
    if (!counts.ok()) return counts.status();
    for (int64_t k = 0; k < chunks; ++k) out[k].num_layers = (*counts)[k];
    out.back().mtp_layers = job.model.mtp_layers;
  }
  int64_t first = 0;
  for (ChunkLayers& c : out) {
    c.first_layer = first;
    first += c.num_layers;
  }
  out.front().embedding = true;
  out.back().loss = true;
  return out;
}

bool IsEvenLayout(const std::vector<ChunkLayers>& chunks) {
  return std::all_of(chunks.begin(), chunks.end(), [&](const ChunkLayers& c) {
    return c.num_layers == chunks.front().num_layers;
  });
}

}  // namespace vtrain

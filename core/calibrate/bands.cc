#include "core/calibrate/bands.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"

namespace vtrain {

std::string LayerShapeKey(const Job& job) {
  const ModelSpec& m = job.model;
  return absl::StrFormat("h=%d heads=%d ffn=%d seq=%d t=%d mb=%d", m.hidden_size, m.num_heads,
                         m.ffn(), m.seq_len, job.plan.tensor_parallel, job.plan.micro_batch);
}

namespace {

// Rows grouped by key(job), the groups shuffled by `seed` and dealt, largest
// first, to the fold with the fewest rows so far.
std::vector<int> GroupedFolds(absl::Span<const Measurement> measurements, int folds, uint64_t seed,
                              std::string (*key)(const Job&)) {
  std::map<std::string, std::vector<size_t>> by_shape;
  for (size_t i = 0; i < measurements.size(); ++i) {
    by_shape[key(measurements[i].job)].push_back(i);
  }
  std::vector<const std::vector<size_t>*> shapes;
  for (const auto& [key, rows] : by_shape) shapes.push_back(&rows);
  std::mt19937_64 rng(seed);
  std::shuffle(shapes.begin(), shapes.end(), rng);
  // Largest first (stable, so the shuffle breaks ties), each to the
  // smallest fold: folds of similar size without splitting a shape.
  std::stable_sort(shapes.begin(), shapes.end(),
                   [](const auto* a, const auto* b) { return a->size() > b->size(); });
  const int k = std::max(1, folds);
  std::vector<size_t> size(k, 0);
  std::vector<int> fold(measurements.size(), 0);
  for (const std::vector<size_t>* rows : shapes) {
    const int f = static_cast<int>(std::min_element(size.begin(), size.end()) - size.begin());
    for (size_t i : *rows) fold[i] = f;
    size[f] += rows->size();
  }
  return fold;
}

std::string ModelKey(const Job& job) {
  return absl::StrCat(job.model.name, " h=", job.model.hidden_size, " l=", job.model.num_layers);
}

// The band of `regime` from log-error magnitudes: q is the smallest magnitude
// that at least `coverage` of them do not exceed (a conservative empirical
// quantile for the few rows a regime has); rows = their count.
ErrorBand QuantileBand(std::string regime, std::vector<double> magnitudes, double coverage) {
  ErrorBand band;
  band.regime = std::move(regime);
  band.coverage = coverage;
  band.rows = static_cast<int64_t>(magnitudes.size());
  if (magnitudes.empty()) return band;
  std::sort(magnitudes.begin(), magnitudes.end());
  const size_t rank =
      static_cast<size_t>(std::ceil(coverage * static_cast<double>(magnitudes.size()) - 1e-9));
  const double q = magnitudes[std::clamp<size_t>(rank, 1, magnitudes.size()) - 1];
  band.error_low = std::expm1(-q);
  band.error_high = std::expm1(q);
  return band;
}

}  // namespace

std::vector<int> ShapeFolds(absl::Span<const Measurement> measurements, int folds, uint64_t seed) {
  return GroupedFolds(measurements, folds, seed, LayerShapeKey);
}

std::vector<int> ModelFolds(absl::Span<const Measurement> measurements, int folds, uint64_t seed) {
  return GroupedFolds(measurements, folds, seed, ModelKey);
}

ErrorBand BandOf(absl::Span<const Measurement> measurements, absl::Span<const ValidationRow> rows,
                 const std::string& regime, double coverage) {
  std::vector<double> magnitudes;
  for (size_t i = 0; i < measurements.size() && i < rows.size(); ++i) {
    const Job& job = measurements[i].job;
    if (!rows[i].status.ok() || rows[i].error <= -1) continue;
    if (!regime.empty() && RegimeOf(job) != regime && BaseRegimeOf(job) != regime) continue;
    magnitudes.push_back(std::abs(std::log1p(rows[i].error)));
  }
  return QuantileBand(regime, std::move(magnitudes), coverage);
}

std::vector<ErrorBand> BandsOf(absl::Span<const Measurement> measurements,
                               absl::Span<const ValidationRow> rows, double coverage,
                               int64_t min_rows) {
  std::map<std::string, int> regimes;
  for (const Measurement& m : measurements) {
    regimes[RegimeOf(m.job)] = 1;
    regimes[BaseRegimeOf(m.job)] = 0;
  }
  std::vector<ErrorBand> bands;
  // A base regime with too few rows of its own takes the band of all rows
  // (a few published runs of one GPU, mostly multi-node, say little about
  // its single-node runs on their own).
  const ErrorBand pooled = BandOf(measurements, rows, "", coverage);
  for (const auto& [regime, fine] : regimes) {
    ErrorBand band = BandOf(measurements, rows, regime, coverage);
    if (fine == 0 && band.rows > 0 && band.rows < min_rows && pooled.rows > band.rows) {
      band = pooled;
      band.regime = regime;
    }
    if (band.rows >= min_rows || (fine == 0 && band.rows > 0)) bands.push_back(band);
  }
  return bands;
}

ErrorBand PairedBandOf(absl::Span<const Measurement> measurements,
                       absl::Span<const ValidationRow> rows, double coverage) {
  // The runs of one job: the model, the GPUs and the global batch.
  std::map<std::string, std::vector<double>> jobs;
  for (size_t i = 0; i < measurements.size() && i < rows.size(); ++i) {
    if (!rows[i].status.ok() || !(rows[i].predicted_ms > 0) || !(rows[i].measured_ms > 0)) {
      continue;
    }
    const Job& j = measurements[i].job;
    jobs[absl::StrFormat("%s h=%d heads=%d l=%d seq=%d gpus=%d gb=%d", j.model.name,
                         j.model.hidden_size, j.model.num_heads, j.model.num_layers,
                         j.model.seq_len, j.cluster.num_gpus, j.plan.global_batch)]
        .push_back(std::log1p(rows[i].error));
  }
  std::vector<double> magnitudes;
  for (const auto& [key, logs] : jobs) {
    for (size_t a = 0; a < logs.size(); ++a) {
      for (size_t b = a + 1; b < logs.size(); ++b)
        magnitudes.push_back(std::abs(logs[a] - logs[b]));
    }
  }
  return QuantileBand(kPairedRegime, std::move(magnitudes), coverage);
}

void ApplyBands(absl::Span<const Measurement> measurements, absl::Span<const ErrorBand> bands,
                std::vector<ValidationRow>& rows) {
  for (size_t i = 0; i < measurements.size() && i < rows.size(); ++i) {
    ValidationRow& r = rows[i];
    r.regime = RegimeOf(measurements[i].job);
    r.interval_low_ms = r.interval_high_ms = 0;
    if (!r.status.ok()) continue;
    const ErrorBand* chosen = nullptr;
    for (const std::string& regime : {r.regime, BaseRegimeOf(measurements[i].job)}) {
      for (const ErrorBand& b : bands) {
        if (chosen == nullptr && b.regime == regime) chosen = &b;
      }
    }
    if (chosen == nullptr) continue;
    r.interval_low_ms = r.predicted_ms / (1 + chosen->error_high);
    r.interval_high_ms = r.predicted_ms / (1 + chosen->error_low);
  }
}

std::vector<RegimeCoverage> CoverageByRegime(absl::Span<const Measurement> measurements,
                                             absl::Span<const ValidationRow> rows) {
  std::map<std::string, std::vector<size_t>> by_regime;
  for (size_t i = 0; i < measurements.size() && i < rows.size(); ++i) {
    by_regime[RegimeOf(measurements[i].job)].push_back(i);
  }
  std::vector<RegimeCoverage> out;
  for (const auto& [regime, indices] : by_regime) {
    RegimeCoverage c;
    c.regime = regime;
    std::vector<ValidationRow> mine;
    std::vector<double> widths;
    int64_t inside = 0;
    for (size_t i : indices) {
      const ValidationRow& r = rows[i];
      mine.push_back(r);
      if (!r.status.ok() || r.interval_high_ms <= 0) continue;
      widths.push_back((r.interval_high_ms - r.interval_low_ms) / r.predicted_ms);
      if (r.measured_ms >= r.interval_low_ms && r.measured_ms <= r.interval_high_ms) ++inside;
    }
    c.error = Summarize(mine);
    c.with_interval = static_cast<int64_t>(widths.size());
    if (!widths.empty()) {
      c.coverage = static_cast<double>(inside) / static_cast<double>(widths.size());
      std::sort(widths.begin(), widths.end());
      const size_t n = widths.size();
      c.median_width = n % 2 == 1 ? widths[n / 2] : (widths[n / 2 - 1] + widths[n / 2]) / 2;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace vtrain

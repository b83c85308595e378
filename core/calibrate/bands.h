// Prediction intervals from held-out errors: the calibration regimes'
// bands (symmetric in log space, from quantiles of |log(predicted /
// measured)|, so a few outliers move them little), how often measured runs
// fall inside them, and the layer-shape grouping that keeps a shape's runs in
// one cross-validation fold.
#ifndef VTRAIN_CORE_CALIBRATE_BANDS_H_
#define VTRAIN_CORE_CALIBRATE_BANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/calibrate/calibration.h"

namespace vtrain {

// The layer shape of a job: hidden size, heads, FFN width, sequence length,
// t and micro-batch ("h=2048 heads=16 ffn=8192 seq=1024 t=2 mb=4"): the key
// of the kernels one decoder layer runs. Runs with the same shape differ only
// in layers, d, p and batch.
std::string LayerShapeKey(const Job& job);

// The fold (0 .. folds-1) of every measurement, grouped by LayerShapeKey:
// the shapes are shuffled by `seed` and dealt, largest first, to the fold
// with the fewest rows so far, so every shape's rows share one fold.
std::vector<int> ShapeFolds(absl::Span<const Measurement> measurements, int folds, uint64_t seed);

// The same dealing grouped by the model (ModelSpec::name, with its hidden
// size and layers, so two shapes sharing a name never share a group), so a
// held-out model was never seen in training.
std::vector<int> ModelFolds(absl::Span<const Measurement> measurements, int folds, uint64_t seed);

// The band of `regime` (RegimeOf or BaseRegimeOf of a measurement's job):
// the `coverage` quantile q of |log(1 + error)| over its successful rows
// gives error_low = exp(-q) - 1 and error_high = exp(q) - 1. `regime` empty:
// the band of every row.
ErrorBand BandOf(absl::Span<const Measurement> measurements, absl::Span<const ValidationRow> rows,
                 const std::string& regime, double coverage);

// Bands for every regime the measurements fall in (fine regimes and the two
// base ones), in a stable order; fine regimes with fewer than `min_rows` rows
// are left out (their jobs fall back to their base regime's band), and a
// base regime with fewer takes the band of all rows (more of them).
std::vector<ErrorBand> BandsOf(absl::Span<const Measurement> measurements,
                               absl::Span<const ValidationRow> rows, double coverage,
                               int64_t min_rows = 8);

// The band of the ratio of two plans of one job (the same model, GPU count
// and global batch; plans differ in t, c, d, p, micro-batch, recomputation):
// the `coverage` quantile q of |log(1 + e_i) - log(1 + e_j)| over every such
// pair of successful rows, as error_low = exp(-q) - 1 and error_high =
// exp(q) - 1, regime kPairedRegime, rows = the pairs. Errors of similar
// plans are correlated, so this is narrower than two independent bands:
// when two predictions differ by more than it, the faster one is faster.
// rows = 0 when there are no pairs.
ErrorBand PairedBandOf(absl::Span<const Measurement> measurements,
                       absl::Span<const ValidationRow> rows, double coverage);

// Fills rows[i].interval_low_ms / interval_high_ms from `bands` as Predict
// does (the job's regime, else its base regime).
void ApplyBands(absl::Span<const Measurement> measurements, absl::Span<const ErrorBand> bands,
                std::vector<ValidationRow>& rows);

// Coverage (measured inside [interval_low, interval_high]) and median
// relative width ((high - low) / predicted) of the rows with an interval, and
// their errors, per fine regime, in a stable order.
std::vector<RegimeCoverage> CoverageByRegime(absl::Span<const Measurement> measurements,
                                             absl::Span<const ValidationRow> rows);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CALIBRATE_BANDS_H_

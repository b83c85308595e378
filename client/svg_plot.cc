#include "client/svg_plot.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vtrain::client {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string PredictedVsMeasuredSvg(const std::vector<ScatterPoint>& points, double band_fraction,
                                   const std::string& title) {
  constexpr double kWidth = 640, kHeight = 640, kMargin = 70;
  double lo = 1e300, hi = 0;
  for (const ScatterPoint& p : points) {
    if (p.x <= 0 || p.y <= 0) continue;
    lo = std::min({lo, p.x, p.y});
    hi = std::max({hi, p.x, p.y});
  }
  if (!(hi > 0)) lo = 1, hi = 10;
  // Whole decades around the data.
  const double dlo = std::floor(std::log10(lo)), dhi = std::ceil(std::log10(hi));
  const double span = std::max(1.0, dhi - dlo);
  auto sx = [&](double v) {
    return kMargin + (std::log10(v) - dlo) / span * (kWidth - 2 * kMargin);
  };
  auto sy = [&](double v) {
    return kHeight - kMargin - (std::log10(v) - dlo) / span * (kHeight - 2 * kMargin);
  };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"30\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
      kWidth, kHeight, kWidth / 2, Escape(title));
  // The +/- band, then y = x.
  const double a = std::pow(10.0, dlo), b = std::pow(10.0, dlo + span);
  absl::StrAppend(
      &svg, absl::StrFormat(
                "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"#dde8f5\"/>\n",
                sx(a), sy(a * (1 + band_fraction)), sx(b), sy(std::min(b, b * (1 + band_fraction))),
                sx(b), sy(b * (1 - band_fraction)), sx(a), sy(a * (1 - band_fraction))));
  absl::StrAppend(
      &svg, absl::StrFormat(
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#4a78b5\"/>\n",
                sx(a), sy(a), sx(b), sy(b)));
  // Axes with decade ticks.
  absl::StrAppend(&svg,
                  absl::StrFormat("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
                                  "fill=\"none\" stroke=\"black\"/>\n",
                                  kMargin, kMargin, kWidth - 2 * kMargin, kHeight - 2 * kMargin));
  for (double d = dlo; d <= dlo + span + 1e-9; d += 1) {
    const double v = std::pow(10.0, d);
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n"
                                    "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                                    sx(v), kHeight - kMargin + 18, v, kMargin - 6, sy(v) + 4, v));
  }
  absl::StrAppend(
      &svg,
      absl::StrFormat(
          "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">measured iteration time (ms)</text>\n"
          "<text x=\"20\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 20 %.0f)\">"
          "predicted iteration time (ms)</text>\n"
          "<text x=\"%.0f\" y=\"%.0f\" fill=\"#4a78b5\">shaded: within %.0f%%</text>\n",
          kWidth / 2, kHeight - 25, kHeight / 2, kHeight / 2, kMargin + 8, kMargin + 16,
          100 * band_fraction));
  for (const ScatterPoint& p : points) {
    if (p.x <= 0 || p.y <= 0) continue;
    absl::StrAppend(&svg, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" "
                                          "fill-opacity=\"0.7\"><title>%s</title>"
                                          "</circle>\n",
                                          sx(p.x), sy(p.y), p.highlight ? "#d1495b" : "#333333",
                                          Escape(p.label)));
  }
  svg += "</svg>\n";
  return svg;
}

std::string TimeVsCostSvg(const std::vector<PlanPoint>& points, const std::string& title) {
  constexpr double kWidth = 720, kHeight = 520, kMargin = 80;
  double xlo = 1e300, xhi = 0, ylo = 1e300, yhi = 0;
  for (const PlanPoint& p : points) {
    if (p.days <= 0 || p.cost_usd <= 0) continue;
    xlo = std::min(xlo, p.days), xhi = std::max(xhi, p.days);
    ylo = std::min(ylo, p.cost_usd), yhi = std::max(yhi, p.cost_usd);
  }
  if (!(xhi > 0)) xlo = 1, xhi = 10, ylo = 1, yhi = 10;
  const double x0 = std::floor(std::log10(xlo)), x1 = std::max(x0 + 1, std::ceil(std::log10(xhi)));
  const double y0 = std::floor(std::log10(ylo)), y1 = std::max(y0 + 1, std::ceil(std::log10(yhi)));
  auto sx = [&](double v) {
    return kMargin + (std::log10(v) - x0) / (x1 - x0) * (kWidth - 2 * kMargin);
  };
  auto sy = [&](double v) {
    return kHeight - kMargin - (std::log10(v) - y0) / (y1 - y0) * (kHeight - 2 * kMargin);
  };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"30\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n"
      "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
      "stroke=\"black\"/>\n",
      kWidth, kHeight, kWidth / 2, Escape(title), kMargin, kMargin, kWidth - 2 * kMargin,
      kHeight - 2 * kMargin);
  for (double d = x0; d <= x1 + 1e-9; d += 1) {
    absl::StrAppend(
        &svg, absl::StrFormat("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
                              sx(std::pow(10.0, d)), kHeight - kMargin + 18, std::pow(10.0, d)));
  }
  for (double d = y0; d <= y1 + 1e-9; d += 1) {
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">$%g</text>\n",
                                    kMargin - 6, sy(std::pow(10.0, d)) + 4, std::pow(10.0, d)));
  }
  absl::StrAppend(
      &svg, absl::StrFormat(
                "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">training time (days)</text>\n"
                "<text x=\"20\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
                "%.0f)\">cost (USD)</text>\n",
                kWidth / 2, kHeight - 25, kHeight / 2, kHeight / 2));
  std::string frontier;
  for (const PlanPoint& p : points) {
    if (p.days <= 0 || p.cost_usd <= 0) continue;
    if (p.frontier)
      absl::StrAppend(&frontier, absl::StrFormat("%.1f,%.1f ", sx(p.days), sy(p.cost_usd)));
    absl::StrAppend(&svg,
                    absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" "
                                    "fill-opacity=\"0.7\"><title>%s</title></circle>\n",
                                    sx(p.days), sy(p.cost_usd), p.chosen ? 6 : 3,
                                    p.chosen ? "#d1495b" : (p.frontier ? "#4a78b5" : "#999999"),
                                    Escape(p.label)));
  }
  if (!frontier.empty()) {
    absl::StrAppend(
        &svg,
        absl::StrFormat(
            "<polyline points=\"%s\" fill=\"none\" stroke=\"#4a78b5\" stroke-width=\"1.5\"/>\n",
            frontier));
  }
  absl::StrAppend(
      &svg,
      absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\" fill=\"#4a78b5\">blue: Pareto frontier</text>"
                      "<text x=\"%.0f\" y=\"%.0f\" fill=\"#d1495b\">red: chosen plan</text>\n",
                      kWidth - kMargin - 150, kMargin + 16, kWidth - kMargin - 150, kMargin + 32));
  svg += "</svg>\n";
  return svg;
}

std::string LinesSvg(const std::vector<Series>& series, const std::string& title,
                     const std::string& x_label, const std::string& y_label) {
  constexpr double kWidth = 720, kHeight = 480, kMargin = 70;
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  double x_max = 0, y_max = 0;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x)) x_max = std::max(x_max, x);
      if (std::isfinite(y)) y_max = std::max(y_max, y);
    }
  }
  if (x_max <= 0) x_max = 1;
  if (y_max <= 0) y_max = 1;
  auto px = [&](double x) { return kMargin + x / x_max * (kWidth - 2 * kMargin); };
  auto py = [&](double y) { return kHeight - kMargin - y / y_max * (kHeight - 2 * kMargin); };
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"30\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
      kWidth, kHeight, kWidth / 2, Escape(title));
  // Axes with five ticks each.
  absl::StrAppend(&out, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                                        "stroke=\"black\"/>\n",
                                        px(0), py(0), px(x_max), py(0)));
  absl::StrAppend(&out, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                                        "stroke=\"black\"/>\n",
                                        px(0), py(0), px(0), py(y_max)));
  for (int i = 0; i <= 5; ++i) {
    const double x = x_max * i / 5, y = y_max * i / 5;
    absl::StrAppend(&out, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                                          "%.3g</text>\n",
                                          px(x), py(0) + 18, x));
    absl::StrAppend(&out, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">"
                                          "%.3g</text>\n",
                                          px(0) - 6, py(y) + 4, y));
  }
  absl::StrAppend(&out, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                                        "%s</text>\n",
                                        kWidth / 2, kHeight - 20, Escape(x_label)));
  absl::StrAppend(&out, absl::StrFormat("<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
                                        "transform=\"rotate(-90 18 %.1f)\">%s</text>\n",
                                        kHeight / 2, kHeight / 2, Escape(y_label)));
  for (size_t k = 0; k < series.size(); ++k) {
    const char* colour = kColours[k % std::size(kColours)];
    std::string path;
    double last_y = 0;
    bool first = true;
    for (const auto& [x, y] : series[k].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        first = true;  // a gap: the line starts again after it
        continue;
      }
      if (!first && series[k].steps) {
        absl::StrAppend(&path, absl::StrFormat(" L%.1f,%.1f", px(x), py(last_y)));
      }
      absl::StrAppend(&path, absl::StrFormat("%s%.1f,%.1f", first ? "M" : " L", px(x), py(y)));
      first = false;
      last_y = y;
    }
    absl::StrAppend(&out, absl::StrFormat("<path d=\"%s\" fill=\"none\" stroke=\"%s\" "
                                          "stroke-width=\"2\"><title>%s</title></path>\n",
                                          path, colour, Escape(series[k].name)));
    absl::StrAppend(&out, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>\n",
                                          kMargin + 10, kMargin + 16.0 * static_cast<double>(k),
                                          colour, Escape(series[k].name)));
  }
  return out + "</svg>\n";
}

}  // namespace vtrain::client

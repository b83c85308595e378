#!/usr/bin/env python3
"""The one source of the accuracy and speed figures that README.md and docs/
quote.

Accuracy figures are computed here, from this build: `vtrainctl validate
--json` over the measured and published runs in data/ (in-sample, or never
fitted on), and the held-out figures that `vtrainctl calibrate --cpp` wrote into
the headers of core/profile/*_params.inc when each built-in set was fitted
(re-fitting takes minutes; the headers are the fit's own record). Speed figures
are measurements, noisy and machine-dependent: they are recorded with their
command, date and machine in data/figures/speed.json (`--measure` re-measures
them) and rendered from there.

Pages hold generated blocks between two markers:
    <!-- figures:NAME -->
    ... (written by this script; do not edit by hand)
    <!-- /figures:NAME -->

Usage:
  scripts/figures.py --write     regenerate every block in README.md and docs/
  scripts/figures.py --check     exit 1 when a block differs from what this
                                 build generates (CI, scripts/check-code.sh)
  scripts/figures.py --measure   re-run the speed benchmarks into
                                 data/figures/speed.json (then --write)
  --vtrainctl PATH  (default build/client/vtrainctl)"""

import argparse
import datetime
import decimal
import functools
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
A100 = "data/a100-megatron-measured"
PUB = "data/published"
SPEED_FILE = "data/figures/speed.json"
BLOCK = re.compile(r"(<!-- figures:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)",
                   re.S)


@functools.lru_cache(maxsize=None)
def validate_json(vtrainctl, file):
    """`vtrainctl validate --json` over one file, run once per file."""
    out = subprocess.run([vtrainctl, "validate", "--json", "--threads", "2", "--measurements",
                          os.path.join(ROOT, file)], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def validate(vtrainctl, file):
    """A file's overall figures in percent."""
    o = validate_json(vtrainctl, file)["overall"]
    return {"rows": int(o["rows"]), "mape": 100 * o["mape"], "p90": 100 * o["p90_abs_error"],
            "max": 100 * o["max_abs_error"], "bias": 100 * o["bias"], "r2": o["r2"]}


@functools.lru_cache(maxsize=None)
def read(path):
    """A file of the repository, read once."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


# The lines `vtrainctl calibrate --cpp` writes into a parameter header: one per
# measurement file, one per regime, the overall one, and the bands.
HELD_OUT = re.compile(r"//\s+(?P<file>[\w.-]+\.csv): (?P<rows>\d+) runs, held-out MAPE "
                      r"(?P<mape>[\d.]+)%, p90 (?P<p90>[\d.]+)%, max (?P<max>[\d.]+)%"
                      r"(?:, R\^2 (?P<r2>\d+\.\d+))?")
REGIME = re.compile(r"//\s+(?P<name>\w+): (?P<rows>\d+) runs, held-out MAPE (?P<mape>[\d.]+)%.*"
                    r"coverage (?P<cov>[\d.]+)%, median width (?P<width>[\d.]+)%")
OVERALL = re.compile(r"Held-out MAPE (?P<mape>[\d.]+)%, R\^2 (?P<r2>\d+\.\d+)")
BAND = re.compile(r'bands\.push_back\(\{"(?P<name>\w+)", (?P<low>-?[\d.]+), (?P<high>-?[\d.]+),')
GEMM = re.compile(r"params\.gemm_max_efficiency = (?P<e>[\d.]+);")
A100_INC = "core/profile/a100_params.inc"


BENCHMARKS = {"gpt3": "GPT-3 175B", "llama31_405b": "Llama 3.1 405B",
              "llama31_8b": "Llama 3.1 8B"}


def validate_by_benchmark(vtrainctl, file):
    """Each row's error, grouped by the CSV's benchmark column (the JSON names
    each row as FILE:LINE)."""
    lines = read(file).split("\n")
    header = next(l for l in lines if l and not l.startswith("#")).split(",")
    column = header.index("benchmark")
    groups = {}
    for row in validate_json(vtrainctl, file)["rows"]:
        line = int(row["source"].rsplit(":", 1)[1])
        benchmark = lines[line - 1].split(",")[column]
        groups.setdefault(benchmark, []).append(100 * row["error"])
    return groups


def summary(errors):
    """MAPE, p90 of |error|, max |error| and bias of a list of % errors."""
    a = sorted(abs(e) for e in errors)
    p90 = a[min(len(a) - 1, max(0, -(-9 * len(a) // 10) - 1))]
    return {"rows": len(errors), "mape": sum(a) / len(a), "p90": p90, "max": a[-1],
            "bias": sum(errors) / len(errors)}


def render_mlperf_table(vtrainctl):
    rows = ["| GPU, runs | MAPE | p90 | max | bias |", "|---|---|---|---|---|"]
    for gpu in ("h100", "h200", "b200"):
        groups = validate_by_benchmark(vtrainctl, f"{PUB}/mlperf-{gpu}-fp8.csv")
        everything = [e for errors in groups.values() for e in errors]
        table = [(f"{gpu.upper()}, all {len(everything)}", summary(everything))]
        if len(groups) > 1:
            table += [(f"{gpu.upper()}, {BENCHMARKS[b]} ({len(e)})", summary(e))
                      for b, e in sorted(groups.items())]
        for label, v in table:
            rows.append(f"| {label} | {pct(v['mape'])} | {pct(v['p90'], 1)} | "
                        f"{pct(v['max'], 1)} | {v['bias']:+.1f}% |")
    return "\n".join(rows) + "\n"


def render_a100_calibration(_):
    """The two tables of the A100 fit in accuracy.md, from the header that
    `vtrainctl calibrate --cpp` wrote into core/profile/a100_params.inc."""
    text = read(A100_INC)
    files = {m["file"]: m for m in HELD_OUT.finditer(text)}
    overall = OVERALL.search(text)
    rows = ["| held out by layer shape | runs | MAPE | p90 | max | R² |",
            "|---|---|---|---|---|---|"]
    total = 0
    for name in ("single_node_calibration.csv", "multi_node_calibration.csv"):
        m = files[name]
        total += int(m["rows"])
        rows.append(f"| {name} | {m['rows']} | {m['mape']}% | {m['p90']}% | {m['max']}% | "
                    f"{m['r2']} |")
    rows.append(f"| all | {total} | {overall['mape']}% | | | {overall['r2']} |")
    return "\n".join(rows) + "\n"


def render_a100_regimes(_):
    text = read(A100_INC)
    regimes = {m["name"]: m for m in REGIME.finditer(text)}
    bands = {m["name"]: m for m in BAND.finditer(text)}
    rows = ["| regime | runs | held-out MAPE | held-out coverage | median width | built-in band |",
            "|---|---|---|---|---|---|"]
    for name in ("single_node_host_bound", "single_node_gpu_bound", "single_node_tp_node",
                 "multi_node_large_params", "multi_node_small_params"):
        r, b = regimes[name], bands[name]
        rows.append(f"| {name} | {r['rows']} | {half_up(r['mape'])}% | {r['cov']}% | "
                    f"{float(r['width']):.0f}% | {minus(100 * float(b['low']))}% / "
                    f"+{100 * float(b['high']):.1f}% |")
    return "\n".join(rows) + "\n"


def render_refits(vtrainctl):
    """accuracy.md's table of the H100, B200 and H200 sets: the refitted GEMM
    efficiency, the held-out figures and the fp8 bands, from their headers."""
    a100 = 100 * float(GEMM.search(read(A100_INC))["e"])
    out = ["| GPU | fitted on | GEMMs at | held out by model | bands (fp8 jobs) |",
           "|---|---|---|---|---|"]
    rows = [("H100-SXM5-80GB", "h100", "13 runs of 11 models, DGX H100, 8–512 GPUs (and Azure's "
             "8-GPU NCCL all-reduce curve)", f" (A100: {a100:.1f}%)"),
            ("B200-SXM-180GB", "b200", "6 runs of 6 models, DGX B200, 8–512 GPUs", "")]
    gemm = {}
    for label, gpu, fitted, note in rows:
        text = read(f"core/profile/{gpu}_params.inc")
        gemm[gpu] = 100 * float(GEMM.search(text)["e"])
        h = next(HELD_OUT.finditer(text))
        b = next(BAND.finditer(text))
        out.append(f"| {label} | {fitted} | {gemm[gpu]:.1f}% of the peak{note} | MAPE "
                   f"{h['mape']}%, p90 {half_up(h['p90'])}%, max {half_up(h['max'])}% | "
                   f"{minus(100 * float(b['low']))}% / +{100 * float(b['high']):.1f}% |")
    h200 = validate(vtrainctl, f"{PUB}/mlperf-h200-fp8.csv")
    out.append(f"| H200-SXM-141GB | none: the H100's fit (the same compute die and NVSwitch) | "
               f"{gemm['h100']:.1f}% | {pct(h200['mape'])} on {h200['rows']} MLPerf runs never "
               "fitted on | the H100's for fp8 jobs (both MLPerf runs inside); bf16: A100's, "
               "widened 1.3× |")
    return "\n".join(out) + "\n"


def half_up(text, places="0.1"):
    """A decimal figure the header wrote ("7.25") rounded half up ("7.3"),
    as a reader rounds, not half to even as float formatting does."""
    return str(decimal.Decimal(text).quantize(decimal.Decimal(places), decimal.ROUND_HALF_UP))


def minus(x):
    """A negative figure with a typographic minus, as the pages write them."""
    return f"−{-x:.1f}" if x < 0 else f"{x:.1f}"


def held_out(inc):
    """The per-file held-out figures and the per-regime interval coverage that
    `vtrainctl calibrate --cpp` wrote into a parameter header."""
    text = read(inc)
    files = {m["file"]: {k: float(m[k]) for k in ("rows", "mape", "p90", "max")}
             for m in HELD_OUT.finditer(text)}
    coverage = [float(m["cov"]) for m in REGIME.finditer(text)]
    return files, coverage


def accuracy(vtrainctl):
    """Every accuracy figure the pages quote, by name."""
    a100, a100_cov = held_out(A100_INC)
    h100, _ = held_out("core/profile/h100_params.inc")
    b200, _ = held_out("core/profile/b200_params.inc")
    f = {
        "a100_single_held": a100["single_node_calibration.csv"],
        "a100_multi_held": a100["multi_node_calibration.csv"],
        "a100_coverage": (min(a100_cov), max(a100_cov)),
        "a100_single_in": validate(vtrainctl, f"{A100}/single_node_calibration.csv"),
        "a100_multi_in": validate(vtrainctl, f"{A100}/multi_node_calibration.csv"),
        "h100_nemo_held": h100["nemo-h100-fp8.csv"],
        "b200_nemo_held": b200["nemo-b200-fp8.csv"],
    }
    for name in ("simumax-b200-bf16", "mlperf-h100-fp8", "mlperf-h200-fp8", "mlperf-b200-fp8",
                 "modelzoo-h100-moe", "simumax-b200-moe-bf16"):
        f[name] = validate(vtrainctl, f"{PUB}/{name}.csv")
    # The predicted peak memory against SimuMax's measured peak allocated,
    # over both of its files' measured plans.
    errors = []
    for name in ("simumax-b200-bf16", "simumax-b200-moe-bf16"):
        for row in validate_json(vtrainctl, f"{PUB}/{name}.csv")["rows"]:
            if "memory_error" in row:
                errors.append(100 * row["memory_error"])
    f["simumax_memory"] = {"rows": len(errors), "mape": sum(map(abs, errors)) / len(errors),
                           "max": max(map(abs, errors)), "bias": sum(errors) / len(errors)}
    return f


def pct(x, digits=2):
    return f"{x:.{digits}f}%"


def render_accuracy_summary(f):
    s, m = f["a100_single_held"], f["a100_multi_held"]
    lo, hi = f["a100_coverage"]
    rows = [
        ("what", "figure"),
        ("---", "---"),
        (f"A100 single-node runs ({s['rows']:.0f}), held out by layer shape",
         f"MAPE {pct(s['mape'])}, p90 {pct(s['p90'], 1)}, max {pct(s['max'], 1)}"),
        (f"A100 multi-node runs ({m['rows']:.0f}, up to 512 GPUs), held out by layer shape",
         f"MAPE {pct(m['mape'])}, p90 {pct(m['p90'], 1)}, max {pct(m['max'], 1)}"),
        ("the same runs, in-sample (the built-in set was fitted on them)",
         f"{pct(f['a100_single_in']['mape'])} / {pct(f['a100_multi_in']['mape'])}"),
    ]
    h, b = f["h100_nemo_held"], f["b200_nemo_held"]
    rows.append((f"H100 fp8, {h['rows']:.0f} published NeMo runs of 11 models, held out by model",
                 f"MAPE {pct(h['mape'])}, max {pct(h['max'], 1)} (one parameter fitted, after the "
                 "all-reduce model on Azure's NCCL curve)"))
    rows.append((f"B200 fp8, {b['rows']:.0f} published NeMo runs of 6 models, held out by model",
                 f"MAPE {pct(b['mape'])}, max {pct(b['max'], 1)}"))
    never = [
        ("simumax-b200-bf16", "B200 bf16, {n} runs SimuMax measured on one node, none fitted on"),
        ("mlperf-h100-fp8", "H100 fp8, {n} MLPerf Training runs (GPT-3 175B, Llama 3.1 405B, "
                            "256–11,616 GPUs), none fitted on"),
        ("mlperf-h200-fp8", "H200 fp8, {n} MLPerf Training runs (Llama 3.1 405B, 512 and 1,024 "
                            "GPUs), none fitted on"),
        ("mlperf-b200-fp8", "B200 fp8, {n} MLPerf Training runs, none fitted on"),
        ("modelzoo-h100-moe", "H100 MoE, {n} Megatron-MoE ModelZoo runs (Qwen3-235B-A22B, "
                              "Mixtral-8x22B; 128–256 GPUs), none fitted on"),
        ("simumax-b200-moe-bf16", "B200 MoE bf16, {n} runs SimuMax measured on one node "
                                  "(DeepSeek-V2/V3 cut to 4 layers), none fitted on"),
    ]
    for key, label in never:
        v = f[key]
        rows.append((label.format(n=v["rows"]),
                     f"MAPE {pct(v['mape'])}, p90 {pct(v['p90'], 1)}, max {pct(v['max'], 1)}, "
                     f"bias {v['bias']:+.1f}%"))
    mem = f["simumax_memory"]
    rows.append((f"Peak memory per GPU, {mem['rows']} plans SimuMax measured on B200 (Llama 3 "
                 "70B/405B shapes to 128K, DeepSeek-V2/V3 shapes), none fitted on",
                 f"MAPE {pct(mem['mape'])}, max {pct(mem['max'], 1)}, bias {mem['bias']:+.1f}% "
                 "of the peak allocated"))
    rows.append(("90% interval coverage, held out", f"{lo:.0f}–{hi:.0f}% per regime"))
    return "".join(f"| {a} | {b} |\n" for a, b in rows)


def render_readme_accuracy(f):
    h, b = f["h100_nemo_held"], f["b200_nemo_held"]
    m1, m2, m3, sb = (f["mlperf-h100-fp8"], f["mlperf-h200-fp8"], f["mlperf-b200-fp8"],
                      f["simumax-b200-bf16"])
    s, m = f["a100_single_held"], f["a100_multi_held"]
    mem = f["simumax_memory"]
    lo, hi = f["a100_coverage"]
    return (
        "- **Hopper and Blackwell are fitted on published runs only**, none measured here: H100 "
        f"{pct(h['mape'], 1)} and B200\n"
        f"  {pct(b['mape'], 1)} MAPE held out on NeMo fp8 runs. Never fitted on: {m1['rows']} "
        f"MLPerf H100 runs (256–11,616 GPUs)\n"
        f"  {pct(m1['mape'], 1)}, {m2['rows']} MLPerf H200 runs {pct(m2['mape'], 1)}, "
        f"{m3['rows']} MLPerf B200 runs {pct(m3['mape'], 1)}, {sb['rows']} SimuMax B200 bf16 "
        f"runs {pct(sb['mape'], 1)}.\n"
        f"  Peak memory per GPU, {mem['rows']} SimuMax plans: {pct(mem['mape'], 1)} MAPE, max "
        f"{pct(mem['max'], 1)}. Hopper bf16 has no run (widened A100\n"
        "  intervals); the H200 takes the H100's fit and fp8 bands "
        "([docs/accuracy.md](docs/accuracy.md#hopper-and-blackwell-fitted-on-published-runs)).\n"
        f"- **Accuracy on A100 is about {round((s['mape'] + m['mape']) / 2):.0f}% MAPE held out "
        f"by layer shape** ({pct(s['mape'])} single-node,\n"
        f"  {pct(m['mape'])} multi-node), above the 4–5% target; shapes next to each other can be "
        "off by ±10–25% in\n"
        "  opposite directions, which only measured profiles fix. Interval coverage is "
        f"{lo:.0f}–{hi:.0f}%, below the\n"
        "  nominal 90%.\n")


def render_speed(speed):
    rows = ["| what | median | command | measured |", "|---|---|---|---|"]
    for r in speed["figures"]:
        rows.append(f"| {r['what']} | {r['median']} | `{r['command']}` | {r['date']}, "
                    f"{r['commit']} |")
    return "\n".join(rows) + "\n\n" + f"Machine: {speed['machine']}.\n"


def measure(vtrainctl):
    """Re-measures the recorded speed figures (medians of repeated runs) and
    rewrites data/figures/speed.json."""
    path = os.path.join(ROOT, SPEED_FILE)
    with open(path, encoding="utf-8") as f:
        speed = json.load(f)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    for r in speed["figures"]:
        samples = []
        for _ in range(r.get("repeats", 5)):
            argv = [vtrainctl if a == "vtrainctl" else a for a in r["command"].split()]
            out = subprocess.run(argv + ["--json"], capture_output=True, text=True,
                                 cwd=ROOT).stdout
            value = json.loads(out)
            for key in r["json_path"].split("."):
                value = value[key]
            samples.append(float(value) / r.get("divide_by", 1))
        r["median"] = f"{statistics.median(samples):.{r.get('digits', 0)}f} {r['unit']}"
        r["date"] = datetime.date.today().isoformat()
        r["commit"] = commit
    with open(path, "w", encoding="utf-8") as f:
        json.dump(speed, f, indent=2, ensure_ascii=False)
        f.write("\n")


def blocks(vtrainctl):
    """Every generated block, by name."""
    f = accuracy(vtrainctl)
    speed = json.loads(read(SPEED_FILE))
    return {"accuracy-summary": render_accuracy_summary(f),
            "mlperf-table": render_mlperf_table(vtrainctl),
            "a100-calibration": render_a100_calibration(vtrainctl),
            "a100-regimes": render_a100_regimes(vtrainctl),
            "refits": render_refits(vtrainctl),
            "readme-accuracy": render_readme_accuracy(f),
            "speed-summary": render_speed(speed)}


def pages():
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, p) for p in os.listdir(docs) if p.endswith(".md"))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--measure", action="store_true")
    parser.add_argument("--vtrainctl", default=os.path.join(ROOT, "build/client/vtrainctl"))
    args = parser.parse_args(argv)
    if args.measure:
        measure(args.vtrainctl)
        return 0
    generated = blocks(args.vtrainctl)
    used, stale = set(), []
    for page in pages():
        with open(page, encoding="utf-8") as fh:
            text = fh.read()

        def fill(m, page=page):
            name = m["name"]
            if name not in generated:
                stale.append(f"{os.path.relpath(page, ROOT)}: no generator for block '{name}'")
                return m.group(0)
            used.add(name)
            if m["body"] != generated[name]:
                stale.append(f"{os.path.relpath(page, ROOT)}: block '{name}' differs from what "
                             "scripts/figures.py generates (run it with --write)")
            return m.group(1) + generated[name] + m.group(4)

        new = BLOCK.sub(fill, text)
        if args.write and new != text:
            with open(page, "w", encoding="utf-8") as fh:
                fh.write(new)
    unused = sorted(set(generated) - used)
    problems = (stale if args.check else []) + [f"block '{n}' is on no page" for n in unused]
    for p in problems:
        print(f"figures: {p}")
    if not problems:
        print(f"figures: {len(used)} blocks {'agree' if args.check else 'written'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

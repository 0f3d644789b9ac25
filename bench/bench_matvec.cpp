// Matrix-vector (decode) and matrix-matrix (prefill) products of the CPU kernels, per weight
// type and ISA, single-threaded. Counters:
//   weight_GBps  bytes of weights read per second (decode is memory bound: compare with the
//                machine's bandwidth, DESIGN.md principle 8)
//   GMACps       multiply-adds per second (prefill is compute bound)
// "hot" runs one 4096x4096 matrix again and again (L3-resident when it fits); "cold" cycles
// through enough copies (>= 256 MiB) that every call streams its weights from DRAM.
//
//   bench_matvec --benchmark_format=json
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "quant/cpu/kernels.h"
#include "quant/types.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

struct Matrices {
  std::vector<std::vector<uint8_t>> copies;  // each [rows][row_bytes(type, k)]
  size_t row_bytes;
};

Matrices make_weights(GgmlType t, int64_t rows, int64_t k, size_t min_total_bytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(k);
  Matrices m;
  m.row_bytes = df::row_bytes(t, k);
  std::vector<uint8_t> one(m.row_bytes * rows);
  for (int64_t i = 0; i < rows; ++i) {
    for (auto& v : row) v = dist(rng);
    df::cpu::quantize_row_ref(t, row.data(), one.data() + i * m.row_bytes, k);
  }
  const size_t n_copies = (min_total_bytes + one.size() - 1) / one.size();
  m.copies.assign(n_copies == 0 ? 1 : n_copies, one);
  return m;
}

void bm_gemm(benchmark::State& state, GgmlType t, Isa isa, int64_t n_act, bool cold) {
  if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const int64_t rows = 4096, k = 4096;
  const auto& kr = df::cpu::kernels(isa);
  const Matrices W = make_weights(t, rows, k, cold ? (size_t{256} << 20) : 0);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n_act * k);
  for (auto& v : x) v = dist(rng);
  const size_t act_bytes = df::cpu::act_row_bytes(t, k);
  std::vector<uint8_t> act(act_bytes * n_act);
  for (int64_t r = 0; r < n_act; ++r)
    kr.quantize_act(t, x.data() + r * k, act.data() + r * act_bytes, k);
  std::vector<float> y(rows * n_act);
  size_t c = 0;
  for (auto _ : state) {
    kr.gemm(t, k, W.copies[c].data(), W.row_bytes, 0, rows, act.data(), act_bytes, n_act,
            y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    c = (c + 1) % W.copies.size();
  }
  const double weight_bytes = double(W.row_bytes) * rows;
  state.counters["weight_GBps"] = benchmark::Counter(
      weight_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMACps"] = benchmark::Counter(
      double(rows) * k * n_act * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Activation quantisation of one 4096-row (included in every decode step).
void bm_quantize_act(benchmark::State& state, GgmlType t, Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const int64_t k = 4096;
  std::vector<float> x(k, 0.5f);
  std::vector<uint8_t> out(df::cpu::act_row_bytes(t, k));
  const auto& kr = df::cpu::kernels(isa);
  for (auto _ : state) {
    kr.quantize_act(t, x.data(), out.data(), k);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["elems_per_s"] =
      benchmark::Counter(double(k), benchmark::Counter::kIsIterationInvariantRate);
}

int register_all() {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
      const std::string name =
          std::string(df::type_name(t)) + "/" + std::string(df::cpu::isa_name(isa));
      const bool slow = isa == Isa::SCALAR;
      for (bool cold : {false, true}) {
        if (slow && cold) continue;
        benchmark::RegisterBenchmark(("matvec/" + name + (cold ? "/cold" : "/hot")).c_str(),
                                     bm_gemm, t, isa, int64_t{1}, cold)
            ->Unit(benchmark::kMicrosecond);
      }
      if (!slow)
        benchmark::RegisterBenchmark(("gemm_n64/" + name).c_str(), bm_gemm, t, isa, int64_t{64},
                                     false)
            ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("quantize_act/" + name).c_str(), bm_quantize_act, t, isa)
          ->Unit(benchmark::kMicrosecond);
    }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();

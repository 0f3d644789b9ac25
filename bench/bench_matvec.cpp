// Matrix-vector (decode) and matrix-matrix (prefill) products of the CPU kernels, per weight
// type and ISA; decode with 1 and 2 threads (rows split in two halves, the backend's thread
// pool). Counters:
//   weight_GBps  bytes of weights read per second (decode is memory bound: compare with the
//                machine's bandwidth, DESIGN.md principle 8)
//   GMACps       multiply-adds per second (prefill is compute bound)
// "hot" runs one 4096x4096 matrix again and again (L3-resident when it fits); "cold" cycles
// through enough copies (>= 256 MiB) that every call streams its weights from DRAM.
// When built with llama.cpp (DF_LLAMA_SRC/DF_LLAMA_LIB), matvec_ggml/* runs llama.cpp's own
// CPU vec_dot (the libggml-cpu variant ggml would pick here) row by row on the same data,
// as a baseline.
// verify/<type>/<isa>/n<N>/{exact,per_row}: a speculative verify (or batched decode) of N
// activation rows against a 2048x1024 matrix (L2/L3 resident, one thread): the row-exact
// multi-row kernel (Kernels::gemm_exact) vs N one-row calls (the decode kernel per row, what
// the backend's row-exact mode ran before); both give the same bits.
// The IQ / ternary / 1-2 bit formats run on random well-formed blocks (most have no reference
// quantiser).
//
//   bench_matvec --benchmark_format=json
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "../tests/unit/random_blocks.h"
#include "backend/cpu/thread_pool.h"
#include "quant/cpu/kernels.h"
#include "quant/types.h"
#ifdef DF_BENCH_GGML
#include "ggml_dl.h"
#endif

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
  if (df::test::scale_offset(t) != -2 && t != GgmlType::Q8_0) {
    one = df::test::random_rows(t, rows, k, 1);
  } else {
    for (int64_t i = 0; i < rows; ++i) {
      for (auto& v : row) v = dist(rng);
      df::cpu::quantize_row_ref(t, row.data(), one.data() + i * m.row_bytes, k);
    }
  }
  const size_t n_copies = (min_total_bytes + one.size() - 1) / one.size();
  m.copies.assign(n_copies == 0 ? 1 : n_copies, one);
  return m;
}

// Y = W x for a 4096x4096 W: ours (gemm) or, with ggml_dot set, ggml's vec_dot per row.
using GgmlDot = void (*)(int n, float* s, size_t bs, const void* x, size_t bx, const void* y,
                         size_t by, int nrc);

// All weight types the kernels support.
const std::vector<GgmlType>& bench_types() {
  static const std::vector<GgmlType> types = {
      GgmlType::F32,     GgmlType::F16,    GgmlType::BF16,    GgmlType::Q8_0,   GgmlType::Q4_0,
      GgmlType::Q4_1,    GgmlType::Q5_0,   GgmlType::Q5_1,    GgmlType::Q2_K,   GgmlType::Q3_K,
      GgmlType::Q4_K,    GgmlType::Q5_K,   GgmlType::Q6_K,    GgmlType::MXFP4,  GgmlType::NVFP4,
      GgmlType::IQ1_S,   GgmlType::IQ1_M,  GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
      GgmlType::IQ3_XXS, GgmlType::IQ3_S,  GgmlType::IQ4_NL,  GgmlType::IQ4_XS, GgmlType::TQ1_0,
      GgmlType::TQ2_0,   GgmlType::Q1_0,   GgmlType::Q2_0};
  return types;
}

void bm_matvec_impl(benchmark::State& state, GgmlType t, Isa isa, int64_t n_act, bool cold,
                    GgmlDot ggml_dot, int threads) {
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
  df::cpu::ThreadPool pool(threads);
  size_t c = 0;
  // rows [i0, i1) of the product on one thread
  auto part = [&](int64_t i0, int64_t i1) {
    if (ggml_dot) {
      for (int64_t i = i0; i < i1; ++i)
        ggml_dot(static_cast<int>(k), &y[i], 0, W.copies[c].data() + i * W.row_bytes, 0,
                 act.data(), 0, 1);
    } else {
      kr.gemm(t, k, W.copies[c].data(), W.row_bytes, i0, i1, act.data(), act_bytes, n_act,
              y.data(), rows);
    }
  };
  for (auto _ : state) {
    if (threads == 1)
      part(0, rows);
    else
      pool.parallel_for(threads, [&](int64_t task, int) {
        part(rows * task / threads, rows * (task + 1) / threads);
      });
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

void bm_gemm(benchmark::State& state, GgmlType t, Isa isa, int64_t n_act, bool cold, int threads) {
  bm_matvec_impl(state, t, isa, n_act, cold, nullptr, threads);
}

void bm_verify(benchmark::State& state, GgmlType t, Isa isa, int64_t n_act, bool exact) {
  if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const int64_t rows = 2048, k = 1024;
  const auto& kr = df::cpu::kernels(isa);
  const Matrices W = make_weights(t, rows, k, 0);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n_act * k);
  for (auto& v : x) v = dist(rng);
  const size_t act_bytes = df::cpu::act_row_bytes(t, k);
  std::vector<uint8_t> act(act_bytes * n_act);
  for (int64_t r = 0; r < n_act; ++r) kr.quantize_act(t, x.data() + r * k, act.data() + r * act_bytes, k);
  std::vector<float> y(rows * n_act);
  for (auto _ : state) {
    if (exact) {
      kr.gemm_exact(t, k, W.copies[0].data(), W.row_bytes, 0, rows, act.data(), act_bytes, n_act, y.data(), rows);
    } else {
      for (int64_t r = 0; r < n_act; ++r)
        kr.gemm(t, k, W.copies[0].data(), W.row_bytes, 0, rows, act.data() + r * act_bytes, act_bytes, 1,
                y.data() + r * rows, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["rows_per_s"] = benchmark::Counter(double(n_act), benchmark::Counter::kIsIterationInvariantRate);
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
  for (GgmlType t : bench_types())
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
      const std::string name =
          std::string(df::type_name(t)) + "/" + std::string(df::cpu::isa_name(isa));
      const bool slow = isa == Isa::SCALAR;
      for (bool cold : {false, true})
        for (int threads : {1, 2}) {
          if (slow && (cold || threads > 1)) continue;
          benchmark::RegisterBenchmark(("matvec/" + name + (cold ? "/cold" : "/hot") + "/t" +
                                        std::to_string(threads))
                                           .c_str(),
                                       bm_gemm, t, isa, int64_t{1}, cold, threads)
              ->Unit(benchmark::kMicrosecond)
              ->MeasureProcessCPUTime()
              ->UseRealTime();
        }
      if (!slow)
        benchmark::RegisterBenchmark(("gemm_n64/" + name).c_str(), bm_gemm, t, isa, int64_t{64},
                                     false, 1)
            ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("quantize_act/" + name).c_str(), bm_quantize_act, t, isa)
          ->Unit(benchmark::kMicrosecond);
    }
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K,
                     GgmlType::Q6_K, GgmlType::IQ4_XS})
    for (Isa isa : {Isa::AVX2, Isa::AVX512})
      for (int64_t n : {1, 2, 4, 8})
        for (bool exact : {true, false})
          benchmark::RegisterBenchmark(("verify/" + std::string(df::type_name(t)) + "/" +
                                        std::string(df::cpu::isa_name(isa)) + "/n" + std::to_string(n) +
                                        (exact ? "/exact" : "/per_row"))
                                           .c_str(),
                                       bm_verify, t, isa, n, exact)
              ->Unit(benchmark::kMicrosecond);
#ifdef DF_BENCH_GGML
  static const df::test::GgmlLibs libs;  // kept loaded for the whole run
  if (libs.error().empty() && libs.cpu_traits(GGML_TYPE_F32))
    for (GgmlType t : bench_types())
      for (bool cold : {false, true})
        for (int threads : {1, 2}) {
          // ggml's activation format equals ours (quantize_act is bit exact with from_float)
          const GgmlDot dot = libs.cpu_traits(static_cast<ggml_type>(t))->vec_dot;
          benchmark::RegisterBenchmark(
              ("matvec_ggml/" + std::string(df::type_name(t)) + "/" + libs.cpu_variant() +
               (cold ? "/cold" : "/hot") + "/t" + std::to_string(threads))
                  .c_str(),
              bm_matvec_impl, t, Isa::SCALAR, int64_t{1}, cold, dot, threads)
              ->Unit(benchmark::kMicrosecond)
              ->MeasureProcessCPUTime()
              ->UseRealTime();
        }
#endif
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();

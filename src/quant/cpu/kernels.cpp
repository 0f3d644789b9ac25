// Kernel selection (CPUID + XGETBV), the registries of the ISAs with the one fallback rule,
// activation formats, reference row conversions.
#include "quant/cpu/kernels.h"

#include <cpuid.h>

#include <array>
#include <initializer_list>
#include <string>

#include "common/error.h"
#include "quant/cpu/registry.h"
#include "quant/formats.h"

namespace df::quant {
void throw_unsupported_type(GgmlType t) {
  const auto info = type_info(static_cast<uint32_t>(t));
  throw Error("tensor type " +
              (info ? std::string(info->name) : "#" + std::to_string(static_cast<uint32_t>(t))) +
              " is not supported by the CPU kernels yet");
}
}  // namespace df::quant

namespace df::cpu {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

Isa detect_isa() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::SCALAR;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!(osxsave && avx && fma && f16c)) return Isa::SCALAR;
  const uint64_t xcr0 = xgetbv0();
  if ((xcr0 & 0x6) != 0x6) return Isa::SCALAR;  // OS saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::SCALAR;
  const bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
  if (!(avx2 && bmi2)) return Isa::SCALAR;
  const bool f512 = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30),
             vl = b & (1u << 31), vnni = c & (1u << 11);
  unsigned a1 = 0, b1, c1, d1;
  const bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // opmask, ZMM_Hi256, Hi16_ZMM
  if (f512 && dq && bw && vl && vnni && bf16 && os_zmm) return Isa::AVX512;
  return Isa::AVX2;
}

}  // namespace

Isa best_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::SCALAR: return "scalar";
    case Isa::AVX2: return "avx2";
    case Isa::AVX512: return "avx512";
  }
  return "?";
}

Isa parse_isa(std::string_view s) {
  if (s == "auto") return best_isa();
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512})
    if (s == isa_name(isa)) return isa;
  throw Error("unknown ISA '" + std::string(s) + "' (expected scalar, avx2, avx512 or auto)");
}

GgmlType vec_dot_type(GgmlType w) {
  return quant::visit_format(quant::WeightFormats{}, w,
                             []<class F>(F) { return F::Act::type; });
}

size_t act_row_bytes(GgmlType w, int64_t n) { return row_bytes(vec_dot_type(w), n); }

namespace {

// Throws df::Error unless n is a positive multiple of w's block size.
void check_row_elems(GgmlType w, int64_t n) {
  const auto& ti = type_info(w);
  if (n <= 0 || n % ti.block_elems != 0)
    throw Error("row of " + std::to_string(n) + " elements is not a positive multiple of the " +
                std::string(ti.name) + " block size " + std::to_string(ti.block_elems));
}

// The parts of each ISA's registry (registry.h), one per translation unit.
struct IsaParts {
  Isa isa;
  std::initializer_list<const Registry*> parts;
};
const IsaParts kIsaParts[] = {
    {Isa::SCALAR, {&kScalarPart}},
    {Isa::AVX2, {&kFloatQ8Avx2Part, &kLegacyAvx2Part, &kKquantAvx2Part, &kLowbitAvx2Part}},
    {Isa::AVX512, {&kFloatAvx512Part, &kLegacyAvx512Part, &kKquantAvx512Part, &kLowbitAvx512Part}},
};
constexpr int kNumIsas = 3;

template <class Fn>
void take(Fn& dst, Fn src, size_t s, Isa isa) {
  if (!src) return;
  if (dst) throw Error("two " + std::string(isa_name(isa)) + " kernels registered for type #" + std::to_string(s));
  dst = src;
}

// By weight type: the quantiser of its activation format, its vec_dot and gemm, each from
// the best ISA up to the row's that has it (the fallback rule: AVX-512 -> AVX2 -> scalar).
using ByWeight = std::array<Registry, kNumIsas>;
ByWeight resolve() {
  std::array<Registry, kNumIsas> by_format{};
  for (int i = 0; i < kNumIsas; ++i) {
    Registry& r = by_format[i];
    for (const Registry* part : kIsaParts[i].parts)
      for (size_t s = 0; s < kTypeSlots; ++s) {
        take(r[s].quantize, (*part)[s].quantize, s, kIsaParts[i].isa);
        take(r[s].vec_dot, (*part)[s].vec_dot, s, kIsaParts[i].isa);
        take(r[s].gemm, (*part)[s].gemm, s, kIsaParts[i].isa);
        take(r[s].gemm_exact, (*part)[s].gemm_exact, s, kIsaParts[i].isa);
      }
    if (i > 0)
      for (size_t s = 0; s < kTypeSlots; ++s) {
        const FormatKernels& lower = by_format[i - 1][s];
        if (!r[s].quantize) r[s].quantize = lower.quantize;
        if (!r[s].vec_dot) r[s].vec_dot = lower.vec_dot;
        // gemm_exact comes from the ISA whose gemm is used: its bits are that gemm's at
        // n_act = 1 (an ISA with its own gemm but no gemm_exact runs gemm row by row)
        if (!r[s].gemm) {
          r[s].gemm = lower.gemm;
          r[s].gemm_exact = lower.gemm_exact;
        }
      }
  }
  ByWeight out{};
  for (int i = 0; i < kNumIsas; ++i)
    quant::visit_all(quant::WeightFormats{}, [&]<class F>(F) {
      const FormatKernels& w = by_format[i][slot(F::type)];
      out[i][slot(F::type)] = {by_format[i][slot(F::Act::type)].quantize, w.vec_dot, w.gemm, w.gemm_exact};
    });
  return out;
}

// The kernels of weight type w on ISA I; throws df::Error for a bad row size or a type
// without kernels.
template <Isa I>
const FormatKernels& entry(GgmlType w, int64_t n) {
  static const ByWeight table = resolve();
  check_row_elems(w, n);
  const size_t s = slot(w);
  if (s >= kTypeSlots || !table[static_cast<int>(I)][s].vec_dot) quant::throw_unsupported_type(w);
  return table[static_cast<int>(I)][s];
}

template <Isa I>
void quantize_act(GgmlType w, const float* x, void* out, int64_t n) {
  entry<I>(w, n).quantize(x, out, n);
}
template <Isa I>
float vec_dot(GgmlType w, int64_t n, const void* w_row, const void* act_row) {
  return entry<I>(w, n).vec_dot(n, w_row, act_row);
}
template <Isa I>
void gemm(GgmlType w, int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
          const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  entry<I>(w, n).gemm(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
}

template <Isa I>
void gemm_exact(GgmlType w, int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  const FormatKernels& k = entry<I>(w, n);
  if (k.gemm_exact) {
    k.gemm_exact(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    return;
  }
  for (int64_t r = 0; r < n_act; ++r)  // no row-exact tiles: the decode kernel per row
    k.gemm(n, W, w_stride, i0, i1, act + act_stride * static_cast<size_t>(r), act_stride, 1, Y + r * ldy, ldy);
}

template <Isa I>
constexpr Kernels kKernelsOf = {I, &quantize_act<I>, &vec_dot<I>, &gemm<I>, &gemm_exact<I>};

}  // namespace

const Kernels& kernels(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_isa()))
    throw Error("this CPU cannot run the " + std::string(isa_name(isa)) + " kernels (best: " +
                std::string(isa_name(best_isa())) + ")");
  switch (isa) {
    case Isa::SCALAR: return kKernelsOf<Isa::SCALAR>;
    case Isa::AVX2: return kKernelsOf<Isa::AVX2>;
    case Isa::AVX512: return kKernelsOf<Isa::AVX512>;
  }
  throw Error("bad ISA value");
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  check_row_elems(t, n);
  quant::visit_format(quant::WeightFormats{}, t, [&]<class F>(F) {
    F::dequantize_ref(static_cast<const typename F::Block*>(src), dst, n / F::block_elems);
  });
}

void quantize_row_ref(GgmlType t, const float* src, void* dst, int64_t n) {
  check_row_elems(t, n);
  quant::visit_format(quant::WeightFormats{}, t, [&]<class F>(F) {
    if constexpr (quant::QuantizableFormat<F>)
      F::quantize_ref(src, static_cast<typename F::Block*>(dst), n / F::block_elems);
    else
      throw Error("no reference quantiser for type " + std::string(type_name(t)) +
                  " (ggml's needs an importance matrix or search tables)");
  });
}

}  // namespace df::cpu

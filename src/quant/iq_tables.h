// Lookup tables of the IQ formats (grids of 8 or 4 magnitudes per index, sign codes, the
// non-linear IQ4 values). The numbers are facts of the file format, copied from llama.cpp's
// ggml-common.h by tools/iq_tables/gen_iq_tables.py (iq_grids.cpp, iq1s_grid.cpp); the
// derived tables below are computed from them (iq_tables.cpp).
//
// A grid entry packs its values as bytes, element j in byte j (little endian):
//   IQ2 grids: 8 unsigned magnitudes (from {8, 25, 43}); IQ3 grids: 4 magnitudes (<= 62);
//   IQ1 grid: 8 signed values from {-1, 0, 1}.
#pragma once
#include <cstdint>

namespace df::quant {

extern const uint64_t kIq2xxsGrid[256];   // IQ2_XXS
extern const uint64_t kIq2xsGrid[512];    // IQ2_XS
extern const uint64_t kIq2sGrid[1024];    // IQ2_S
extern const uint32_t kIq3xxsGrid[256];   // IQ3_XXS
extern const uint32_t kIq3sGrid[512];     // IQ3_S
extern const uint64_t kIq1sGrid[2048];    // IQ1_S, IQ1_M
extern const int8_t kIq4nlValues[16];     // IQ4_NL, IQ4_XS

// Sign bytes of 8 elements from a 7-bit code: bit j set = element j negative; bit 7 makes
// the number of negative signs even (ggml's ksigns_iq2xs).
extern const uint8_t kIq2xsSigns[128];

// kIq2xsSigns expanded to 8 bytes of +1 / -1 (for vpsignb), element j in byte j
// (ggml's keven_signs_q2xs holds the same values). A plain aggregate: no member functions
// to be instantiated in the ISA translation units.
struct SignsPm1Table {
  uint64_t v[128];
};
extern const SignsPm1Table kIq2xsSignsPm1;

}  // namespace df::quant

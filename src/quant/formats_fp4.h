// 4-bit float formats with E2M1 elements (block layouts: ggml-common.h). Both use ggml's
// doubled E2M1 value table kvalues_fp4 = {0, 1, 2, 3, 4, 6, 8, 12, and negatives} and
// halve the scale instead, so that the element values are int8 and dot products are integer
// sums against Q8_0 activations.
//   MXFP4: 32 elements, one E8M0 scale byte e: w = kvalues[q] * 2^(e - 128).
//          Nibble order as Q4_0: byte j holds element j (low) and j + 16 (high).
//   NVFP4: 64 elements in 4 sub-blocks of 16, one UE4M3 scale byte each:
//          w = kvalues[q] * ue4m3(d[s]) / 2. Sub-block s: byte s*8 + j holds element
//          16s + j (low nibble) and 16s + 8 + j (high).
// Activations: Q8_0 (NVFP4's block spans two Q8_0 blocks).
// quantize_ref = ggml's quantize_row_mxfp4_ref / quantize_row_nvfp4_ref (bit exact).
// dot_ref: exact int32 sums per scale group, s += float(isum) * (fp16(da) * scale_w), as
// ggml's vec_dot (per 32 elements for MXFP4, per 16 for NVFP4).
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df::quant {

// Doubled E2M1 values (ggml-common.h kvalues_fp4).
inline constexpr int8_t kValuesFp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

struct FormatMxfp4 {
  static constexpr GgmlType type = GgmlType::MXFP4;
  static constexpr int64_t block_elems = kQKMxfp4;
  using Block = BlockMxfp4;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatNvfp4 {
  static constexpr GgmlType type = GgmlType::NVFP4;
  static constexpr int64_t block_elems = kQKNvfp4;
  using Block = BlockNvfp4;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);  // a: 2*nb blocks
};

static_assert(WeightFormat<FormatMxfp4> && WeightFormat<FormatNvfp4>);

}  // namespace df::quant

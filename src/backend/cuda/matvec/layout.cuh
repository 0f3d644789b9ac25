// Host side of the GPU weight layouts (see matvec.cuh):
//   raw:    rows x q_row_bytes of the ggml blocks as in the file (rows padded to 16 bytes);
//   planar: the formats of dev_fast.cuh. Per row, a quant plane of kLoads sub-planes of
//           nparts x 16 bytes (word i of part t at (i * nparts + t) * 16), then, in the meta
//           plane, the blocks' scale bytes (nblocks x kMetaBytes, 16-byte padded rows).
//           Bytes are those of the ggml blocks, re-ordered (Q4_K, Q5_K, Q6_K: to the nibble order
//           of Q4_0 per 32 elements, Q6_K's high bits next to them, Q5_K's fifth bits in
//           the meta plane, 4 bytes per 32 after the block's 16; Q4_1 / Q5_0 / Q5_1: qs as
//           they are, meta planes of their qh (permuted as Q5_K's), d, m); nothing is expanded.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "quant/formats.h"

namespace df::cudamv {

struct Layout {
  bool planar = false;
  size_t q_row_bytes = 0, m_row_bytes = 0;
  int64_t nparts = 0;   // planar: parts per row
  int loads = 0;        // planar: 16-byte words per part
};

inline size_t align16(size_t v) { return (v + 15) & ~size_t{15}; }

// Planar geometry of a type: {part elems, loads, meta bytes per block}; loads = 0: raw.
struct PlanarGeom {
  int part_elems, loads, meta_bytes;
};
inline PlanarGeom planar_geom(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return {32, 1, 2};
    case GgmlType::Q8_0: return {16, 1, 2};
    case GgmlType::Q4_1: return {32, 1, 4};
    case GgmlType::Q5_0: return {32, 1, 6};
    case GgmlType::Q5_1: return {32, 1, 8};
    case GgmlType::Q4_K: return {32, 1, 16};
    case GgmlType::Q5_K: return {32, 1, 48};
    case GgmlType::Q6_K: return {64, 3, 18};
    case GgmlType::IQ4_XS: return {32, 1, 8};
    default: return {0, 0, 0};
  }
}

inline bool layout_supported(GgmlType t) {
  bool found = false;
  quant::visit_format(quant::WeightFormats{}, t, [&](auto) { found = true; });
  return found;
}

inline Layout layout_of(GgmlType t, int64_t cols) {
  const auto info = type_info(static_cast<uint32_t>(t));
  if (!info || !layout_supported(t))
    throw Error("CUDA matvec: unsupported weight type " + std::to_string(static_cast<uint32_t>(t)));
  const bool is_float = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
  const int64_t mult = is_float ? 8 : info->block_elems;
  if (cols <= 0 || cols % mult != 0)
    throw Error("CUDA matvec: " + std::string(info->name) + " row of " + std::to_string(cols) +
                " elements is not a multiple of " + std::to_string(mult));
  Layout l;
  const PlanarGeom g = planar_geom(t);
  if (g.loads == 0) {
    l.q_row_bytes = align16(row_bytes(t, cols));
    return l;
  }
  const int64_t nb = cols / info->block_elems;
  l.planar = true;
  l.nparts = cols / g.part_elems;
  l.loads = g.loads;
  l.q_row_bytes = static_cast<size_t>(l.nparts) * 16 * g.loads;
  l.m_row_bytes = align16(static_cast<size_t>(nb) * g.meta_bytes);
  return l;
}

namespace detail {

// Q4_0 nibble order of 32 values v (0..15): byte i = v[i] | v[i + 16] << 4.
inline void nibbles32(const int8_t* v, uint8_t* out) {
  for (int i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>((v[i] & 15) | ((v[i + 16] & 15) << 4));
}

// One planar row from one row of ggml blocks.
inline void pack_planar_row(GgmlType t, int64_t cols, const uint8_t* src, const Layout& l, uint8_t* q, uint8_t* m) {
  const int64_t np = l.nparts;
  auto word = [&](int i, int64_t part) { return q + (i * np + part) * 16; };
  switch (t) {
    case GgmlType::Q4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(src);
      for (int64_t k = 0; k < np; ++k) {
        std::memcpy(word(0, k), b[k].qs, 16);
        std::memcpy(m + 2 * k, &b[k].d, 2);
      }
      break;
    }
    case GgmlType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (int64_t k = 0; k < np / 2; ++k) {
        std::memcpy(word(0, 2 * k), b[k].qs, 16);
        std::memcpy(word(0, 2 * k + 1), b[k].qs + 16, 16);
        std::memcpy(m + 2 * k, &b[k].d, 2);
      }
      break;
    }
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: {  // dev_fast.cuh FastLegacyT
      const bool mn = t != GgmlType::Q5_0, five = t != GgmlType::Q4_1;
      const size_t bb = mn ? (five ? 24 : 20) : 22, qh_at = mn ? 4 : 2, qs_at = qh_at + (five ? 4 : 0);
      uint8_t* dp = m + (five ? 4 * np : 0);
      for (int64_t k = 0; k < np; ++k) {
        const uint8_t* b = src + bb * static_cast<size_t>(k);
        std::memcpy(word(0, k), b + qs_at, 16);
        std::memcpy(dp + 2 * k, b, 2);
        if (mn) std::memcpy(dp + 2 * np + 2 * k, b + 2, 2);
        if (five) {
          uint32_t qh = 0, h = 0;
          std::memcpy(&qh, b + qh_at, 4);
          for (int mm = 0; mm < 4; ++mm)
            for (int kk = 0; kk < 4; ++kk) {
              h |= ((qh >> (4 * mm + kk)) & 1u) << (8 * kk + mm);
              h |= ((qh >> (16 + 4 * mm + kk)) & 1u) << (8 * kk + 4 + mm);
            }
          for (int i = 0; i < 4; ++i) m[4 * k + i] = static_cast<uint8_t>(h >> (8 * i));
        }
      }
      break;
    }
    case GgmlType::Q4_K: {
      const auto* b = reinterpret_cast<const BlockQ4_K*>(src);
      quant::KUnpacked u;
      for (int64_t k = 0; k < np / 8; ++k) {
        quant::unpack(b[k], u);
        for (int s = 0; s < 8; ++s) detail::nibbles32(u.q + 32 * s, word(0, 8 * k + s));
        std::memcpy(m + 16 * k, &b[k].d, 2);
        std::memcpy(m + 16 * k + 2, &b[k].dmin, 2);
        std::memcpy(m + 16 * k + 4, b[k].scales, 12);
      }
      break;
    }
    case GgmlType::Q5_K: {  // as Q4_K, then per part the fifth bits (dev_fast.cuh FastQ5_K)
      const auto* b = reinterpret_cast<const BlockQ5_K*>(src);
      quant::KUnpacked u;
      for (int64_t k = 0; k < np / 8; ++k) {
        quant::unpack(b[k], u);
        uint8_t* mb = m + 48 * k;
        std::memcpy(mb, &b[k].d, 2);
        std::memcpy(mb + 2, &b[k].dmin, 2);
        std::memcpy(mb + 4, b[k].scales, 12);
        for (int s = 0; s < 8; ++s) {
          const int8_t* v = u.q + 32 * s;
          detail::nibbles32(v, word(0, 8 * k + s));
          uint32_t h = 0;
          for (int mm = 0; mm < 4; ++mm)
            for (int kk = 0; kk < 4; ++kk) {
              h |= static_cast<uint32_t>((v[4 * mm + kk] >> 4) & 1) << (8 * kk + mm);
              h |= static_cast<uint32_t>((v[16 + 4 * mm + kk] >> 4) & 1) << (8 * kk + 4 + mm);
            }
          for (int i = 0; i < 4; ++i) mb[16 + 4 * s + i] = static_cast<uint8_t>(h >> (8 * i));
        }
      }
      break;
    }
    case GgmlType::Q6_K: {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
      const int64_t nb = np / 4;
      quant::KUnpacked u;
      for (int64_t k = 0; k < nb; ++k) {
        quant::unpack(b[k], u);
        int8_t q6[256];
        for (int e = 0; e < 256; ++e) q6[e] = static_cast<int8_t>(u.q[e] + 32);
        for (int p = 0; p < 4; ++p) {
          const int8_t* v = q6 + 64 * p;
          detail::nibbles32(v, word(0, 4 * k + p));
          detail::nibbles32(v + 32, word(1, 4 * k + p));
          uint8_t* hw = word(2, 4 * k + p);
          std::memset(hw, 0, 16);
          for (int h = 0; h < 2; ++h)
            for (int mm = 0; mm < 4; ++mm)
              for (int kk = 0; kk < 4; ++kk) {
                const int lo = (v[32 * h + 4 * mm + kk] >> 4) & 3, hi = (v[32 * h + 16 + 4 * mm + kk] >> 4) & 3;
                const int bits = mm % 2 ? (lo | (hi << 2)) : ((lo << 4) | (hi << 6));
                hw[4 * (2 * h + mm / 2) + kk] = static_cast<uint8_t>(hw[4 * (2 * h + mm / 2) + kk] | bits);
              }
        }
        std::memcpy(m + 16 * k, b[k].scales, 16);
        std::memcpy(m + 16 * nb + 2 * k, &b[k].d, 2);
      }
      break;
    }
    case GgmlType::IQ4_XS: {
      const auto* b = reinterpret_cast<const BlockIQ4_XS*>(src);
      for (int64_t k = 0; k < np / 8; ++k) {
        for (int ib = 0; ib < 8; ++ib) std::memcpy(word(0, 8 * k + ib), b[k].qs + 16 * ib, 16);
        std::memcpy(m + 8 * k, &b[k], 8);  // d, scales_h, scales_l[4]
      }
      break;
    }
    default: throw Error("CUDA matvec: no planar layout for this type");
  }
  (void)cols;
}

}  // namespace detail

// Packs rows x row_bytes(t, cols) bytes of ggml blocks into dst (packed_bytes() bytes).
inline void pack_rows(GgmlType t, int64_t cols, int64_t rows, const uint8_t* src, const Layout& l, uint8_t* dst) {
  const size_t rb = row_bytes(t, cols);
  std::memset(dst, 0, (l.q_row_bytes + l.m_row_bytes) * static_cast<size_t>(rows));
  uint8_t* mplane = dst + l.q_row_bytes * static_cast<size_t>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + rb * static_cast<size_t>(r);
    if (!l.planar)
      std::memcpy(dst + l.q_row_bytes * static_cast<size_t>(r), s, rb);
    else
      detail::pack_planar_row(t, cols, s, l, dst + l.q_row_bytes * static_cast<size_t>(r),
                              mplane + l.m_row_bytes * static_cast<size_t>(r));
  }
}

// pack_rows on up to 16 host threads over ranges of rows (the same bytes; loading large
// models is otherwise bound by one core's repacking).
inline void pack_rows_parallel(GgmlType t, int64_t cols, int64_t rows, const uint8_t* src, const Layout& l,
                               uint8_t* dst) {
  const size_t rb = row_bytes(t, cols);
  const int64_t bytes = static_cast<int64_t>(rb) * rows;
  const int threads = static_cast<int>(std::clamp<int64_t>(bytes >> 24, 1, std::min(16u, std::max(1u, std::thread::hardware_concurrency()))));
  if (threads <= 1) return pack_rows(t, cols, rows, src, l, dst);
  uint8_t* mplane = dst + l.q_row_bytes * static_cast<size_t>(rows);
  auto range = [&](int64_t r0, int64_t r1) {
    const size_t n = static_cast<size_t>(r1 - r0);
    std::memset(dst + l.q_row_bytes * static_cast<size_t>(r0), 0, l.q_row_bytes * n);
    std::memset(mplane + l.m_row_bytes * static_cast<size_t>(r0), 0, l.m_row_bytes * n);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* s = src + rb * static_cast<size_t>(r);
      if (!l.planar)
        std::memcpy(dst + l.q_row_bytes * static_cast<size_t>(r), s, rb);
      else
        detail::pack_planar_row(t, cols, s, l, dst + l.q_row_bytes * static_cast<size_t>(r),
                                mplane + l.m_row_bytes * static_cast<size_t>(r));
    }
  };
  std::vector<std::thread> pool;
  const int64_t per = (rows + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    const int64_t r0 = i * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) pool.emplace_back(range, r0, r1);
  }
  for (auto& th : pool) th.join();
}

}  // namespace df::cudamv

// Tables derived from the IQ sign codes (see iq_tables.h).
#include "quant/iq_tables.h"

namespace df::quant {
namespace {

constexpr SignsPm1Table make_signs_pm1() {
  SignsPm1Table t{};
  for (int code = 0; code < 128; ++code) {
    int neg = 0;
    for (int j = 0; j < 7; ++j) neg += (code >> j) & 1;
    const int bits = code | ((neg & 1) << 7);  // even number of negative signs
    uint64_t v = 0;
    for (int j = 0; j < 8; ++j) v |= uint64_t{(bits >> j) & 1 ? 0xffu : 0x01u} << (8 * j);
    t.v[code] = v;
  }
  return t;
}

}  // namespace

alignas(64) constinit const SignsPm1Table kIq2xsSignsPm1 = make_signs_pm1();

}  // namespace df::quant

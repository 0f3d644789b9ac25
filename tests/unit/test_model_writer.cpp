// df_make_model's writers (tools/make_model): the same shape and seed give the same bytes, and
// the weight type only changes the rounding of the same underlying floats. (Moved from the
// reference tests: it needs no llama.cpp; it runs the writers in process.)
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf.h"
#include "quant/types.h"
#include "qwen3_model.h"

namespace df {
namespace {

std::vector<uint8_t> write(GgmlType type, uint64_t seed) {
  make_model::BaseShape s;
  s.layers = 2, s.dim = 128, s.ff = 256, s.heads = 2, s.kv_heads = 1, s.head_dim = 64, s.vocab = 256;
  s.ctx = 512, s.rope_base = 1e6f, s.rms_eps = 1e-6f;
  gguf::Writer w;
  w.set_string("general.architecture", "qwen3");
  make_model::write_qwen3_keys(w, s);
  make_model::Qwen35Scales sc;
  sc.seed = seed;
  make_model::write_qwen3_tensors(w, s, type, sc);
  return w.to_bytes();
}

TEST(ModelWriter, DeterministicAndTypeIndependentDraws) {
  const auto a = write(GgmlType::F32, 5), b = write(GgmlType::F32, 5), h = write(GgmlType::F16, 5);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, write(GgmlType::F32, 6));
  auto fa = gguf::File::from_memory(a.data(), a.size());
  auto fh = gguf::File::from_memory(h.data(), h.size());
  ASSERT_EQ(fa->tensors().size(), fh->tensors().size());
  for (const auto& ta : fa->tensors()) {
    const auto& th = fh->tensor(ta.name);
    ASSERT_EQ(ta.ne, th.ne) << ta.name;
    const auto* pa = reinterpret_cast<const float*>(fa->tensor_data(ta));
    if (ta.ne.size() == 1) {
      EXPECT_EQ(th.type, GgmlType::F32) << ta.name << ": norms stay F32";
      EXPECT_EQ(0, std::memcmp(pa, fh->tensor_data(th), ta.nbytes)) << ta.name;
      continue;
    }
    ASSERT_EQ(th.type, GgmlType::F16) << ta.name;
    const auto* ph = reinterpret_cast<const uint16_t*>(fh->tensor_data(th));
    for (int64_t i = 0; i < ta.n_elements(); ++i)
      ASSERT_EQ(ph[i], fp32_to_fp16(pa[i])) << ta.name << "[" << i << "]";
  }
}

}  // namespace
}  // namespace df

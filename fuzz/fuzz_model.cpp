// libFuzzer target for model loading. The input is an edit script applied to one of a few
// small valid models written by df_make_model's writers (tools/make_model/tiny_models.h):
// hyperparameter keys set to other values and types, keys and tensors removed, tensors
// reshaped, retyped or renamed. The edited file is rebuilt with the GGUF writer and loaded
// with df::load_model on a one-thread CPU backend of one of the instruction sets the machine
// runs (the input's last byte picks it). Every outcome must be a model or a
// df::Error; a model that loads must then run a forward pass of two tokens and a decode step.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tiny_models.h"

using namespace df;

namespace {

struct Base {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
};

std::vector<Base> make_bases() {
  std::vector<gguf::Writer> ws;
  ws.push_back(make_model::tiny_qwen3_writer(GgmlType::F32, false));
  ws.push_back(make_model::tiny_qwen3_writer(GgmlType::Q8_0, true));
  ws.push_back(make_model::tiny_qwen35_writer(GgmlType::F32, 1, false));
  ws.push_back(make_model::tiny_qwen35_writer(GgmlType::F16, 0, true));
  std::vector<Base> out(ws.size());
  for (size_t i = 0; i < ws.size(); ++i) {
    out[i].bytes = ws[i].to_bytes();
    out[i].file = gguf::File::from_memory(out[i].bytes.data(), out[i].bytes.size());
  }
  return out;
}

// Keys the loaders read (some absent from the bases: their defaults are then in play).
const char* const kKeyNames[] = {
    "general.architecture", "block_count", "context_length", "embedding_length", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "rope.dimension_count", "rope.dimension_sections", "rope.freq_base", "attention.layer_norm_rms_epsilon",
    "full_attention_interval", "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
    "ssm.inner_size", "nextn_predict_layers",
};

uint64_t interesting_int(FuzzedDataProvider& p) {
  static const uint64_t v[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 33, 64, 255, 256, 1u << 16,
                               (1ull << 31) - 1, 1ull << 31, 0xFFFFFFFFull, 1ull << 32, 1ull << 62,
                               ~0ull >> 1, ~0ull, ~0ull - 1};
  if (p.ConsumeBool()) return p.ConsumeIntegral<uint64_t>();
  return v[p.ConsumeIntegralInRange<size_t>(0, std::size(v) - 1)];
}

gguf::Value fuzz_value(FuzzedDataProvider& p) {
  using namespace gguf;
  switch (p.ConsumeIntegralInRange(0, 9)) {
    case 0: return make_u32(static_cast<uint32_t>(interesting_int(p)));
    case 1: return make_i32(static_cast<int32_t>(interesting_int(p)));
    case 2: return make_u64(interesting_int(p));
    case 3: return make_i64(static_cast<int64_t>(interesting_int(p)));
    case 4: {
      static const float f[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, 1e30f, std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::denorm_min()};
      return make_f32(p.ConsumeBool() ? f[p.ConsumeIntegralInRange<size_t>(0, std::size(f) - 1)]
                                      : p.ConsumeFloatingPoint<float>());
    }
    case 5: return make_f64(p.ConsumeFloatingPoint<double>());
    case 6: return make_bool(p.ConsumeBool());
    case 7: return make_string(p.ConsumeRandomLengthString(16));
    case 8: {
      std::vector<int32_t> a(p.ConsumeIntegralInRange<size_t>(0, 6));
      for (auto& x : a) x = static_cast<int32_t>(interesting_int(p));
      return make_array(a);
    }
    default: {
      std::vector<uint64_t> a(p.ConsumeIntegralInRange<size_t>(0, 6));
      for (auto& x : a) x = interesting_int(p);
      return make_array(a);
    }
  }
}

struct EditedTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> data;
};

// Bytes of a tensor of type t and dims ne, or 0 when the row is not a whole number of blocks
// or the tensor is larger than the fuzzer allows (1 MiB).
size_t tensor_bytes(GgmlType t, const std::vector<int64_t>& ne) {
  const auto& ti = type_info(t);
  if (ne.empty() || ne[0] <= 0 || ne[0] % ti.block_elems != 0) return 0;
  uint64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) {
    if (ne[i] <= 0 || ne[i] > (1 << 20)) return 0;
    rows *= static_cast<uint64_t>(ne[i]);
    if (rows > (1u << 20)) return 0;
  }
  if (ne[0] > (1 << 20)) return 0;
  const uint64_t n = rows * (static_cast<uint64_t>(ne[0]) / ti.block_elems) * ti.block_bytes;
  return n <= (1u << 20) ? static_cast<size_t>(n) : 0;
}

void resize_data(EditedTensor& t, FuzzedDataProvider& p) {
  const size_t n = tensor_bytes(t.type, t.ne);
  if (n == 0) return;
  const size_t old = t.data.size();
  t.data.resize(n);
  const uint8_t fill = p.ConsumeIntegral<uint8_t>();
  for (size_t i = old; i < n; ++i) t.data[i] = old ? t.data[i % old] : fill;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Base> bases = make_bases();
  // One one-thread backend per instruction set this CPU runs (scalar, AVX2, AVX-512): a user's
  // CPU may take other kernels than the fuzzing machine's best ones. The input's last byte picks
  // one (the provider reads its integers from the end: that byte also feeds the first edit).
  static const std::vector<std::unique_ptr<cpu::CpuBackend>> backends = [] {
    std::vector<std::unique_ptr<cpu::CpuBackend>> v;
    for (int i = 0; i <= static_cast<int>(cpu::best_isa()); ++i) {
      cpu::CpuOptions o;
      o.threads = 1;
      o.isa = static_cast<cpu::Isa>(i);
      v.push_back(std::make_unique<cpu::CpuBackend>(o));
    }
    return v;
  }();
  cpu::CpuBackend& backend = *backends[size ? data[size - 1] % backends.size() : backends.size() - 1];
  FuzzedDataProvider p(data, size);
  const gguf::File& base = *bases[p.ConsumeIntegralInRange<size_t>(0, bases.size() - 1)].file;
  const std::string arch = base.get_string("general.architecture");

  std::vector<std::pair<std::string, gguf::Value>> kv = base.metadata();
  std::vector<EditedTensor> tensors;
  for (const auto& t : base.tensors()) {
    const uint8_t* d = base.tensor_data(t);
    tensors.push_back({t.name, t.type, t.ne, std::vector<uint8_t>(d, d + t.nbytes)});
  }

  const int n_edits = p.ConsumeIntegralInRange(0, 6);  // 0: the base itself must load and run
  for (int e = 0; e < n_edits && p.remaining_bytes() > 0; ++e) {
    switch (p.ConsumeIntegralInRange(0, 6)) {
      case 0: {  // set a key the loader reads (present or not) to some value
        const std::string name = kKeyNames[p.ConsumeIntegralInRange<size_t>(0, std::size(kKeyNames) - 1)];
        const std::string key = name.rfind("general.", 0) == 0 ? name : arch + "." + name;
        gguf::Value v = fuzz_value(p);
        bool found = false;
        for (auto& [k, old] : kv)
          if (k == key) old = v, found = true;
        if (!found) kv.emplace_back(key, v);
        break;
      }
      case 1: {  // small change of an integer key
        if (kv.empty()) break;
        auto& [k, v] = kv[p.ConsumeIntegralInRange<size_t>(0, kv.size() - 1)];
        if (!v.is_integer()) break;
        const uint32_t delta = static_cast<uint32_t>(p.ConsumeIntegralInRange<int32_t>(-3, 3));  // wraps
        if (const auto* u = std::get_if<uint64_t>(&v.v)) v = gguf::make_u32(static_cast<uint32_t>(*u + delta));
        if (const auto* i = std::get_if<int64_t>(&v.v)) v = gguf::make_u32(static_cast<uint32_t>(static_cast<uint64_t>(*i) + delta));
        break;
      }
      case 2:  // remove a key
        if (!kv.empty()) kv.erase(kv.begin() + p.ConsumeIntegralInRange<ptrdiff_t>(0, kv.size() - 1));
        break;
      case 3:  // remove a tensor
        if (!tensors.empty())
          tensors.erase(tensors.begin() + p.ConsumeIntegralInRange<ptrdiff_t>(0, tensors.size() - 1));
        break;
      case 4: {  // reshape a tensor (the data follows: repeated or filled)
        if (tensors.empty()) break;
        auto& t = tensors[p.ConsumeIntegralInRange<size_t>(0, tensors.size() - 1)];
        std::vector<int64_t> ne(p.ConsumeIntegralInRange<size_t>(1, 4));
        for (auto& d : ne) d = p.ConsumeBool() ? p.ConsumeIntegralInRange<int64_t>(1, 80)
                                               : int64_t{1} << p.ConsumeIntegralInRange(0, 9);
        if (tensor_bytes(t.type, ne) == 0) break;
        t.ne = ne;
        resize_data(t, p);
        break;
      }
      case 5: {  // retype a tensor
        if (tensors.empty()) break;
        auto& t = tensors[p.ConsumeIntegralInRange<size_t>(0, tensors.size() - 1)];
        const uint32_t id = p.ConsumeIntegralInRange<uint32_t>(0, 41);
        const auto ti = type_info(id);
        if (!ti || tensor_bytes(static_cast<GgmlType>(id), t.ne) == 0) break;
        t.type = static_cast<GgmlType>(id);
        resize_data(t, p);
        break;
      }
      default: {  // rename a tensor (another layer's name, or a bytewise change)
        if (tensors.empty()) break;
        auto& t = tensors[p.ConsumeIntegralInRange<size_t>(0, tensors.size() - 1)];
        if (t.name.size() > 4 && p.ConsumeBool()) {
          t.name[p.ConsumeIntegralInRange<size_t>(0, t.name.size() - 1)] = p.ConsumeIntegral<char>();
        } else if (t.name.rfind("blk.", 0) == 0) {
          t.name = "blk." + std::to_string(p.ConsumeIntegralInRange(0, 4)) + t.name.substr(t.name.find('.', 4));
        }
        break;
      }
    }
  }

  gguf::Writer w;
  std::vector<uint8_t> bytes;
  try {
    for (const auto& [k, v] : kv) w.set(k, v);
    for (const auto& t : tensors) w.add_tensor(t.name, t.type, t.ne, t.data.data(), t.data.size());
    bytes = w.to_bytes();
  } catch (const df::Error&) {
    return 0;  // e.g. a duplicate tensor name after a rename
  }
  const auto file = gguf::File::from_memory(bytes.data(), bytes.size());  // writer output must parse

  std::unique_ptr<Model> model;
  try {
    model = load_model(*file, backend);
  } catch (const df::Error&) {
    return 0;
  }
  // Loaded: it must run (no df::Error here: whatever forward would refuse, the loader must).
  const int64_t n_vocab = model->info().n_vocab;
  if (n_vocab <= 0) __builtin_trap();
  make_model::smoke_forward(*model, static_cast<int32_t>(p.ConsumeIntegralInRange<int64_t>(0, n_vocab - 1)),
                            static_cast<int32_t>(p.ConsumeIntegralInRange<int64_t>(0, n_vocab - 1)));
  return 0;
}

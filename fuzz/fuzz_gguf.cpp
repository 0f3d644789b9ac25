// libFuzzer target for the GGUF reader. Any input must either parse or throw df::Error.
// A parsed file is exercised through every getter and its tensor bytes are touched (ASan
// flags any pointer past the buffer); then it is rebuilt with the writer and re-parsed, and
// the result must carry identical metadata and tensors.
#include <cstdint>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "gguf/gguf.h"

using namespace df::gguf;

namespace {

void exercise_getters(const File& f) {
  for (const auto& [key, v] : f.metadata()) {
    try { (void)f.get_u64(key); } catch (const df::Error&) {}
    try { (void)f.get_f64(key); } catch (const df::Error&) {}
    try { (void)v.as_i64(key); } catch (const df::Error&) {}
    try { (void)f.get_bool(key); } catch (const df::Error&) {}
    try { (void)f.get_string(key); } catch (const df::Error&) {}
    try { (void)f.get_string_array(key); } catch (const df::Error&) {}
    (void)v.array_size();
    if (!(v == v) || f.find(key) != &v) __builtin_trap();
  }
}

volatile uint8_t g_sink;

void touch_tensors(const File& f) {
  uint8_t acc = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.nbytes == 0 || f.find_tensor(t.name) != &t) __builtin_trap();
    acc ^= f.tensor_data(t)[0] ^ f.tensor_data(t)[t.nbytes - 1];
  }
  g_sink = acc;
}

void round_trip(const File& f) {
  // A file without tensors may declare an alignment up to 2^31; the writer would then pad
  // to it (as llama.cpp and gguf-py do). Skip those to keep the fuzzer's memory small.
  if (f.alignment() > 65536) return;
  Writer w;
  try {
    for (const auto& [key, v] : f.metadata()) w.set(key, v);
    for (const TensorInfo& t : f.tensors()) w.add_tensor(t.name, t.type, t.ne, f.tensor_data(t), t.nbytes);
  } catch (const df::Error&) {
    return;  // the writer is stricter (e.g. tensor names llama.cpp cannot load)
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  std::unique_ptr<File> g = File::from_memory(bytes.data(), bytes.size());  // must not throw
  if (g->metadata().size() != f.metadata().size() || g->tensors().size() != f.tensors().size() ||
      g->alignment() != f.alignment())
    __builtin_trap();
  for (size_t i = 0; i < f.metadata().size(); ++i)
    if (g->metadata()[i].first != f.metadata()[i].first ||
        !(g->metadata()[i].second == f.metadata()[i].second))
      __builtin_trap();
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& a = f.tensors()[i];
    const TensorInfo& b = g->tensors()[i];
    if (a.name != b.name || a.type != b.type || a.ne != b.ne || a.nbytes != b.nbytes ||
        std::memcmp(f.tensor_data(a), g->tensor_data(b), a.nbytes) != 0)
      __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<File> f;
  try {
    f = File::from_memory(data, size);
  } catch (const df::Error&) {
    return 0;
  }
  exercise_getters(*f);
  touch_tensors(*f);
  round_trip(*f);
  return 0;
}

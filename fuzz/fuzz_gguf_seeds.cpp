// Writes a small seed corpus for fuzz_gguf with our own writer: fuzz_gguf_seeds <dir>.
#include <filesystem>
#include <iostream>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"

using namespace df::gguf;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_gguf_seeds <dir>\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const std::vector<uint8_t> d(256, 0x3c);
  try {
    Writer empty;
    empty.write((dir / "empty.gguf").string());

    Writer kv;
    kv.set_string("general.architecture", "qwen3");
    kv.set_u32("qwen3.block_count", 2);
    kv.set_f32("qwen3.rope.freq_base", 1e6f);
    kv.set_bool("b", true);
    kv.set("u64", make_u64(1ull << 40));
    kv.set("i64", make_i64(-5));
    kv.set("f64", make_f64(0.125));
    kv.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
    kv.set_i32_array("tokenizer.ggml.token_type", {1, 1, 3});
    kv.set_f32_array("scores", {0.f, -1.f});
    kv.set("bools", make_array(std::vector<bool>{true, false}));
    kv.set("u8s", make_array(std::vector<uint8_t>{1, 2}));
    kv.set("nested", make_array(std::vector<Value>{make_array(std::vector<int16_t>{1}),
                                                   make_array(std::vector<std::string>{"x"})}));
    kv.write((dir / "kv.gguf").string());

    Writer t;
    t.set_string("general.architecture", "qwen3");
    t.add_tensor("token_embd.weight", df::GgmlType::F32, {4, 2}, d.data(), 32);
    t.add_tensor("blk.0.attn_q.weight", df::GgmlType::Q8_0, {32, 2}, d.data(), 68);
    t.add_tensor("blk.0.attn_norm.weight", df::GgmlType::F16, {3}, d.data(), 6);
    t.add_tensor("x", df::GgmlType::BF16, {1, 1, 1, 2}, d.data(), 4);
    t.write((dir / "tensors.gguf").string());

    Writer a;
    a.set_alignment(64);
    a.add_tensor("w", df::GgmlType::Q4_K, {256}, d.data(), 144);
    a.add_tensor("v", df::GgmlType::I8, {5}, d.data(), 5);
    a.write((dir / "align64.gguf").string());
  } catch (const df::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}

// Corrupt GGUF files: each defect gives a df::Error naming it; truncation at any byte and
// random byte flips never crash (run under ASan+UBSan with DF_SANITIZE=ON).
#include <gtest/gtest.h>

#include <random>

#include "gguf_test_bytes.h"

namespace df::gguf {
namespace {

using test::expect_parse_error;
using test::RawGguf;

constexpr uint32_t kF32 = 0, kQ8_0 = 8;

// A valid file: one kv, one f32 tensor 'w' of shape [4] at offset 0.
RawGguf valid_file() {
  RawGguf r;
  r.header(3, 1, 1).kv_str("general.architecture", "test").tensor("w", {4}, kF32, 0).pad(32);
  return r.zeros(16).pad(32);
}

// A file with one tensor with the given info fields and enough data for none of them to
// run past the end unless the test wants it.
std::vector<uint8_t> tensor_file(const std::vector<int64_t>& ne, uint32_t type, uint64_t offset,
                                 size_t data_bytes = 64) {
  RawGguf r;
  r.header(3, 1, 0).tensor("w", ne, type, offset).pad(32);
  return r.zeros(data_bytes).b;
}

TEST(GgufCorrupt, ValidBaselineParses) {
  const auto b = valid_file().b;
  auto f = File::from_memory(b.data(), b.size());
  EXPECT_EQ(f->tensor("w").nbytes, 16u);
}

TEST(GgufCorrupt, Header) {
  auto b = valid_file().b;
  b[3] = 'X';
  expect_parse_error(b, {"bad magic", "found 47475558"});
  expect_parse_error(RawGguf().header(1, 0, 0).b, {"unsupported GGUF version 1"});
  expect_parse_error(RawGguf().header(4, 0, 0).b, {"unsupported GGUF version 4"});
  expect_parse_error(RawGguf().header(0x03000000, 0, 0).b, {"big-endian"});
  expect_parse_error({}, {"truncated file", "magic"});
  expect_parse_error({'G', 'G', 'U', 'F', 3, 0}, {"truncated file", "version"});
  const auto full = valid_file().b;
  expect_parse_error(std::vector<uint8_t>(full.begin(), full.begin() + 20),
                     {"truncated file", "key-value count"});
}

TEST(GgufCorrupt, AbsurdCounts) {
  expect_parse_error(RawGguf().header(3, 0, uint64_t{1} << 62).zeros(64).b, {"n_kv = "});
  expect_parse_error(RawGguf().header(3, ~uint64_t{0}, 0).zeros(64).b, {"n_tensors = "});
  // A string length far past the end (key name).
  expect_parse_error(RawGguf().header(3, 0, 1).u64(uint64_t{1} << 60).zeros(16).b,
                     {"string length 1152921504606846976", "key-value pair 0"});
  // Array of 2^61 uint32 in a tiny file.
  expect_parse_error(RawGguf().header(3, 0, 1).str("arr").u32(9).u32(4).u64(1ull << 61).zeros(8).b,
                     {"key 'arr'", "array length 2305843009213693952"});
  // Array of strings whose second string's length is absurd.
  expect_parse_error(
      RawGguf().header(3, 0, 1).str("s").u32(9).u32(8).u64(2).str("ok").u64(1ull << 40).b,
      {"string length", "key 's'"});
  // Tensor name length absurd.
  expect_parse_error(RawGguf().header(3, 1, 0).u64(~uint64_t{0}).zeros(40).b,
                     {"string length", "tensor info 0"});
}

TEST(GgufCorrupt, Metadata) {
  expect_parse_error(RawGguf().header(3, 0, 1).str("k").u32(13).u32(0).b,
                     {"key 'k' has unknown value type 13"});
  expect_parse_error(RawGguf().header(3, 0, 1).str("k").u32(9).u32(99).u64(0).b,
                     {"key 'k' has an array of unknown value type 99"});
  expect_parse_error(RawGguf().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).b,
                     {"duplicate key 'a'"});
  expect_parse_error(RawGguf().header(3, 0, 1).kv_u32("", 1).b, {"empty key"});
  // Value cut short: a uint32 needs 4 bytes.
  expect_parse_error(RawGguf().header(3, 0, 1).str("k").u32(4).u8(1).b,
                     {"truncated file", "key 'k'"});
  // 20 levels of nested arrays.
  RawGguf deep;
  deep.header(3, 0, 1).str("deep").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  expect_parse_error(deep.b, {"key 'deep'", "nested deeper"});
}

TEST(GgufCorrupt, Alignment) {
  auto with_alignment = [](uint32_t a) {
    return RawGguf().header(3, 0, 1).kv_u32("general.alignment", a).b;
  };
  expect_parse_error(with_alignment(0), {"general.alignment = 0", "power of two"});
  expect_parse_error(with_alignment(48), {"general.alignment = 48", "power of two"});
  expect_parse_error(RawGguf().header(3, 0, 1).kv_str("general.alignment", "32").b,
                     {"general.alignment", "must be uint32"});
  // Data section at 2^31 alignment lies past the end of a small file.
  expect_parse_error(RawGguf()
                         .header(3, 1, 1)
                         .kv_u32("general.alignment", 1u << 31)
                         .tensor("w", {1}, kF32, 0)
                         .zeros(64)
                         .b,
                     {"data section starts"});
}

TEST(GgufCorrupt, TensorInfo) {
  expect_parse_error(tensor_file({}, kF32, 0), {"tensor 'w' has n_dims = 0"});
  expect_parse_error(tensor_file({1, 1, 1, 1, 1}, kF32, 0), {"tensor 'w' has n_dims = 5"});
  expect_parse_error(tensor_file({4, 0}, kF32, 0), {"tensor 'w' dimension 1 is 0"});
  expect_parse_error(tensor_file({-3}, kF32, 0), {"tensor 'w' dimension 0 is -3"});
  expect_parse_error(tensor_file({1ll << 32, 1ll << 32}, kF32, 0),
                     {"tensor 'w'", "overflows the int64 element count"});
  // Element count fits in int64 but the byte size does not fit in 64 bits.
  expect_parse_error(tensor_file({1ll << 40, 1ll << 22}, kF32, 0),
                     {"tensor 'w'", "overflows its size in bytes"});
  expect_parse_error(tensor_file({4}, 99, 0), {"tensor 'w' has unknown type id 99"});
  expect_parse_error(tensor_file({4}, 4, 0), {"tensor 'w' has unknown type id 4"});
  expect_parse_error(tensor_file({33}, kQ8_0, 0),
                     {"tensor 'w'", "33 elements is not a multiple of the q8_0 block size 32"});
  // Cut inside the tensor info.
  auto b = tensor_file({4, 4, 4, 4}, kF32, 0);
  b.resize(24 + 8 + 1 + 4 + 8 + 8 + 3);  // header, name, n_dims, 2 dims, 3 bytes of the third
  expect_parse_error(b, {"truncated file", "tensor 'w'"});
}

TEST(GgufCorrupt, TensorData) {
  expect_parse_error(tensor_file({4}, kF32, 64, 64), {"tensor 'w' data", "past the end"});
  expect_parse_error(tensor_file({17}, kF32, 0, 64), {"tensor 'w' data", "past the end"});
  expect_parse_error(tensor_file({4}, kF32, ~uint64_t{0} << 5, 64), {"past the end"});
  expect_parse_error(tensor_file({4}, kF32, 8), {"tensor 'w' offset 8", "alignment 32"});
  // Duplicate names and overlap.
  RawGguf dup;
  dup.header(3, 2, 0).tensor("w", {4}, kF32, 0).tensor("w", {4}, kF32, 32).pad(32).zeros(64);
  expect_parse_error(dup.b, {"duplicate tensor name 'w'"});
  RawGguf overlap;
  overlap.header(3, 2, 0).tensor("a", {16}, kF32, 0).tensor("b", {4}, kF32, 32).pad(32).zeros(96);
  expect_parse_error(overlap.b, {"tensors 'a' and 'b' overlap"});
  // Same data for two tensors.
  RawGguf same;
  same.header(3, 2, 0).tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 0).pad(32).zeros(32);
  expect_parse_error(same.b, {"overlap"});
}

// A file exercising every parser path; its last tensor needs no padding, so every proper
// prefix is invalid.
std::vector<uint8_t> rich_file() {
  Writer w;
  w.set_string("general.architecture", "qwen3");
  w.set("u8", Value{ValueType::UINT8, ValueType::UINT32, uint64_t{3}});
  w.set("f64", make_f64(0.5));
  w.set_bool("b", true);
  w.set_string_array("tokens", {"a", "bc", ""});
  w.set_f32_array("scores", {1.f, 2.f});
  w.set("bools", make_array(std::vector<bool>{true, false}));
  w.set("nested", make_array(std::vector<Value>{make_array(std::vector<int32_t>{1, 2}),
                                                make_array(std::vector<std::string>{"q"})}));
  const std::vector<uint8_t> d(64, 1);
  w.add_tensor("x", GgmlType::F16, {3}, d.data(), 6);
  w.add_tensor("y", GgmlType::F32, {8}, d.data(), 32);
  return w.to_bytes();
}

TEST(GgufCorrupt, TruncatedAtEveryByte) {
  const auto b = rich_file();
  ASSERT_NO_THROW(File::from_memory(b.data(), b.size()));
  for (size_t n = 0; n < b.size(); ++n) {
    std::unique_ptr<uint8_t[]> copy(new uint8_t[n + 1]);
    std::memcpy(copy.get(), b.data(), n);
    EXPECT_THROW(File::from_memory(copy.get(), n), df::Error) << "prefix of " << n << " bytes";
  }
}

TEST(GgufCorrupt, RandomByteFlipsNeverCrash) {
  const auto base = rich_file();
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    std::unique_ptr<uint8_t[]> copy(new uint8_t[b.size()]);
    std::memcpy(copy.get(), b.data(), b.size());
    try {
      auto f = File::from_memory(copy.get(), b.size());
      for (const auto& t : f->tensors())  // touch first and last byte of every tensor
        ASSERT_GE(static_cast<int>(f->tensor_data(t)[0]) + f->tensor_data(t)[t.nbytes - 1], 0);
      ++parsed;
    } catch (const df::Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace df::gguf

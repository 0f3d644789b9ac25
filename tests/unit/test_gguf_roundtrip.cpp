// GGUF writer -> reader round trips, the writer's byte layout against a hand-built file, and
// the typed getters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "gguf_test_bytes.h"

namespace df::gguf {
namespace {

using test::RawGguf;

Value scalar(ValueType t, std::variant<uint64_t, int64_t, double, bool, std::string> x) {
  Value v;
  v.type = t;
  std::visit([&](auto&& a) { v.v = a; }, x);
  return v;
}

// One value of every scalar type, arrays of every element type (empty ones too) and nested
// arrays, in a fixed order.
std::vector<std::pair<std::string, Value>> sample_metadata() {
  std::vector<std::pair<std::string, Value>> kv = {
      {"general.architecture", make_string("qwen3")},
      {"t.u8", scalar(ValueType::UINT8, uint64_t{250})},
      {"t.i8", scalar(ValueType::INT8, int64_t{-128})},
      {"t.u16", scalar(ValueType::UINT16, uint64_t{65535})},
      {"t.i16", scalar(ValueType::INT16, int64_t{-30000})},
      {"t.u32", make_u32(4000000000u)},
      {"t.i32", make_i32(-2000000000)},
      {"t.f32", make_f32(1e-6f)},
      {"t.f32nan", make_f32(std::numeric_limits<float>::quiet_NaN())},
      {"t.bool", make_bool(true)},
      {"t.string", make_string(std::string("h\xc3\xa9llo\0world", 12))},
      {"t.empty_string", make_string("")},
      {"t.u64", make_u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", make_i64(std::numeric_limits<int64_t>::min())},
      {"t.f64", make_f64(-2.5e300)},
      {"a.u8", make_array(std::vector<uint8_t>{0, 1, 255})},
      {"a.i8", make_array(std::vector<int8_t>{-1, 127})},
      {"a.u16", make_array(std::vector<uint16_t>{1, 65535})},
      {"a.i16", make_array(std::vector<int16_t>{-32768})},
      {"a.u32", make_array(std::vector<uint32_t>{7, 8, 9})},
      {"a.i32", make_array(std::vector<int32_t>{-7, 8})},
      {"a.f32", make_array(std::vector<float>{0.5f, -0.0f, INFINITY})},
      {"a.bool", make_array(std::vector<bool>{true, false, true})},
      {"a.string", make_array(std::vector<std::string>{"a", "", "ccc"})},
      {"a.u64", make_array(std::vector<uint64_t>{1ull << 63})},
      {"a.i64", make_array(std::vector<int64_t>{-1, 1})},
      {"a.f64", make_array(std::vector<double>{3.25})},
      {"a.empty", make_array(std::vector<int32_t>{})},
      {"a.nested",
       make_array(std::vector<Value>{make_array(std::vector<std::string>{"x", "yz"}),
                                     make_array(std::vector<std::string>{})})},
      {"a.nested3",
       make_array(std::vector<Value>{make_array(std::vector<Value>{
           make_array(std::vector<int32_t>{1, 2}), make_array(std::vector<float>{3.f})})})},
  };
  return kv;
}

struct SampleTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> data;
};

std::vector<SampleTensor> sample_tensors() {
  std::mt19937 rng(7);
  auto make = [&](std::string name, GgmlType type, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (auto d : ne) n *= d;
    const auto& ti = type_info(type);
    std::vector<uint8_t> data(static_cast<size_t>(n / ti.block_elems) * ti.block_bytes);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    return SampleTensor{std::move(name), type, std::move(ne), std::move(data)};
  };
  return {make("token_embd.weight", GgmlType::F32, {8, 3}),
          make("blk.0.attn_q.weight", GgmlType::Q8_0, {64, 2}),
          make("blk.0.ffn_up.weight", GgmlType::Q4_K, {256, 1, 1, 2}),
          make("blk.0.attn_norm.weight", GgmlType::F16, {5}),
          make("output.weight", GgmlType::BF16, {3, 2, 2}),
          make("pos", GgmlType::I32, {1})};
}

Writer sample_writer(uint32_t alignment) {
  Writer w;
  if (alignment != 32) w.set_alignment(alignment);
  for (auto& [k, v] : sample_metadata()) w.set(k, v);
  for (auto& t : sample_tensors()) w.add_tensor(t.name, t.type, t.ne, t.data.data(), t.data.size());
  return w;
}

void check_sample(const File& f, uint32_t alignment) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  auto kv = sample_metadata();
  size_t extra = alignment != 32 ? 1 : 0;  // general.alignment comes first
  ASSERT_EQ(f.metadata().size(), kv.size() + extra);
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f.metadata()[i + extra].first, kv[i].first);
    EXPECT_TRUE(f.metadata()[i + extra].second == kv[i].second) << kv[i].first;
  }
  auto tensors = sample_tensors();
  ASSERT_EQ(f.tensors().size(), tensors.size());
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.type, tensors[i].type);
    EXPECT_EQ(t.ne, tensors[i].ne);
    EXPECT_EQ(t.nbytes, tensors[i].data.size());
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(&f.tensor(t.name), &t);
    EXPECT_EQ(std::memcmp(f.tensor_data(t), tensors[i].data.data(), t.nbytes), 0) << t.name;
  }
}

TEST(GgufRoundTrip, EveryValueTypeArraysAndTensors) {
  for (uint32_t alignment : {32u, 1u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    const auto bytes = sample_writer(alignment).to_bytes();
    EXPECT_EQ(bytes.size() % alignment, 0u);
    auto f = File::from_memory(bytes.data(), bytes.size());
    check_sample(*f, alignment);
  }
}

TEST(GgufRoundTrip, WriteAndOpenMapped) {
  const std::string path = testing::TempDir() + "df_gguf_roundtrip.gguf";
  sample_writer(32).write(path);
  {
    auto f = File::open(path);
    EXPECT_EQ(f->path(), path);
    check_sample(*f, 32);
  }
  std::remove(path.c_str());
  try {
    File::open(path);
    FAIL() << "opened a missing file";
  } catch (const df::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(GgufRoundTrip, ErrorsNameTheFilePath) {
  const std::string path = testing::TempDir() + "df_gguf_bad.gguf";
  auto bytes = sample_writer(32).to_bytes();
  bytes[0] = 'X';
  std::FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(fp);
  std::fwrite(bytes.data(), 1, bytes.size(), fp);
  std::fclose(fp);
  try {
    File::open(path);
    FAIL() << "parsed a file with bad magic";
  } catch (const df::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  }
  std::remove(path.c_str());
}

// The writer's bytes equal a file laid out by hand from the spec (and as gguf-py writes it):
// header, kv pairs, tensor infos, zero padding, each tensor's data padded to the alignment.
TEST(GgufWriter, ByteLayoutMatchesSpec) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("n", 5);
  w.set_i32_array("ids", {1, -2});
  const std::vector<float> a = {1.f, 2.f, 3.f};
  const std::vector<uint8_t> b(34, 0xab);  // one q8_0 block
  w.add_tensor("a", GgmlType::F32, {3}, a.data(), 12);
  w.add_tensor("b", GgmlType::Q8_0, {32}, b.data(), b.size());

  RawGguf r;
  r.header(3, 2, 3).kv_str("general.architecture", "llama").kv_u32("n", 5);
  r.str("ids").u32(9).u32(5).u64(2).put<int32_t>(1).put<int32_t>(-2);
  r.tensor("a", {3}, 0, 0).tensor("b", {32}, 8, 32).pad(32);
  for (float x : a) r.put(x);
  r.pad(32);
  r.b.insert(r.b.end(), b.begin(), b.end());
  r.pad(32);
  EXPECT_EQ(w.to_bytes(), r.b);
}

TEST(GgufWriter, SetReplacesKeyInPlace) {
  Writer w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "x");
  const auto bytes = w.to_bytes();
  auto f = File::from_memory(bytes.data(), bytes.size());
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(f->get_string("a"), "x");
}

TEST(GgufWriter, RejectsBadInput) {
  Writer w;
  const std::vector<uint8_t> data(64);
  auto expect_throw = [](auto&& fn, const std::string& sub) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected " << sub;
    } catch (const df::Error& e) {
      EXPECT_NE(std::string(e.what()).find(sub), std::string::npos) << e.what();
    }
  };
  expect_throw([&] { w.set_alignment(48); }, "power of two");
  expect_throw([&] { w.set_alignment(0); }, "power of two");
  expect_throw([&] { w.set("x", scalar(ValueType::UINT8, uint64_t{256})); }, "does not fit");
  expect_throw([&] { w.set("x", scalar(ValueType::INT16, uint64_t{40000})); }, "does not fit");
  expect_throw([&] { w.set("x", scalar(ValueType::STRING, uint64_t{1})); }, "no string");
  expect_throw([&] { w.set("", make_u32(1)); }, "empty key");
  expect_throw([&] { w.add_tensor("t", GgmlType::F32, {4}, data.data(), 15); }, "needs 16");
  expect_throw([&] { w.add_tensor("t", GgmlType::Q8_0, {33}, data.data(), 34); }, "block size");
  expect_throw([&] { w.add_tensor("t", GgmlType::F32, {0}, data.data(), 0); }, "positive");
  expect_throw([&] { w.add_tensor("t", GgmlType::F32, {1, 1, 1, 1, 1}, data.data(), 4); },
               "1..4");
  expect_throw([&] { w.add_tensor(std::string(64, 'n'), GgmlType::F32, {1}, data.data(), 4); },
               "longer than");
  w.add_tensor("t", GgmlType::F32, {1}, data.data(), 4);
  expect_throw([&] { w.add_tensor("t", GgmlType::F32, {1}, data.data(), 4); }, "duplicate");
}

TEST(GgufFile, NoTensorsAndVersion2) {
  Writer w;
  w.set_u32("k", 1);
  auto bytes = w.to_bytes();
  auto f = File::from_memory(bytes.data(), bytes.size());
  EXPECT_TRUE(f->tensors().empty());
  // Version 2 has the same layout as version 3 (64-bit counts and lengths).
  RawGguf r;
  r.header(2, 1, 1).kv_str("general.name", "v2").tensor("w", {2}, 0, 0).pad(32).zeros(8);
  auto f2 = File::from_memory(r.b.data(), r.b.size());
  EXPECT_EQ(f2->version(), 2u);
  EXPECT_EQ(f2->get_string("general.name"), "v2");
  EXPECT_EQ(f2->tensor("w").nbytes, 8u);
}

TEST(GgufFile, TypedGetters) {
  Writer w;
  w.set_u32("u32", 7);
  w.set_i32("i32", 9);
  w.set_i32("neg", -3);
  w.set("u8", scalar(ValueType::UINT8, uint64_t{200}));
  w.set_f32("f32", 0.25f);
  w.set("f64", make_f64(1e-300));
  w.set_bool("b", true);
  w.set_string("s", "str");
  w.set_string_array("sa", {"x", "y"});
  w.set_i32_array("ia", {1});
  const auto bytes = w.to_bytes();
  auto f = File::from_memory(bytes.data(), bytes.size());

  EXPECT_EQ(f->get_u64("u32"), 7u);
  EXPECT_EQ(f->get_u64("i32"), 9u);
  EXPECT_EQ(f->get_u64("u8"), 200u);
  EXPECT_EQ(f->find("neg")->as_i64("neg"), -3);
  EXPECT_DOUBLE_EQ(f->get_f64("f32"), 0.25);
  EXPECT_DOUBLE_EQ(f->get_f64("f64"), 1e-300);
  EXPECT_DOUBLE_EQ(f->get_f64("i32"), 9.0);
  EXPECT_TRUE(f->get_bool("b"));
  EXPECT_EQ(f->get_string("s"), "str");
  EXPECT_EQ(f->get_string_array("sa"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f->find("sa")->array_size(), 2u);
  EXPECT_EQ(f->get_u64("missing", 11), 11u);
  EXPECT_DOUBLE_EQ(f->get_f64("missing", 1.5), 1.5);
  EXPECT_FALSE(f->get_bool("missing", false));
  EXPECT_EQ(f->get_string("missing", "fb"), "fb");
  EXPECT_FALSE(f->has("missing"));

  auto expect_throw = [](auto&& fn, const std::string& sub) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected " << sub;
    } catch (const df::Error& e) {
      EXPECT_NE(std::string(e.what()).find(sub), std::string::npos) << e.what();
    }
  };
  expect_throw([&] { f->get_u64("missing"); }, "missing required key 'missing'");
  expect_throw([&] { f->get_string("missing"); }, "missing required key 'missing'");
  expect_throw([&] { f->get_string_array("missing"); }, "missing required key 'missing'");
  expect_throw([&] { f->get_u64("neg"); }, "non-negative");
  expect_throw([&] { f->get_u64("s"); }, "key 's' has type string, expected an integer");
  expect_throw([&] { f->get_u64("f32", 0); }, "expected an integer");
  expect_throw([&] { f->get_f64("b"); }, "expected a number");
  expect_throw([&] { f->get_bool("u32"); }, "expected bool");
  expect_throw([&] { f->get_string("u32"); }, "expected string");
  expect_throw([&] { f->get_string_array("ia"); }, "array of int32, expected an array of string");
  expect_throw([&] { f->get_string_array("s"); }, "expected array");
  expect_throw([&] { f->tensor("nope"); }, "missing tensor 'nope'");
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

}  // namespace
}  // namespace df::gguf

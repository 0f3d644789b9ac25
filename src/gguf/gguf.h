// GGUF container: reader (memory-mapped, validated) and writer.
// Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (versions 2 and 3).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/error.h"
#include "quant/types.h"

namespace df::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);
// Bytes of one element of a fixed-size type on disk; 0 for STRING and ARRAY.
size_t value_type_size(ValueType t);
// True for the 13 ids the format defines.
bool value_type_valid(uint32_t id);

// One metadata value. Arrays hold their elements in a typed vector (nested arrays are
// vectors of Value).
struct Value;
using Array = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                           std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                           std::vector<float>, std::vector<bool>, std::vector<std::string>,
                           std::vector<Value>, std::vector<uint64_t>, std::vector<int64_t>,
                           std::vector<double>>;
struct Value {
  ValueType type = ValueType::UINT32;
  ValueType array_type = ValueType::UINT32;  // element type when type == ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;

  // Conversions; throw df::Error naming the key when the stored type does not fit.
  bool is_integer() const;
  uint64_t as_u64(std::string_view key) const;
  int64_t as_i64(std::string_view key) const;
  double as_f64(std::string_view key) const;
  bool as_bool(std::string_view key) const;
  const std::string& as_string(std::string_view key) const;
  const Array& as_array(std::string_view key) const;
  size_t array_size() const;  // 0 when not an array
};
// Deep comparison (type, element type and contents); floats compare bitwise so NaNs match.
bool operator==(const Value& a, const Value& b);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // dimensions, ne[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t nbytes = 0;
  int64_t n_elements() const;
};

// Thrown by File::header_from_memory when the header runs past the bytes it was given:
// `needed` is a lower bound on the prefix length that the parse needs (fetch more, retry).
class HeaderTruncated : public Error {
 public:
  HeaderTruncated(const std::string& what, uint64_t needed) : Error(what), needed(needed) {}
  uint64_t needed;
};

// A validated, memory-mapped GGUF file. Throws df::Error with a message naming the problem
// (bad magic, unsupported version, truncated, tensor past end of file, bad dims, unknown
// type, duplicate names, ...).
class File {
 public:
  static std::unique_ptr<File> open(const std::string& path);
  // Parse from memory (the buffer must outlive the File). Used by tests and the fuzzer.
  static std::unique_ptr<File> from_memory(const uint8_t* data, size_t size);
  // Parses only the header (metadata, tensor infos) of a file of `file_size` bytes from a
  // buffer holding its first `size` bytes, e.g. a remote file read by range requests. Tensor
  // extents are validated against file_size; the File holds no tensor data (has_data() is
  // false, tensor_data() throws). Throws HeaderTruncated when the header needs more bytes.
  static std::unique_ptr<File> header_from_memory(const uint8_t* data, size_t size, uint64_t file_size);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // Absolute offset of the tensor data (aligned); without tensors, at most the file size.
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Required getters throw df::Error("missing required key 'x'") when absent.
  uint64_t get_u64(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  // Optional getters return the fallback when absent.
  uint64_t get_u64(std::string_view key, uint64_t fallback) const;
  double get_f64(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws if missing
  bool has_data() const { return !header_only_; }
  const uint8_t* tensor_data(const TensorInfo& t) const {
    if (header_only_) no_data(t);
    return base_ + data_offset_ + t.offset;
  }
  const uint8_t* base() const { return header_only_ ? nullptr : base_; }

 private:
  File() = default;
  void parse();
  [[noreturn]] static void no_data(const TensorInfo& t);
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;          // the file's size
  size_t avail_ = 0;         // bytes at base_: size_, or the header prefix when header_only_
  bool header_only_ = false;
  void* mapping_ = nullptr;  // mmap address when opened from a path
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF file (version 3) in memory and writes it out.
class Writer {
 public:
  void set(const std::string& key, Value v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_alignment(uint32_t a);
  // Tensor bytes are copied; ne[0] is the row dimension; bytes.size() must match the type.
  void add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                  const void* data, size_t nbytes);
  // Declares a tensor whose bytes the writer does not hold (large files written piece by
  // piece, e.g. downloaded): layout() says where they go. to_bytes() and write() refuse a
  // Writer that has such tensors.
  void add_tensor_info(const std::string& name, GgmlType type, const std::vector<int64_t>& ne);
  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;

  // The file as to_bytes() lays it out: the bytes before the tensor data (header, key-values,
  // tensor infos, padding to the alignment), each tensor's info with its offset relative to
  // the data section (= meta.size()), and the total size (every tensor padded to the alignment).
  struct Layout {
    std::vector<uint8_t> meta;
    std::vector<TensorInfo> tensors;
    uint64_t file_size = 0;
  };
  Layout layout() const;
  uint32_t alignment() const { return alignment_; }

 private:
  TensorInfo checked_info(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) const;
  template <class Emit>
  void emit_file(Emit&& emit) const;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  struct PendingTensor {
    TensorInfo info;
    std::vector<uint8_t> data;
    bool has_data = true;  // false: declared by add_tensor_info
  };
  std::vector<PendingTensor> tensors_;
};

// Convenience constructors for Values.
Value make_u32(uint32_t v);
Value make_i32(int32_t v);
Value make_u64(uint64_t v);
Value make_f32(float v);
Value make_bool(bool v);
Value make_string(std::string v);
Value make_i64(int64_t v);
Value make_f64(double v);
// An array value; its element type follows the vector's type (vector<Value> = nested arrays,
// each element itself an array value).
Value make_array(Array a);

}  // namespace df::gguf

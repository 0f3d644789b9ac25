// GGUF writer (version 3), laid out like gguf-py's GGUFWriter and llama.cpp's gguf_write:
// header, key-value pairs in insertion order, tensor infos, zero padding to the alignment,
// then each tensor's data followed by zero padding to the alignment (the last one included).
#include <bit>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df::gguf {

namespace {

constexpr int kMaxNameBytes = 63;  // llama.cpp's GGML_MAX_NAME (64) includes the terminator

uint64_t pad_to(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// Appends little-endian encodings to a buffer; with no buffer it only counts bytes
// (used to validate a value when it is set).
class Sink {
 public:
  explicit Sink(std::vector<uint8_t>* out) : out_(out) {}
  void bytes(const void* p, size_t n) {
    if (out_ && n) out_->insert(out_->end(), static_cast<const uint8_t*>(p),
                                static_cast<const uint8_t*>(p) + n);
    count_ += n;
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void zeros(size_t n) {
    if (out_) out_->insert(out_->end(), n, uint8_t{0});
    count_ += n;
  }
  size_t count() const { return count_; }

 private:
  std::vector<uint8_t>* out_;
  size_t count_ = 0;
};

[[noreturn]] void bad_value(const std::string& key, const std::string& why) {
  throw Error("GGUF writer: key '" + key + "': " + why);
}

// The stored integer narrowed to T, or an error when it does not fit.
template <class T>
T narrow(const Value& v, const std::string& key) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(*u);
    bad_value(key, std::to_string(*u) + " does not fit in " +
                       std::string(value_type_name(v.type)));
  }
  if (const auto* i = std::get_if<int64_t>(&v.v)) {
    if (std::in_range<T>(*i)) return static_cast<T>(*i);
    bad_value(key, std::to_string(*i) + " does not fit in " +
                       std::string(value_type_name(v.type)));
  }
  bad_value(key, "type " + std::string(value_type_name(v.type)) + " holds no integer");
}

double stored_double(const Value& v, const std::string& key) {
  const auto* d = std::get_if<double>(&v.v);
  if (!d) bad_value(key, "type " + std::string(value_type_name(v.type)) + " holds no number");
  if (v.type == ValueType::FLOAT32 && std::isfinite(*d) && std::fabs(*d) > FLT_MAX)
    bad_value(key, std::to_string(*d) + " does not fit in float32");
  return *d;
}

void write_array_body(Sink& s, const Value& v, const std::string& key);

void write_scalar(Sink& s, const Value& v, const std::string& key) {
  switch (v.type) {
    case ValueType::UINT8: s.put(narrow<uint8_t>(v, key)); break;
    case ValueType::INT8: s.put(narrow<int8_t>(v, key)); break;
    case ValueType::UINT16: s.put(narrow<uint16_t>(v, key)); break;
    case ValueType::INT16: s.put(narrow<int16_t>(v, key)); break;
    case ValueType::UINT32: s.put(narrow<uint32_t>(v, key)); break;
    case ValueType::INT32: s.put(narrow<int32_t>(v, key)); break;
    case ValueType::UINT64: s.put(narrow<uint64_t>(v, key)); break;
    case ValueType::INT64: s.put(narrow<int64_t>(v, key)); break;
    case ValueType::FLOAT32: s.put(static_cast<float>(stored_double(v, key))); break;
    case ValueType::FLOAT64: s.put(stored_double(v, key)); break;
    case ValueType::BOOL: {
      const auto* b = std::get_if<bool>(&v.v);
      if (!b) bad_value(key, "type bool holds no bool");
      s.put<uint8_t>(*b ? 1 : 0);
      break;
    }
    case ValueType::STRING: {
      const auto* str = std::get_if<std::string>(&v.v);
      if (!str) bad_value(key, "type string holds no string");
      s.str(*str);
      break;
    }
    case ValueType::ARRAY: write_array_body(s, v, key); break;
    default: bad_value(key, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
  }
}

// Element type, count and elements (what follows the ARRAY type id).
void write_array_body(Sink& s, const Value& v, const std::string& key) {
  const auto* pa = std::get_if<std::shared_ptr<Array>>(&v.v);
  if (v.type != ValueType::ARRAY || !pa || !*pa) bad_value(key, "array value holds no array");
  const Array& a = **pa;
  if (a.index() != static_cast<size_t>(v.array_type))
    bad_value(key, "array_type " + std::string(value_type_name(v.array_type)) +
                       " does not match the stored elements");
  s.put(static_cast<uint32_t>(v.array_type));
  std::visit(
      [&](const auto& vec) {
        using T = typename std::decay_t<decltype(vec)>::value_type;
        s.put<uint64_t>(vec.size());
        if constexpr (std::is_same_v<T, bool>) {
          for (bool b : vec) s.put<uint8_t>(b ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::string>) {
          for (const auto& str : vec) s.str(str);
        } else if constexpr (std::is_same_v<T, Value>) {
          for (const Value& e : vec) {
            if (e.type != ValueType::ARRAY) bad_value(key, "nested array element is not an array");
            write_array_body(s, e, key);
          }
        } else {
          s.bytes(vec.data(), vec.size() * sizeof(T));
        }
      },
      a);
}

}  // namespace

void Writer::set(const std::string& key, Value v) {
  if (key.empty()) throw Error("GGUF writer: empty key");
  if (v.type > ValueType::FLOAT64)
    bad_value(key, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
  Sink counter(nullptr);
  write_scalar(counter, v, key);  // validates the value
  if (key == "general.alignment") {
    if (v.type != ValueType::UINT32) bad_value(key, "must be uint32");
    const uint32_t a = narrow<uint32_t>(v, key);
    if (a == 0 || !std::has_single_bit(a))
      bad_value(key, std::to_string(a) + " is not a non-zero power of two");
    alignment_ = a;
  }
  for (auto& kv : kv_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void Writer::set_u32(const std::string& key, uint32_t v) { set(key, make_u32(v)); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, make_i32(v)); }
void Writer::set_u64(const std::string& key, uint64_t v) { set(key, make_u64(v)); }
void Writer::set_f32(const std::string& key, float v) { set(key, make_f32(v)); }
void Writer::set_bool(const std::string& key, bool v) { set(key, make_bool(v)); }
void Writer::set_string(const std::string& key, const std::string& v) { set(key, make_string(v)); }
void Writer::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, make_array(v));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, make_array(v));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, make_array(v));
}
void Writer::set_alignment(uint32_t a) { set_u32("general.alignment", a); }

TensorInfo Writer::checked_info(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) const {
  const std::string tn = "GGUF writer: tensor '" + name + "'";
  if (name.empty()) throw Error("GGUF writer: empty tensor name");
  if (name.size() > kMaxNameBytes)
    throw Error(tn + ": name longer than " + std::to_string(kMaxNameBytes) + " bytes");
  for (const auto& t : tensors_)
    if (t.info.name == name) throw Error("GGUF writer: duplicate tensor name '" + name + "'");
  if (ne.empty() || ne.size() > 4)
    throw Error(tn + ": " + std::to_string(ne.size()) + " dimensions, must be 1..4");
  const auto ti = type_info(static_cast<uint32_t>(type));
  if (!ti) throw Error(tn + ": unknown type id " + std::to_string(static_cast<uint32_t>(type)));
  int64_t n = 1;
  for (int64_t d : ne)
    if (d <= 0 || __builtin_mul_overflow(n, d, &n))
      throw Error(tn + ": dimensions must be positive and their product fit in int64");
  if (ne[0] % ti->block_elems != 0)
    throw Error(tn + ": row of " + std::to_string(ne[0]) + " elements is not a multiple of the " +
                std::string(ti->name) + " block size " + std::to_string(ti->block_elems));
  TensorInfo info;
  info.name = name;
  info.ne = ne;
  info.type = type;
  info.nbytes = static_cast<uint64_t>(n / ti->block_elems) * ti->block_bytes;
  return info;
}

void Writer::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                        const void* data, size_t nbytes) {
  PendingTensor t;
  t.info = checked_info(name, type, ne);
  if (nbytes != t.info.nbytes)
    throw Error("GGUF writer: tensor '" + name + "': got " + std::to_string(nbytes) + " bytes, type " +
                std::string(type_info(static_cast<uint32_t>(type))->name) + " needs " +
                std::to_string(t.info.nbytes));
  const auto* p = static_cast<const uint8_t*>(data);
  t.data.assign(p, p + nbytes);
  tensors_.push_back(std::move(t));
}

void Writer::add_tensor_info(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) {
  PendingTensor t;
  t.info = checked_info(name, type, ne);
  t.has_data = false;
  tensors_.push_back(std::move(t));
}

namespace {
// Everything before the tensor data: header, key-value pairs, tensor infos, padding.
std::vector<uint8_t> encode_meta(const std::vector<std::pair<std::string, Value>>& kv,
                                 const std::vector<TensorInfo>& infos, uint32_t alignment) {
  std::vector<uint8_t> out;
  Sink s(&out);
  s.bytes("GGUF", 4);
  s.put<uint32_t>(3);
  s.put<uint64_t>(infos.size());
  s.put<uint64_t>(kv.size());
  for (const auto& [key, v] : kv) {
    s.str(key);
    s.put(static_cast<uint32_t>(v.type));
    write_scalar(s, v, key);
  }
  for (const TensorInfo& t : infos) {
    s.str(t.name);
    s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) s.put(d);
    s.put(static_cast<uint32_t>(t.type));
    s.put(t.offset);
  }
  s.zeros(pad_to(s.count(), alignment) - s.count());
  return out;
}
}  // namespace

// Calls emit(pointer, size) for each piece of the file in order (tensor data is not copied).
Writer::Layout Writer::layout() const {
  Layout l;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    l.tensors.push_back(t.info);
    l.tensors.back().offset = offset;
    offset += pad_to(t.info.nbytes, alignment_);
  }
  l.meta = encode_meta(kv_, l.tensors, alignment_);
  l.file_size = l.meta.size() + offset;
  return l;
}

template <class Emit>
void Writer::emit_file(Emit&& emit) const {
  for (const auto& t : tensors_)
    if (!t.has_data)
      throw Error("GGUF writer: tensor '" + t.info.name + "' was declared without data (add_tensor_info); "
                  "write its bytes at layout()'s offsets instead");
  const std::vector<uint8_t> meta = layout().meta;
  emit(meta.data(), meta.size());
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const auto& t : tensors_) {
    emit(t.data.data(), t.data.size());
    emit(zeros.data(), pad_to(t.data.size(), alignment_) - t.data.size());
  }
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  emit_file([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void Writer::write(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error("cannot create GGUF file '" + path + "': " + std::strerror(errno));
  bool ok = true;
  emit_file([&](const uint8_t* p, size_t n) { ok = ok && std::fwrite(p, 1, n, f) == n; });
  const int err = errno;
  if (std::fclose(f) != 0 && ok) ok = false;
  if (!ok) throw Error("cannot write GGUF file '" + path + "': " + std::strerror(err ? err : errno));
}

}  // namespace df::gguf

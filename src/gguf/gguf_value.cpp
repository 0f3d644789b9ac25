// GGUF metadata values: type names, typed conversions, deep comparison, constructors.
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

bool value_type_valid(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::FLOAT64); }

namespace {

[[noreturn]] void type_mismatch(std::string_view key, const Value& v, std::string_view expected) {
  std::string got(value_type_name(v.type));
  if (v.type == ValueType::ARRAY) got += " of " + std::string(value_type_name(v.array_type));
  throw Error("key '" + std::string(key) + "' has type " + got + ", expected " +
              std::string(expected));
}

template <class T>
bool bits_equal(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

bool arrays_equal(const Array& a, const Array& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& va) {
        using V = std::decay_t<decltype(va)>;
        const auto& vb = std::get<V>(b);
        if (va.size() != vb.size()) return false;
        if constexpr (std::is_floating_point_v<typename V::value_type>) {
          for (size_t i = 0; i < va.size(); ++i)
            if (!bits_equal(va[i], vb[i])) return false;
          return true;
        } else {
          return va == vb;
        }
      },
      a);
}

}  // namespace

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

uint64_t Value::as_u64(std::string_view key) const {
  if (!is_integer()) type_mismatch(key, *this, "an integer");
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  const int64_t i = std::get<int64_t>(v);
  if (i < 0)
    throw Error("key '" + std::string(key) + "' is " + std::to_string(i) +
                ", expected a non-negative integer");
  return static_cast<uint64_t>(i);
}

int64_t Value::as_i64(std::string_view key) const {
  if (!is_integer()) type_mismatch(key, *this, "an integer");
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  const uint64_t u = std::get<uint64_t>(v);
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error("key '" + std::string(key) + "' is " + std::to_string(u) +
                ", too large for int64");
  return static_cast<int64_t>(u);
}

double Value::as_f64(std::string_view key) const {
  if (type == ValueType::FLOAT32 || type == ValueType::FLOAT64) return std::get<double>(v);
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v); i && is_integer()) return static_cast<double>(*i);
  type_mismatch(key, *this, "a number");
}

bool Value::as_bool(std::string_view key) const {
  if (type != ValueType::BOOL) type_mismatch(key, *this, "bool");
  return std::get<bool>(v);
}

const std::string& Value::as_string(std::string_view key) const {
  if (type != ValueType::STRING) type_mismatch(key, *this, "string");
  return std::get<std::string>(v);
}

const Array& Value::as_array(std::string_view key) const {
  const auto* a = std::get_if<std::shared_ptr<Array>>(&v);
  if (type != ValueType::ARRAY || !a || !*a) type_mismatch(key, *this, "array");
  return **a;
}

size_t Value::array_size() const {
  const auto* a = std::get_if<std::shared_ptr<Array>>(&v);
  if (type != ValueType::ARRAY || !a || !*a) return 0;
  return std::visit([](const auto& vec) { return vec.size(); }, **a);
}

bool operator==(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type == ValueType::ARRAY) {
    if (a.array_type != b.array_type) return false;
    const auto* pa = std::get_if<std::shared_ptr<Array>>(&a.v);
    const auto* pb = std::get_if<std::shared_ptr<Array>>(&b.v);
    if (!pa || !pb || !*pa || !*pb) return pa && pb && !*pa && !*pb;
    return arrays_equal(**pa, **pb);
  }
  if (a.v.index() != b.v.index()) return false;
  if (const auto* da = std::get_if<double>(&a.v)) return bits_equal(*da, std::get<double>(b.v));
  return a.v == b.v;
}

Value make_u32(uint32_t v) { return Value{ValueType::UINT32, ValueType::UINT32, uint64_t{v}}; }
Value make_i32(int32_t v) { return Value{ValueType::INT32, ValueType::UINT32, int64_t{v}}; }
Value make_u64(uint64_t v) { return Value{ValueType::UINT64, ValueType::UINT32, v}; }
Value make_i64(int64_t v) { return Value{ValueType::INT64, ValueType::UINT32, v}; }
Value make_f32(float v) { return Value{ValueType::FLOAT32, ValueType::UINT32, double{v}}; }
Value make_f64(double v) { return Value{ValueType::FLOAT64, ValueType::UINT32, v}; }
Value make_bool(bool v) { return Value{ValueType::BOOL, ValueType::UINT32, v}; }
Value make_string(std::string v) {
  return Value{ValueType::STRING, ValueType::UINT32, std::move(v)};
}
Value make_array(Array a) {
  // The Array alternatives are declared in ValueType order, so the index is the type id.
  const auto elem = static_cast<ValueType>(a.index());
  return Value{ValueType::ARRAY, elem, std::make_shared<Array>(std::move(a))};
}

}  // namespace df::gguf

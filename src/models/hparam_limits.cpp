#include "models/hparam_limits.h"

#include <type_traits>
#include <variant>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df {
namespace {

[[noreturn]] void fail(const std::string& key, const std::string& value, bool in_array) {
  throw Error("hyperparameter '" + key + "'" + (in_array ? " has an entry " : " = ") + value +
              ", out of range (sizes are at most " + std::to_string(kMaxHparam) + ")");
}

// Negative values are left to the loaders (which reject them where they are sizes).
template <typename E>
void check(const std::string& key, E e, bool in_array) {
  if constexpr (std::is_unsigned_v<E>) {
    if (static_cast<uint64_t>(e) > static_cast<uint64_t>(kMaxHparam)) fail(key, std::to_string(e), in_array);
  } else {
    if (static_cast<int64_t>(e) > kMaxHparam) fail(key, std::to_string(e), in_array);
  }
}

}  // namespace

void check_hparam_limits(const gguf::File& f, const std::string& arch) {
  const std::string prefix = arch + ".";
  for (const auto& kv : f.metadata()) {
    const std::string& key = kv.first;  // (clang 14 cannot capture structured bindings)
    const gguf::Value& v = kv.second;
    const bool context = key.size() >= 14 && key.compare(key.size() - 14, 14, "context_length") == 0;
    if (key.rfind(prefix, 0) != 0 || context) continue;
    if (v.is_integer()) {
      if (const auto* u = std::get_if<uint64_t>(&v.v)) check(key, *u, false);
      if (const auto* i = std::get_if<int64_t>(&v.v)) check(key, *i, false);
      continue;
    }
    if (v.type != gguf::ValueType::ARRAY) continue;
    std::visit(
        [&](const auto& vec) {
          using E = typename std::decay_t<decltype(vec)>::value_type;
          if constexpr (std::is_integral_v<E> && !std::is_same_v<E, bool>)
            for (E e : vec) check(key, e, true);
        },
        v.as_array(key));
  }
}

}  // namespace df

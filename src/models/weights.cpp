#include "models/weights.h"

#include <sstream>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df {
namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < ne.size(); ++i) s << (i ? ", " : "") << ne[i];
  s << ']';
  return s.str();
}

}  // namespace

bool WeightLoader::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

const void* WeightLoader::host(const std::string& name) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (!t) throw Error("missing required tensor '" + name + "'");
  return file_.tensor_data(*t);
}

Tensor WeightLoader::get(const std::string& name, int64_t cols, int64_t rows) {
  return get_dims(name, rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows}, cols, rows);
}

Tensor WeightLoader::get_stack(const std::string& name, int64_t cols, int64_t rows, int64_t n) {
  return get_dims(name, {cols, rows, n}, cols, rows, n);
}

Tensor WeightLoader::get_dims(const std::string& name, const std::vector<int64_t>& want, int64_t cols, int64_t rows,
                              int64_t n_stack) {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (!t) throw Error("missing required tensor '" + name + "'");
  std::vector<int64_t> have = t->ne;
  while (have.size() > want.size() && have.back() == 1) have.pop_back();
  if (have != want)
    throw Error("tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " + shape_str(want) +
                " from the hyperparameters");
  const auto& ti = type_info(t->type);
  if (!ti.supported)
    throw Error("tensor '" + name + "' has type " + std::string(ti.name) +
                ", which this build cannot compute with");
  bytes_ += t->nbytes;
  if (n_stack > 0) return backend_.weight_stack(t->type, cols, rows, n_stack, file_.tensor_data(*t));
  return backend_.weight(t->type, cols, rows, file_.tensor_data(*t));
}

Tensor WeightLoader::get_f32(const std::string& name, int64_t cols) {
  Tensor t = get(name, cols, 1);
  if (t.type != GgmlType::F32)
    throw Error("tensor '" + name + "' must be f32, found " + std::string(type_name(t.type)));
  return t;
}

}  // namespace df

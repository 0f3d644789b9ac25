#include "backend/backend.h"

#include "common/error.h"

namespace df {

Tensor Tensor::reshape(int64_t new_cols) const {
  const size_t dense = row_bytes(type, cols);
  if (stride != dense) throw Error("reshape of a strided tensor");
  const int64_t total = cols * rows;
  if (new_cols <= 0 || total % new_cols != 0) throw Error("reshape to incompatible row size");
  Tensor t = *this;
  t.cols = new_cols;
  t.rows = total / new_cols;
  t.stride = row_bytes(type, new_cols);
  return t;
}

}  // namespace df

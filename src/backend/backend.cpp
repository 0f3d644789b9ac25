#include "backend/backend.h"

#include "common/error.h"

namespace df {

Tensor Tensor::slice_cols(int64_t c0, int64_t n) const {
  if (type_info(type).block_elems != 1) throw Error("column slice of a block-quantized tensor");
  if (c0 < 0 || n <= 0 || c0 + n > cols) throw Error("column slice out of range");
  Tensor t = *this;
  t.data = static_cast<uint8_t*>(data) + row_bytes(type, c0);
  t.cols = n;
  return t;
}

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

Tensor alloc_tensor(Backend& b, GgmlType type, int64_t cols, int64_t rows,
                    std::vector<std::shared_ptr<Buffer>>& owner) {
  Tensor t;
  t.type = type;
  t.cols = cols;
  t.rows = rows;
  t.stride = row_bytes(type, cols);
  auto buf = b.alloc(t.nbytes());
  t.data = buf->data();
  owner.push_back(std::move(buf));
  return t;
}

}  // namespace df

// The CUDA backend's transfers on its stream: upload, download (waits), synchronize, copy and
// copy_batch (device to device), and host_reader (a download queued now and waited for later: pinned memory and
// an event, for the decode lookahead of GreedySteps).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/backend_check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/ops/copy_batch.cuh"
#include "backend/cuda/ops/upload_small.cuh"
#include "common/error.h"

namespace df::cuda {

void CudaBackend::upload(const Tensor& dst, const void* src, size_t bytes) {
  check(bytes <= dst.nbytes(), "upload larger than tensor");
  ctx_->make_current();
  OpScope ps(prof_.get(), "upload");
  ++i32_epoch_;
  if (opt_.copy_kernels && upload_small_fits(dst.data, bytes)) {
    launch_upload_small(dst.data, src, bytes, ctx_->stream());
    return;
  }
  cuda_check(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, ctx_->stream()), "upload");
}

void CudaBackend::download(const Tensor& src, void* dst, size_t bytes) {
  check(bytes <= src.nbytes(), "download larger than tensor");
  ctx_->make_current();
  cuda_check(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, ctx_->stream()), "download");
  cuda_check(cudaStreamSynchronize(ctx_->stream()), "download: synchronize");
}

void CudaBackend::synchronize() {
  ctx_->make_current();
  cuda_check(cudaStreamSynchronize(ctx_->stream()), "synchronize");
}

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  OpScope ps(prof_.get(), "copy");
  check(same_shape(src, dst) && src.type == dst.type, "copy shapes");
  ctx_->make_current();
  ++i32_epoch_;
  if (src.rows == 0) return;
  const size_t rb = row_bytes(src.type, src.cols);
  // byte spans [first, last) of the two matrices: overlapping ones keep cudaMemcpy2DAsync
  const auto* s0 = static_cast<const uint8_t*>(src.data);
  const auto* d0 = static_cast<const uint8_t*>(dst.data);
  const size_t last_row = static_cast<size_t>(src.rows - 1);
  const bool apart = s0 + src.stride * last_row + rb <= d0 || d0 + dst.stride * last_row + rb <= s0;
  if (opt_.copy_kernels && apart && rb * static_cast<size_t>(src.rows) <= kMaxCopyKernelBytes) {
    const CopyItem item{static_cast<const uint8_t*>(src.data), static_cast<uint8_t*>(dst.data), static_cast<int64_t>(rb),
                        src.rows, static_cast<int64_t>(src.stride), static_cast<int64_t>(dst.stride)};
    launch_copy_batch(&item, 1, ctx_->stream());
    return;
  }
  cuda_check(cudaMemcpy2DAsync(dst.data, dst.stride, src.data, src.stride, rb, static_cast<size_t>(src.rows),
                               cudaMemcpyDeviceToDevice, ctx_->stream()),
             "copy");
}

void CudaBackend::copy_batch(std::span<const CopyPair> pairs) {
  if (!opt_.copy_batch) {
    Backend::copy_batch(pairs);
    return;
  }
  OpScope ps(prof_.get(), "copy_batch");
  std::vector<CopyItem> items;
  items.reserve(pairs.size());
  // byte ranges [first, last) of a strided matrix (its rows' spans)
  auto span_of = [](const void* p, size_t stride, int64_t rows, size_t rb) {
    const auto* b = static_cast<const uint8_t*>(p);
    return std::pair<const uint8_t*, const uint8_t*>(b, b + stride * static_cast<size_t>(rows - 1) + rb);
  };
  for (const CopyPair& p : pairs) {
    check(same_shape(p.src, p.dst) && p.src.type == p.dst.type, "copy_batch shapes");
    if (p.src.rows == 0) continue;
    const size_t rb = row_bytes(p.src.type, p.src.cols);
    items.push_back(CopyItem{static_cast<const uint8_t*>(p.src.data), static_cast<uint8_t*>(p.dst.data),
                             static_cast<int64_t>(rb), p.src.rows, static_cast<int64_t>(p.src.stride),
                             static_cast<int64_t>(p.dst.stride)});
  }
  // the copies of one launch run together: a destination may not overlap any other pair's bytes
  for (size_t i = 0; i < items.size(); ++i) {
    const auto d = span_of(items[i].dst, static_cast<size_t>(items[i].dst_stride), items[i].rows,
                           static_cast<size_t>(items[i].row_bytes));
    for (size_t j = 0; j < items.size(); ++j) {
      if (j == i) continue;
      const auto s = span_of(items[j].src, static_cast<size_t>(items[j].src_stride), items[j].rows,
                             static_cast<size_t>(items[j].row_bytes));
      const auto o = span_of(items[j].dst, static_cast<size_t>(items[j].dst_stride), items[j].rows,
                             static_cast<size_t>(items[j].row_bytes));
      check(!(d.first < s.second && s.first < d.second) && !(d.first < o.second && o.first < d.second),
            "copy_batch: a destination overlaps another pair's source or destination");
    }
  }
  ctx_->make_current();
  ++i32_epoch_;
  for (size_t i = 0; i < items.size(); i += kMaxCopyItems)
    launch_copy_batch(items.data() + i, static_cast<int>(std::min<size_t>(kMaxCopyItems, items.size() - i)),
                      ctx_->stream());
}

namespace {

// CudaBackend::host_reader: the copy into pinned memory queued on the stream with an event
// after it; wait() blocks on the event only.
class PinnedReader final : public HostReader {
 public:
  PinnedReader(const CudaContext& ctx, size_t bytes) : ctx_(ctx), bytes_(bytes) {
    ctx.make_current();
    cuda_check(cudaMallocHost(&host_, bytes == 0 ? 1 : bytes), "host_reader: cudaMallocHost");
    const cudaError_t e = cudaEventCreateWithFlags(&done_, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      cudaFreeHost(host_);
      cuda_check(e, "host_reader: cudaEventCreate");
    }
  }
  ~PinnedReader() override {
    cudaSetDevice(ctx_.device());
    cudaEventDestroy(done_);
    cudaFreeHost(host_);
  }
  void start(const Tensor& src) override {
    if (src.nbytes() < bytes_) throw Error("host_reader: the tensor is smaller than the reader");
    ctx_.make_current();
    cuda_check(cudaMemcpyAsync(host_, src.data, bytes_, cudaMemcpyDeviceToHost, ctx_.stream()), "host_reader: copy");
    cuda_check(cudaEventRecord(done_, ctx_.stream()), "host_reader: event");
  }
  const void* wait() override {
    ctx_.make_current();
    cuda_check(cudaEventSynchronize(done_), "host_reader: wait");
    return host_;
  }

 private:
  const CudaContext& ctx_;
  size_t bytes_;
  void* host_ = nullptr;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

std::unique_ptr<HostReader> CudaBackend::host_reader(size_t bytes) {
  return std::make_unique<PinnedReader>(*ctx_, bytes);
}

}  // namespace df::cuda

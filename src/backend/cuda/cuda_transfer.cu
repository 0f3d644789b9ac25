// The CUDA backend's host <-> device transfers on its stream: upload, download (waits),
// synchronize, and host_reader (a download queued now and waited for later: pinned memory and
// an event, for the decode lookahead of GreedySteps).
#include <memory>

#include "backend/cuda/backend_check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/op_profile.h"
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

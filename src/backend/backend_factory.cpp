#include "backend/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"

namespace df {
namespace {

std::unique_ptr<Backend> make_cpu(const CpuBackendOptions& o) {
  cpu::CpuOptions co;
  co.threads = o.threads;
  co.repack = o.repack;
  co.repack_q8_0 = o.repack_q8_0;
  co.expert_stats = o.expert_stats;
  co.expert_prefetch = o.expert_prefetch;
  co.expert_forecast = o.expert_forecast;
  co.expert_draft_forecast = o.expert_draft_forecast;
  co.expert_draft_forecast_blocks = o.expert_draft_forecast_blocks;
  co.isa = o.isa == "auto" ? cpu::best_isa() : cpu::parse_isa(o.isa);
  if (static_cast<int>(co.isa) > static_cast<int>(cpu::best_isa()))
    throw Error("this CPU does not support --isa " + o.isa);
  return std::make_unique<cpu::CpuBackend>(co);
}

}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& opt) {
  if (opt.device == "cpu") return make_cpu(opt.cpu);
  if (opt.device == "cuda") {
#ifdef DF_HAVE_CUDA
    if (cuda::device_count() <= 0) throw Error("--device cuda: no CUDA GPU found");
    return cuda::make_backend(opt);
#else
    throw Error("--device cuda: this build has no CUDA backend (configure with -DDF_CUDA=ON on a machine with "
                "the CUDA toolkit)");
#endif
  }
  if (opt.device == "auto") {
#ifdef DF_HAVE_CUDA
    if (cuda::device_count() > 0) {
      BackendOptions o = opt;
      o.device = "cuda";
      return cuda::make_backend(o);
    }
#endif
    return make_cpu(opt.cpu);
  }
  throw Error("unknown device '" + opt.device + "' (expected cpu, cuda or auto)");
}

}  // namespace df

// bench_matvec_cuda --chain ... --persist2 NW:D:U:BPS:PF,...: the variants of the second
// persistent chain (persistent_chain2.cuh) timed and checked against the launch chain's bits.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda/matvec/launch.cuh"
#include "persistent_chain2.cuh"

namespace df::cudamv::persist2 {

// time_graph(rec, &out): median ms of the graph of rec(stream), out = the residual after one
// chain from x0; base: the launch chain's residual (the bits every variant must give).
template <class TimeGraph>
nlohmann::json runs(const std::vector<LayerMats>& layers, float* resid, const float* norm_w,
                    const std::vector<Variant>& vars, int sms, double bw, double bytes,
                    const std::vector<float>& base, TimeGraph&& time_graph) {
  using nlohmann::json;
  Chain2 ch(layers, resid, norm_w, 1e-6f, [](int64_t u, int64_t p) { return mv_wpr(u, p); });
  json out = json::array();
  for (const Variant& v : vars) {
    size_t smem = 0;
    int occ = 0;
    cudaFuncAttributes fa{};
    std::string why;
    json r = {{"nw", v.nw}, {"d", v.d}, {"u", v.u}, {"blocks_per_sm", v.bps}, {"pf_items", v.pf}, {"flags", v.flags}};
    if (!ch.prepare(v, smem, occ, fa, why)) {
      r["error"] = why;
      out.push_back(r);
      std::printf("   persist2 %d:%d:%d:%d:%d:%d: %s\n", v.nw, v.d, v.u, v.bps, v.pf, v.flags, why.c_str());
      continue;
    }
    std::vector<float> y;
    const double ms = time_graph([&](cudaStream_t st) { ch.launch(v, sms, st); }, &y);
    const unsigned err = ch.err();
    double maxd = 0.0;
    bool finite = true;
    for (size_t i = 0; i < y.size(); ++i) {
      finite = finite && std::isfinite(y[i]);
      maxd = std::max(maxd, static_cast<double>(std::fabs(y[i] - base[i])));
    }
    const bool same = y.size() == base.size() && std::memcmp(y.data(), base.data(), y.size() * 4) == 0;
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    r.update({{"smem", smem}, {"occupancy", occ}, {"regs", fa.numRegs}, {"local_bytes", fa.localSizeBytes},
              {"grid", sms * v.bps}, {"ms", ms}, {"gbs", gbs}, {"pct_of_read_bw", 100.0 * gbs / bw},
              {"bits_equal_launch_chain", same}, {"max_abs_diff", maxd}, {"finite", finite}, {"barrier_gave_up", err != 0}});
    out.push_back(r);
    std::printf("   persist2 %2d:%d:%d:%d:%d:%2d (regs %d, local %d, smem %zu, occ %d): %.3f ms %5.0f GB/s (%4.1f %%) %s maxdiff %.3g%s\n",
                v.nw, v.d, v.u, v.bps, v.pf, v.flags, fa.numRegs, static_cast<int>(fa.localSizeBytes), smem, occ, ms, gbs,
                100.0 * gbs / bw, same ? "bits equal" : "BITS DIFFER", maxd, err ? " BARRIER GAVE UP" : "");
    std::fflush(stdout);
    if (err) ch.reset_sync();
  }
  return {{"stage_wpr_qkv_o_gateup_down", ch.wprs()}, {"stages", ch.nstages()}, {"runs", out}};
}

}  // namespace df::cudamv::persist2

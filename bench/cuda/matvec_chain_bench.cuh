// The --chain part of bench_matvec_cuda.cu (a decode step's matvecs as launches and as one
// persistent launch). Included by that file only, inside its anonymous namespace, after the
// helpers it uses (ck, median, DevBuf, clone, replicate, time_launches): not a header of its own.
#pragma once

// ---- a decode step's matvecs in a chain (--chain): the layers' real sequence ----
// Per layer, as the backend launches them: norm + Q|K|V (three matrices over the normed x),
// o (x: the Q output), norm + the SwiGLU gate/up pair (x: the o output), down (x: the SwiGLU
// output, into the residual the next layer's norm reads), `layers` times in one graph, each
// layer with weights of its own (rows copied from random tiles). GB/s = packed weight bytes
// of the chain / its time, beside a chain of the read kernel over the same weights.
struct ChainShape {
  std::string name;
  int64_t hidden, q, k, v, o_in, ffn;
  int layers;
};
struct ChainCfg {
  bool pdl;
  int64_t l2_mb;
  int per_sm;
};

json chain(const mv::Context& ctx, GgmlType t, const ChainShape& sh, double bw, const std::vector<ChainCfg>& cfgs,
           const std::vector<mv::persist::Variant>& pvars, const std::vector<mv::persist2::Variant>& p2vars,
           cudaStream_t s) {
  std::vector<mv::PackedWeight> tiles;
  auto tile_of = [&](int64_t cols) -> const mv::PackedWeight& {
    for (auto& tl : tiles)
      if (tl.cols == cols) return tl;
    const auto b = mt::random_blocks(t, cols, 64, 7000 + static_cast<uint64_t>(cols));
    tiles.push_back(mv::pack_weight(ctx, t, cols, 64, b.data()));
    return tiles.back();
  };
  tile_of(sh.hidden), tile_of(sh.o_in), tile_of(sh.ffn);
  struct Layer {
    mv::PackedWeight wq, wk, wv, wo, wg, wu, wd;
  };
  std::vector<Layer> L(static_cast<size_t>(sh.layers));
  size_t bytes = 0;
  for (auto& l : L) {
    l.wq = replicate(tile_of(sh.hidden), sh.q), l.wk = replicate(tile_of(sh.hidden), sh.k);
    l.wv = replicate(tile_of(sh.hidden), sh.v), l.wo = replicate(tile_of(sh.o_in), sh.hidden);
    l.wg = replicate(tile_of(sh.hidden), sh.ffn), l.wu = replicate(tile_of(sh.hidden), sh.ffn);
    l.wd = replicate(tile_of(sh.ffn), sh.hidden);
    for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.wg, &l.wu, &l.wd}) bytes += w->bytes;
  }
  const auto x0 = mt::random_x(sh.hidden, 31), nw = mt::random_x(sh.hidden, 32);
  DevBuf resid(sh.hidden * 4), dn(sh.hidden * 4), q(sh.q * 4), k(sh.k * 4), v(sh.v * 4), o(sh.hidden * 4),
      h(sh.ffn * 4), sink(4);
  ck(cudaMemcpy(dn.p, nw.data(), nw.size() * 4, cudaMemcpyHostToDevice), "norm w");
  auto set = [&](const ChainCfg& c) {
    for (auto& l : L)
      for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.wg, &l.wu, &l.wd})
        w->pdl = c.pdl, w->pipe = true, w->l2_prefetch = c.l2_mb << 20, w->blocks_per_sm = c.per_sm;
  };
  auto record = [&](cudaStream_t st) {
    for (auto& l : L) {
      mv::MatvecFusion fu;
      fu.more[0] = &l.wk, fu.more[1] = &l.wv, fu.y_more[0] = k.f(), fu.y_more[1] = v.f();
      fu.norm_w = dn.f(), fu.eps = 1e-6f;
      if (!mv::matvec_fused(l.wq, resid.f(), q.f(), 1, fu, st)) throw df::Error("chain: qkv not fused");
      mv::matvec(l.wo, q.f(), o.f(), 1, st);
      mv::MatvecFusion sw;
      sw.more[0] = &l.wu, sw.swiglu = true, sw.norm_w = dn.f(), sw.eps = 1e-6f;
      if (!mv::matvec_fused(l.wg, o.f(), h.f(), 1, sw, st)) throw df::Error("chain: gate/up not fused");
      mv::matvec(l.wd, h.f(), resid.f(), 1, st);
    }
  };
  int sms = 1;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  auto record_read = [&](cudaStream_t st) {
    for (auto& l : L)
      for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.wg, &l.wu, &l.wd})
        read_kernel<<<sms * 8, 512, 0, st>>>(reinterpret_cast<const uint4*>(w->data), w->bytes / 16,
                                             static_cast<unsigned*>(sink.p));
  };
  // Median time (ms) of the recorded chain in a graph; `out`: the residual after one chain
  // from x0 (the bits every configuration must give).
  auto time_graph = [&](auto&& rec, std::vector<float>* out) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
    rec(s);
    ck(cudaStreamEndCapture(s, &g), "capture end");
    ck(cudaGraphInstantiate(&ge, g, 0), "instantiate");
    if (out) {
      ck(cudaMemcpyAsync(resid.p, x0.data(), x0.size() * 4, cudaMemcpyHostToDevice, s), "x0");
      ck(cudaGraphLaunch(ge, s), "graph");
      out->resize(static_cast<size_t>(sh.hidden));
      ck(cudaMemcpyAsync(out->data(), resid.p, out->size() * 4, cudaMemcpyDeviceToHost, s), "resid");
    }
    ck(cudaGraphLaunch(ge, s), "graph");
    ck(cudaStreamSynchronize(s), "graph run");
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<double> ms;
    for (int rep = 0; rep < 7; ++rep) {
      cudaEventRecord(a, s);
      ck(cudaGraphLaunch(ge, s), "graph");
      cudaEventRecord(b, s);
      ck(cudaEventSynchronize(b), "graph run");
      float tm = 0;
      cudaEventElapsedTime(&tm, a, b);
      ms.push_back(tm);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return median(ms);
  };
  json res = {{"type", std::string(df::type_name(t))}, {"shape", sh.name}, {"layers", sh.layers},
              {"launches", 4 * sh.layers}, {"packed_bytes", bytes}};
  const double read_ms = time_graph(record_read, nullptr);
  res["read_kernel_chain"] = {{"ms", read_ms}, {"gbs", bytes / (read_ms * 1e-3) / 1e9},
                              {"pct_of_read_bw", 100.0 * bytes / (read_ms * 1e-3) / 1e9 / bw}};
  std::printf("chain %-5s %-4s %d layers %.1f MB: read-kernel chain %.3f ms %5.0f GB/s\n",
              std::string(df::type_name(t)).c_str(), sh.name.c_str(), sh.layers, bytes / 1e6, read_ms,
              bytes / (read_ms * 1e-3) / 1e9);
  std::vector<float> base;
  json runs = json::array();
  for (const ChainCfg& c : cfgs) {
    set(c);
    std::vector<float> out;
    const double ms = time_graph(record, &out);
    if (base.empty()) base = out;
    bool finite = true;
    for (float f : out) finite = finite && std::isfinite(f);
    const bool same = std::memcmp(out.data(), base.data(), out.size() * 4) == 0;
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    runs.push_back({{"pdl", c.pdl}, {"l2_mb", c.l2_mb}, {"blocks_per_sm", c.per_sm}, {"ms", ms}, {"gbs", gbs},
                    {"pct_of_read_bw", 100.0 * gbs / bw}, {"us_per_launch", 1e3 * ms / (4 * sh.layers)},
                    {"bits_equal_first", same}, {"finite", finite}});
    std::printf("   pdl %d l2 %5lld MB per_sm %d: %.3f ms %5.0f GB/s (%4.1f %%)%s\n", c.pdl ? 1 : 0,
                static_cast<long long>(c.l2_mb), c.per_sm, ms, gbs, 100.0 * gbs / bw,
                same && finite ? "" : " (BITS DIFFER or not finite)");
    std::fflush(stdout);
  }
  res["runs"] = runs;
  if (!p2vars.empty() && t == GgmlType::Q4_0) {  // the second persistent chain (persistent_chain2.cuh)
    auto mat = [](const mv::PackedWeight& w) {
      return mv::persist2::Mat{w.data, w.data + w.m_offset, static_cast<int>(w.rows), static_cast<int>(w.cols),
                               static_cast<int>(w.q_row_bytes), static_cast<int>(w.m_row_bytes)};
    };
    std::vector<mv::persist2::LayerMats> lm;
    for (auto& l : L) lm.push_back({mat(l.wq), mat(l.wk), mat(l.wv), mat(l.wo), mat(l.wg), mat(l.wu), mat(l.wd)});
    res["persistent2"] = mv::persist2::runs(lm, resid.f(), dn.f(), p2vars, sms, bw, static_cast<double>(bytes), base, time_graph);
  }
  if (pvars.empty() || t != GgmlType::Q4_0) return res;
  // The persistent kernel (persistent_chain.cuh): the same stages in one launch, from the same
  // x0; its residual against the first configuration's (the chain of mv_kernel launches).
  namespace ps = mv::persist;
  auto view = [](const mv::PackedWeight& w, ps::Stage& st, int i) {
    st.q[i] = w.data, st.m[i] = w.data + w.m_offset, st.rows[i] = static_cast<int>(w.rows);
    st.q_row_bytes = static_cast<int>(w.q_row_bytes), st.m_row_bytes = static_cast<int>(w.m_row_bytes);
    st.cols = static_cast<int>(w.cols);
  };
  std::vector<ps::Stage> stv;
  for (auto& l : L) {
    ps::Stage a{}, b{}, c{}, d{};
    view(l.wq, a, 0), view(l.wk, a, 1), view(l.wv, a, 2);
    a.y[0] = q.f(), a.y[1] = k.f(), a.y[2] = v.f(), a.nmat = 3, a.units = static_cast<int>(sh.q + sh.k + sh.v);
    a.x = resid.f(), a.norm_w = dn.f(), a.eps = 1e-6f;
    view(l.wo, b, 0);
    b.y[0] = o.f(), b.nmat = 1, b.units = static_cast<int>(sh.hidden), b.x = q.f();
    view(l.wg, c, 0), view(l.wu, c, 1);
    c.y[0] = h.f(), c.nmat = 2, c.pair = 1, c.units = static_cast<int>(sh.ffn), c.x = o.f(), c.norm_w = dn.f(), c.eps = 1e-6f;
    view(l.wd, d, 0);
    d.y[0] = resid.f(), d.nmat = 1, d.units = static_cast<int>(sh.hidden), d.x = h.f();
    for (ps::Stage* st : {&a, &b, &c, &d}) {  // mv_kernel's warps per row of the same launch
      const int64_t units = st->pair ? 2 * st->units : st->units;
      st->wpr = mv::mv_wpr(units, st->cols / 32);
      stv.push_back(*st);
    }
  }
  int max_cols = 0;
  for (const auto& st : stv) max_cols = std::max(max_cols, st.cols);
  DevBuf dstages(stv.size() * sizeof(ps::Stage)), dsync(16);
  ck(cudaMemcpy(dstages.p, stv.data(), stv.size() * sizeof(ps::Stage), cudaMemcpyHostToDevice), "stages");
  ck(cudaMemset(dsync.p, 0, 16), "sync");
  unsigned* su = static_cast<unsigned*>(dsync.p);
  const ps::Sync sync{su, su + 1, su + 2};
  json wprs = json::array();
  for (int i = 0; i < 4; ++i) wprs.push_back(stv[static_cast<size_t>(i)].wpr);
  json pr = json::array();
  for (const auto& pv : pvars) {
    const ps::ChainKernel kern = ps::kernel_of(pv.ring, pv.sleep != 0);
    if (!kern) throw df::Error("--persist: ring " + std::to_string(pv.ring) + " sleep " + std::to_string(pv.sleep) +
                               " not instantiated (4, 8, 16, 24, 32, 36; sleep with 16, 32)");
    int xoff = 0, xsoff = 0;
    const size_t smem = ps::smem_of(pv.ring, max_cols, xoff, xsoff);
    int optin = 0;
    ck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), "smem optin");
    if (smem + 128 > static_cast<size_t>(optin)) {
      pr.push_back({{"ring", pv.ring}, {"sleep", pv.sleep}, {"smem", smem}, {"error", "shared memory does not fit"}});
      std::printf("   persistent ring %2d: %zu B shared memory do not fit\n", pv.ring, smem);
      continue;
    }
    ck(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "smem attr");
    int occ = 0;
    ck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, ps::kPWarps * 32, smem), "occupancy");
    cudaFuncAttributes fa{};
    ck(cudaFuncGetAttributes(&fa, kern), "attributes");
    json r = {{"ring", pv.ring}, {"sleep", pv.sleep}, {"per_sm_asked", pv.per_sm}, {"smem", smem}, {"occupancy", occ},
              {"regs", fa.numRegs}, {"local_bytes", fa.localSizeBytes}};
    if (occ < 1) {
      r["error"] = "does not fit";
      pr.push_back(r);
      continue;
    }
    const int per_sm = pv.per_sm > 0 ? std::min(occ, pv.per_sm) : occ;
    const unsigned grid = static_cast<unsigned>(sms * per_sm);
    auto rec = [&](cudaStream_t st) {
      kern<<<grid, ps::kPWarps * 32, smem, st>>>(static_cast<const ps::Stage*>(dstages.p), static_cast<int>(stv.size()),
                                                 sync, xoff, xsoff);
      ck(cudaGetLastError(), "persistent launch");
    };
    std::vector<float> out;
    const double ms = time_graph(rec, &out);
    unsigned err = 0;
    ck(cudaMemcpy(&err, su + 2, 4, cudaMemcpyDeviceToHost), "err");
    double maxd = 0.0;
    bool finite = true;
    for (size_t i = 0; i < out.size(); ++i) {
      finite = finite && std::isfinite(out[i]);
      maxd = std::max(maxd, static_cast<double>(std::fabs(out[i] - base[i])));
    }
    double maxref = 0.0;
    for (float f : base) maxref = std::max(maxref, static_cast<double>(std::fabs(f)));
    const bool same = std::memcmp(out.data(), base.data(), out.size() * 4) == 0;
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    r.update({{"blocks_per_sm", per_sm}, {"grid", grid}, {"ms", ms}, {"gbs", gbs}, {"pct_of_read_bw", 100.0 * gbs / bw},
              {"bits_equal_launch_chain", same}, {"max_abs_diff", maxd}, {"max_abs_ref", maxref}, {"finite", finite},
              {"barrier_gave_up", err != 0}});
    pr.push_back(r);
    std::printf("   persistent ring %2d sleep %d blocks/SM %d (regs %d, smem %zu): %.3f ms %5.0f GB/s (%4.1f %%) %s maxdiff %.3g%s\n",
                pv.ring, pv.sleep, per_sm, fa.numRegs, smem, ms, gbs, 100.0 * gbs / bw,
                same ? "bits equal" : "BITS DIFFER", maxd, err ? " BARRIER GAVE UP" : "");
    std::fflush(stdout);
    if (err) ck(cudaMemset(dsync.p, 0, 16), "sync reset");
  }
  res["persistent"] = {{"stage_wpr_qkv_o_gateup_down", wprs}, {"stages", stv.size()}, {"runs", pr}};
  return res;
}

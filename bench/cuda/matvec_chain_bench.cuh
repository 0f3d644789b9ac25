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
  int cluster = 0;  // PackedWeight::cluster (thread block clusters rounding x once)
};

// --chain-trace: one replay of the chain (its first configuration) with each matvec launch's
// per-block phase stamps (Q4_0 / Q8_0: the backend's launch by mv_kernel's traced instance,
// variants.cuh matvec_traced; PackedWeight::trace; mv_fuse.cuh mv_trace: globaltimer at entry,
// after griddepcontrol.wait and at the end; clock64 at entry, before the wait, after it, after
// the x prologue and at the end). Per launch: its blocks' first entry, first release from the
// wait, last end (globaltimer, ns), and per block the phases in SM cycles. Summarised per
// stage (qkv, o, gate/up, down) as medians over the layers, in us (cycles at the SM clock the
// blocks ran at: clock64 over globaltimer). globaltimer's own step is reported: on some GPUs it
// advances in ~1 us steps.
constexpr int kTraceMaxBlocks = 132 * 16;  // per launch: more than any persistent grid
struct TracePhases {
  double gap_us = 0, release_us = 0, span_us = 0, after_release_us = 0;  // globaltimer
  double issue_us = 0, wait_us = 0, prologue_us = 0, body_us = 0, body_max_us = 0;  // clock64, block medians
  int blocks = 0;
};
json trace_summary(const std::vector<uint64_t>& st, int launches, int per_layer, double attr_ghz) {
  static const char* kStage[] = {"qkv", "o", "gate_up", "down"};
  // The SM clock as it ran: each block's clock64 cycles over its globaltimer ns, entry to end
  // (median over the blocks; the attribute is the top clock, not the clock under load).
  std::vector<double> ratio;
  for (size_t k = 0; k < st.size() / 8; ++k) {
    const uint64_t* e = st.data() + 8 * k;
    if (e[0] != 0 && e[2] > e[0] && e[7] > e[3]) ratio.push_back(static_cast<double>(e[7] - e[3]) / static_cast<double>(e[2] - e[0]));
  }
  const double clock_ghz = ratio.empty() ? attr_ghz : median(ratio);
  std::vector<TracePhases> ph(static_cast<size_t>(launches));
  uint64_t prev_end = 0, gt_step = UINT64_MAX;
  for (int i = 0; i < launches; ++i) {
    const uint64_t* b = st.data() + static_cast<size_t>(i) * kTraceMaxBlocks * 8;
    uint64_t first_in = UINT64_MAX, first_rel = UINT64_MAX, last_end = 0;
    std::vector<double> issue, wait, pro, body;
    for (int k = 0; k < kTraceMaxBlocks; ++k) {
      const uint64_t* e = b + 8 * k;
      if (e[0] == 0) continue;
      first_in = std::min(first_in, e[0]), first_rel = std::min(first_rel, e[1]), last_end = std::max(last_end, e[2]);
      for (int a = 0; a < 3; ++a)
        for (int c = a + 1; c < 3; ++c)
          if (e[c] > e[a]) gt_step = std::min(gt_step, e[c] - e[a]);
      issue.push_back((e[4] - e[3]) / clock_ghz * 1e-3), wait.push_back((e[5] - e[4]) / clock_ghz * 1e-3);
      pro.push_back((e[6] - e[5]) / clock_ghz * 1e-3), body.push_back((e[7] - e[6]) / clock_ghz * 1e-3);
    }
    TracePhases& p = ph[static_cast<size_t>(i)];
    p.blocks = static_cast<int>(issue.size());
    if (p.blocks == 0) continue;
    p.gap_us = prev_end ? (static_cast<double>(first_in) - static_cast<double>(prev_end)) * 1e-3 : 0.0;
    p.release_us = prev_end ? (static_cast<double>(first_rel) - static_cast<double>(prev_end)) * 1e-3 : 0.0;
    p.span_us = (last_end - first_in) * 1e-3, p.after_release_us = (last_end - first_rel) * 1e-3;
    p.issue_us = median(issue), p.wait_us = median(wait), p.prologue_us = median(pro), p.body_us = median(body);
    p.body_max_us = *std::max_element(body.begin(), body.end());
    prev_end = last_end;
  }
  json out = json::array();
  std::printf("   trace (medians over the layers, us; gap/release: from the previous launch's last block end;\n"
              "   issue/wait/prologue/body: per block, its median, body max: its slowest block; the smallest\n"
              "   globaltimer difference within a block %.0f ns (a bound on the timer's step);\n"
              "   SM clock %.3f GHz from clock64 / globaltimer, attribute %.3f)\n",
              gt_step == UINT64_MAX ? 0.0 : static_cast<double>(gt_step), clock_ghz, attr_ghz);
  std::printf("   %-8s %6s %7s %8s %7s %9s %6s %6s %8s %6s %8s\n", "stage", "blocks", "gap", "release", "span",
              "post-rel", "issue", "wait", "prologue", "body", "body max");
  for (int sidx = 0; sidx < per_layer; ++sidx) {
    std::vector<double> f[10];
    for (int i = sidx; i < launches; i += per_layer) {
      const TracePhases& p = ph[static_cast<size_t>(i)];
      if (p.blocks == 0 || i < per_layer) continue;  // the first layer: no previous launch in the chain
      const double v[10] = {static_cast<double>(p.blocks), p.gap_us, p.release_us, p.span_us, p.after_release_us,
                            p.issue_us, p.wait_us, p.prologue_us, p.body_us, p.body_max_us};
      for (int k = 0; k < 10; ++k) f[k].push_back(v[k]);
    }
    if (f[0].empty()) continue;
    double m[10];
    for (int k = 0; k < 10; ++k) m[k] = median(f[k]);
    std::printf("   %-8s %6.0f %7.2f %8.2f %7.2f %9.2f %6.2f %6.2f %8.2f %6.2f %8.2f\n", kStage[sidx % 4], m[0], m[1], m[2],
                m[3], m[4], m[5], m[6], m[7], m[8], m[9]);
    out.push_back({{"stage", kStage[sidx % 4]}, {"blocks", m[0]}, {"gap_us", m[1]}, {"release_us", m[2]}, {"span_us", m[3]},
                   {"after_release_us", m[4]}, {"issue_us", m[5]}, {"wait_us", m[6]}, {"prologue_us", m[7]},
                   {"body_us", m[8]}, {"body_max_us", m[9]}});
  }
  return {{"globaltimer_min_diff_ns", gt_step == UINT64_MAX ? 0 : gt_step}, {"clock_ghz", clock_ghz},
          {"clock_ghz_attribute", attr_ghz}, {"stages", out}};
}

json chain(const mv::Context& ctx, GgmlType t, const ChainShape& sh, double bw, const std::vector<ChainCfg>& cfgs,
           const std::vector<mv::persist::Variant>& pvars, const std::vector<mv::persist2::Variant>& p2vars,
           cudaStream_t s, bool trace) {
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
        w->pdl = c.pdl, w->pipe = true, w->l2_prefetch = c.l2_mb << 20, w->blocks_per_sm = c.per_sm,
        w->cluster = c.cluster;
  };
  // A launch as the backend makes it, or (the weight's trace set: --chain-trace) the same launch
  // by the traced instance (variants.cuh matvec_traced).
  auto launch = [&](const mv::PackedWeight& w, const float* xin, float* yout, const mv::MatvecFusion& fu,
                    cudaStream_t st, const char* what) {
    const bool ok = w.trace ? mv::matvec_traced(w, xin, yout, fu, st) : mv::matvec_fused(w, xin, yout, 1, fu, st);
    if (!ok) throw df::Error(std::string("chain: ") + what + (w.trace ? " has no traced launch" : " not fused"));
  };
  auto record = [&](cudaStream_t st) {
    for (auto& l : L) {
      mv::MatvecFusion fu;
      fu.more[0] = &l.wk, fu.more[1] = &l.wv, fu.y_more[0] = k.f(), fu.y_more[1] = v.f();
      fu.norm_w = dn.f(), fu.eps = 1e-6f;
      launch(l.wq, resid.f(), q.f(), fu, st, "qkv");
      launch(l.wo, q.f(), o.f(), mv::MatvecFusion{}, st, "o");
      mv::MatvecFusion sw;
      sw.more[0] = &l.wu, sw.swiglu = true, sw.norm_w = dn.f(), sw.eps = 1e-6f;
      launch(l.wg, o.f(), h.f(), sw, st, "gate/up");
      launch(l.wd, h.f(), resid.f(), mv::MatvecFusion{}, st, "down");
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
    runs.push_back({{"pdl", c.pdl}, {"l2_mb", c.l2_mb}, {"blocks_per_sm", c.per_sm}, {"cluster", c.cluster}, {"ms", ms}, {"gbs", gbs},
                    {"pct_of_read_bw", 100.0 * gbs / bw}, {"us_per_launch", 1e3 * ms / (4 * sh.layers)},
                    {"bits_equal_first", same}, {"finite", finite}});
    std::printf("   pdl %d l2 %5lld MB per_sm %d cluster %d: %.3f ms %5.0f GB/s (%4.1f %%)%s\n", c.pdl ? 1 : 0,
                static_cast<long long>(c.l2_mb), c.per_sm, c.cluster, ms, gbs, 100.0 * gbs / bw,
                same && finite ? "" : " (BITS DIFFER or not finite)");
    std::fflush(stdout);
  }
  res["runs"] = runs;
  if (trace) {  // one replay of the first configuration with every launch's stamps
    set(cfgs.front());
    const int launches = 4 * sh.layers;
    DevBuf tb(static_cast<size_t>(launches) * kTraceMaxBlocks * 8 * sizeof(uint64_t));
    ck(cudaMemset(tb.p, 0, static_cast<size_t>(launches) * kTraceMaxBlocks * 8 * sizeof(uint64_t)), "trace clear");
    int i = 0;
    for (auto& l : L)  // in launch order: qkv (wq), o, gate/up (wg), down
      for (auto* w : {&l.wq, &l.wo, &l.wg, &l.wd})
        w->trace = static_cast<uint64_t*>(tb.p) + static_cast<size_t>(i++) * kTraceMaxBlocks * 8;
    std::vector<float> out;
    const double ms = time_graph(record, &out);  // its replays overwrite the stamps: the last one stays
    for (auto& l : L)
      for (auto* w : {&l.wq, &l.wo, &l.wg, &l.wd}) w->trace = nullptr;
    std::vector<uint64_t> st(static_cast<size_t>(launches) * kTraceMaxBlocks * 8);
    ck(cudaMemcpy(st.data(), tb.p, st.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost), "trace copy");
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    const bool same = std::memcmp(out.data(), base.data(), out.size() * 4) == 0;
    std::printf("   traced replay: %.3f ms (untraced %.3f), bits %s\n", ms, runs[0]["ms"].get<double>(),
                same ? "equal" : "DIFFER");
    res["trace"] = trace_summary(st, launches, 4, khz * 1e-6);
    res["trace"]["ms"] = ms;
    res["trace"]["bits_equal_first"] = same;
  }
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

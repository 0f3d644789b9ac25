// The statistics block printed on stderr after a generation.
#pragma once
#include <cstdio>

#include "diskformer/engine.h"

namespace df::cli {

inline void print_stats(const Engine& e, const Session& s) {
  const Stats& st = s.stats();
  const double mib = 1024.0 * 1024.0;
  const double pf = st.prefill_seconds > 0 ? st.prefilled_tokens / st.prefill_seconds : 0.0;
  const double dc = st.decode_seconds > 0 ? st.generated_tokens / st.decode_seconds : 0.0;
  std::fprintf(stderr, "\n--- %s on %s\n", e.info().arch.c_str(), e.backend_name().c_str());
  std::fprintf(stderr, "prompt: %lld tokens (%lld reused from cache), prefill %.1f tok/s\n",
               static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.reused_tokens), pf);
  std::fprintf(stderr, "decode: %lld tokens, %.1f tok/s (%.2f ms/token, %.1f GB/s of weights)\n",
               static_cast<long long>(st.generated_tokens), dc, dc > 0 ? 1000.0 / dc : 0.0,
               dc * static_cast<double>(e.info().bytes_per_token) / 1e9);
  std::fprintf(stderr, "memory: weights %.1f MiB (mapped), KV cache + recurrent state %.1f MiB, activations %.1f MiB\n",
               static_cast<double>(e.info().weight_bytes) / mib, static_cast<double>(s.cache_bytes()) / mib,
               static_cast<double>(s.scratch_bytes()) / mib);
}

}  // namespace df::cli

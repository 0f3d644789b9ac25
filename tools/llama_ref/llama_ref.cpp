// llama_ref: a small CLI over llama.cpp's C API, used by tests and benchmarks as the
// independent reference implementation. It never shares code with the engine.
//
//   tokenize   -m VOCAB.gguf --in TEXTS.json --out IDS.json [--no-special]
//              TEXTS.json: array of hex-encoded byte strings (invalid UTF-8 survives).
//              IDS.json:   array of arrays of token ids (add_special=false,
//                          parse_special = !--no-special).
//   logits     -m MODEL --in PROMPTS.json --out OUT.bin [-c CTX] [--kv f16|f32] [--fa on|off|auto]
//              PROMPTS.json: array of arrays of token ids. For each prompt: empty KV cache,
//              one batch with logits at every position. OUT.bin: float32 LE
//              [n_tokens, n_vocab] for every prompt, concatenated in order.
//              stdout: {"n_vocab": V, "lengths": [...]}.
//   generate   -m MODEL --in PROMPTS.json -n N --out OUT.json [--stop-at-eog]
//              Greedy (argmax, lowest id on ties, computed here over the raw logits).
//              OUT.json: {"tokens": [[ids]], "margins": [[top1 - top2 logit]]} — the margin
//              at each generated position lets tests excuse genuine near-ties.
//   perplexity -m MODEL -f TEXT -c CTX [--chunks N]
//              llama.cpp's perplexity method (tools/perplexity): tokenize the whole text
//              (add_special=true, parse_special=false), non-overlapping windows of CTX
//              tokens, first token replaced by BOS when the vocab adds one (Qwen does not),
//              score predictions of the second half of each window. One window per
//              llama_decode (llama-perplexity packs n_batch/n_ctx windows as separate
//              sequences into one batch; the per-sequence maths is the same).
//   bench      -m MODEL [-p 512] [-n 128] [-r 5]
//              pp: one batch of p tokens (n_batch = n_ubatch = p); tg: n tokens one at a
//              time from an empty cache; like llama-bench's ppP / tgN. JSON on stdout
//              (pp_cpu / tg_cpu: the same per process CPU second).
//   quantize   -m IN.gguf -o OUT.gguf --type NAME [--imatrix-uniform] [--pure]
//              llama_model_quantize; --imatrix-uniform passes an all-ones importance
//              matrix for every 2-D+ tensor (needed by IQ1/IQ2 types).
//
// Common flags: -t N threads (default 1), -v to keep llama.cpp's log output,
// --no-repack to disable CPU weight repacking (extra buffer types).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

#ifndef DF_LLAMA_LIB_DIR
#define DF_LLAMA_LIB_DIR ""
#endif

namespace {

using json = nlohmann::json;

struct Common {
  std::string model;
  int threads = 1;
  bool verbose = false;
  bool no_repack = false;
};

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error(msg); }

void quiet_log(enum ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

void init_backend(const Common& c) {
  if (!c.verbose) {
    llama_log_set(quiet_log, nullptr);
    ggml_log_set(quiet_log, nullptr);
  }
  // The CPU backend comes in per-ISA variants that are dynamic libraries; load them from the
  // folder of the prebuilt libraries (the best one for this CPU is chosen by score).
  ggml_backend_load_all_from_path(DF_LLAMA_LIB_DIR);
  llama_backend_init();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_json(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail("bad JSON in '" + path + "': " + e.what());
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write '" + path + "'");
  f << text;
  if (!f) fail("write failed for '" + path + "'");
}

std::string hex_decode(const std::string& hex) {
  if (hex.size() % 2) fail("odd-length hex string");
  auto nib = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    fail(std::string("bad hex digit '") + ch + "'");
  };
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<char>(nib(hex[2 * i]) * 16 + nib(hex[2 * i + 1]));
  return out;
}

struct ModelPtr {
  llama_model* p = nullptr;
  ~ModelPtr() {
    if (p) llama_model_free(p);
  }
};
struct ContextPtr {
  llama_context* p = nullptr;
  ~ContextPtr() {
    if (p) llama_free(p);
  }
};

void load_model(const Common& c, bool vocab_only, ModelPtr& out) {
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.vocab_only = vocab_only;
  if (c.no_repack) mp.use_extra_bufts = false;
  out.p = llama_model_load_from_file(c.model.c_str(), mp);
  if (!out.p) fail("llama.cpp failed to load '" + c.model + "' (run with -v for its log)");
}

struct CtxOptions {
  uint32_t n_ctx = 0;
  uint32_t n_batch = 0;
  std::string kv = "f16";
  std::string fa = "auto";
};

ggml_type parse_kv(const std::string& s) {
  if (s == "f16") return GGML_TYPE_F16;
  if (s == "f32") return GGML_TYPE_F32;
  if (s == "bf16") return GGML_TYPE_BF16;
  if (s == "q8_0") return GGML_TYPE_Q8_0;
  fail("unknown --kv type '" + s + "' (f16|f32|bf16|q8_0)");
}

llama_flash_attn_type parse_fa(const std::string& s) {
  if (s == "on") return LLAMA_FLASH_ATTN_TYPE_ENABLED;
  if (s == "off") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
  if (s == "auto") return LLAMA_FLASH_ATTN_TYPE_AUTO;
  fail("unknown --fa value '" + s + "' (on|off|auto)");
}

void make_context(const Common& c, llama_model* model, const CtxOptions& o, ContextPtr& out) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = o.n_ctx;
  cp.n_batch = o.n_batch;
  cp.n_ubatch = o.n_batch;
  cp.n_seq_max = 1;
  cp.n_threads = c.threads;
  cp.n_threads_batch = c.threads;
  cp.type_k = parse_kv(o.kv);
  cp.type_v = parse_kv(o.kv);
  cp.flash_attn_type = parse_fa(o.fa);
  cp.no_perf = true;
  out.p = llama_init_from_model(model, cp);
  if (!out.p) fail("llama.cpp failed to create a context (n_ctx " + std::to_string(o.n_ctx) + ")");
}

std::vector<std::vector<llama_token>> read_prompts(const std::string& path) {
  json j = read_json(path);
  if (!j.is_array()) fail("'" + path + "' must hold an array of arrays of token ids");
  std::vector<std::vector<llama_token>> prompts;
  for (const auto& p : j) {
    if (!p.is_array()) fail("'" + path + "' must hold an array of arrays of token ids");
    prompts.push_back(p.get<std::vector<llama_token>>());
  }
  return prompts;
}

void check_tokens(const std::vector<llama_token>& toks, int n_vocab) {
  if (toks.empty()) fail("empty prompt");
  for (llama_token t : toks)
    if (t < 0 || t >= n_vocab)
      fail("token id " + std::to_string(t) + " outside the vocabulary (" + std::to_string(n_vocab) + ")");
}

// Decodes toks at positions [pos0, pos0 + n) of sequence 0; outputs logits where want(i).
template <class Want>
void decode(llama_context* ctx, const llama_token* toks, int n, int pos0, Want want) {
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    b.token[i] = toks[i];
    b.pos[i] = pos0 + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = want(i) ? 1 : 0;
  }
  b.n_tokens = n;
  const int rc = llama_decode(ctx, b);
  llama_batch_free(b);
  if (rc != 0) fail("llama_decode failed with code " + std::to_string(rc));
}

// ---------------------------------------------------------------- tokenize
struct TokenizeArgs {
  std::string in, out;
  bool no_special = false;
};

int cmd_tokenize(const Common& c, const TokenizeArgs& a) {
  ModelPtr model;
  load_model(c, /*vocab_only=*/true, model);
  const llama_vocab* vocab = llama_model_get_vocab(model.p);
  json texts = read_json(a.in);
  if (!texts.is_array()) fail("'" + a.in + "' must hold an array of hex strings");
  json out = json::array();
  for (const auto& h : texts) {
    const std::string text = hex_decode(h.get<std::string>());
    std::vector<llama_token> toks(text.size() + 8);
    int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                           static_cast<int32_t>(toks.size()), false, !a.no_special);
    if (n < 0) {
      toks.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                         static_cast<int32_t>(toks.size()), false, !a.no_special);
    }
    if (n < 0) fail("llama_tokenize failed");
    toks.resize(static_cast<size_t>(n));
    out.push_back(toks);
  }
  write_text(a.out, out.dump() + "\n");
  return 0;
}

// ---------------------------------------------------------------- logits
struct LogitsArgs {
  std::string in, out;
  CtxOptions ctx;
};

int cmd_logits(const Common& c, LogitsArgs a) {
  ModelPtr model;
  load_model(c, false, model);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.p));
  auto prompts = read_prompts(a.in);
  size_t max_len = 1;
  for (const auto& p : prompts) {
    check_tokens(p, n_vocab);
    max_len = std::max(max_len, p.size());
  }
  if (a.ctx.n_ctx == 0) a.ctx.n_ctx = static_cast<uint32_t>(max_len);
  if (max_len > a.ctx.n_ctx) fail("a prompt is longer than -c " + std::to_string(a.ctx.n_ctx));
  a.ctx.n_batch = a.ctx.n_ctx;
  ContextPtr ctx;
  make_context(c, model.p, a.ctx, ctx);

  std::ofstream f(a.out, std::ios::binary);
  if (!f) fail("cannot write '" + a.out + "'");
  json lengths = json::array();
  for (const auto& p : prompts) {
    llama_memory_clear(llama_get_memory(ctx.p), true);
    const int n = static_cast<int>(p.size());
    decode(ctx.p, p.data(), n, 0, [](int) { return true; });
    for (int i = 0; i < n; ++i) {
      const float* row = llama_get_logits_ith(ctx.p, i);
      if (!row) fail("no logits for position " + std::to_string(i));
      f.write(reinterpret_cast<const char*>(row), sizeof(float) * static_cast<size_t>(n_vocab));
    }
    lengths.push_back(n);
  }
  if (!f) fail("write failed for '" + a.out + "'");
  std::cout << json{{"n_vocab", n_vocab}, {"lengths", lengths}}.dump() << "\n";
  return 0;
}

// ---------------------------------------------------------------- generate
struct GenerateArgs {
  std::string in, out;
  int n = 32;
  bool stop_at_eog = false;
  CtxOptions ctx;
};

// Argmax with the lowest index on ties, and the margin to the best other logit.
std::pair<llama_token, float> argmax_margin(const float* row, int n_vocab) {
  int best = 0;
  for (int i = 1; i < n_vocab; ++i)
    if (row[i] > row[best]) best = i;
  float second = -INFINITY;
  for (int i = 0; i < n_vocab; ++i)
    if (i != best) second = std::max(second, row[i]);
  return {best, row[best] - second};
}

int cmd_generate(const Common& c, GenerateArgs a) {
  ModelPtr model;
  load_model(c, false, model);
  const llama_vocab* vocab = llama_model_get_vocab(model.p);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  auto prompts = read_prompts(a.in);
  size_t need = 1;
  for (const auto& p : prompts) {
    check_tokens(p, n_vocab);
    need = std::max(need, p.size() + static_cast<size_t>(a.n));
  }
  if (a.ctx.n_ctx == 0) a.ctx.n_ctx = static_cast<uint32_t>(need);
  if (need > a.ctx.n_ctx) fail("prompt + -n exceeds -c " + std::to_string(a.ctx.n_ctx));
  a.ctx.n_batch = a.ctx.n_ctx;
  ContextPtr ctx;
  make_context(c, model.p, a.ctx, ctx);

  json all_tokens = json::array(), all_margins = json::array();
  for (const auto& p : prompts) {
    llama_memory_clear(llama_get_memory(ctx.p), true);
    const int n = static_cast<int>(p.size());
    decode(ctx.p, p.data(), n, 0, [n](int i) { return i == n - 1; });
    std::vector<llama_token> gen;
    std::vector<float> margins;
    for (int step = 0; step < a.n; ++step) {
      const float* row = llama_get_logits_ith(ctx.p, -1);
      if (!row) fail("no logits after decode");
      auto [tok, margin] = argmax_margin(row, n_vocab);
      gen.push_back(tok);
      margins.push_back(margin);
      if (a.stop_at_eog && llama_vocab_is_eog(vocab, tok)) break;
      if (step + 1 == a.n) break;
      decode(ctx.p, &tok, 1, n + step, [](int) { return true; });
    }
    all_tokens.push_back(gen);
    all_margins.push_back(margins);
  }
  write_text(a.out, json{{"tokens", all_tokens}, {"margins", all_margins}}.dump() + "\n");
  return 0;
}

// ---------------------------------------------------------------- perplexity
struct PerplexityArgs {
  std::string file;
  int chunks = -1;
  CtxOptions ctx;
};

int cmd_perplexity(const Common& c, PerplexityArgs a) {
  ModelPtr model;
  load_model(c, false, model);
  const llama_vocab* vocab = llama_model_get_vocab(model.p);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  if (llama_vocab_get_add_eos(vocab)) fail("perplexity: vocab adds EOS (llama-perplexity refuses too)");
  const bool add_bos = llama_vocab_get_add_bos(vocab);
  const std::string text = read_file(a.file);
  std::vector<llama_token> tokens(text.size() + 8);
  int nt = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                          static_cast<int32_t>(tokens.size()), /*add_special=*/true,
                          /*parse_special=*/false);
  if (nt < 0) fail("llama_tokenize failed");
  tokens.resize(static_cast<size_t>(nt));

  const int n_ctx = static_cast<int>(a.ctx.n_ctx);
  if (n_ctx < 4) fail("-c must be at least 4");
  if (nt < 2 * n_ctx)
    fail("the text tokenizes to " + std::to_string(nt) + " tokens; perplexity needs at least 2*c = " +
         std::to_string(2 * n_ctx));
  int n_chunk = nt / n_ctx;
  if (a.chunks > 0) n_chunk = std::min(n_chunk, a.chunks);
  a.ctx.n_batch = a.ctx.n_ctx;
  ContextPtr ctx;
  make_context(c, model.p, a.ctx, ctx);

  const int first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  json chunk_ppl = json::array();
  std::vector<llama_token> window(static_cast<size_t>(n_ctx));
  for (int i = 0; i < n_chunk; ++i) {
    const int start = i * n_ctx;
    std::copy(tokens.begin() + start, tokens.begin() + start + n_ctx, window.begin());
    if (add_bos) window[0] = llama_vocab_bos(vocab);
    llama_memory_clear(llama_get_memory(ctx.p), true);
    decode(ctx.p, window.data(), n_ctx, 0, [first](int k) { return k >= first; });
    // Logits at position k predict token k + 1 of the original text (not the BOS).
    for (int k = first; k < n_ctx - 1; ++k) {
      const float* row = llama_get_logits_ith(ctx.p, k);
      const llama_token target = tokens[static_cast<size_t>(start + k + 1)];
      float mx = row[0];
      for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
      double sum = 0;
      for (int v = 0; v < n_vocab; ++v) sum += std::exp(row[v] - mx);
      const double lp = row[target] - mx - std::log(sum);
      nll += -lp;
      nll2 += lp * lp;
      ++count;
    }
    chunk_ppl.push_back(std::exp(nll / static_cast<double>(count)));
  }
  const double mean = nll / static_cast<double>(count);
  const double ppl = std::exp(mean);
  double var = nll2 / static_cast<double>(count) - mean * mean;
  const double err = var > 0 ? std::sqrt(var / static_cast<double>(count - 1)) * ppl : 0.0;
  std::cout << json{{"ppl", ppl},         {"ppl_stderr", err},      {"n_chunks", n_chunk},
                    {"n_ctx", n_ctx},     {"n_tokens", nt},         {"n_scored", count},
                    {"add_bos", add_bos}, {"chunk_ppl", chunk_ppl}, {"mean_nll", mean}}
                   .dump()
            << "\n";
  return 0;
}

// ---------------------------------------------------------------- bench
struct BenchArgs {
  int p = 512, n = 128, reps = 5;
  CtxOptions ctx;
};

json stats(const std::vector<double>& ts, int n_tokens) {
  double mean = 0;
  for (double t : ts) mean += t;
  mean /= static_cast<double>(ts.size());
  double var = 0;
  for (double t : ts) var += (t - mean) * (t - mean);
  const double sd = ts.size() > 1 ? std::sqrt(var / static_cast<double>(ts.size() - 1)) : 0.0;
  return json{{"n_tokens", n_tokens}, {"avg_ts", mean}, {"stddev_ts", sd}, {"samples_ts", ts}};
}

int cmd_bench(const Common& c, BenchArgs a) {
  ModelPtr model;
  load_model(c, false, model);
  const llama_vocab* vocab = llama_model_get_vocab(model.p);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  if (a.ctx.n_ctx == 0) a.ctx.n_ctx = static_cast<uint32_t>(std::max(a.p, a.n));
  a.ctx.n_batch = static_cast<uint32_t>(std::max(a.p, 1));
  ContextPtr ctx;
  make_context(c, model.p, a.ctx, ctx);
  std::mt19937 rng(1234);
  auto random_tokens = [&](int n) {
    std::vector<llama_token> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<llama_token>(rng() % static_cast<uint32_t>(n_vocab));
    return t;
  };
  using clock = std::chrono::steady_clock;
  // process CPU seconds of the last run (all threads; on a shared machine the wall clock
  // includes the time other processes ran)
  double cpu_s = 0;
  auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  auto run_pp = [&]() {
    auto toks = random_tokens(a.p);
    llama_memory_clear(llama_get_memory(ctx.p), true);
    const double c0 = cpu_now();
    auto t0 = clock::now();
    decode(ctx.p, toks.data(), a.p, 0, [&](int i) { return i == a.p - 1; });
    llama_synchronize(ctx.p);
    cpu_s = cpu_now() - c0;
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  auto run_tg = [&]() {
    auto toks = random_tokens(a.n);
    llama_memory_clear(llama_get_memory(ctx.p), true);
    const double c0 = cpu_now();
    auto t0 = clock::now();
    for (int i = 0; i < a.n; ++i) {
      decode(ctx.p, &toks[static_cast<size_t>(i)], 1, i, [](int) { return true; });
      llama_synchronize(ctx.p);
    }
    cpu_s = cpu_now() - c0;
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  json out{{"model", c.model}, {"threads", c.threads}, {"n_params", llama_model_n_params(model.p)},
           {"model_size", llama_model_size(model.p)}};
  if (a.p > 0) {
    run_pp();  // warm-up
    std::vector<double> ts, cs;
    for (int r = 0; r < a.reps; ++r) ts.push_back(a.p / run_pp()), cs.push_back(a.p / cpu_s);
    out["pp"] = stats(ts, a.p);
    out["pp_cpu"] = stats(cs, a.p);  // tokens per process CPU second
  }
  if (a.n > 0) {
    run_tg();  // warm-up
    std::vector<double> ts, cs;
    for (int r = 0; r < a.reps; ++r) ts.push_back(a.n / run_tg()), cs.push_back(a.n / cpu_s);
    out["tg"] = stats(ts, a.n);
    out["tg_cpu"] = stats(cs, a.n);
  }
  std::cout << out.dump() << "\n";
  return 0;
}

// ---------------------------------------------------------------- quantize
struct QuantizeArgs {
  std::string out, type;
  bool imatrix_uniform = false;
  bool pure = false;
};

// Names as llama-quantize accepts them (tools/quantize/quantize.cpp), mapped to the enum.
const std::vector<std::pair<std::string, llama_ftype>>& ftype_names() {
  static const std::vector<std::pair<std::string, llama_ftype>> names = {
      {"F32", LLAMA_FTYPE_ALL_F32},          {"F16", LLAMA_FTYPE_MOSTLY_F16},
      {"BF16", LLAMA_FTYPE_MOSTLY_BF16},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
      {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
      {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},     {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
      {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},     {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S},
      {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
      {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
      {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
      {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
      {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S},   {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M},
      {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS}, {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS},
      {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S},   {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M},
      {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS}, {"IQ3_XS", LLAMA_FTYPE_MOSTLY_IQ3_XS},
      {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S},   {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M},
      {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
      {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0},   {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
      {"Q1_0", LLAMA_FTYPE_MOSTLY_Q1_0},     {"Q2_0", LLAMA_FTYPE_MOSTLY_Q2_0},
      {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
  };
  return names;
}

llama_ftype parse_ftype(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (const auto& [name, ft] : ftype_names())
    if (name == s) return ft;
  std::string all;
  for (const auto& [name, ft] : ftype_names()) all += " " + name;
  fail("unknown quantization type '" + s + "'; known:" + all);
}

int cmd_quantize(const Common& c, const QuantizeArgs& a) {
  llama_model_quantize_params qp = llama_model_quantize_default_params();
  qp.nthread = c.threads;
  qp.ftype = parse_ftype(a.type);
  qp.pure = a.pure;

  // Uniform importance matrix: one all-ones vector of ne[0] * ne[2] per weight tensor
  // (that is the size llama_model_quantize checks), read from the input's tensor list.
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  std::vector<llama_model_imatrix_data> imatrix;
  if (a.imatrix_uniform) {
    ggml_context* meta = nullptr;
    gguf_init_params gp{/*no_alloc=*/true, &meta};
    gguf_context* g = gguf_init_from_file(c.model.c_str(), gp);
    if (!g) fail("cannot read GGUF '" + c.model + "'");
    const int64_t n = gguf_get_n_tensors(g);
    for (int64_t i = 0; i < n; ++i) {
      const char* name = gguf_get_tensor_name(g, i);
      const ggml_tensor* t = ggml_get_tensor(meta, name);
      if (!t || ggml_n_dims(t) < 2) continue;
      names.emplace_back(name);
      values.emplace_back(static_cast<size_t>(t->ne[0] * t->ne[2]), 1.0f);
    }
    gguf_free(g);
    ggml_free(meta);
    for (size_t i = 0; i < names.size(); ++i)
      imatrix.push_back({names[i].c_str(), values[i].data(), values[i].size()});
    imatrix.push_back({nullptr, nullptr, 0});
    qp.imatrix = imatrix.data();
  }
  if (llama_model_quantize(c.model.c_str(), a.out.c_str(), &qp) != 0)
    fail("llama_model_quantize failed (run with -v for its log)");
  std::cout << json{{"out", a.out}, {"type", a.type}, {"imatrix_uniform", a.imatrix_uniform}}.dump()
            << "\n";
  return 0;
}

void add_common(CLI::App* sub, Common& c, bool with_model = true) {
  if (with_model) sub->add_option("-m,--model", c.model, "GGUF model or vocab file")->required();
  sub->add_option("-t,--threads", c.threads, "threads for llama.cpp")->check(CLI::PositiveNumber);
  sub->add_flag("-v,--verbose", c.verbose, "keep llama.cpp's log output");
  sub->add_flag("--no-repack", c.no_repack, "disable CPU weight repacking (extra buffer types)");
}

void add_ctx(CLI::App* sub, CtxOptions& o) {
  sub->add_option("-c,--ctx", o.n_ctx, "context size (0: as needed)");
  sub->add_option("--kv", o.kv, "KV cache type: f16|f32|bf16|q8_0");
  sub->add_option("--fa", o.fa, "flash attention: on|off|auto");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"llama_ref: llama.cpp reference runner for diskformer tests"};
  app.require_subcommand(1);
  Common c;

  TokenizeArgs ta;
  auto* tok = app.add_subcommand("tokenize", "tokenize hex-encoded byte strings");
  add_common(tok, c);
  tok->add_option("--in", ta.in)->required();
  tok->add_option("--out", ta.out)->required();
  tok->add_flag("--no-special", ta.no_special, "treat special-token text as plain text");

  LogitsArgs la;
  auto* lg = app.add_subcommand("logits", "logits at every position of each prompt");
  add_common(lg, c);
  add_ctx(lg, la.ctx);
  lg->add_option("--in", la.in)->required();
  lg->add_option("--out", la.out)->required();

  GenerateArgs ga;
  auto* gen = app.add_subcommand("generate", "greedy generation");
  add_common(gen, c);
  add_ctx(gen, ga.ctx);
  gen->add_option("--in", ga.in)->required();
  gen->add_option("--out", ga.out)->required();
  gen->add_option("-n", ga.n, "tokens to generate per prompt")->check(CLI::PositiveNumber);
  gen->add_flag("--stop-at-eog", ga.stop_at_eog, "stop a prompt at an end-of-generation token");

  PerplexityArgs pa;
  pa.ctx.n_ctx = 512;
  auto* ppl = app.add_subcommand("perplexity", "llama.cpp's perplexity over a text file");
  add_common(ppl, c);
  add_ctx(ppl, pa.ctx);
  ppl->add_option("-f,--file", pa.file)->required();
  ppl->add_option("--chunks", pa.chunks, "score at most this many windows");

  BenchArgs ba;
  auto* bench = app.add_subcommand("bench", "prefill and decode throughput");
  add_common(bench, c);
  add_ctx(bench, ba.ctx);
  bench->add_option("-p", ba.p, "prompt tokens (one batch)");
  bench->add_option("-n", ba.n, "generated tokens (one at a time)");
  bench->add_option("-r,--reps", ba.reps)->check(CLI::PositiveNumber);

  QuantizeArgs qa;
  auto* quant = app.add_subcommand("quantize", "llama_model_quantize");
  add_common(quant, c);
  quant->add_option("-o,--out", qa.out)->required();
  quant->add_option("--type", qa.type)->required();
  quant->add_flag("--imatrix-uniform", qa.imatrix_uniform, "all-ones importance matrix");
  quant->add_flag("--pure", qa.pure, "every tensor to the given type (no k-quant mixes)");

  CLI11_PARSE(app, argc, argv);
  try {
    init_backend(c);
    int rc = 1;
    if (*tok) rc = cmd_tokenize(c, ta);
    else if (*lg) rc = cmd_logits(c, la);
    else if (*gen) rc = cmd_generate(c, ga);
    else if (*ppl) rc = cmd_perplexity(c, pa);
    else if (*bench) rc = cmd_bench(c, ba);
    else if (*quant) rc = cmd_quantize(c, qa);
    llama_backend_free();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_ref: %s\n", e.what());
    return 1;
  }
}

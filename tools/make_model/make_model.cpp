// df_make_model: writes a random-weight qwen3 GGUF with the project's own GGUF writer, for
// tests (llama.cpp loads the same file) and benchmarks.
//
// Weights are drawn so that activations stay O(1) through the layers and the logits have a
// healthy spread: every linear weight ~ N(0, 1/sqrt(fan_in)); norm weights ~ 1 + N(0, 0.1);
// the token embedding (and the tied output) ~ N(0, logit_std / sqrt(dim)) so that
// logits = rmsnorm(x) . embd have a standard deviation of about logit_std (4 by default).
// With a tied output, output_norm's entries get random signs (else greedy decoding loops on
// one token; see the comment at output_norm).
// Every tensor has its own random stream seeded by (seed, tensor name), so the same seed gives
// the same underlying floats for every --type: the f32/f16/bf16/q8_0 files are the same model
// rounded differently.
//
// Tensor names and keys are those of llama.cpp's qwen3 loader (src/models/qwen3.cpp,
// src/llama-arch.cpp). 1-D tensors (norms) are always F32.
#include <cctype>
#include <cmath>
#include <numbers>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bpe_train.h"
#include "qwen3_model.h"
#include "qwen35_model.h"
#include "random_weights.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/cpu/kernels.h"
#include "quant/types.h"

namespace df::make_model {
namespace {

// Model shape. Dimensions follow GGUF order: ne[0] is the input (row) dimension.
struct Shape {
  int layers = 4;
  int dim = 256;        // n_embd
  int ff = 768;         // n_ff
  int heads = 4;        // n_head
  int kv_heads = 2;     // n_head_kv
  int head_dim = 64;    // key_length == value_length
  int vocab = 1024;     // n_vocab
  int ctx = 4096;       // context_length
  float rope_base = 1000000.0f;
  float rms_eps = 1e-6f;
  // output.weight absent: the logits use token_embd (then output_norm gets random signs, see
  // below). The default model is untied so that it exercises output.weight.
  bool tied = false;
};

constexpr const char* kPresets = "default | bench05b | qwen3_06b | qwen3_4b | qwen35_27b | moe-small | 35b-a3b";

Shape preset(const std::string& name) {
  Shape s;
  if (name == "default") return s;
  if (name == "bench05b" || name == "qwen3_06b") {  // Qwen3-0.6B's shape
    s.layers = 28, s.dim = 1024, s.ff = 3072, s.heads = 16, s.kv_heads = 8, s.head_dim = 128;
    s.vocab = 151936, s.ctx = 40960, s.tied = true;
    return s;
  }
  if (name == "qwen3_4b") {  // Qwen3-4B's shape
    s.layers = 36, s.dim = 2560, s.ff = 9728, s.heads = 32, s.kv_heads = 8, s.head_dim = 128;
    s.vocab = 151936, s.ctx = 40960, s.tied = true;
    return s;
  }
  if (name == "qwen35_27b") {  // Qwen3.5-27B's trunk: 64 layers (every 4th full attention)
    s.layers = 64, s.dim = 5120, s.ff = 17408, s.heads = 24, s.kv_heads = 4, s.head_dim = 256;
    s.vocab = 248320, s.ctx = 40960, s.tied = false, s.rope_base = 10000000.0f;
    return s;
  }
  if (name == "moe-small") {  // a small qwen35moe for tests and CPU benchmarks
    s.layers = 8, s.dim = 512, s.ff = 1024, s.heads = 4, s.kv_heads = 2, s.head_dim = 128;
    s.vocab = 8192, s.ctx = 8192;
    return s;
  }
  if (name == "35b-a3b") {  // Qwen3.5-35B-A3B's shape
    s.layers = 40, s.dim = 2048, s.ff = 512, s.heads = 16, s.kv_heads = 2, s.head_dim = 256;
    s.vocab = 248320, s.ctx = 262144, s.rope_base = 10000000.0f;
    return s;
  }
  throw Error("unknown preset '" + name + "' (" + kPresets + ")");
}

// The qwen35moe part of the MoE presets (flags given on the command line win).
void moe_preset(const std::string& name, Qwen35Flags& f) {
  auto set = [](int& v, int d) { v = v > 0 ? v : d; };
  if (name == "moe-small") {
    set(f.ssm_state, 64), set(f.ssm_k_heads, 2), set(f.ssm_v_heads, 4), set(f.rot_dims, 32);
    set(f.experts, 32), set(f.experts_used, 4), set(f.expert_ff, 256), set(f.shexp_ff, 256);
  } else if (name == "35b-a3b") {
    set(f.ssm_state, 128), set(f.ssm_k_heads, 16), set(f.ssm_v_heads, 32), set(f.rot_dims, 64);
    set(f.experts, 256), set(f.experts_used, 8), set(f.expert_ff, 512), set(f.shexp_ff, 512);
    set(f.mtp_layers, 1);
  }
}

// Any type the CPU kernels can quantise to (quantize_row_ref), by ggml's name.
GgmlType parse_type(const std::string& s) {
  std::string known;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto ti = type_info(id);
    if (!ti || !ti->supported) continue;
    std::string name(ti->name);
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string want = s;
    for (auto& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name == want) return static_cast<GgmlType>(id);
    known += (known.empty() ? "" : " | ") + name;
  }
  throw Error("unknown --type '" + s + "' (" + known + ")");
}

// llama_ftype value for general.file_type (llama.h; informational for a file whose
// weights all have one type: the K-quants map to their _S variants).
uint32_t file_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q5_0: return 8;
    case GgmlType::Q5_1: return 9;
    case GgmlType::Q2_K: return 10;
    case GgmlType::Q3_K: return 11;
    case GgmlType::Q4_K: return 14;
    case GgmlType::Q5_K: return 16;
    case GgmlType::Q6_K: return 18;
    case GgmlType::BF16: return 32;
    case GgmlType::TQ1_0: return 36;
    case GgmlType::TQ2_0: return 37;
    case GgmlType::MXFP4: return 38;
    case GgmlType::NVFP4: return 39;
    case GgmlType::Q1_0: return 40;
    case GgmlType::Q2_0: return 41;
    default: throw Error("no file type for " + std::string(type_name(t)));
  }
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open vocabulary text '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A short ChatML template (the format Qwen uses), written for this generator.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";

// Writes the tokenizer keys; returns the vocabulary size.
int write_tokenizer(gguf::Writer& w, const std::string& vocab_text, const std::string& vocab_from,
                    int vocab_size) {
  if (!vocab_from.empty()) {
    auto f = gguf::File::open(vocab_from);
    int n = 0;
    for (const auto& [key, value] : f->metadata()) {
      if (key.rfind("tokenizer.", 0) != 0) continue;
      w.set(key, value);
      if (key == "tokenizer.ggml.tokens") n = static_cast<int>(value.array_size());
    }
    if (n == 0) throw Error("'" + vocab_from + "' has no tokenizer.ggml.tokens");
    return n;
  }
  if (vocab_text.empty()) throw Error("give --vocab-text FILE (train a BPE) or --vocab-from VOCAB.gguf");
  const Vocab v = train_byte_bpe(read_text(vocab_text), vocab_size);
  std::fprintf(stderr, "df_make_model: trained %d merges (%d new tokens) on %s\n",
               static_cast<int>(v.merges.size()), v.n_learnt, vocab_text.c_str());
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template", kChatTemplate);
  return vocab_size;
}

struct Options {
  std::string out, arch = "qwen3", preset = "default", type = "f32", vocab_text, vocab_from, name;
  uint64_t seed = 42;
  float logit_std = 4.0f;
  float norm_noise = 0.1f;
  float resid_gain = 1.0f;
  bool fast_random = false;
};

int run(int argc, char** argv) {
  CLI::App app{"df_make_model: random-weight qwen3 GGUF generator"};
  Options o;
  int layers = 0, dim = 0, ff = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, ctx = 0;
  float rope_base = 0;
  bool tied = false, untied = false;
  app.add_option("-o,--out", o.out, "output GGUF")->required();
  app.add_option("--arch", o.arch, "qwen3 | qwen35 | qwen35moe")->check(CLI::IsMember({"qwen3", "qwen35", "qwen35moe"}));
  Qwen35Flags q35;
  add_qwen35_flags(app, q35);
  app.add_option("--preset", o.preset, std::string(kPresets) + " (moe-small, 35b-a3b: --arch qwen35moe)");
  app.add_option("--layers", layers);
  app.add_option("--dim", dim);
  app.add_option("--ff", ff);
  app.add_option("--heads", heads);
  app.add_option("--kv-heads", kv_heads);
  app.add_option("--head-dim", head_dim);
  app.add_option("--vocab-size", vocab, "with --vocab-text: tokens in total (fillers pad it)");
  app.add_option("--ctx", ctx, "context_length");
  app.add_option("--rope-base", rope_base);
  app.add_flag("--tied", tied, "share token_embd as the output matrix (bench05b default)");
  app.add_flag("--untied", untied, "write a separate output.weight (default preset)");
  app.add_option("--type", o.type, "weight type: f32 | f16 | bf16 | q8_0 | q4_0 | ... | q6_K | mxfp4 | nvfp4 (any type with a reference quantiser)");
  app.add_option("--seed", o.seed);
  app.add_option("--logit-std", o.logit_std, "target standard deviation of the logits");
  app.add_option("--resid-gain", o.resid_gain, "scale of attn_output / ffn_down (sublayer outputs)");
  app.add_flag("--fast-random", o.fast_random,
               "qwen35/qwen35moe: draw the weight matrices with a cheap normal stand-in (other bytes than without it; "
               "~5x faster, for the real-shape benchmark files)");
  app.add_option("--vocab-text", o.vocab_text, "train a byte-level BPE on this text");
  app.add_option("--vocab-from", o.vocab_from, "copy the tokenizer of this GGUF");
  app.add_option("--name", o.name, "general.name");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (tied && untied) throw Error("--tied and --untied are exclusive");
  if (!o.vocab_text.empty() && !o.vocab_from.empty()) throw Error("--vocab-text and --vocab-from are exclusive");

  Shape s = preset(o.preset);
  if ((o.preset == "moe-small" || o.preset == "35b-a3b") && o.arch != "qwen35moe")
    throw Error("preset '" + o.preset + "' is a qwen35moe shape (give --arch qwen35moe)");
  moe_preset(o.preset, q35);
  if (o.preset == "qwen35_27b") {  // the linear-attention shape of Qwen3.5-27B
    if (app.count("--arch") && o.arch != "qwen35") throw Error("--preset qwen35_27b is a qwen35 model");
    o.arch = "qwen35";
    auto def = [](int& v, int d) { v = v ? v : d; };
    def(q35.rot_dims, 64);
    def(q35.ssm_state, 128);
    def(q35.ssm_k_heads, 16);
    def(q35.ssm_v_heads, 48);
    def(q35.conv_kernel, 4);
    def(q35.full_attn_interval, 4);
  }
  if (layers) s.layers = layers;
  if (dim) s.dim = dim;
  if (ff) s.ff = ff;
  if (heads) s.heads = heads;
  if (kv_heads) s.kv_heads = kv_heads;
  if (head_dim) s.head_dim = head_dim;
  if (vocab) s.vocab = vocab;
  if (ctx) s.ctx = ctx;
  if (rope_base > 0) s.rope_base = rope_base;
  if (tied) s.tied = true;
  if (untied) s.tied = false;
  if (s.layers <= 0 || s.dim <= 0 || s.ff <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0)
    throw Error("every dimension must be positive");
  if (s.heads % s.kv_heads != 0)
    throw Error("--heads " + std::to_string(s.heads) + " is not a multiple of --kv-heads " + std::to_string(s.kv_heads));
  if (s.head_dim % 2 != 0) throw Error("--head-dim must be even (rope rotates pairs)");
  const GgmlType type = parse_type(o.type);

  gguf::Writer w;
  if (o.fast_random && o.arch == "qwen3") throw Error("--fast-random is a qwen35 / qwen35moe option");
  w.set_string("general.architecture", o.arch);
  w.set_string("general.name", o.name.empty() ? "diskformer-random-" + o.preset : o.name);
  w.set_u32("general.file_type", file_type(type));
  if (o.arch == "qwen35" || o.arch == "qwen35moe") {  // tools/make_model/qwen35_model.cpp
    s.vocab = write_tokenizer(w, o.vocab_text, o.vocab_from, s.vocab);
    const BaseShape base{s.layers, s.dim, s.ff, s.heads, s.kv_heads, s.head_dim, s.vocab, s.ctx,
                         s.rope_base, s.rms_eps, s.tied};
    const int64_t n_params = write_qwen35(w, o.arch, base, q35, type, {o.seed, o.logit_std, o.norm_noise, o.resid_gain, o.fast_random});
    w.write(o.out);
    std::fprintf(stderr, "df_make_model: wrote %s (%s, %s, %lld parameters, %d layers + %d MTP, dim %d, vocab %d)\n",
                 o.out.c_str(), o.arch.c_str(), o.type.c_str(), static_cast<long long>(n_params), s.layers, q35.mtp_layers, s.dim,
                 s.vocab);
    return 0;
  }
  BaseShape base{s.layers, s.dim, s.ff, s.heads, s.kv_heads, s.head_dim, s.vocab, s.ctx,
                 s.rope_base, s.rms_eps, s.tied};
  write_qwen3_keys(w, base);
  s.vocab = base.vocab = write_tokenizer(w, o.vocab_text, o.vocab_from, s.vocab);
  const int64_t n_params = write_qwen3_tensors(w, base, type, {o.seed, o.logit_std, o.norm_noise, o.resid_gain});
  w.write(o.out);
  std::fprintf(stderr, "df_make_model: wrote %s (%s, %lld parameters, %d layers, dim %d, vocab %d, %s)\n",
               o.out.c_str(), o.type.c_str(), static_cast<long long>(n_params), s.layers, s.dim, s.vocab,
               s.tied ? "tied" : "untied");
  return 0;
}

}  // namespace
}  // namespace df::make_model

int main(int argc, char** argv) {
  try {
    return df::make_model::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "df_make_model: %s\n", e.what());
    return 1;
  }
}

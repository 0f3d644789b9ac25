// `diskformer inspect`: metadata, hyperparameters, and tensors with their types and bytes.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "common.h"
#include "gguf/gguf.h"

namespace df::cli {
namespace {

std::string show_value(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::STRING: {
      const std::string& s = v.as_string("");
      return nlohmann::json(s.size() > 200 ? s.substr(0, 200) + "..." : s)
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    case ValueType::ARRAY:
      return "[" + std::to_string(v.array_size()) + " x " + std::string(gguf::value_type_name(v.array_type)) + "]";
    case ValueType::BOOL:
      return v.as_bool("") ? "true" : "false";
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      return std::to_string(v.as_f64(""));
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64:
      return std::to_string(v.as_i64(""));
    default:
      return std::to_string(v.as_u64(""));
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect", "print a GGUF file's metadata, hyperparameters and tensors");
  cmd->add_option("model", *path, "GGUF file (default: the embedded model)");
  cmd->callback([path] {
    auto f = gguf::File::open(resolve_model_path(*path));
    std::printf("file: %s\nGGUF version %u, alignment %llu, %zu metadata keys, %zu tensors, %.2f MiB\n\n",
                f->path().c_str(), f->version(), static_cast<unsigned long long>(f->alignment()),
                f->metadata().size(), f->tensors().size(), static_cast<double>(f->file_size()) / (1 << 20));
    std::printf("metadata:\n");
    for (const auto& [k, v] : f->metadata()) std::printf("  %-48s %s\n", k.c_str(), show_value(v).c_str());
    if (f->has("general.architecture")) {
      cpu::CpuBackend backend(cpu::CpuOptions{1, cpu::Isa::SCALAR});
      auto model = load_model(*f, backend);
      const ModelInfo& h = model->info();
      std::printf("\nhyperparameters (%s):\n", h.arch.c_str());
      std::printf("  layers %lld, embedding %lld, feed-forward %lld, heads %lld, kv heads %lld, head dim %lld\n",
                  static_cast<long long>(h.n_layer), static_cast<long long>(h.n_embd), static_cast<long long>(h.n_ff),
                  static_cast<long long>(h.n_head), static_cast<long long>(h.n_head_kv),
                  static_cast<long long>(h.head_dim));
      std::printf("  rotary dims %lld, rope base %g, rms eps %g, vocab %lld, trained context %lld, %s output head\n",
                  static_cast<long long>(h.n_rot), h.rope_base, h.rms_eps, static_cast<long long>(h.n_vocab),
                  static_cast<long long>(h.n_ctx_train), h.tied_output ? "tied" : "separate");
      if (h.n_layer_recurrent > 0 || h.n_layer_nextn > 0)
        std::printf("  Gated DeltaNet layers %lld of %lld (conv kernel %lld, state %lld, key heads %lld, value heads "
                    "%lld), MTP layers %lld (loaded, not run)\n",
                    static_cast<long long>(h.n_layer_recurrent), static_cast<long long>(h.n_layer),
                    static_cast<long long>(h.ssm_conv_kernel), static_cast<long long>(h.ssm_state),
                    static_cast<long long>(h.ssm_k_heads), static_cast<long long>(h.ssm_v_heads),
                    static_cast<long long>(h.n_layer_nextn));
      if (h.n_expert > 0)
        std::printf("  experts %lld per layer, %lld routed per token (FF %lld), shared expert FF %lld\n",
                    static_cast<long long>(h.n_expert), static_cast<long long>(h.n_expert_used),
                    static_cast<long long>(h.n_ff_exp), static_cast<long long>(h.n_ff_shexp));
      std::printf("  parameters %.3f M, weight bytes %.2f MiB, bytes read per decoded token %.2f MiB\n",
                  static_cast<double>(h.n_params) / 1e6, static_cast<double>(h.weight_bytes) / (1 << 20),
                  static_cast<double>(h.bytes_per_token) / (1 << 20));
    }
    std::printf("\ntensors:\n");
    std::map<std::string, std::pair<int, uint64_t>> by_type;
    for (const auto& t : f->tensors()) {
      std::string shape;
      for (size_t i = 0; i < t.ne.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.ne[i]);
      const std::string tn(type_name(t.type));
      std::printf("  %-40s %-8s %-22s %12llu bytes\n", t.name.c_str(), tn.c_str(), shape.c_str(),
                  static_cast<unsigned long long>(t.nbytes));
      by_type[tn].first++;
      by_type[tn].second += t.nbytes;
    }
    std::printf("\nby type:\n");
    for (const auto& [tn, cb] : by_type)
      std::printf("  %-8s %5d tensors %10.2f MiB\n", tn.c_str(), cb.first, static_cast<double>(cb.second) / (1 << 20));
  });
}

}  // namespace df::cli

// The OpenAI request bodies the server accepts, parsed and validated. Every field is
// checked for its type and range; a field the server does not implement is refused with a
// 400 that names it (never silently ignored). Parsing throws ApiError.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace df::server {

enum class Endpoint { CHAT, COMPLETION };

struct RequestDefaults {
  SamplerOptions sampling;              // temperature, top_k, top_p, min_p when not given
  int64_t max_tokens = -1;              // -1: until the end of the context
  std::vector<std::string> model_names; // the served id first, then its aliases
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::CHAT;
  std::string model;                    // as sent (empty when absent)
  std::vector<ChatMessage> messages;    // chat: system / user / assistant turns
  bool enable_thinking = true;          // chat: chat_template_kwargs.enable_thinking
  std::string prompt;                   // completion: the prompt text
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  SamplerOptions sampling;
  bool seed_given = false;
  int64_t max_tokens = -1;              // -1: until the end of the context
  std::vector<std::string> stop;        // at most kMaxStops non-empty strings
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int top_logprobs = -1;                // -1: no logprobs
  bool ignore_eos = false;              // llama-server extension: do not stop at end-of-generation ids
};

inline constexpr size_t kMaxStops = 16;
inline constexpr int kMaxTopLogprobs = 20;

// body: the raw request body. Throws ApiError (400 malformed / wrong type / out of range /
// unsupported field, 404 unknown model).
ApiRequest parse_request(Endpoint endpoint, const std::string& body, const RequestDefaults& defaults);

}  // namespace df::server

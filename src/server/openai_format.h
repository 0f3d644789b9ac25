// OpenAI response bodies: chat.completion / text_completion objects, their streaming
// chunks, usage and log-probabilities, in the layouts OpenAI's API documents.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/job.h"
#include "server/request.h"

namespace df::server {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::CHAT;
  std::string id;        // chatcmpl-… / cmpl-…
  int64_t created = 0;   // unix seconds
  std::string model;
};

// JSON text; invalid UTF-8 (a token that is part of a character) becomes U+FFFD.
std::string dump(const nlohmann::json& j);

nlohmann::json usage_json(const Usage& u);

// Log-probabilities of `tokens` in the endpoint's layout: chat {"content": [{token, logprob,
// bytes, top_logprobs}]}, completions {tokens, token_logprobs, top_logprobs, text_offset}.
// text_offset: characters of output before the first token (advanced by the call).
nlohmann::json logprobs_json(Endpoint e, const Tokenizer& tok, const std::vector<TokenLogprob>& tokens,
                             int64_t& text_offset);

// The whole answer (stream: false).
nlohmann::json final_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                              const Usage& usage, const nlohmann::json& logprobs);
// One streaming chunk. first: chat's opening chunk carrying the role. finish_reason empty:
// null. with_usage_null: stream_options.include_usage asks for "usage": null on every chunk.
nlohmann::json stream_chunk(const ResponseMeta& m, const std::string& text, const nlohmann::json& logprobs,
                            const std::string& finish_reason, bool first, bool with_usage_null);
// The last chunk when stream_options.include_usage is set: empty choices and the usage.
nlohmann::json usage_chunk(const ResponseMeta& m, const Usage& usage);

}  // namespace df::server

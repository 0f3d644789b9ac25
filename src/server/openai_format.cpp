#include "server/openai_format.h"

namespace df::server {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Characters (UTF-8 lead bytes) in s.
int64_t n_chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

json logprobs_json(Endpoint e, const Tokenizer& tok, const std::vector<TokenLogprob>& tokens, int64_t& text_offset) {
  if (e == Endpoint::CHAT) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      const std::string piece = tok.token_to_piece(t.id);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string p = tok.token_to_piece(id);
        top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
      }
      content.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string piece = tok.token_to_piece(t.id);
    toks.push_back(piece);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[tok.token_to_piece(id)] = lp;
    tops.push_back(top);
    offs.push_back(text_offset);
    text_offset += n_chars(piece);
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json final_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                    const Usage& usage, const json& logprobs) {
  json choice;
  if (m.endpoint == Endpoint::CHAT) {
    choice = {{"index", 0},
              {"message", {{"role", "assistant"}, {"content", text}}},
              {"logprobs", logprobs},
              {"finish_reason", finish_reason}};
  } else {
    choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  }
  return {{"id", m.id},
          {"object", m.endpoint == Endpoint::CHAT ? "chat.completion" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(usage)}};
}

json stream_chunk(const ResponseMeta& m, const std::string& text, const json& logprobs,
                  const std::string& finish_reason, bool first, bool with_usage_null) {
  json choice;
  const json fr = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (m.endpoint == Endpoint::CHAT) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice = {{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", fr}};
  } else {
    choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", fr}};
  }
  json out = {{"id", m.id},
              {"object", m.endpoint == Endpoint::CHAT ? "chat.completion.chunk" : "text_completion"},
              {"created", m.created},
              {"model", m.model},
              {"choices", json::array({choice})}};
  if (with_usage_null) out["usage"] = nullptr;
  return out;
}

json usage_chunk(const ResponseMeta& m, const Usage& usage) {
  return {{"id", m.id},
          {"object", m.endpoint == Endpoint::CHAT ? "chat.completion.chunk" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", json::array()},
          {"usage", usage_json(usage)}};
}

}  // namespace df::server

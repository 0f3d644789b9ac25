// libFuzzer target for the server's request handling: a body of POST /v1/chat/completions
// or /v1/completions goes through job_request (src/server/job_request.h: parse, validate,
// build and tokenize the prompt, as the HTTP route does) and must end in one of two ways:
//   - a JobRequest whose every field is in its documented range (sampling, max_tokens, stop,
//     logprobs, model), whose prompt has 1..n_ctx ids inside the vocabulary and, for chat,
//     whose history checkpoint is a token prefix of the prompt; the stop strings then cut a
//     stream of the prompt's own token pieces (nothing of a stop string reaches the client,
//     a stop string in the text always stops it) and the answer's JSON is valid;
//   - an ApiError with status 400 (404 for an unknown model) whose reply body is valid JSON
//     in OpenAI's error layout.
// Anything else (another exception, a sanitizer report) is a crash.
// Input: byte 0 picks the endpoint (bit 0), the vocabulary (bit 1: the default model's, or
// llama.cpp's qwen35 vocab file when DF_LLAMA_SRC has it) and n_ctx (bits 2-3: 8, 64, 512,
// 4096); the rest is the body.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_vocabs.h"
#include "server/api_error.h"
#include "server/job_request.h"
#include "server/openai_format.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using namespace df::server;

// A broken promise is a crash (libFuzzer keeps the input; the stack names the check).
void require(bool ok) {
  if (!ok) __builtin_trap();
}

using df::fuzz::Vocab;
const std::vector<Vocab>* g_vocabs = nullptr;

// The defaults `diskformer serve` passes (apps/server/cmd_serve.cpp).
RequestDefaults serve_defaults() {
  RequestDefaults d;
  d.sampling = df::SamplerOptions{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
  d.model_names = {"default", "diskformer", "alias"};
  return d;
}

bool parses(const std::string& text) { return json::accept(text); }

void check_error(const ApiError& e) {
  require(e.status == 400 || (e.status == 404 && e.code == "model_not_found"));
  require(e.what()[0] != '\0');
  const std::string body = dump(e.to_json());
  require(parses(body));
  const json j = json::parse(body);
  require(j.at("error").at("message").is_string() && j["error"]["type"] == "invalid_request_error");
}

void check_request(const JobRequest& jr, Endpoint endpoint, const df::Tokenizer& tok, int64_t n_ctx,
                   const RequestDefaults& defaults) {
  const ApiRequest& r = jr.request;
  require(r.endpoint == endpoint);
  const df::SamplerOptions& s = jr.params.choice.sampling;
  require(s.temperature >= 0 && s.temperature <= 2);
  require(s.top_p >= 0 && s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1 && s.top_k >= 0);
  require(jr.params.max_tokens == defaults.max_tokens || jr.params.max_tokens >= 1);
  require(jr.params.stop.size() <= kMaxStops);
  for (const std::string& st : jr.params.stop) require(!st.empty());
  require(jr.params.choice.top_logprobs >= -1 && jr.params.choice.top_logprobs <= kMaxTopLogprobs);
  const float fp = jr.params.choice.frequency_penalty, pp = jr.params.choice.presence_penalty;
  require(fp >= -2 && fp <= 2 && pp >= -2 && pp <= 2);
  if (!r.model.empty()) {
    bool known = false;
    for (const std::string& n : defaults.model_names) known |= n == r.model;
    require(known);
  }
  if (!r.stream) require(!r.include_usage);
  require(!jr.prompt.empty() && static_cast<int64_t>(jr.prompt.size()) <= n_ctx);
  for (df::Token t : jr.prompt) require(t >= 0 && t < tok.n_vocab());
  if (endpoint == Endpoint::CHAT) {
    require(!r.messages.empty());
    for (const df::ChatMessage& m : r.messages)
      require(m.role == "system" || m.role == "user" || m.role == "assistant");
    // The history checkpoint must be a position of this prompt, its tokens a prefix of it.
    require(jr.params.checkpoint_at.size() == 1);
    const std::vector<df::Token> history = tok.encode(df::chat_prompt(r.messages, false, false), true);
    require(static_cast<int64_t>(history.size()) == jr.params.checkpoint_at[0]);
    require(history.size() <= jr.prompt.size());
    require(std::equal(history.begin(), history.end(), jr.prompt.begin()));
  } else {
    require(!r.prompt.empty() && jr.params.checkpoint_at.empty());
  }
}

// Streams the prompt's own token pieces (split inside characters, as generated text is)
// through the request's stop strings, then writes the answer as the route would.
void check_stops_and_reply(const JobRequest& jr, Endpoint endpoint, const df::Tokenizer& tok) {
  StopMatcher m(jr.params.stop);
  std::string full, released;
  const size_t n = std::min<size_t>(jr.prompt.size(), 512);
  const ResponseMeta meta{endpoint, "id", 0, jr.request.model};
  for (size_t i = 0; i < n; ++i) {
    const std::string piece = tok.token_to_piece(jr.prompt[i]);
    full += piece;
    const std::string out = m.push(piece);
    if (i == 0) require(parses(dump(stream_chunk(meta, out, nullptr, "", true, jr.request.include_usage))));
    released += out;
  }
  if (m.stopped()) {
    bool listed = false;
    for (const std::string& s : jr.params.stop) listed |= s == m.matched();
    require(listed);
    require(full.compare(0, released.size() + m.matched().size(), released + m.matched()) == 0);
    for (const std::string& s : jr.params.stop) require(released.find(s) == std::string::npos);
  } else {
    released += m.flush();
    require(released == full);
    for (const std::string& s : jr.params.stop) require(full.find(s) == std::string::npos);
  }
  const Usage u{static_cast<int64_t>(jr.prompt.size()), 0, static_cast<int64_t>(n)};
  require(parses(dump(final_response(meta, released, m.stopped() ? "stop" : "length", u, nullptr))));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_vocabs = new std::vector<Vocab>(df::fuzz::load_vocabs({"qwen35"}));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::vector<Vocab>& vocabs = *g_vocabs;
  const Endpoint endpoint = (data[0] & 1) ? Endpoint::COMPLETION : Endpoint::CHAT;
  const df::Tokenizer& tok = *vocabs[((data[0] >> 1) & 1) % vocabs.size()].tok;
  static const int64_t kCtx[] = {8, 64, 512, 4096};
  const int64_t n_ctx = kCtx[(data[0] >> 2) & 3];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  static const RequestDefaults defaults = serve_defaults();
  JobRequest jr;
  try {
    jr = job_request(endpoint, body, defaults, tok, n_ctx);
  } catch (const ApiError& e) {
    check_error(e);
    return 0;
  }
  check_request(jr, endpoint, tok, n_ctx, defaults);
  check_stops_and_reply(jr, endpoint, tok);
  return 0;
}

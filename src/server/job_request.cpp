#include "server/job_request.h"

#include "server/api_error.h"

namespace df::server {

JobRequest job_request(Endpoint endpoint, const std::string& body, const RequestDefaults& defaults,
                       const Tokenizer& tok, int64_t n_ctx) {
  JobRequest out;
  out.request = parse_request(endpoint, body, defaults);
  const ApiRequest& r = out.request;
  GenParams& gp = out.params;
  std::string text;
  if (endpoint == Endpoint::CHAT) {
    text = chat_prompt(r.messages, true, r.enable_thinking);
    // Hybrid models: a checkpoint where the history ends, as `diskformer chat` and
    // `run --chat` keep: the next turn re-renders this answer and diverges right after
    // it. (No other split: a prompt computed afresh goes in the same chunks as in `run`,
    // so its greedy answer is the same bits.)
    gp.checkpoint_at.push_back(static_cast<int64_t>(tok.encode(chat_prompt(r.messages, false, false), true).size()));
  } else {
    text = r.prompt;
  }
  out.prompt = tok.encode(text, true);
  const char* field = endpoint == Endpoint::CHAT ? "messages" : "prompt";
  if (out.prompt.empty()) throw ApiError(400, "the prompt has no tokens", field);
  if (static_cast<int64_t>(out.prompt.size()) > n_ctx)
    throw ApiError(400,
                   "the prompt has " + std::to_string(out.prompt.size()) + " tokens, more than the context of " +
                       std::to_string(n_ctx) + " tokens",
                   field, "context_length_exceeded");
  gp.choice.sampling = r.sampling;
  gp.choice.frequency_penalty = r.frequency_penalty;
  gp.choice.presence_penalty = r.presence_penalty;
  gp.choice.top_logprobs = r.top_logprobs;
  gp.max_tokens = r.max_tokens;
  gp.stop = r.stop;
  gp.ignore_eos = r.ignore_eos;
  return out;
}

}  // namespace df::server

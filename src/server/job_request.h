// From a request body to the job it asks for: the parsed request, the prompt tokens exactly
// as `diskformer run` builds them (chat: the ChatML prompt, special tokens parsed) and the
// generation parameters. The HTTP routes (apps/server/http_api.cpp) and the fuzz target
// fuzz/fuzz_server_request.cpp both go through here: every body gives a JobRequest or an
// ApiError (the client's 4xx reply), nothing else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/job.h"
#include "server/request.h"

namespace df::server {

struct JobRequest {
  ApiRequest request;
  std::vector<Token> prompt;  // 1..n_ctx tokens
  GenParams params;           // seed as requested (or the defaults'), no deadline
};

// Throws ApiError: parse_request's, an empty prompt, or a prompt longer than n_ctx tokens.
JobRequest job_request(Endpoint endpoint, const std::string& body, const RequestDefaults& defaults,
                       const Tokenizer& tok, int64_t n_ctx);

}  // namespace df::server

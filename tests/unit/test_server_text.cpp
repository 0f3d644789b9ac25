// The server's request parsing (types, ranges, unsupported fields named) and stop strings
// over streamed pieces.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/request.h"
#include "server/stop_matcher.h"

namespace df::server {
namespace {

// Feeds `pieces` and returns the released text; *stopped tells whether a stop string ended it.
std::string run_stops(const std::vector<std::string>& stops, const std::vector<std::string>& pieces, bool* stopped) {
  StopMatcher m(stops);
  std::string out;
  for (const std::string& p : pieces) out += m.push(p);
  *stopped = m.stopped();
  if (!m.stopped()) out += m.flush();
  return out;
}

TEST(StopMatcher, StopStringAcrossPieces) {
  bool stopped = false;
  EXPECT_EQ(run_stops({"END"}, {"abc E", "N", "D tail"}, &stopped), "abc ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run_stops({"\n\n"}, {"x\n", "\ny"}, &stopped), "x");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, HoldsBackOnlyPossibleStarts) {
  StopMatcher m({"stop"});
  EXPECT_EQ(m.push("ab st"), "ab ");    // "st" could begin "stop"
  EXPECT_EQ(m.push("ar"), "star");      // it did not
  EXPECT_EQ(m.push("s"), "");
  EXPECT_EQ(m.push("to"), "");
  EXPECT_EQ(m.push("p!"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "stop");
  EXPECT_EQ(m.push("more"), "");
}

TEST(StopMatcher, EarliestOfSeveralAndFlush) {
  bool stopped = false;
  EXPECT_EQ(run_stops({"world", "lo w"}, {"hello world"}, &stopped), "hel");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run_stops({"xyz"}, {"abc x", "y"}, &stopped), "abc xy");  // never completed: all released
  EXPECT_FALSE(stopped);
  EXPECT_EQ(run_stops({}, {"a", "b"}, &stopped), "ab");
}

RequestDefaults defaults() {
  RequestDefaults d;
  d.model_names = {"default", "diskformer"};
  d.sampling.temperature = 0.8f;
  return d;
}

ApiError error_of(Endpoint e, const std::string& body) {
  try {
    parse_request(e, body, defaults());
  } catch (const ApiError& err) {
    return err;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

TEST(ServerRequest, ParsesChat) {
  const ApiRequest r = parse_request(
      Endpoint::CHAT,
      R"({"model":"diskformer","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "temperature":0,"max_tokens":7,"stop":"\n","stream":true,"stream_options":{"include_usage":true},
          "logprobs":true,"top_logprobs":2,"chat_template_kwargs":{"enable_thinking":false},"seed":5,"user":"u","n":1})",
      defaults());
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stream && r.include_usage && r.seed_given);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_FALSE(r.enable_thinking);
  EXPECT_EQ(r.sampling.seed, 5u);
}

TEST(ServerRequest, DefaultsAndNulls) {
  const ApiRequest r = parse_request(Endpoint::COMPLETION, R"({"prompt":"x","temperature":null,"stop":null})", defaults());
  EXPECT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.top_logprobs, -1);
}

TEST(ServerRequest, RefusesBadInputNamingTheField) {
  struct Case {
    Endpoint e;
    const char* body;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {Endpoint::CHAT, "{", 400, ""},
      {Endpoint::CHAT, "[]", 400, ""},
      // A number past double's range is an out_of_range, not a parse_error, in nlohmann::json
      // (found by fuzz_server_request: it escaped as a 500).
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"temperature":1e999})", 400, ""},
      {Endpoint::COMPLETION, R"({"prompt":"x","max_tokens":-77e806})", 400, ""},
      {Endpoint::CHAT, R"({})", 400, "messages"},
      {Endpoint::CHAT, R"({"messages":[]})", 400, "messages"},
      {Endpoint::CHAT, R"({"messages":[{"role":"tool","content":"x"}]})", 400, "messages[0].role"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x","name":"n"}]})", 400, "messages[0].name"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400, "messages[0].content[0].type"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", 400, "max_tokens"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"top_p":true})", 400, "top_p"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"top_k":-1})", 400, "top_k"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"presence_penalty":2.5})", 400, "presence_penalty"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"stop":["a",""]})", 400, "stop"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":21,"logprobs":true})", 400, "top_logprobs"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"auto"})", 400, "tool_choice"},
      {Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"model":"gpt-4"})", 404, "model"},
      {Endpoint::COMPLETION, R"({"prompt":["a","b"]})", 400, "prompt"},
      {Endpoint::COMPLETION, R"({"prompt":"a","echo":true})", 400, "echo"},
      {Endpoint::COMPLETION, R"({"prompt":"a","messages":[]})", 400, "messages"},
      {Endpoint::COMPLETION, R"({"prompt":"a","seed":1.5})", 400, "seed"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.e, c.body);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
    EXPECT_EQ(e.to_json()["error"]["message"], e.what());
  }
  // Several unsupported fields: all named in the message.
  const ApiError e = error_of(Endpoint::CHAT, R"({"messages":[{"role":"user","content":"x"}],"tools":[],"logit_bias":{}})");
  EXPECT_NE(std::string(e.what()).find("'logit_bias'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'tools'"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace df::server

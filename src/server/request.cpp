#include "server/request.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace df::server {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = {}) {
  throw ApiError(400, message, param, code);
}

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

bool get_bool(const json& v, const std::string& name) {
  if (!v.is_boolean()) bad(name, "'" + name + "' must be a boolean, not " + type_name(v));
  return v.get<bool>();
}

double get_number(const json& v, const std::string& name, double lo, double hi) {
  if (!v.is_number()) bad(name, "'" + name + "' must be a number, not " + type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, "'" + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v.dump());
  return x;
}

int64_t get_int(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(name, "'" + name + "' must be an integer, not " + type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(name, "'" + name + "' is too large");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    std::string range = hi == INT64_MAX ? "at least " + std::to_string(lo)
                                        : "between " + std::to_string(lo) + " and " + std::to_string(hi);
    bad(name, "'" + name + "' must be " + range + ", got " + v.dump());
  }
  return x;
}

std::string get_string(const json& v, const std::string& name) {
  if (!v.is_string()) bad(name, "'" + name + "' must be a string, not " + type_name(v));
  return v.get<std::string>();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string message_content(const json& c, const std::string& name) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(name, "'" + name + "' must be a string or an array of text parts, not " + type_name(c));
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string pn = name + "[" + std::to_string(i) + "]";
    const json& part = c[i];
    if (!part.is_object()) bad(pn, "'" + pn + "' must be an object");
    for (const auto& [k, v] : part.items())
      if (k != "type" && k != "text") bad(pn + "." + k, "unsupported field '" + pn + "." + k + "'");
    if (!part.contains("type") || get_string(part["type"], pn + ".type") != "text")
      bad(pn + ".type", "'" + pn + ".type' must be \"text\" (only text content is supported)");
    if (!part.contains("text")) bad(pn + ".text", "'" + pn + ".text' is missing");
    out += get_string(part["text"], pn + ".text");
  }
  return out;
}

std::vector<ChatMessage> parse_messages(const json& m) {
  if (!m.is_array()) bad("messages", "'messages' must be an array, not " + type_name(m));
  if (m.empty()) bad("messages", "'messages' must not be empty");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string name = "messages[" + std::to_string(i) + "]";
    const json& msg = m[i];
    if (!msg.is_object()) bad(name, "'" + name + "' must be an object, not " + type_name(msg));
    for (const auto& [k, v] : msg.items())
      if (k != "role" && k != "content") bad(name + "." + k, "unsupported field '" + name + "." + k + "'");
    if (!msg.contains("role")) bad(name + ".role", "'" + name + ".role' is missing");
    const std::string role = get_string(msg["role"], name + ".role");
    if (role != "system" && role != "user" && role != "assistant")
      bad(name + ".role", "unknown role '" + role + "' in '" + name + ".role' (system, user or assistant)");
    if (!msg.contains("content") || msg["content"].is_null())
      bad(name + ".content", "'" + name + ".content' is missing");
    out.push_back({role, message_content(msg["content"], name + ".content")});
  }
  return out;
}

std::vector<std::string> parse_stop(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > kMaxStops) bad("stop", "'stop' has more than " + std::to_string(kMaxStops) + " strings");
    for (size_t i = 0; i < v.size(); ++i) out.push_back(get_string(v[i], "stop[" + std::to_string(i) + "]"));
  } else {
    bad("stop", "'stop' must be a string or an array of strings, not " + type_name(v));
  }
  for (const std::string& s : out)
    if (s.empty()) bad("stop", "'stop' strings must not be empty");
  return out;
}

}  // namespace

ApiRequest parse_request(Endpoint endpoint, const std::string& body, const RequestDefaults& defaults) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    // parse_error for bad syntax, out_of_range for a number past double's range (1e999):
    // both are the client's fault.
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object, not " + type_name(j));
  const bool chat = endpoint == Endpoint::CHAT;

  static const std::set<std::string> common = {
      "model", "stream", "stream_options", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens",
      "stop", "frequency_penalty", "presence_penalty", "logprobs", "n", "user", "ignore_eos"};
  static const std::set<std::string> chat_only = {"messages", "max_completion_tokens", "top_logprobs",
                                                  "chat_template_kwargs"};
  static const std::set<std::string> completion_only = {"prompt", "echo"};
  std::vector<std::string> unsupported;
  for (const auto& [k, v] : j.items()) {
    if (common.count(k) || (chat ? chat_only.count(k) : completion_only.count(k))) continue;
    unsupported.push_back(k);
  }
  if (!unsupported.empty()) {
    std::string list;
    for (const std::string& k : unsupported) list += (list.empty() ? "'" : ", '") + k + "'";
    bad(unsupported.front(), std::string("unsupported field") + (unsupported.size() > 1 ? "s " : " ") + list +
                                 " (this server does not implement " + (unsupported.size() > 1 ? "them" : "it") + ")");
  }
  // Fields set to null count as absent, as in OpenAI's API.
  auto has = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };

  ApiRequest r;
  r.endpoint = endpoint;
  r.sampling = defaults.sampling;
  r.max_tokens = defaults.max_tokens;

  if (has("model")) {
    r.model = get_string(j["model"], "model");
    const auto& names = defaults.model_names;
    if (std::find(names.begin(), names.end(), r.model) == names.end())
      throw ApiError(404, "the model '" + r.model + "' does not exist (this server serves '" +
                              (names.empty() ? std::string() : names.front()) + "')",
                     "model", "model_not_found");
  }
  if (chat) {
    if (!has("messages")) bad("messages", "'messages' is missing");
    r.messages = parse_messages(j["messages"]);
    if (has("chat_template_kwargs")) {
      const json& k = j["chat_template_kwargs"];
      if (!k.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      for (const auto& [key, v] : k.items()) {
        if (key != "enable_thinking")
          bad("chat_template_kwargs." + key, "unsupported field 'chat_template_kwargs." + key + "'");
        r.enable_thinking = get_bool(v, "chat_template_kwargs.enable_thinking");
      }
    }
  } else {
    if (!has("prompt")) bad("prompt", "'prompt' is missing");
    const json& p = j["prompt"];
    if (p.is_array()) {
      if (p.size() != 1 || !p[0].is_string())
        bad("prompt", "'prompt' must be a string (or an array of exactly one string)");
      r.prompt = p[0].get<std::string>();
    } else {
      r.prompt = get_string(p, "prompt");
    }
    if (r.prompt.empty()) bad("prompt", "'prompt' must not be empty");
    if (has("echo") && get_bool(j["echo"], "echo")) bad("echo", "'echo': true is not supported");
  }

  if (has("stream")) r.stream = get_bool(j["stream"], "stream");
  if (has("stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    for (const auto& [key, v] : so.items()) {
      if (key != "include_usage") bad("stream_options." + key, "unsupported field 'stream_options." + key + "'");
      r.include_usage = get_bool(v, "stream_options.include_usage");
    }
  }
  if (has("temperature")) r.sampling.temperature = static_cast<float>(get_number(j["temperature"], "temperature", 0, 2));
  if (has("top_p")) r.sampling.top_p = static_cast<float>(get_number(j["top_p"], "top_p", 0, 1));
  if (has("top_k")) r.sampling.top_k = static_cast<int32_t>(get_int(j["top_k"], "top_k", 0, 1 << 30));
  if (has("min_p")) r.sampling.min_p = static_cast<float>(get_number(j["min_p"], "min_p", 0, 1));
  if (has("seed")) {
    const json& s = j["seed"];
    if (!s.is_number_integer()) bad("seed", "'seed' must be an integer, not " + type_name(s));
    r.sampling.seed = s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
    r.seed_given = true;
  }
  const char* max_names[] = {"max_tokens", "max_completion_tokens"};
  for (const char* name : max_names)
    if (has(name)) r.max_tokens = get_int(j[name], name, 1, INT64_MAX);
  if (has("stop")) r.stop = parse_stop(j["stop"]);
  if (has("frequency_penalty"))
    r.frequency_penalty = static_cast<float>(get_number(j["frequency_penalty"], "frequency_penalty", -2, 2));
  if (has("presence_penalty"))
    r.presence_penalty = static_cast<float>(get_number(j["presence_penalty"], "presence_penalty", -2, 2));
  if (chat) {
    const bool lp = has("logprobs") && get_bool(j["logprobs"], "logprobs");
    if (has("top_logprobs")) {
      const int64_t k = get_int(j["top_logprobs"], "top_logprobs", 0, kMaxTopLogprobs);
      if (!lp) bad("top_logprobs", "'top_logprobs' requires 'logprobs': true");
      r.top_logprobs = static_cast<int>(k);
    } else if (lp) {
      r.top_logprobs = 0;
    }
  } else if (has("logprobs")) {
    r.top_logprobs = static_cast<int>(get_int(j["logprobs"], "logprobs", 0, kMaxTopLogprobs));
  }
  if (has("n") && get_int(j["n"], "n", 1, INT64_MAX) != 1) bad("n", "'n' must be 1 (one choice per request)");
  if (has("user")) get_string(j["user"], "user");  // metadata: accepted, not used
  if (has("ignore_eos")) r.ignore_eos = get_bool(j["ignore_eos"], "ignore_eos");
  return r;
}

}  // namespace df::server

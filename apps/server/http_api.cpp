#include "http_api.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>

#include <httplib.h>

#include "common/error.h"
#include "server/api_error.h"
#include "server/job_request.h"
#include "server/openai_format.h"

namespace df::server {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG is compiled into
// Debian's library); 32 clients connecting at once would overflow it and wait for SYN
// retransmits. listen() again on the bound socket raises the backlog.
class Server : public httplib::Server {
 public:
  void widen_backlog(int n) { ::listen(svr_sock_, n); }
};

std::string random_id(const char* prefix) {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(m);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffull));
  return std::string(prefix) + buf;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.to_json()), "application/json");
}

// Constant-time comparison of the bearer token.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

// What the streaming or one-piece response needs between provider calls.
struct Reply {
  std::shared_ptr<Job> job;
  ResponseMeta meta;
  const Tokenizer* tok = nullptr;
  bool stream = false;
  bool include_usage = false;
  bool opened = false;          // chat: the role chunk has gone out
  JobUpdate carry;              // output taken from the job before the first provider call
  std::string text;             // stream: false: the answer so far
  std::vector<TokenLogprob> logprobs;
  bool want_logprobs = false;
  int64_t text_offset = 0;
};

bool write_event(httplib::DataSink& sink, const json& j) {
  const std::string s = "data: " + dump(j) + "\n\n";
  return sink.write(s.data(), s.size());
}

// One call of the content provider: waits (polling the client's socket) for news from the
// job, writes it, and on the job's end writes the closing chunks. Returns false to drop the
// connection (the client went away, or a write failed).
bool provide(Reply& r, httplib::DataSink& sink) {
  JobUpdate u = std::move(r.carry);
  r.carry = JobUpdate{};
  const bool carried = !u.text.empty() || !u.logprobs.empty();
  for (;;) {
    if (!sink.is_writable()) {
      r.job->cancel();
      return false;
    }
    if (r.job->poll(u, milliseconds(carried ? 0 : 50)) || carried || u.state == JobState::DONE) break;
  }
  const bool done = u.state == JobState::DONE;
  const bool failed = done && (u.finish_reason == "error" || u.finish_reason == "cancelled");
  if (!r.stream) {
    r.text += u.text;
    for (auto& lp : u.logprobs) r.logprobs.push_back(std::move(lp));
    if (!done) return true;
    std::string body;
    if (failed) {
      body = dump(ApiError(u.finish_reason == "error" ? 500 : 503,
                           u.finish_reason == "error" ? "generation failed: " + u.error
                                                      : "the generation was cancelled (the server is shutting down)")
                      .to_json());
    } else {
      const json lp = r.want_logprobs ? logprobs_json(r.meta.endpoint, *r.tok, r.logprobs, r.text_offset) : json(nullptr);
      body = dump(final_response(r.meta, r.text, u.finish_reason, u.usage, lp));
    }
    if (!sink.write(body.data(), body.size())) return false;
    sink.done();
    return true;
  }
  if (r.meta.endpoint == Endpoint::CHAT && !r.opened) {
    r.opened = true;
    if (!write_event(sink, stream_chunk(r.meta, "", nullptr, "", true, r.include_usage))) return false;
  }
  if (!u.text.empty() || !u.logprobs.empty()) {
    const json lp = r.want_logprobs ? logprobs_json(r.meta.endpoint, *r.tok, u.logprobs, r.text_offset) : json(nullptr);
    if (!write_event(sink, stream_chunk(r.meta, u.text, lp, "", false, r.include_usage))) return false;
  }
  if (!done) return true;
  if (failed) {
    const ApiError e(u.finish_reason == "error" ? 500 : 503,
                     u.finish_reason == "error" ? "generation failed: " + u.error
                                                : "the generation was cancelled (the server is shutting down)");
    if (!write_event(sink, e.to_json())) return false;
  } else {
    if (!write_event(sink, stream_chunk(r.meta, "", nullptr, u.finish_reason, false, r.include_usage))) return false;
    if (r.include_usage && !write_event(sink, usage_chunk(r.meta, u.usage))) return false;
  }
  static const std::string kDone = "data: [DONE]\n\n";
  if (!sink.write(kDone.data(), kDone.size())) return false;
  sink.done();
  return true;
}

}  // namespace

HttpApi::HttpApi(Scheduler& scheduler, HttpOptions opt) : sched_(scheduler), opt_(std::move(opt)) {
  auto svr = std::make_unique<Server>();
  const int threads = opt_.http_threads > 0 ? opt_.http_threads : std::max(64, 2 * sched_.n_slots() + 16);
  svr->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr->set_payload_max_length(opt_.max_body_bytes);
  svr->set_keep_alive_timeout(opt_.keep_alive_s);
  // cpp-httplib's default sets SO_REUSEPORT, which lets a second server bind the same port
  // and silently share its connections; SO_REUSEADDR alone makes that bind fail.
  svr->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr_ = std::move(svr);
  routes();
}

HttpApi::~HttpApi() = default;

int HttpApi::bind() {
  int port = opt_.port;
  if (port == 0) {
    port = svr_->bind_to_any_port(opt_.host);
    if (port <= 0) throw Error("cannot listen on " + opt_.host + " (any port)");
  } else if (!svr_->bind_to_port(opt_.host, port)) {
    throw Error("cannot listen on " + opt_.host + ":" + std::to_string(port) + " (in use, or not an address here)");
  }
  static_cast<Server&>(*svr_).widen_backlog(512);
  return port;
}

bool HttpApi::listen() { return svr_->listen_after_bind(); }

void HttpApi::wait_replies(std::chrono::milliseconds max) {
  const auto until = std::chrono::steady_clock::now() + max;
  while (replies_.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void HttpApi::stop() { svr_->stop(); }
bool HttpApi::running() const { return svr_->is_running(); }

void HttpApi::routes() {
  httplib::Server& s = *svr_;
  const Tokenizer& tok = sched_.engine().tokenizer();

  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg;
    switch (res.status) {
      case 404: msg = "no such endpoint: " + req.method + " " + req.path; break;
      case 405: msg = "method not allowed"; break;
      case 413: msg = "the request body is larger than " + std::to_string(opt_.max_body_bytes) + " bytes"; break;
      case 414: msg = "the request URI is too long"; break;
      default: msg = "bad request"; break;
    }
    send_error(res, ApiError(res.status, msg));
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg += std::string(": ") + e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, msg));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    static const char* known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics",
                                  "/chat/completions",    "/completions"};
    std::string ep = "other";
    for (const char* k : known)
      if (req.path == k) ep = k;
    http_counters_.count(ep, res.status);
    if (opt_.log_requests)
      std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });

  auto authorized = [this](const httplib::Request& req) {
    if (opt_.api_key.empty()) return;
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.size() <= prefix.size() || h.compare(0, prefix.size(), prefix) != 0)
      throw ApiError(401, "missing bearer token: send 'Authorization: Bearer <key>'", "", "invalid_api_key");
    if (!same_secret(h.substr(prefix.size()), opt_.api_key))
      throw ApiError(401, "incorrect API key", "", "invalid_api_key");
  };

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (stopping_) {
      res.status = 503;
      res.set_content(R"({"status":"shutting down"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(http_counters_, sched_.counters()), "text/plain; version=0.0.4");
  });
  auto models = [this, authorized](const httplib::Request& req, httplib::Response& res) {
    try {
      authorized(req);
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    const ModelInfo& info = sched_.engine().info();
    json m = {{"id", opt_.model_id},
              {"object", "model"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"owned_by", "diskformer"},
              {"aliases", opt_.aliases},
              {"meta",
               {{"architecture", info.arch},
                {"n_params", info.n_params},
                {"n_vocab", info.n_vocab},
                {"n_ctx", sched_.engine().options().n_ctx},
                {"slots", sched_.n_slots()}}}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  };
  s.Get("/v1/models", models);
  s.Get("/models", models);

  auto generate = [this, authorized, &tok](Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    try {
      authorized(req);
      if (stopping_) throw ApiError(503, "the server is shutting down");
      JobRequest jr = job_request(endpoint, req.body, opt_.defaults, tok, sched_.engine().options().n_ctx);
      const ApiRequest& r = jr.request;
      GenParams gp = std::move(jr.params);
      if (!r.seed_given) gp.choice.sampling.seed = std::random_device{}();
      if (opt_.time_limit.count() > 0) gp.deadline = Clock::now() + opt_.time_limit;
      auto job = std::make_shared<Job>(std::move(jr.prompt), std::move(gp));
      sched_.submit(job);

      // Headers go out once the job has a slot, so that a failure in the queue still gets
      // its own status code.
      JobUpdate u;
      while (job->poll(u, milliseconds(200)), u.state == JobState::QUEUED) {
      }
      if (u.state == JobState::DONE && (u.finish_reason == "error" || u.finish_reason == "cancelled")) {
        if (u.finish_reason == "cancelled") throw ApiError(503, "the server is shutting down");
        throw ApiError(u.error.find("time limit") != std::string::npos ? 503 : 500, u.error);
      }
      auto reply = std::make_shared<Reply>();
      reply->job = job;
      reply->meta = {endpoint, random_id(endpoint == Endpoint::CHAT ? "chatcmpl-" : "cmpl-"),
                     static_cast<int64_t>(std::time(nullptr)), r.model.empty() ? opt_.model_id : r.model};
      reply->tok = &tok;
      reply->stream = r.stream;
      reply->include_usage = r.include_usage;
      reply->want_logprobs = r.top_logprobs >= 0;
      reply->carry = std::move(u);  // what the wait above took out of the job
      if (r.stream) res.set_header("Cache-Control", "no-cache");
      ++replies_;
      res.set_chunked_content_provider(
          r.stream ? "text/event-stream" : "application/json",
          [reply](size_t, httplib::DataSink& sink) { return provide(*reply, sink); },
          [this, reply](bool success) {
            if (!success) reply->job->cancel();  // the connection broke: stop generating
            --replies_;
          });
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  };
  s.Post("/v1/chat/completions",
         [generate](const httplib::Request& q, httplib::Response& r) { generate(Endpoint::CHAT, q, r); });
  s.Post("/chat/completions",
         [generate](const httplib::Request& q, httplib::Response& r) { generate(Endpoint::CHAT, q, r); });
  s.Post("/v1/completions",
         [generate](const httplib::Request& q, httplib::Response& r) { generate(Endpoint::COMPLETION, q, r); });
  s.Post("/completions",
         [generate](const httplib::Request& q, httplib::Response& r) { generate(Endpoint::COMPLETION, q, r); });
}

}  // namespace df::server

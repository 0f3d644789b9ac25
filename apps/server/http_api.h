// The HTTP face of `diskformer serve`: OpenAI-compatible routes on cpp-httplib over the
// scheduler. Debian 12's cpp-httplib 0.11.4 serves each connection on a worker of a fixed
// thread pool (8 threads by default: too few for 32 streaming clients, so the pool size is
// a flag) and detects a client that went away through DataSink::is_writable() (a peek at
// the socket), which the streaming provider polls while it waits for tokens.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
}

namespace df::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port
  std::string api_key;            // empty: no authentication
  int http_threads = 0;           // 0: max(64, 2 * slots + 16)
  size_t max_body_bytes = 4u << 20;
  int keep_alive_s = 5;           // idle keep-alive connections close after this (and delay exit by at most it)
  std::chrono::milliseconds time_limit{600000};  // per request, queue wait included; 0: none
  std::string model_id;           // the served model's id in /v1/models
  std::vector<std::string> aliases;
  RequestDefaults defaults;
  bool log_requests = false;
};

class HttpApi {
 public:
  HttpApi(Scheduler& scheduler, HttpOptions opt);
  ~HttpApi();
  // Binds the listening socket; returns the port (useful with port 0). Throws df::Error.
  int bind();
  // Serves until stop(). Returns false when the server could not run.
  bool listen();
  // Refuses new generations from now on (503) and makes /health report it.
  void begin_shutdown() { stopping_ = true; }
  // Waits (at most `max`) until every response whose generation has ended is written out:
  // stop() closes the sockets, so it must not cut a stream's last chunks off.
  void wait_replies(std::chrono::milliseconds max);
  void stop();
  // Whether listen() is serving (cpp-httplib's stop() does nothing before it is).
  bool running() const;

 private:
  void routes();
  Scheduler& sched_;
  HttpOptions opt_;
  std::unique_ptr<httplib::Server> svr_;
  HttpCounters http_counters_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> replies_{0};  // responses being written (content providers not yet released)
};

}  // namespace df::server

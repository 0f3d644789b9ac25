// HTTP GETs over libcurl for the store: optional byte ranges, the response's status and
// Content-Range parsed before the first body byte, transient failures (network errors,
// timeouts, 5xx, 408, 429) told apart from permanent ones, retries with backoff.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/error.h"

namespace df::store {

struct HttpOptions {
  long connect_timeout_s = 30;
  // A transfer slower than low_speed_bytes/s for low_speed_time_s seconds is aborted (and retried).
  long low_speed_time_s = 60;
  long low_speed_bytes = 1;
  int max_retries = 8;               // consecutive failed attempts without progress
  double backoff_initial_s = 1.0;    // doubled after each failure ...
  double backoff_max_s = 60.0;       // ... up to this
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by SIGINT) to stop a transfer
  std::string user_agent = "diskformer/0.1";
};

// A failure that another attempt may not see (connection reset, timeout, 5xx).
class TransientError : public Error {
 public:
  using Error::Error;
};
// The user stopped the transfer (HttpOptions::cancel).
class Cancelled : public Error {
 public:
  using Error::Error;
};

struct HttpResponse {
  long status = 0;
  std::optional<uint64_t> content_length;
  // Content-Range: bytes first-last/total, or bytes */total (with 416).
  std::optional<uint64_t> range_first, range_last, range_total;
};

// Receives the body of a 200 or 206 response: begin() once with the headers, then data().
// Either may throw; the transfer stops and the exception reaches the caller of get().
struct HttpSink {
  std::function<void(const HttpResponse&)> begin;
  std::function<void(const uint8_t*, size_t)> data;
};

// One GET of url with `Range: bytes=first-` (or first-last when last is set; no Range header
// when first is 0 and last is unset). Redirects are followed. A 200/206 body goes to the
// sink; any other status returns without calling it (the body is dropped). Throws
// TransientError on network failures and Cancelled when cancelled.
HttpResponse http_get(const std::string& url, uint64_t first, std::optional<uint64_t> last, const HttpSink& sink,
                      const HttpOptions& opt);

// Statuses worth retrying: 408, 429, 500, 502, 503, 504.
bool http_status_transient(long status);
// Throws TransientError or a permanent df::Error for a status that is not 200/206.
[[noreturn]] void throw_http_status(const std::string& url, const HttpResponse& r);

// Runs attempt() until it returns normally. A TransientError is retried after a backoff
// (initial, doubled, capped) unless max_retries consecutive attempts failed without progress;
// attempt() sets `progressed` when it moved the transfer forward (resetting the count and the
// backoff). on_retry (optional) hears about each retry.
void with_retries(const HttpOptions& opt, const std::function<void(bool& progressed)>& attempt,
                  const std::function<void(const std::string& why, double wait_s)>& on_retry = {});

}  // namespace df::store

#include "store/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace df::store {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("libcurl: curl_global_init failed");
  });
}

bool iequals_prefix(const char* line, size_t n, const char* name) {
  const size_t k = std::strlen(name);
  if (n < k) return false;
  for (size_t i = 0; i < k; ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::optional<uint64_t> parse_u64(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<uint64_t>(c - '0'), &v))
      return std::nullopt;
  }
  return v;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// "bytes 10-99/1000" or "bytes */1000".
void parse_content_range(const std::string& v, HttpResponse& r) {
  if (v.compare(0, 6, "bytes ") != 0) return;
  const std::string rest = trim(v.substr(6));
  const auto slash = rest.find('/');
  if (slash == std::string::npos) return;
  r.range_total = parse_u64(rest.substr(slash + 1));
  const std::string range = rest.substr(0, slash);
  const auto dash = range.find('-');
  if (range == "*" || dash == std::string::npos) return;
  r.range_first = parse_u64(range.substr(0, dash));
  r.range_last = parse_u64(range.substr(dash + 1));
}

struct Transfer {
  const HttpSink* sink;
  const HttpOptions* opt;
  HttpResponse resp;
  bool started = false;
  std::exception_ptr error;
};

size_t on_header(char* line, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (iequals_prefix(line, len, "http/")) {  // a new response (after a redirect or 100-continue)
    t->resp = HttpResponse{};
    const std::string l(line, len);
    const auto sp = l.find(' ');
    if (sp != std::string::npos) t->resp.status = std::strtol(l.c_str() + sp + 1, nullptr, 10);
  } else if (iequals_prefix(line, len, "content-length:")) {
    t->resp.content_length = parse_u64(trim(std::string(line + 15, len - 15)));
  } else if (iequals_prefix(line, len, "content-range:")) {
    parse_content_range(trim(std::string(line + 14, len - 14)), t->resp);
  }
  return len;
}

bool body_wanted(long status) { return status == 200 || status == 206; }

size_t on_body(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (!body_wanted(t->resp.status)) return len;  // an error page: dropped
  try {
    if (!t->started) {
      t->started = true;
      if (t->sink->begin) t->sink->begin(t->resp);
    }
    t->sink->data(reinterpret_cast<const uint8_t*>(p), len);
  } catch (...) {
    t->error = std::current_exception();
    return 0;  // CURLE_WRITE_ERROR
  }
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return t->opt->cancel && t->opt->cancel->load() ? 1 : 0;
}

struct Easy {
  CURL* h = curl_easy_init();
  ~Easy() {
    if (h) curl_easy_cleanup(h);
  }
};

}  // namespace

bool http_status_transient(long s) { return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504; }

void throw_http_status(const std::string& url, const HttpResponse& r) {
  const std::string msg = "HTTP " + std::to_string(r.status) + " from " + url;
  if (http_status_transient(r.status)) throw TransientError(msg);
  if (r.status == 404) throw Error(msg + " (not found: check the repository, revision and file name)");
  if (r.status == 401 || r.status == 403) throw Error(msg + " (access denied: the file may be gated or private)");
  throw Error(msg);
}

HttpResponse http_get(const std::string& url, uint64_t first, std::optional<uint64_t> last, const HttpSink& sink,
                      const HttpOptions& opt) {
  global_init();
  Easy e;
  if (!e.h) throw Error("libcurl: curl_easy_init failed");
  Transfer t{&sink, &opt, {}, false, nullptr};
  char errbuf[CURL_ERROR_SIZE] = {0};
  std::string range;
  if (first > 0 || last) range = std::to_string(first) + "-" + (last ? std::to_string(*last) : "");
  curl_easy_setopt(e.h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e.h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e.h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e.h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e.h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(e.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e.h, CURLOPT_USERAGENT, opt.user_agent.c_str());
  curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT, opt.connect_timeout_s);
  curl_easy_setopt(e.h, CURLOPT_LOW_SPEED_TIME, opt.low_speed_time_s);
  curl_easy_setopt(e.h, CURLOPT_LOW_SPEED_LIMIT, opt.low_speed_bytes);
  curl_easy_setopt(e.h, CURLOPT_ERRORBUFFER, errbuf);
  if (!range.empty()) curl_easy_setopt(e.h, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(e.h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e.h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e.h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e.h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(e.h, CURLOPT_XFERINFODATA, &t);
  const CURLcode rc = curl_easy_perform(e.h);
  if (t.error) std::rethrow_exception(t.error);
  if (rc == CURLE_ABORTED_BY_CALLBACK) throw Cancelled("interrupted");
  if (rc != CURLE_OK) {
    const std::string detail = errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc);
    if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT)
      throw Error("cannot fetch " + url + ": " + detail);
    throw TransientError(url + ": " + detail);
  }
  if (body_wanted(t.resp.status) && !t.started && sink.begin) sink.begin(t.resp);  // empty body
  return t.resp;
}

void with_retries(const HttpOptions& opt, const std::function<void(bool& progressed)>& attempt,
                  const std::function<void(const std::string&, double)>& on_retry) {
  int failures = 0;
  double wait = opt.backoff_initial_s;
  for (;;) {
    bool progressed = false;
    try {
      attempt(progressed);
      return;
    } catch (const TransientError& e) {
      if (progressed) {
        failures = 0;
        wait = opt.backoff_initial_s;
      }
      if (++failures > opt.max_retries)
        throw Error(std::string(e.what()) + " (gave up after " + std::to_string(opt.max_retries) +
                    " retries; run the same command again to resume)");
      if (on_retry) on_retry(e.what(), wait);
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
      while (std::chrono::steady_clock::now() < until) {
        if (opt.cancel && opt.cancel->load()) throw Cancelled("interrupted");
        std::this_thread::sleep_for(std::min(std::chrono::duration<double>(0.05),
                                             std::chrono::duration<double>(until - std::chrono::steady_clock::now())));
      }
      wait = std::min(wait * 2, opt.backoff_max_s);
    }
  }
}

}  // namespace df::store

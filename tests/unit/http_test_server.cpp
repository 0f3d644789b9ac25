#include "http_test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace df::test {

TestHttpServer::TestHttpServer() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("test server: socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 16) != 0)
    throw std::runtime_error("test server: bind/listen failed");
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { loop(); });
}

TestHttpServer::~TestHttpServer() {
  stop_.store(true);
  thread_.join();
  ::close(listen_fd_);
}

std::string TestHttpServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/" + path;
}

void TestHttpServer::serve(const std::string& path, std::shared_ptr<const std::vector<uint8_t>> bytes) {
  std::lock_guard<std::mutex> l(mu_);
  files_["/" + path] = std::move(bytes);
}

void TestHttpServer::set_faults(const Faults& f) {
  std::lock_guard<std::mutex> l(mu_);
  faults_ = f;
}

std::vector<std::string> TestHttpServer::range_headers() const {
  std::lock_guard<std::mutex> l(mu_);
  return ranges_;
}

void TestHttpServer::reset_counters() {
  std::lock_guard<std::mutex> l(mu_);
  sent_ = 0;
  requests_ = 0;
  ranges_.clear();
}

void TestHttpServer::loop() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    handle(fd);
    ::close(fd);
  }
}

namespace {

bool send_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void TestHttpServer::handle(int fd) {
  // ---- the request (headers only; GET has no body) ----
  std::string req;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (req.find("\r\n\r\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline || stop_.load()) return;
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  const auto sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
  const std::string path = req.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string range;
  for (size_t pos = req.find("\r\n") + 2; pos < req.size();) {
    const auto e = req.find("\r\n", pos);
    const std::string line = req.substr(pos, e - pos);
    pos = e + 2;
    if (lower(line).rfind("range:", 0) == 0) {
      range = line.substr(6);
      range.erase(0, range.find_first_not_of(' '));
    }
  }

  // ---- this request's faults ----
  Faults f;
  std::shared_ptr<const std::vector<uint8_t>> file;
  bool drop = false, forced = false, ignore_range = false, wrong_length = false, stall = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    ++requests_;
    ranges_.push_back(range);
    f = faults_;
    const bool pass = faults_.pass_requests > 0;
    if (pass) --faults_.pass_requests;
    if (pass) {
    } else if (faults_.status_requests > 0) forced = faults_.status_requests-- > 0;
    if (!pass && !forced) {
      if (faults_.drop_requests > 0) drop = faults_.drop_requests-- > 0;
      if (faults_.ignore_range_requests > 0) ignore_range = faults_.ignore_range_requests-- > 0;
      if (faults_.wrong_length_requests > 0) wrong_length = faults_.wrong_length_requests-- > 0;
      if (faults_.stall_requests > 0) stall = faults_.stall_requests-- > 0;
    }
    if (auto it = files_.find(path); it != files_.end()) file = it->second;
  }
  auto head = [&](int status, const std::string& reason, const std::string& extra) {
    const std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n" + extra +
                          "Connection: close\r\n\r\n";
    send_all(fd, h.data(), h.size());
  };
  if (forced) {
    const std::string cr = f.status == 416 && file ? "Content-Range: bytes */" + std::to_string(file->size()) + "\r\n" : "";
    head(f.status, "Fault", cr + "Content-Length: 0\r\n");
    return;
  }
  if (!file) {
    head(404, "Not Found", "Content-Length: 0\r\n");
    return;
  }
  const uint64_t size = file->size();
  uint64_t first = 0, last = size ? size - 1 : 0;
  bool partial = false;
  if (!range.empty() && !ignore_range && range.rfind("bytes=", 0) == 0) {
    const std::string r = range.substr(6);
    const auto dash = r.find('-');
    first = std::stoull(r.substr(0, dash));
    if (dash + 1 < r.size()) last = std::min<uint64_t>(std::stoull(r.substr(dash + 1)), size - 1);
    if (first >= size) {
      head(416, "Range Not Satisfiable", "Content-Range: bytes */" + std::to_string(size) + "\r\nContent-Length: 0\r\n");
      return;
    }
    partial = true;
  }
  uint64_t n = size ? last - first + 1 : 0;
  uint64_t announced = n;
  if (wrong_length) {
    announced = static_cast<uint64_t>(static_cast<int64_t>(n) + f.content_length_delta);
    n = std::min(n, announced);
  }
  if (drop) n = std::min(n, f.drop_after);
  if (stall) n = std::min(n, f.stall_after);
  std::string extra = "Content-Length: " + std::to_string(announced) + "\r\nAccept-Ranges: bytes\r\n";
  if (partial)
    extra += "Content-Range: bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(size) + "\r\n";
  head(partial ? 206 : 200, partial ? "Partial Content" : "OK", extra);
  for (uint64_t done = 0; done < n && !stop_.load();) {
    if (f.chunk_delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(f.chunk_delay_ms));
    const size_t k = static_cast<size_t>(std::min<uint64_t>(f.chunk, n - done));
    if (!send_all(fd, file->data() + first + done, k)) return;
    sent_ += k;
    done += k;
  }
  if (stall) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.stall_ms);
    while (std::chrono::steady_clock::now() < until && !stop_.load()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10) > 0 && ::recv(fd, buf, sizeof buf, 0) <= 0) return;  // the client hung up
    }
  }
}

}  // namespace df::test
